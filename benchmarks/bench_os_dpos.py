"""OS-DPOS's speed (issue 25 item 1), old code beside new, on the generated Transformer in both comm modes.
Each cell is one whole process, ``dplace solve GRAPH --method os_dpos --out R.json`` (start-up, loading, the
paper's loop of DPOS runs, the final simulation and the proven bound), after both executables ran os_dpos on
small graphs (numba's compile caches warm). The result file gives the DPOS runs, the splits kept, why the
loop stopped and the makespan; old and new must agree on all of them (the loop is the paper's: the same
splits tried in the same order, the same answer), printed as "same".

    .venv/bin/python benchmarks/bench_os_dpos.py --old 6aaaf47
    .venv/bin/python benchmarks/bench_os_dpos.py --sizes 6000 --old 6aaaf47 --timeout 120
    .venv/bin/python benchmarks/bench_os_dpos.py --sizes 36000 --comms parallel --old 6aaaf47 --timeout 400
    .venv/bin/python benchmarks/bench_os_dpos.py --sizes 360000 --comms sequential --time-limit 30 --timeout 300

``--old``: a ``dplace`` executable of the old code or a git revision of this repository (run by this venv's
Python, :func:`bench_seqcomm.export_revision`). ``--time-limit``: passed to ``dplace solve`` (os_dpos then
stops trying splits, or cuts its first DPOS run, and says so in ``extra``: printed under "stopped"). A run
past ``--timeout`` seconds (wall) is stopped and printed as "> T". Times are "wall/CPU" seconds of the whole
process (CPU: user + system, what a loaded box distorts least); report ``cat /proc/loadavg`` beside them.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_seqcomm import NEW, _old_exe  # noqa: E402


def _solve(exe: str, graph: str, timeout: float, out_dir: str, flags: list[str]) -> dict:
    """One whole ``dplace solve --method os_dpos`` process: its time cell and what its result says."""
    out = os.path.join(out_dir, f"{os.path.basename(graph)}.{abs(hash(exe))}.json")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    try:
        p = subprocess.run([exe, "solve", graph, "--method", "os_dpos", "--out", out, "--quiet", *flags], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"time": f"> {timeout:.0f}"}
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    if p.returncode != 0 or not os.path.exists(out):
        return {"time": f"exit {p.returncode}", "error": (p.stderr or p.stdout).strip()[-300:]}
    with open(out) as f:
        r = json.load(f)
    os.remove(out)
    ex = r.get("extra") or {}
    cut = ex.get("time_limit")
    return {"time": f"{dt:.1f}/{cpu:.1f}", "runs": ex.get("dpos_runs"), "splits": ex.get("splits"),
            "stopped": ex.get("stopped", "") + (f" (first run: {cut['ops_placed_by_method']} of {cut['ops']} ops "
                                                "by DPOS's rule)" if cut else ""),
            "makespan": r.get("makespan"), "placement": r.get("placement"), "order": r.get("order")}


def _warm(exes: list[str], devices: int, tmp: str) -> None:
    """os_dpos once per executable and comm mode on a 3,000-op graph (the compiled paths: DPOS, the
    simulation, the split graphs' topological order), capped at 3 DPOS runs."""
    for comm in ("sequential", "parallel"):
        g = os.path.join(tmp, f"warm_{comm}.json")
        subprocess.run([NEW, "generate", "transformer", "--ops", "3000", "--devices", str(devices), "--comm", comm,
                        "--out", g], check=True, capture_output=True)
        for exe in exes:
            subprocess.run([exe, "solve", g, "--method", "os_dpos", "-o", "max_dpos_runs=3", "--quiet"],
                           capture_output=True, timeout=900)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="6000,36000")
    ap.add_argument("--comms", default="parallel,sequential")
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--old", default=None, help="dplace executable of the old code, or a git revision")
    ap.add_argument("--timeout", type=float, default=400.0)
    ap.add_argument("--time-limit", type=float, default=None, help="dplace solve --time-limit")
    args = ap.parse_args()
    flags = [] if args.time_limit is None else ["--time-limit", str(args.time_limit)]
    with tempfile.TemporaryDirectory() as tmp:
        if args.old and not os.path.isfile(args.old):
            args.old = _old_exe(args.old, tmp)
        _warm([NEW] + ([args.old] if args.old else []), args.devices, tmp)
        print(f"os_dpos, transformer --devices {args.devices}{' --time-limit ' + str(args.time_limit) if flags else ''};"
              f" load {open('/proc/loadavg').read().split()[:3]}")
        print(f"{'ops':>7} {'comm':10} {'new s':>12} {'runs':>5} {'splits':>6} {'old s':>12} {'runs':>5} {'splits':>6} "
              f"{'same':>5} {'makespan':>14}  stopped (new)", flush=True)
        for ops in map(int, args.sizes.split(",")):
            for comm in args.comms.split(","):
                g = os.path.join(tmp, f"t{ops}_{comm}.json")
                subprocess.run([NEW, "generate", "transformer", "--ops", str(ops), "--devices", str(args.devices),
                                "--comm", comm, "--out", g], check=True, capture_output=True)
                new = _solve(NEW, g, args.timeout, tmp, flags)
                old = _solve(args.old, g, args.timeout, tmp, flags) if args.old else {"time": ""}
                keys = ("runs", "splits", "stopped", "makespan", "placement", "order")
                same = ("" if "makespan" not in old or "makespan" not in new
                        else "yes" if all(old[k] == new[k] for k in keys) else "NO")
                ms = new.get("makespan")
                print(f"{ops:>7} {comm:10} {new['time']:>12} {new.get('runs', '-')!s:>5} "
                      f"{len(new.get('splits') or []) if 'splits' in new else '-'!s:>6} {old['time']:>12} "
                      f"{old.get('runs', '-')!s:>5} {len(old.get('splits') or []) if 'splits' in old else '-'!s:>6} "
                      f"{same:>5} {'-' if ms is None else f'{ms:,.0f}':>14}  {new.get('stopped', new.get('error', ''))}",
                      flush=True)
                os.remove(g)
        print(f"load {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
