"""Simulated annealing over placements for graphs of a few thousand ops (both comm modes).

``portfolio`` runs it on the best start's placement: whole units (colocation groups, single ops) move to
other devices with room or swap devices, whole branches (:meth:`.units.Units.chains`: runs of units, a
training graph's forward and backward ops together) move to one device with probability
:data:`BLOCK_P` a step, two devices swap over a run of units in topological order with probability
:data:`RELABEL_P` a step, and each placement is judged by its own list schedule
(:func:`dplace.kernels.anneal.list_makespan`: ``formulations.units.placement_order`` timed by the
simulator's rules, compiled, ~50 µs on 650 ops). Judging thousands of placements a second lets the
search cross the plateaus a first-improvement search stops on: on InceptionV3 (two copies of one DAG
tied op by op) the moves that help come in long runs that each look worse alone.

The temperature falls geometrically with the time used, from ``t_hi`` to ``t_lo`` (fractions of the
start's makespan); with ``workers`` > 1 as many chains run in threads (the kernel releases the GIL) from
the same start with different seeds, on a ladder of temperatures (chain i of k at ``ladder ** (i / (k - 1))``
times the comm mode's own ``t_hi`` and ``t_lo``), and the best placement of all is returned. No one temperature suits every graph: on
NASNet-Mobile (ops of 0.3 ms, makespan ~300 ms) a chain 10 times cooler reached 272,536 µs in 35 s
against 286,528 at the default (parallel comm; sequential 311,494 against 347,008), while on ResNeXt-50
the default's 718,755 beat the cooler 728,241 and on Inception-v3 the two tied (``bench_nas.py``). With
the branch moves the temperature matters less there: 60k steps of one chain from dpos at 1, 0.1 and 0.01
times the default reached 261,678 / 259,483 / 260,446 µs (parallel comm; sequential 291,496 / 297,210 /
294,353). The compiled kernel
loads from numba's disk cache; the first run after an install compiles it (~10 s, holding the GIL):
``portfolio`` runs the stage then only with 30 s or more for it (:func:`kernel_ready`), and a chain whose
first chunk is still compiling at the deadline is left to finish in the background, not waited for.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Sequence

from dplace import progress
from dplace.budget import Budget
from dplace.instance.model import Instance

__all__ = ["BLOCK_P", "JUDGES", "PARALLEL_T", "RELABEL_MAX", "RELABEL_P", "SEQUENTIAL_T", "SYNC", "AnnealStats",
           "anneal_placement", "applies", "block_chance", "chain_scales", "judged_order", "kernel_ready",
           "temperatures"]

MAX_OPS = 5000  # one judgement costs ~O(n * ops per device): past this a second gives too few
# (t_hi, t_lo) in sequential comm (a setting of ours, swept in session 12: 2 chains from the best start,
# t_lo = t_hi / 3, simulated makespan; 3,006-op Transformer 30 s, load 4-5: t_hi 3e-3 803,504 (no gain
# over the start), 1e-3 814,353, 3e-4 788,317, 1e-4 776,372, 3e-5 774,395, 1e-5 775,596; 996-op one 20 s,
# load 5-6: 3e-3 367,502, 3e-4 354,213, 1e-4 351,944, 3e-5 357,165; BERT-12 converted, 20 s from heft_links:
# 1,758,038 / 1,742,223 / 1,734,579 / 1,741,647 for 3e-3 / 3e-4 / 1e-4 / 3e-5). At 3e-3 it accepted 64 %
# of its moves on the 3,006-op graph and ended no better than its start (1e-4: 37 %). Session 18 tried (1e-3,
# 3e-5) (hotter at the start, as cold at the end): on NASNet-Mobile one chain of 40,000 steps from heft's
# placement (judge mixed, seeds 0-3; a fixed number of steps, so the load does not decide) reached 266,534 /
# 263,431 / 267,837 / 271,312 µs against 272,909 / 267,078 / 278,137 / 278,337 here (160,000 steps, seed 0:
# 258,490 against 264,279), but portfolio 60 s did not follow: NASNet-Mobile the same within the noise,
# bundled InceptionV3 sequential worse in three runs of three (benchmarks/RESULTS.md, "Which method when:
# sequential comm"), so it stays.
SEQUENTIAL_T = (1e-4, 1e-4 / 3)
# (t_hi, t_lo) in parallel comm (a setting of ours; see the module docstring and the README for the sweeps)
PARALLEL_T = (0.003, 1e-4)
# parallel comm: ``portfolio``'s annealing rounds (formulations/large.py) pass sync=SYNC: at SYNC times evenly
# spaced in a round, a chain behind the best chain goes on from that chain's best (0: the chains never meet).
# Why: runs differed by which chain won (benchmarks/RESULTS.md, "Branchy (NAS-style) graphs", session 16);
# measured there (session 18).
SYNC = 3
# a step's chance of moving a whole branch (:meth:`.units.Units.chains`), times the share of units in
# branches (NASNet-Mobile 0.83; figures below are of the unscaled chance). Moving one op
# of a branch to another device costs a transfer in and one out, so single moves rarely split a branch
# off; a branch moved at once crosses that wall. NASNet-Mobile (81 chains of 8 layers), 60k steps of one
# chain from dpos at 0.1x the parallel temperatures, seeds 0 / 1: no block moves 289,868 (3 s, 2 chains)
# -> 0.2: 261,629 / 264,421, 0.4: 259,483 / 255,596, 0.6: 259,844 / 260,080; sequential comm seed 0:
# 305,717 / 297,210 / 295,454. 20 s from dpos, 2 chains: parallel 271,680 without, 260,061 at 0.2;
# sequential 307,150 / 286,671; ResNeXt-50 719,238 / 687,187 (0.4: 681,389); Inception-v3 571,733 / 569,719.
BLOCK_P = 0.4
# sequential comm's judge (:func:`dplace.kernels.anneal._anneal`): "fast" (the rank order without
# insertion), "insert" (the same ranks with insertion, placement_order's order: ~60 times slower), "both"
# (the walk by "fast", accepted placements within JUDGE_SLACK of the best "fast" value also judged by
# "insert", the best by "insert" kept), "mixed" (the better of "fast"'s order and the order of the starts of
# the parallel-comm list schedule with insertion, each simulated exactly: ~2.5 times "fast"'s cost,
# :func:`dplace.kernels.anneal._seq_mixed`), "links" (the best of "mixed"'s two orders and the start order of
# the list schedule that keeps the links' queues, :func:`dplace.kernels.seqorder.link_schedule`: on
# NASNet-Mobile 20-s chains from heft it reached 272,376 / 274,177 / 280,704 against "mixed"'s 272,298 /
# 273,673 / 270,994, so it is not the default; portfolio's final re-order uses it). Session 32, portfolio 60 s on
# NASNet-Mobile sequential (benchmarks/bench_flags.py, alternated): "fast" 269,524 / 267,441 us against "mixed"'s
# 251,911 / 250,865, judging twice the placements; "links" (judged incrementally and stopped early since then: 430 ->
# ~290 us a step) 262,914 / 258,145 / 251,444 against 251,352 / 251,366 / 250,794. Measured in
# benchmarks/RESULTS.md ("Which method when: sequential comm").
SEQUENTIAL_JUDGE = "mixed"
# parallel comm and sequential comm's judges fast, mixed and links: a placement judged from the last accepted one
# (only the ranks that can change re-computed, their order re-sorted by insertion;
# :func:`dplace.kernels.anneal._judge_moved`), the same makespan as from scratch, step for step
# (tests/kernels/test_anneal_incremental.py): 56-60 against 80-87 µs a step on NASNet-Mobile
# (benchmarks/bench_anneal_steps.py; benchmarks/RESULTS.md, "Which method when: branchy graphs", session 29). False:
# from scratch.
INCREMENTAL = True
# sequential comm's judges fast, mixed and links: a step's acceptance number is drawn before its judge, and the judge
# stops a simulation as soon as the placement is sure to end above the value it must stay under (an op's start plus
# its rank: :func:`dplace.kernels.anneal._seq_run_cut`): the same walk, step for step (tests/kernels/
# test_anneal_incremental.py; the stopped simulations themselves: tests/kernels/test_anneal_prune.py), faster.
# False: every simulation to its end. Measured (session 31,
# `benchmarks/bench_anneal_steps.py F --compare prune`, from heft, load ~0.9): NASNet-Mobile 165.9 -> 130.8 us a step
# (1.27x), bundled InceptionV3 45.8 -> 33.7 (1.36x), Inception-v3 (PipeDream) 54.8 -> 36.6 (1.50x), the 3k-op
# Transformer 703.1 -> 691.6 (1.02x: its rejected placements show late); inside portfolio 60 s the sequential
# annealing judged 410k-491k placements on NASNet-Mobile against 304k-308k, 1.59M-1.88M on bundled InceptionV3
# against 1.07M, with no gain in the answers shown (benchmarks/RESULTS.md, "Which method when: sequential comm").
PRUNE = True
JUDGE_SLACK = 0.02
# a step's chance of swapping two devices over a run of units in topological order (a cell, part of one, several:
# log-uniform length 2 to RELABEL_MAX - 1, RELABEL_MAX 0: a quarter of the units;
# :func:`dplace.kernels.anneal._relabel_move`): the run keeps its own split, only the tensors across its ends and
# the devices' loads change. A placement whose first half of a cell sits "one device off" from the rest is one move
# from the better one, where unit and branch moves need many that each look worse alone. 0: no such moves. Measured
# (session 30, benchmarks/RESULTS.md, "Which method when: branchy graphs"): NASNet-Mobile, one chain of 600,000
# steps from heft's placement, seeds 0-2 (parallel comm, the portfolio's temperatures): 0 -> 256,659 / 255,340 /
# 250,387 µs, 0.05 -> 251,666 / 248,938 / 251,490, 0.1 -> 247,905 / 249,854 / 249,414, 0.25 -> 249,906 / 250,190 /
# 247,140, 0.4 -> 250,529 / 251,448 / 252,925; RELABEL_MAX 40 -> 251,367 / 251,134 / 246,073, 921 (all units) ->
# 249,662 / 252,810 / 248,750; portfolio 60 s (benchmarks/bench_flags.py): 242,777-249,222 in twelve runs against
# 251,455-251,919 in four alternated runs without.
RELABEL_P = 0.1
RELABEL_MAX = 0
JUDGES = {"fast": 0, "insert": 1, "both": 2, "mixed": 3, "links": 4}  # name -> the kernel's judge code


@dataclass
class AnnealStats:
    start_makespan: float  # the start's list-schedule makespan
    makespan: float  # the best placement's list-schedule makespan
    steps: int  # placements judged (all chains)
    accepted: int
    chains: int
    wall_s: float
    stopped: str  # "time limit", "interrupted", "compiling" (no chain finished a chunk in time)
    late_gain: float = 0.0  # how much the best fell in the last quarter of the run, over its start (0..1)
    per_chain: tuple = ()  # each chain's (best makespan, placements judged), in ladder order (chain 0 the hottest)
    judge: str = "fast"  # sequential comm's judge (SEQUENTIAL_JUDGE); parallel comm: "fast"
    insert_judged: int = 0  # placements judged with insertion (judge "insert": every one; "both": the near-best)
    syncs: int = 0  # times a chain went on from another chain's best (``sync``)


def applies(inst: Instance) -> bool:
    """Whether :func:`anneal_placement` runs on ``inst``: 2 to :data:`MAX_OPS` ops, more than one device,
    and the compiled kernels enabled (``DPLACE_KERNEL=python`` turns it off: there is no pure-Python
    version of the loop). Both comm modes (sequential: each placement judged by :data:`SEQUENTIAL_JUDGE`)."""
    from dplace import kernels

    return 2 <= inst.n <= MAX_OPS and inst.m > 1 and kernels.use(inst.n, "anneal")


def anneal_placement(inst: Instance, placement: Sequence[int], *, time_limit_s: float | None = None, seed: int = 0,
                     workers: int = 1, t_hi: float | None = None, t_lo: float | None = None, ladder: float = 0.1,
                     p_block: float = BLOCK_P, should_stop=None,
                     budget: Budget | None = None, judge: str | None = None, sync: int = 0,
                     others: Sequence[Sequence[int]] = (), hot_others: bool = False,
                     snapshots: list[tuple[float, float, list[int]]] | None = None, snapshot_every: float = 0.5,
                     incumbent_below: float | None = None) -> tuple[list[int], AnnealStats]:
    """The best placement the annealing judged within ``budget`` (or ``time_limit_s`` from now; module docstring) and
    its stats. A step moves a whole branch with probability ``p_block`` times the share of units in branches, and
    swaps two devices over a run of units with probability :data:`RELABEL_P`. Temperatures left None: 0.003 and 1e-4
    in parallel comm, :data:`SEQUENTIAL_T` in sequential comm; chain i of k anneals at ``ladder ** (i / (k - 1))``
    times them (chain 0 at the mode's own, the last ``ladder`` times cooler).
    Memory, pins and colocation of ``placement`` are kept by every move (a start over memory stays over
    only where it was); the result is never judged worse than the start. ``sync`` > 0 (several chains):
    at ``sync`` times evenly spaced in the run, a chain whose best is above the best of all chains goes
    on from that placement at its own temperature (:data:`SYNC`). ``others``: chain i (i >= 1) begins from
    ``others[i - 1]`` where there is one (memory-feasible placements), chain 0 and the rest from ``placement``;
    ``hot_others``: those chains anneal at chain 0's temperatures (a start in another basin, to be searched as
    widely as the best start), the others keep their places on the ladder. ``snapshots``: when a list is
    given, the best placement of all chains is appended to it as (seconds, judged makespan, placement) each time
    it falls, at most once per ``snapshot_every`` seconds (the placements the run went through, for a caller
    that judges them otherwise: :func:`.large._parallel_first` times them in sequential comm). ``incumbent_below``:
    each best judged below it (and below the last one reported) is reported to :mod:`dplace.progress` as the
    incumbent (the judge's value is the simulation of :func:`judged_order`'s order; None: nothing reported, for
    a caller whose instance is not the problem's)."""
    from dplace.kernels.anneal import Annealer
    from dplace.schedule.simulate import simulate

    from .units import Units, placement_order

    t0 = time.perf_counter()
    budget = Budget.resolve(budget, time_limit_s)
    hot, cold = temperatures(inst)
    t_hi = hot if t_hi is None else t_hi
    t_lo = cold if t_lo is None else t_lo
    units = Units(inst)
    start = [int(d) for d in placement]
    # the temperatures' scale (the same list schedule, timed here in Python: nothing compiled runs in
    # this thread, so a first run that compiles the kernel keeps the clock)
    m0 = simulate(inst, start, placement_order(inst, start, insertion=inst.comm != "sequential")).makespan
    blocks = units.chains()
    p_blk = block_chance(units, blocks, p_block)
    judge = (judge or SEQUENTIAL_JUDGE) if inst.comm == "sequential" else "fast"
    begin = [start] + [[int(d) for d in o] for o in others]
    chains = [Annealer(inst, begin[i] if i < len(begin) else start, units.members, units.allowed, blocks, p_blk,
                       JUDGES[judge], JUDGE_SLACK, INCREMENTAL, RELABEL_P, RELABEL_MAX, PRUNE)
              for i in range(max(1, workers))]
    scale = chain_scales(len(chains), ladder, len(others) if hot_others else 0)  # chain i's temperatures
    done = [0] * len(chains)
    syncs = [0] * len(chains)  # times each chain went on from another chain's best
    stop = threading.Event()

    def run(i: int) -> None:
        a = chains[i]
        hi, lo = t_hi * m0 * scale[i], max(t_lo * m0 * scale[i], 1e-12)
        iters, k = 50, 0
        synced = 0
        while not stop.is_set():
            if budget.expired():
                break
            f0 = min(1.0, budget.elapsed() / max(1e-9, budget.limit_s or 0.0))
            if sync > 0 and len(chains) > 1 and synced < sync and f0 >= (synced + 1) / (sync + 1):
                synced += 1
                syncs[i] += _go_with_best(a, chains)
            t = time.perf_counter()
            a.step(iters, hi * (lo / hi) ** f0, hi * (lo / hi) ** min(1.0, f0 + 0.02), seed * 7919 + 104729 * i + k)
            took = time.perf_counter() - t
            done[i] += 1
            k += 1
            # chunks of ~0.05 s (the clock and Ctrl-C are looked at between chunks)
            iters = max(10, min(200_000, int(iters * 0.05 / max(took, 1e-6))))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(chains))]
    for th in threads:
        th.start()
    stopped = "time limit"
    trace = [(0.0, m0)]  # (seconds, the best judged so far) whenever it falls
    while any(th.is_alive() for th in threads):
        now, now_pl = min((c.result for c in chains), key=lambda r: r[0])
        if now < trace[-1][1]:
            trace.append((time.perf_counter() - t0, now))
            if incumbent_below is not None and now < incumbent_below:
                incumbent_below = float(now)
                progress.update(incumbent=incumbent_below)
            if snapshots is not None and (not snapshots or trace[-1][0] - snapshots[-1][0] >= snapshot_every):
                snapshots.append((trace[-1][0], float(now), now_pl.tolist()))
        if should_stop is not None and should_stop():
            stopped = "interrupted"
            stop.set()
            break
        if budget.expired():
            break
        threads[0].join(0.05)
    stop.set()
    for th in threads:  # a chunk ends within ~0.05 s; a first chunk still compiling is not waited for
        th.join(min(0.2, budget.left() + 0.2))
    ran = [c for c, n in zip(chains, done) if n > 0]
    if not ran:
        return start, AnnealStats(m0, m0, 0, 0, len(chains), time.perf_counter() - t0, "compiling", judge=judge)
    value, best_pl = min((c.result for c in ran), key=lambda r: r[0])  # never above its chain's start
    wall = time.perf_counter() - t0
    before = min([b for t, b in trace if t <= 0.75 * wall] + [ran[0].start_value])  # the best at 3/4 of the run
    late = max(0.0, (before - value) / ran[0].start_value) if ran[0].start_value > 0 else 0.0
    per = tuple((c.result[0], c.steps) for c, n in zip(chains, done) if n > 0)
    return best_pl.tolist(), AnnealStats(ran[0].start_value, value, sum(c.steps for c in ran),
                                         sum(c.accepted for c in ran), len(chains), wall, stopped, late, per,
                                         judge, sum(int(c.ins[0]) for c in ran), sum(syncs))


def block_chance(units, blocks: Sequence[Sequence[int]], p_block: float = BLOCK_P) -> float:
    """A step's chance of moving a whole branch: ``p_block`` times the share of ``units``
    (:class:`.units.Units`) in ``blocks`` (as if a step drew a unit and moved its branch with ``p_block``): a
    graph with a few short chains spends no steps moving them."""
    return p_block * sum(len(b) for b in blocks) / max(1, len(units.members))


def chain_scales(k: int, ladder: float, hot: int = 0) -> list[float]:
    """Chain i of ``k`` anneals at ``ladder ** (i / (k - 1))`` times the temperatures; chains 1 .. ``hot`` (those
    begun from other starts, ``hot_others``) at 1, as chain 0."""
    return [1.0 if 1 <= i <= hot else ladder ** (i / max(1, k - 1)) for i in range(k)]


def _go_with_best(a, chains) -> int:
    """Chain ``a`` (an :class:`dplace.kernels.anneal.Annealer`, between its chunks) goes on from the best
    placement of all ``chains`` when that is below its own best: its current placement, device memory and
    current value become that placement's (the value judged by the same judge: the chain needs no new
    judgement). Returns 1 when it moved, else 0. Another chain's ``result`` is one tuple, assigned at once."""
    import numpy as np

    value, pl = min((c.result for c in chains), key=lambda r: r[0])
    if not value < a.result[0] or a.cur < 0:
        return 0
    a.pl[:] = pl
    a.used[:] = 0
    np.add.at(a.used, a.pl[a.unit_members[a.unit_ptr[:-1]]], a.unit_mem)
    a.cur = float(value)
    return 1


def temperatures(inst: Instance) -> tuple[float, float]:
    """(t_hi, t_lo), fractions of the start's makespan: 0.003 and 1e-4 in parallel comm,
    :data:`SEQUENTIAL_T` in sequential comm."""
    return SEQUENTIAL_T if inst.comm == "sequential" else PARALLEL_T


def judged_order(inst: Instance, placement: Sequence[int], judge: str | None = None) -> list[list[int]]:
    """Per device, the order of the list schedule :func:`anneal_placement` judged ``placement`` by; timed
    by the simulator it gives the judged makespan (``tests/formulations/test_anneal.py``, with the oracle
    too). Sequential comm: the rank order without insertion (``placement_order(..., insertion=False)``).
    Parallel comm: the compiled kernel's own start times (ops by start, then end, then topological
    position). ``placement_order`` gives the same where no op takes zero time; with zero-time ops its
    state re-times them and its order may be slower: on NASNet-Mobile (160 zero-time ``Add`` ops) an
    annealed placement judged 263,104 µs simulated to 278,762 in ``placement_order``'s order."""
    from dplace.kernels.anneal import list_makespan, seq_links, seq_mixed

    from .units import placement_order

    if inst.comm == "sequential":
        judge = judge or SEQUENTIAL_JUDGE
        if judge == "mixed":
            return seq_mixed(inst, placement)[1]
        if judge == "links":
            return seq_links(inst, placement)[1]
        return placement_order(inst, placement, insertion=judge != "fast")
    _, start, end = list_makespan(inst, placement)
    lists: list[list[int]] = [[] for _ in range(inst.m)]
    tp = inst.topo_pos
    for o in sorted(range(inst.n), key=lambda x: (start[x], end[x], tp[x])):
        lists[placement[o]].append(o)
    return lists


def kernel_ready() -> bool:
    """Whether the annealing kernel is compiled in this process or in numba's disk cache (else its first
    run compiles it: ~10 s, most of it holding the GIL)."""
    import os

    from dplace.kernels import anneal as ka

    if ka._anneal.signatures:
        return True
    try:  # numba's cache folder: the package's __pycache__, or a user-wide one where that is read-only
        folder = ka._anneal._cache.cache_path
    except AttributeError:
        folder = os.path.join(os.path.dirname(os.path.abspath(ka.__file__)), "__pycache__")
    try:
        return any(n.startswith("anneal._anneal-") and n.endswith(".nbi") for n in os.listdir(folder))
    except OSError:
        return False
