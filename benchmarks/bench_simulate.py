"""Simulator benchmark (issue #2 §4 goal: one evaluation of a 36,000-op graph <= 0.5 s).

Generates the 36,000-op Transformer training graph on 4 devices, places it with a simple contiguous
split of the topological order (balanced by op time; memory is not the point here), and times
``dplace.simulate`` without an order (FIFO, TensorFlow-executor-like) and with an explicit per-device
order, in both comm modes, over a few repetitions. Prints a table.

    .venv/bin/python benchmarks/bench_simulate.py [--ops 36000] [--devices 4] [--repeat 5]
"""
from __future__ import annotations

import argparse
import statistics
import time

import dplace
from dplace.formats.generate import transformer_training


def contiguous_placement(inst: dplace.Instance) -> list[int]:
    """Cut the topological order into ``m`` pieces of about equal total time."""
    total = sum(inst.dur[o][0] for o in range(inst.n))
    pl = [0] * inst.n
    acc = 0.0
    for o in inst.topo:
        pl[o] = min(inst.m - 1, int(acc / total * inst.m))
        acc += inst.dur[o][0]
    return pl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    t = time.perf_counter()
    base = transformer_training(args.ops, args.devices)
    gen_s = time.perf_counter() - t
    print(f"generate transformer_training({args.ops}, {args.devices}): {base.n} ops, {len(base.edges)} edges, "
          f"{gen_s:.2f} s (goal < 3 s)")
    rows = []
    for comm in ("parallel", "sequential"):
        inst = base if comm == base.comm else base.replace(comm=comm)
        pl = contiguous_placement(inst)
        order = dplace.simulate(inst, pl).order  # a valid per-device order to replay
        for label, kw in (("FIFO", {}), ("order", {"order": order})):
            times = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                s = dplace.simulate(inst, pl, **kw)
                times.append(time.perf_counter() - t)
            rows.append((comm, label, s.makespan, min(times), statistics.median(times), max(times)))

    try:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"dplace.simulate on {base.n} ops, {base.m} devices ({args.repeat} runs)")
        for col in ("comm", "mode", "makespan µs", "min s", "median s", "max s", "≤ 0.5 s"):
            table.add_column(col, justify="right")
        for comm, label, mk, lo, med, hi in rows:
            table.add_row(comm, label, f"{mk:,.0f}", f"{lo:.3f}", f"{med:.3f}", f"{hi:.3f}", "yes" if med <= 0.5 else "NO")
        Console().print(table)
    except ImportError:  # pragma: no cover
        print("comm        mode   makespan_us   min_s  median_s   max_s")
        for comm, label, mk, lo, med, hi in rows:
            print(f"{comm:10s} {label:6s} {mk:12,.0f} {lo:7.3f} {med:9.3f} {hi:7.3f}")


if __name__ == "__main__":
    main()
