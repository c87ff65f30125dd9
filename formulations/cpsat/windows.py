"""Bounds on start times and on the makespan from the CP-SAT model's tick data: start windows from longest
paths (:func:`time_windows`, tight domains for large models) and energetic reasoning (:func:`energetic_bound`).

Split from :mod:`.model` (the constraint families); both read only the instance and its :class:`Ticks`.
"""
from __future__ import annotations

from typing import Sequence

from dplace.errors import InvalidInstanceError
from dplace.instance import graph
from dplace.instance.model import Instance

from .ticks import Ticks

__all__ = ["energetic_bound", "time_windows"]


def time_windows(inst: Instance, T: Ticks, horizon: int, fixed: dict[int, int] | None = None,
                 prec: Sequence[tuple[int, int]] = ()) -> tuple[list[int], list[int]]:
    """Start windows valid for every schedule of makespan <= ``horizon`` (ticks): head = longest path
    to o, tail = longest path from o (its own time included), with the smallest durations, transfer
    delays only where both ends are fixed on different devices, and the extra arcs ``prec``. Tight
    domains spare CP-SAT long propagation chains on large graphs."""
    fixed = fixed or {}
    n = inst.n
    allowed = [[fixed[o]] if o in fixed else inst.allowed_devices(o) for o in range(n)]
    pmin = [min(T.p[o][d] for d in allowed[o]) for o in range(n)]
    arcs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for k in range(len(inst.esrc)):
        u, v = inst.esrc[k], inst.edst[k]
        if set(allowed[u]) & set(allowed[v]):
            c = 0
        else:
            c = min(T.c[k][a][b] for a in allowed[u] for b in allowed[v])
        arcs[u].append((v, c))
    for a, b in prec:
        arcs[a].append((b, 0))
    if prec:  # any topological order of the arcs serves the longest paths below
        try:
            order = graph.topological_order(graph.digraph(n, ((u, v) for u in range(n) for v, _ in arcs[u])))
        except graph.NotADag:
            raise InvalidInstanceError("time_windows: the extra precedences make a cycle") from None
    else:
        order = list(inst.topo)
    head = [0] * n
    for o in order:
        for v, c in arcs[o]:
            t = head[o] + pmin[o] + c
            if t > head[v]:
                head[v] = t
    tail = list(pmin)
    for o in reversed(order):
        for v, c in arcs[o]:
            t = pmin[o] + c + tail[v]
            if t > tail[o]:
                tail[o] = t
    return head, [horizon - tail[o] for o in range(n)]


def energetic_bound(inst: Instance, T: Ticks, lo: int, hi: int, max_ops: int = 200) -> int:
    """Smallest makespan L in [lo, hi] (ticks) that passes energetic reasoning (Lopez & Erschler; Baptiste,
    Le Pape & Nuijten, "Constraint-Based Scheduling", ch. 3): every op o runs p_o (its smallest time) inside
    [head_o, L - tail_o] (longest paths without transfers); for every interval [a, b] the work that must
    fall inside it, sum_o min(p_o, b - a, head_o + p_o - a, b - L + tail_o + p_o)^+, is at most m (b - a).
    A relaxation (one op per device at a time; memory, pins and transfers ignored), so L is a lower bound;
    ``lo`` when the graph has more than ``max_ops`` ops (cost O(n^3))."""
    import numpy as np

    n, m = inst.n, inst.m
    if n == 0 or n > max_ops or hi <= lo:
        return lo
    p = np.array([min(row) for row in T.p], dtype=np.int64)
    head = np.zeros(n, dtype=np.int64)
    for o in inst.topo:
        for k in inst.succ[o]:
            v = inst.edst[k]
            head[v] = max(head[v], head[o] + p[o])
    tail = np.zeros(n, dtype=np.int64)
    for o in reversed(inst.topo):
        for k in inst.succ[o]:
            v = inst.edst[k]
            tail[o] = max(tail[o], p[v] + tail[v])

    def passes(L: int) -> bool:
        d = L - tail
        if np.any(head + p > d):
            return False
        pts = np.unique(np.concatenate([head, head + p, d - p, d]))
        pts = pts[(pts >= 0) & (pts <= L)]
        a, b = pts[:, None], pts[None, :]
        width = b - a
        energy = np.zeros(width.shape, dtype=np.int64)
        for o in range(n):
            c = np.minimum(np.minimum(p[o], width), np.minimum(head[o] + p[o] - a, b - (d[o] - p[o])))
            energy += np.maximum(c, 0)
        return not np.any((width > 0) & (energy > m * width))

    if passes(lo):
        return lo
    bad, good = lo, hi  # invariant: bad fails, good passes (hi is a feasible makespan, so it passes)
    while good - bad > 1:
        mid = (bad + good) // 2
        if passes(mid):
            good = mid
        else:
            bad = mid
    return good
