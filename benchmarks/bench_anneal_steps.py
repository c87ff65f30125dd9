"""The annealing's cost per step, its judge from scratch against the incremental one
(``dplace.kernels.anneal._judge_moved``: only the ranks that can change re-computed, their order re-sorted by
insertion; parallel comm, and sequential comm's judge, ``SEQUENTIAL_JUDGE`` or ``--judge``), alternated, the same
seeds: the walks must be the same (best, moves accepted, last placement), so the table is a pure speed comparison.
``--compare prune`` (sequential comm): the incremental judge with every simulation run to its end against the one
stopped once the placement is sure to miss the acceptance threshold (``formulations.anneal.PRUNE``,
:func:`dplace.kernels.anneal._seq_run_cut`); the same walk again.

    .venv/bin/python benchmarks/bench_anneal_steps.py FILE [--start heft] [--steps 20000] [--rounds 3]
        [--compare incremental|prune] [--judge fast|mixed|links]

One chain (``Annealer``, branch moves as ``anneal_placement`` draws them), chunks of 2,000 steps at a fixed
temperature ladder from 1e-3 to 1e-4 of the start's makespan, from the start method's placement.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import dplace  # noqa: E402
from dplace.formulations.anneal import JUDGES, SEQUENTIAL_JUDGE, block_chance  # noqa: E402
from dplace.formulations.units import Units  # noqa: E402
from dplace.kernels.anneal import Annealer  # noqa: E402


def walk(inst, start: list[int], incremental: bool, steps: int, m0: float, prune: bool = True,
         judge_name: str = SEQUENTIAL_JUDGE) -> tuple[float, tuple]:
    u = Units(inst)
    blocks = u.chains()
    p_blk = block_chance(u, blocks)
    judge = JUDGES[judge_name] if inst.comm == "sequential" else JUDGES["fast"]
    a = Annealer(inst, start, u.members, u.allowed, blocks, p_blk, judge=judge, incremental=incremental, prune=prune)
    a.step(10, 1e-3 * m0, 1e-3 * m0, 0)  # the start judged (and the kernel loaded) outside the clock
    chunks = max(1, steps // 2000)
    t = time.perf_counter()
    for c in range(chunks):
        hi = 1e-3 * m0 * 0.1 ** (c / chunks)
        a.step(2000, hi, hi * 0.1 ** (1 / chunks), c + 1)
    dt = time.perf_counter() - t
    return dt / (chunks * 2000) * 1e6, (a.result[0], a.accepted, a.cur, a.pl.tolist())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--start", default="heft", help="the method whose placement the chains begin from")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare", choices=("incremental", "prune"), default="incremental",
                    help="incremental: from scratch against incremental; prune (sequential comm): incremental with "
                         "every simulation to its end against stopped early")
    ap.add_argument("--judge", choices=("fast", "mixed", "links"), default=SEQUENTIAL_JUDGE,
                    help=f"sequential comm's judge (default {SEQUENTIAL_JUDGE}, the portfolio's)")
    args = ap.parse_args()
    inst = dplace.load_instance(args.file)
    res = dplace.solve(inst, args.start)
    start = list(res.placement)
    judge = args.judge if inst.comm == "sequential" else "list schedule"
    print(f"{inst.name}: {inst.n} ops, {inst.comm} comm (judge {judge}), start {args.start} {res.makespan:,.0f} µs, {args.steps} steps a run; "
          f"load {os.getloadavg()[0]:.2f}")
    if args.compare == "prune" and inst.comm != "sequential":
        ap.error(f"--compare prune: the instance's comm must be sequential, got {inst.comm!r}")
    names = ("from scratch", "incremental") if args.compare == "incremental" else ("to the end", "stopped early")
    print(f"| round | {names[0]} µs/step | {names[1]} µs/step | ratio | same walk | best µs |")
    print("|---|---|---|---|---|---|")
    for r in range(args.rounds):
        if args.compare == "incremental":
            old, w_old = walk(inst, start, False, args.steps, res.makespan, judge_name=args.judge)
            new, w_new = walk(inst, start, True, args.steps, res.makespan, judge_name=args.judge)
        else:
            old, w_old = walk(inst, start, True, args.steps, res.makespan, prune=False, judge_name=args.judge)
            new, w_new = walk(inst, start, True, args.steps, res.makespan, prune=True, judge_name=args.judge)
        print(f"| {r + 1} | {old:.1f} | {new:.1f} | {old / new:.2f} | {w_old == w_new} | {w_new[0]:,.0f} |")
        if w_old != w_new:
            sys.exit("bench_anneal_steps: the two judges walked differently")


if __name__ == "__main__":
    main()
