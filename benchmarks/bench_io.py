"""I/O and start-up, old against new: whole `dplace` processes (JSON in, JSON out) and the parts of a fresh
Python process (import, load, first solve), each for two installs of dplace. Prints a table: CPU seconds
(user + sys of the process, what a loaded machine changes least) and wall seconds, best of ``--repeat``
(each part of a fresh process its best run's; the start-up that of the run where it is least).

    .venv/bin/python benchmarks/bench_io.py --old /path/to/old/.venv/bin/dplace
    .venv/bin/python benchmarks/bench_io.py --old ... --sizes 36000,360000,1000000 --repeat 2

The instances (``dplace generate transformer --ops N --devices D --seed 7 --compact``; 4 devices for 36k,
8 beyond, as in the scale issue) are made once in ``--dir`` by the new install. Goals (issue 28):
360k ops JSON in + heft + JSON out <= 6 s, 1M <= 20 s, loading the 36k-op JSON <= 0.3 s, what the first
solve needs <= 0.3 s, ``dplace solve t36k.json --method m_etf`` <= 1.5 s (whole process).

Start-up: the first lower bound plus the first solve less a second solve (which finds the bound kept on the
instance) is the kernels' loading plus the bound's own work (~0.06 CPU s at 36k ops), which every first solve
of an instance does, loaded or not; the goal's row, "loading what the first solve needs", takes out the
bound's own work, measured by computing it again once its kernels are loaded.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

PARTS = r"""
import sys, time
c = time.process_time
t0 = c()
import dplace
t1 = c()
inst = dplace.load_instance(sys.argv[1])
t2 = c()
import numba
t3 = c()
from dplace.bounds import lower_bound_with_source
lower_bound_with_source(inst)
t4 = c()
dplace.solve(inst, sys.argv[2])
t5 = c()
dplace.solve(inst, sys.argv[2])
t6 = c()
inst.__dict__.pop("_lower_bound_parts")  # the bound's own work, its kernels loaded: computed again
from dplace.bounds import lower_bound_parts
lower_bound_parts(inst)
t7 = c()
print(f"{t1 - t0:.3f} {t2 - t1:.3f} {t3 - t2:.3f} {t4 - t3:.3f} {t5 - t4:.3f} {t6 - t5:.3f} {t7 - t6:.3f}")
"""

def _run(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(cpu s, wall s, stdout) of one child process, run outside any checkout (``python -c`` would import
    the ``dplace`` of its working directory)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(argv, capture_output=True, text=True, env=env, cwd="/")
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"failed ({p.returncode}): {' '.join(argv)}\n{p.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, p.stdout


def _best(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, float, str]:
    runs = [_run(argv, env) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs), runs[-1][2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", required=True, help="the old install's dplace executable")
    ap.add_argument("--new", default=str(Path(sys.executable).parent / "dplace"), help="the new one's (default: this venv's)")
    ap.add_argument("--sizes", default="36000,360000", help="op counts (default 36000,360000)")
    ap.add_argument("--dir", default="bench-io-data", help="where the instances are made and results written")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    d = Path(args.dir).resolve()
    d.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, DPLACE_PROGRESS="quiet")
    installs = {"old": Path(args.old), "new": Path(args.new)}
    rows: list[tuple[str, str, float, float, str]] = []
    for n in [int(x) for x in args.sizes.split(",")]:
        m = 4 if n <= 36000 else 8
        src = d / f"t{n}.json"
        if not src.exists():
            _run([str(installs["new"]), "generate", "transformer", "--ops", str(n), "--devices", str(m), "--seed", "7",
                  "--compact", "--out", str(src)], env)
        for who, exe in installs.items():
            py = str(exe.parent / "python")
            if n <= 36000:
                _run([str(exe), "solve", str(src), "--method", "m_etf"], env)  # caches warm
                cpu, wall, _ = _best([str(exe), "solve", str(src), "--method", "m_etf"], env, args.repeat)
                rows.append((f"{n:,} ops: dplace solve --method m_etf (process)", who, cpu, wall, "goal 1.5 s"))
                runs = [[float(x) for x in _run([py, "-c", PARTS, str(src), "m_etf"], env)[2].split()]
                        for _ in range(args.repeat)]
                imp, load, nb, bound, first, second, again = (min(col) for col in zip(*runs))  # each the best run's
                startup = min(r[3] + r[4] - r[5] for r in runs)  # the start-up of the best run
                loading = min(r[3] - r[6] + r[4] - r[5] for r in runs)  # less the bound's own work
                nan = float("nan")
                rows.append((f"{n:,} ops: import dplace (CPU in process)", who, imp, nan, ""))
                rows.append((f"{n:,} ops: load_instance JSON (CPU)", who, load, nan, "goal 0.3 s"))
                rows.append((f"{n:,} ops: import numba, if import dplace did not (CPU)", who, nb, nan, ""))
                rows.append((f"{n:,} ops: first lower bound, its kernels loaded (CPU)", who, bound, nan, ""))
                rows.append((f"{n:,} ops: first solve m_etf, bound known (CPU)", who, first, nan, ""))
                rows.append((f"{n:,} ops: second solve m_etf (CPU)", who, second, nan, ""))
                rows.append((f"{n:,} ops: the bound computed again, kernels loaded (CPU)", who, again, nan, ""))
                rows.append((f"{n:,} ops: start-up of the first solve (bound + first - second)", who,
                             startup, nan, ""))
                rows.append((f"{n:,} ops: start-up less the bound again (loading only)", who,
                             loading, nan, "goal 0.3 s"))
            out = d / f"r{n}_{who}.json"
            cpu, wall, _ = _best([str(exe), "solve", str(src), "--method", "heft", "--out", str(out)], env, args.repeat)
            goal = {360000: "goal 6 s", 1000000: "goal 20 s"}.get(n, "")
            rows.append((f"{n:,} ops: dplace solve --method heft --out r.json (process)", who, cpu, wall, goal))
            out.unlink(missing_ok=True)
    print(f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    print(f"| {'what':<64} | who | CPU s | wall s | |")
    print(f"|{'-' * 66}|-----|------:|-------:|---|")
    for what, who, cpu, wall, goal in rows:
        print(f"| {what:<64} | {who} | {cpu:5.2f} | {wall:6.2f} | {goal} |")


if __name__ == "__main__":
    main()
