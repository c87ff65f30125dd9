"""Longest paths in a DAG on CSR arrays, compiled: :func:`dplace.instance.graph.longest_to` (``c`` None) and
:func:`dplace.instance.graph.longest_from` (``own=False``) with the same visiting order and float operations, so
the same values to the last bit. ``w``: op weights; ops in ``topo`` order."""
from __future__ import annotations

import numpy as np

from . import njit


@njit
def longest_to(n, topo, succ_ptr, succ_edge, edst, w):
    to = np.zeros(n)
    via = np.full(n, -1, np.int64)
    for u in topo:
        f = to[u] + w[u]
        for i in range(succ_ptr[u], succ_ptr[u + 1]):
            v = edst[succ_edge[i]]
            if f > to[v]:
                to[v] = f
                via[v] = u
    return to, via


@njit
def tails(n, topo, succ_ptr, succ_edge, edst, w):
    frm = np.zeros(n)
    after = np.zeros(n)
    for j in range(n - 1, -1, -1):
        u = topo[j]
        best = 0.0
        for i in range(succ_ptr[u], succ_ptr[u + 1]):
            x = frm[edst[succ_edge[i]]]
            if x > best:
                best = x
        frm[u] = w[u] + best
        after[u] = best
    return after
