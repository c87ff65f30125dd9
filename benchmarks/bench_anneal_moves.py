"""What the annealing's moves buy, at a fixed number of steps: one chain (``Annealer``, the moves
``anneal_placement`` draws) from a start method's placement, the comm mode's temperatures
(``formulations.anneal.temperatures``, falling geometrically over the run in chunks of 2,000 steps), for each
chance of a relabel move (two devices swapped over a run of units in topological order,
``formulations.anneal.RELABEL_P``) and each seed. A fixed number of steps, so the load of the machine changes
the time a run takes, not where it ends.

    .venv/bin/python benchmarks/bench_anneal_moves.py FILE [--start heft] [--steps 600000] [--seeds 3]
        [--relabel 0,0.1,0.25] [--relabel-max 0]

Prints one row per seed: the best list-schedule makespan (the annealing's judge) of each variant.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dplace  # noqa: E402
from dplace.formulations.anneal import JUDGES, SEQUENTIAL_JUDGE, block_chance, temperatures  # noqa: E402
from dplace.formulations.units import Units  # noqa: E402
from dplace.kernels.anneal import Annealer  # noqa: E402


def chain(inst, start: list[int], m0: float, steps: int, seed: int, p_relabel: float, relabel_max: int):
    u = Units(inst)
    blocks = u.chains()
    judge = JUDGES[SEQUENTIAL_JUDGE] if inst.comm == "sequential" else JUDGES["fast"]
    a = Annealer(inst, start, u.members, u.allowed, blocks, block_chance(u, blocks), judge=judge,
                 p_relabel=p_relabel, relabel_max=relabel_max)
    hot, cold = temperatures(inst)
    hi0, lo0 = hot * m0, cold * m0
    chunks = max(1, steps // 2000)
    t = time.perf_counter()
    for c in range(chunks):
        hi = hi0 * (lo0 / hi0) ** (c / chunks)
        a.step(2000, hi, hi * (lo0 / hi0) ** (1 / chunks), seed * 1000 + c + 1)
    return a.result[0], time.perf_counter() - t, a.accepted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--start", default="heft", help="the method whose placement the chain begins from")
    ap.add_argument("--steps", type=int, default=600000)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--relabel", default="0,0.1,0.25", help="comma-separated chances of a relabel move a step")
    ap.add_argument("--relabel-max", type=int, default=0, help="the longest run of units relabelled (0: a quarter)")
    args = ap.parse_args()
    try:
        ps = [float(x) for x in args.relabel.split(",")]
    except ValueError:
        ap.error(f"--relabel: not a comma-separated list of numbers: {args.relabel!r}")
    if not all(0.0 <= p <= 1.0 for p in ps):
        ap.error(f"--relabel: each chance must lie in [0, 1]: {args.relabel!r}")
    if args.steps < 1 or args.seeds < 1 or args.relabel_max < 0:
        ap.error(f"--steps {args.steps} and --seeds {args.seeds} must be >= 1, --relabel-max {args.relabel_max} >= 0")
    inst = dplace.load_instance(args.file)
    res = dplace.solve(inst, args.start)
    start = list(res.placement)
    print(f"{inst.name}: {inst.n} ops, {inst.comm} comm, start {args.start} {res.makespan:,.0f} µs, "
          f"{args.steps} steps a chain, relabel max {args.relabel_max or 'a quarter of the units'}; "
          f"load {os.getloadavg()[0]:.2f}")
    print("| seed | " + " | ".join(f"relabel {p}" for p in ps) + " |")
    print("|---|" + "---|" * len(ps))
    for seed in range(args.seeds):
        cells = []
        for p in ps:
            best, wall, acc = chain(inst, start, res.makespan, args.steps, seed, p, args.relabel_max)
            cells.append(f"{best:,.0f} ({wall:.0f} s)")
        print(f"| {seed} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
