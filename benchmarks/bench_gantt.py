"""Time of the Gantt chart and the Chrome trace on generated graphs (heft schedules): layered DAGs below
500 ops, Transformer training graphs from there (``dplace generate``).

    .venv/bin/python benchmarks/bench_gantt.py [--ops 20,2000,36000] [--out DIR]

Prints one row per size: ops, transfers, seconds for gantt_png and chrome_trace, PNG size; with --out the
PNGs are kept there to look at. The goal is a chart of the 36k-op graph in at most 5 s.
"""
import argparse
import time
from pathlib import Path

import dplace
from dplace.formats.generate import layered_dag, transformer_training
from dplace.viz import chrome_trace, gantt_png


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="20,2000,36000", help="comma-separated graph sizes (default 20,2000,36000)")
    ap.add_argument("--out", default=None, help="keep the PNGs in this directory")
    args = ap.parse_args()
    print(f"{'ops':>7} {'transfers':>9} {'gantt s':>8} {'trace s':>8} {'png KiB':>8}")
    for n in (int(x) for x in args.ops.split(",")):
        inst = transformer_training(n, 4) if n >= 500 else layered_dag(n, 3)
        res = dplace.solve(inst, "heft")
        gantt_png(res)  # warm: matplotlib's import is not the chart's cost
        t = time.perf_counter()
        png = gantt_png(res)
        tg = time.perf_counter() - t
        t = time.perf_counter()
        chrome_trace(res)
        tt = time.perf_counter() - t
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            (Path(args.out) / f"gantt_{inst.n}.png").write_bytes(png)
        print(f"{inst.n:>7} {len(res.schedule.transfers):>9} {tg:>8.2f} {tt:>8.2f} {len(png) / 1024:>8.0f}")


if __name__ == "__main__":
    main()
