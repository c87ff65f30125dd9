"""Kahn's topological order on edge arrays, compiled: the order :func:`dplace.instance.graph.ready_order`
gives (the ready op of smallest index first), for graphs a method builds by editing another (OS-DPOS's split
graphs, :func:`dplace.heuristics.fastt_graphs.split_instance`), handed to ``Instance.from_columns(topo=...)``.
tests/heuristics/test_fastt_split.py compares it with ``ready_order``."""
from __future__ import annotations

import numpy as np

from . import njit
from .baechi import _bucket
from .heap import hpop, hpush


@njit
def _kahn(n, src, dst):
    ptr, succ = _bucket(src, dst, n)  # each op's successors (CSR)
    indeg = np.zeros(n, dtype=np.int64)
    for v in dst:
        indeg[v] += 1
    ht = np.empty(n)
    hx = np.empty(n, dtype=np.int64)
    size = 0
    for o in range(n):
        if indeg[o] == 0:
            size = hpush(ht, hx, size, float(o), o)
    out = np.empty(n, dtype=np.int64)
    k = 0
    while size > 0:
        u = hx[0]
        size = hpop(ht, hx, size)
        out[k] = u
        k += 1
        for i in range(ptr[u], ptr[u + 1]):
            v = succ[i]
            indeg[v] -= 1
            if indeg[v] == 0:
                size = hpush(ht, hx, size, float(v), v)
    return out[:k]


def ready_order_arrays(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Kahn's order of ops ``0..n-1`` under edges ``src[e] -> dst[e]`` (int64 arrays), the ready op of
    smallest index first; shorter than ``n`` when there is a cycle."""
    return _kahn(n, np.ascontiguousarray(src, dtype=np.int64), np.ascontiguousarray(dst, dtype=np.int64))
