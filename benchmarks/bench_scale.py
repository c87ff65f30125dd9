"""Scale benchmark: a Transformer-like training graph of 36k / 360k / 1M ops on 8 devices, loaded, placed,
simulated and checked, one fresh process per (size, method), as ``dplace solve`` does it.

Goal: 1,000,000 ops <= 20 s wall per method (whole process) and <= 3 GB peak; 360,000 ops <= 6 s; the
36k-op figures no slower than before. Instances are generated once into ``--dir`` as ``.npz`` (``dplace
generate transformer --ops N --devices 8 --out FILE.npz``) and loaded from there; ``--json`` loads the
JSON form instead (written beside it); ``--instance`` takes given files.

Columns (seconds): load (read + validate + index), bound (the proven lower bound ``solve`` reports),
place (``dplace.solve`` less the bound and the simulation inside it), simulate (``dplace.simulate`` of the
method's placement and order, as ``solve`` runs it), check (``dplace.check`` of the result), total (the
child process from start to exit, imports and loading compiled kernels included, wall, as measured by
this parent), cpu (its user + system CPU seconds: less sensitive to a loaded machine), peak RSS (GiB),
goal (the wall goal for that size). Compiled kernels are cached on disk: run once to warm the cache.

    nice .venv/bin/python benchmarks/bench_scale.py --ops 36000,360000,1000000 [--methods heft,m_etf,dpos,celeritas]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

METHODS = "heft,m_etf,dpos,celeritas"
GOALS = ((900_000, 20.0), (300_000, 6.0))  # (from this many ops, wall seconds per method)


def child(path: str, method: str) -> None:
    """One run, as ``dplace solve`` does it; prints one JSON line of timings."""
    t0 = time.perf_counter()
    import dplace
    import dplace.bounds
    import dplace.result as result_mod
    from dplace.verify.check import check
    from dplace.instance.io import load_instance

    t_import = time.perf_counter() - t0
    sim_s = [0.0]

    def timed(real):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                sim_s[0] += time.perf_counter() - t
        return run

    # make_result simulates through one of these (the compiled loop on arrays, or the reference)
    result_mod.simulate = timed(result_mod.simulate)
    result_mod.simulate_arrays = timed(result_mod.simulate_arrays)
    t = time.perf_counter()
    inst = load_instance(path)
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    dplace.bounds.lower_bound_with_source(inst)  # kept on the instance: solve reuses it
    t_bound = time.perf_counter() - t
    t = time.perf_counter()
    res = dplace.solve(inst, method)
    t_solve = time.perf_counter() - t
    t = time.perf_counter()
    rep = check(res.instance, res)
    t_check = time.perf_counter() - t
    print(json.dumps({
        "ops": inst.n, "method": method, "import": t_import, "load": t_load, "bound": t_bound,
        "place": t_solve - sim_s[0],
        "simulate": sim_s[0], "check": t_check, "valid": rep.ok, "makespan": res.makespan,
        "rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }))


def ensure_instance(n: int, devices: int, folder: Path, as_json: bool) -> Path:
    base = folder / f"transformer_{n}_{devices}dev"
    npz, js = base.with_suffix(".npz"), base.with_suffix(".json")
    if not npz.exists():
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dplace.cli", "generate", "transformer", "--ops", str(n),
                        "--devices", str(devices), "--out", str(npz)], check=True, stdout=subprocess.DEVNULL)
        print(f"generated {npz} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    if as_json and not js.exists():
        subprocess.run([sys.executable, "-m", "dplace.cli", "convert", "instance", str(npz), "--out", str(js)],
                       check=True, stdout=subprocess.DEVNULL)
    return js if as_json else npz


def run_child(path: Path, method: str) -> dict:
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(path), method], stdout=subprocess.PIPE)
    out = proc.stdout.read() if proc.stdout else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        return {"method": method, "error": f"exit status {status}", "total": wall}
    row = json.loads(out.decode().strip().splitlines()[-1])
    row["total"] = wall
    row["cpu"] = usage.ru_utime + usage.ru_stime
    row["rss_gib"] = usage.ru_maxrss / 2**20
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="36000,360000,1000000", help="comma-separated op counts")
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--dir", default="/tmp/dplace-scale", help="where generated instances are kept")
    ap.add_argument("--json", action="store_true", help="load the JSON form instead of the .npz")
    ap.add_argument("--instance", default=None, help="comma-separated instance files instead of generated ones")
    ap.add_argument("--child", nargs=2, metavar=("FILE", "METHOD"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [Path(x) for x in args.instance.split(",")] if args.instance else \
        [ensure_instance(int(x), args.devices, folder, args.json) for x in args.ops.split(",")]
    head = (f"{'ops':>9} {'method':<10} {'load':>6} {'bound':>6} {'place':>6} {'simul':>6} {'check':>6} "
            f"{'total':>6} {'cpu':>6} {'peak GiB':>8} {'goal s':>6}  valid")
    print(head)
    print("-" * len(head))
    for path in paths:
        for method in args.methods.split(","):
            r = run_child(path, method)
            if "error" in r:
                print(f"{path.name:>9} {method:<10} {r['error']} after {r['total']:.1f} s", flush=True)
                continue
            goal = next((g for size, g in GOALS if r["ops"] >= size), None)
            print(f"{r['ops']:>9} {method:<10} {r['load']:6.2f} {r['bound']:6.2f} {r['place']:6.2f} "
                  f"{r['simulate']:6.2f} {r['check']:6.2f} {r['total']:6.2f} {r['cpu']:6.2f} {r['rss_gib']:8.2f} "
                  f"{'' if goal is None else f'{goal:g}':>6}  {r['valid']}", flush=True)
    print("goals: 1M ops <= 20 s and <= 3 GB peak per method (whole process); 360k ops <= 6 s; "
          "36k ops no slower than before")


if __name__ == "__main__":
    main()
