"""The annealing's rank of a placement: each op's upward rank with its own device's duration and the
transfer time of every edge whose ends the placement puts on different devices (shared by the annealing's
judges, :mod:`dplace.kernels.anneal`, and the sequential judge with insertion, :mod:`dplace.kernels.seqjudge`)."""
from __future__ import annotations

import numpy as np

from . import njit

__all__ = ["placement_rank", "sorted_ops"]


@njit
def placement_rank(pl, dur, lat, bw, topo, esrc, edst, ebytes, succ_ptr, succ_edge, rank):
    for i in range(len(topo) - 1, -1, -1):
        u = topo[i]
        d = pl[u]
        best = 0.0
        for k in range(succ_ptr[u], succ_ptr[u + 1]):
            e = succ_edge[k]
            v = edst[e]
            x = rank[v]
            dv = pl[v]
            if dv != d:
                x += lat[d, dv] + ebytes[e] / bw[d, dv]
            if x > best:
                best = x
        rank[u] = dur[u, d] + best


@njit
def sorted_ops(topo, value, sign):
    """All ops by ``sign * value[op]`` ascending, ties by topological position (``topo``): the rank order
    (``value`` a placement's rank, ``sign`` -1.0: an order where each op comes after its predecessors) or
    a schedule's start order (``value`` its starts, ``sign`` 1.0). Multiplying by +-1.0 is exact."""
    n = len(topo)
    key = np.empty(n)
    for i in range(n):
        key[i] = sign * value[topo[i]]
    return topo[np.argsort(key, kind="mergesort")]
