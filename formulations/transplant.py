"""Pieces' own schedules put back into a whole answer, one piece at a time ("transplant").

The segment bound (:mod:`dplace.formulations.bounds_segments`) solves pieces of the critical path with
CP-SAT, and on NASNet-Mobile (parallel comm) some of those schedules are far shorter than the same ops'
span inside portfolio's answer: the forward stem (54 ops) 20,842 µs alone against 26,769 in a 251,963-µs
answer, the backward stem 26,897 against 30,899 (benchmarks/RESULTS.md, "Branchy (NAS-style) graphs"). For one piece:

1. its ops' placement becomes the piece's (devices renamed by each of the m! permutations when the devices
   are interchangeable; identity otherwise); an op's colocation group follows it (the group's ops outside
   the piece move with it);
2. each device's order: the ops sorted by a *key*, the answer's simulated start for every op outside the
   piece and, for a piece op, the piece's first start in the answer plus its start in the piece's own
   schedule; keys are raised along the edges (a topological pass) so the order is a valid one;
3. the candidate is timed by :func:`dplace.simulate` and kept only when its makespan is below the
   answer's and memory holds.

Pieces are tried largest excess first (span in the answer minus the piece's own makespan). It is a
search step: nothing here is claimed; the answer is what the simulator gives. The time: m! simulations
per piece (24 on 4 devices, ~3 ms each on NASNet-Mobile's 1,842 ops); it stops at ``budget``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Sequence

from dplace.budget import Budget
from dplace.instance.model import Instance
from dplace.schedule.simulate import Schedule, simulate

__all__ = ["TransplantStats", "transplant", "piece_excess"]


@dataclass
class TransplantStats:
    tried: int = 0  # simulations
    kept: int = 0  # pieces whose transplant was kept
    start_makespan: float = 0.0
    makespan: float = 0.0
    stopped: str = ""  # "time limit", "interrupted" or "done"
    gains: list[tuple[int, float]] = field(default_factory=list)  # (piece index, µs gained) per kept piece


def _span(sch: Schedule, members: Sequence[int]) -> tuple[float, float]:
    return min(sch.start[o] for o in members), max(sch.end[o] for o in members)


def piece_excess(sch: Schedule, piece: dict[str, Any]) -> float:
    """µs a piece spans in the schedule above its own schedule's makespan (``piece["start"]`` plus the
    ops' times are not known here: ``piece["makespan"]`` when given, else its last start)."""
    a, b = _span(sch, piece["members"])
    own = piece.get("makespan")
    if own is None:
        own = max(piece["start"]) if piece["start"] else 0.0
    return (b - a) - own


def _order(inst: Instance, pl: Sequence[int], key: list[float]) -> list[list[int]]:
    """Per device its ops by key (raised along edges first, ties by topological position): valid."""
    k = list(key)
    for o in inst.topo:
        ko = k[o]
        for e in inst.succ[o]:
            v = inst.edst[e]
            if k[v] < ko:
                k[v] = ko
    tp = inst.topo_pos
    lists: list[list[int]] = [[] for _ in range(inst.m)]
    for o in sorted(range(inst.n), key=lambda x: (k[x], tp[x])):
        lists[pl[o]].append(o)
    return lists


def _interchangeable(inst: Instance) -> bool:
    from .stitch import _interchangeable as same

    return same(inst)


def transplant(inst: Instance, placement: Sequence[int], schedule: Schedule, pieces: Sequence[dict[str, Any]], *,
               budget: Budget | None = None, should_stop=None, max_pieces: int | None = None,
               ) -> tuple[list[int], list[list[int]], Schedule, TransplantStats]:
    """(placement, order, schedule, stats): the answer ``placement`` (simulated as ``schedule``) with the
    pieces' schedules put in where the simulation says it is faster (module docstring). ``pieces``: dicts
    with ``members`` (op indices), ``placement`` (per member a device index of the piece's schedule) and
    ``start`` (µs, per member), optionally ``makespan`` and ``part`` (per member a part number: each part's
    ops keep their first start in the answer, e.g. a forward and a backward stem solved chained); the ``max_pieces`` of largest excess are tried."""
    budget = Budget.resolve(budget, None)
    pl = list(placement)
    sch = schedule
    od = [list(x) for x in sch.order]
    stats = TransplantStats(start_makespan=sch.makespan, makespan=sch.makespan)
    perms = list(itertools.permutations(range(inst.m))) if _interchangeable(inst) and inst.m <= 5 else [
        tuple(range(inst.m))]
    ranked = sorted(range(len(pieces)), key=lambda i: -piece_excess(sch, pieces[i]))
    if max_pieces is not None:
        ranked = ranked[:max_pieces]
    groups = inst.groups
    g_of = inst.group_of

    def stop() -> bool:
        if should_stop is not None and should_stop():
            stats.stopped = "interrupted"
        elif budget.expired():
            stats.stopped = "time limit"
        else:
            return False
        return True

    for i in ranked:
        piece = pieces[i]
        members, sub_pl, sub_st = piece["members"], piece["placement"], piece["start"]
        if not members:
            continue
        part = piece.get("part") or [0] * len(members)
        key = list(sch.start)
        for k in set(part):  # each part keeps its first start in the answer
            idx = [x for x, q in enumerate(part) if q == k]
            base = min(sch.start[members[x]] for x in idx) - min(sub_st[x] for x in idx)
            for x in idx:
                key[members[x]] = base + sub_st[x]
        best = None
        for perm in (perms if not piece.get("fixed_devices") else [tuple(range(inst.m))]):
            if stop():
                break
            new = list(pl)
            done: set[int] = set()
            for o, j in zip(members, sub_pl):
                g = g_of[o]
                if g >= 0:
                    if g in done:
                        continue
                    done.add(g)
                    for x in groups[g]:
                        new[x] = perm[j]
                else:
                    new[o] = perm[j]
            if new == pl:
                continue
            cand = _order(inst, new, key)
            stats.tried += 1
            s = simulate(inst, new, cand)
            if s.memory_ok and s.makespan < sch.makespan * (1 - 1e-12) and (best is None or s.makespan < best[0].makespan):
                best = (s, new, cand)
        if best is not None:
            stats.gains.append((i, sch.makespan - best[0].makespan))
            sch, pl, od = best
            stats.kept += 1
        if stats.stopped:
            break
    stats.stopped = stats.stopped or "done"
    stats.makespan = sch.makespan
    return pl, [list(x) for x in od], sch, stats
