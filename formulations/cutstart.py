"""A start for the annealing from the cuts memory forces on the critical path.

The forced-cut bound (:mod:`dplace.bounds.memory`) cuts the critical path into *runs* that each fit on one device,
at the least total cost of its boundaries (in sequential comm with the link's queue in front of each send). Its
dynamic programme also gives one such cut (:func:`~dplace.bounds.memory.cheapest_forced_cut`), and
:func:`cut_start` places it:

* the units (colocation groups, or single ops) of the runs, in path order: each run's units not placed by an
  earlier run (a training graph's path meets each layer's unit forward and again backward: the backward half
  follows the forward cuts) on one device they may all use with room for them, an unused one first, else the
  one with the most room left, never the device of the run just before it;
* every unit off the path, in topological order: on the device of its placed neighbours (predecessors first,
  then successors) that exchange the most bytes with it and have room, else on the allowed device with the most
  room left.

It is a placement, nothing more: on near-chains (the graph's work at most ``CUTS_SPREAD`` times its critical
path's) ``portfolio`` simulates it as every start and gives it an annealing chain of its own
(``formulations/large.py``). Why: on ResNeXt-50 (PipeDream, 4 devices each holding 0.4 of the ops' memory, a
near-chain) every start cut the network where its activations are large (a 411 MB tensor, 34 ms each way), and the
annealing stayed there (706,464 µs in sequential comm in every 60-s run since session 20); the cheapest forced cut
crosses where they are small, and the annealing from its placement reached 661,006-678,521 µs in portfolio's 60 s
(benchmarks/RESULTS.md, "Which method when: sequential comm"). Where memory forces no cut on the path, or one that
costs less than :data:`MIN_SHARE` of it (NASNet-Mobile: 10 µs), there is no such start (None).
"""
from __future__ import annotations

import math

from dplace.bounds.memory import cheapest_forced_cut
from dplace.bounds.shared import critical_path_length, critical_path_ops
from dplace.instance.model import Instance

from .units import Units

__all__ = ["MIN_SHARE", "cut_start"]

MIN_SHARE = 0.01  # a cut that costs less than this share of the path's smallest times gives no start: memory
# barely shapes the path there (NASNet-Mobile: 10 µs of 181,322), and the annealing's chain is worth more from
# the stitched segments (formulations/large.py, STITCH_CHAIN)


def cut_start(inst: Instance, min_share: float = MIN_SHARE) -> list[int] | None:
    """The placement of the critical path's cheapest forced cut (module docstring): device per op, or None
    when memory forces no cut on the path that costs ``min_share`` of the path's smallest times, or a run's or
    another unit finds no device with room."""
    path = critical_path_ops(inst)
    if len(path) < 2 or inst.m < 2:
        return None
    value, cuts = cheapest_forced_cut(inst, path)
    if not cuts or value == math.inf or value < min_share * critical_path_length(inst):
        return None
    units = Units(inst)
    runs: list[list[int]] = []  # the runs' units, in path order
    begin = 0
    for end in cuts + [len(path) - 1]:
        runs.append(list(dict.fromkeys(units.of[o] for o in path[begin:end + 1])))
        begin = end + 1
    free = list(inst.capacity)
    where = [-1] * len(units.members)
    used: set[int] = set()
    last = -1
    for run in runs:
        new = [u for u in run if where[u] < 0]
        if not new:  # a run of units placed before (a training graph's backward half): they stay
            last = where[run[-1]]
            continue
        mem = sum(units.mem[u] for u in new)
        allowed = set(range(inst.m))
        for u in new:
            allowed &= set(units.allowed[u])
        fits = [d for d in sorted(allowed) if free[d] >= mem and d != last]
        if not fits:
            return None
        d = min(fits, key=lambda d: (d in used, -free[d], d))
        for u in new:
            where[u] = d
        free[d] -= mem
        used.add(d)
        last = d
    if not _place_the_rest(inst, units, where, free):
        return None
    return [where[units.of[o]] for o in range(inst.n)]


def _place_the_rest(inst: Instance, units: Units, where: list[int], free: list[float]) -> bool:
    """Every unit not placed yet (``where`` -1), in topological order of its first op: by its placed neighbours'
    bytes, predecessors first (module docstring). False when one finds no allowed device with room."""
    tp = inst.topo_pos
    todo = sorted((u for u in range(len(units.members)) if where[u] < 0),
                  key=lambda u: min(tp[o] for o in units.members[u]))
    es, ed, eb = inst.esrc, inst.edst, inst.ebytes
    for u in todo:
        ms = units.members[u]
        inward: dict[int, float] = {}
        outward: dict[int, float] = {}
        for o in ms:
            for e in inst.pred[o]:
                d = where[units.of[es[e]]]
                if d >= 0 and units.of[es[e]] != u:
                    inward[d] = inward.get(d, 0.0) + eb[e]
            for e in inst.succ[o]:
                d = where[units.of[ed[e]]]
                if d >= 0 and units.of[ed[e]] != u:
                    outward[d] = outward.get(d, 0.0) + eb[e]
        mem = units.mem[u]
        ok = [d for d in units.allowed[u] if free[d] >= mem]
        if not ok:
            return False
        d = max(ok, key=lambda d: (inward.get(d, -1.0), outward.get(d, -1.0), free[d], -d))
        where[u] = d
        free[d] -= mem
    return True
