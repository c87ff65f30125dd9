"""Representative costs and path levels on arrays, bit for bit those of :mod:`dplace.schedule.ranks` and
:mod:`dplace.instance.graph`'s list loops (the reference).

Same arithmetic in the same order: an op's mean time is ``sum(row) / m`` summed left to right (Python
3.11's ``sum``; numpy's pairwise sum would differ in the last bits), an edge's mean cost is
``lat + bytes * inv`` with the mean latency and mean inverse bandwidth over ordered pairs of distinct
devices, and the level recurrences visit edges in the instance's order.
"""
from __future__ import annotations

import numpy as np

from . import njit
from .lists import _longest_from

__all__ = ["op_cost_mean", "edge_cost_mean", "longest_from", "longest_to", "row_sums", "segment_sums", "upward_rank", "cpath"]


@njit
def _row_sums(dur: np.ndarray) -> np.ndarray:
    n, m = dur.shape
    out = np.empty(n)
    for o in range(n):
        s = 0.0
        for d in range(m):
            s += dur[o, d]
        out[o] = s
    return out


def row_sums(a) -> np.ndarray:
    """``sum(inst.dur[o])`` per op (left to right)."""
    return _row_sums(a.dur)


def op_cost_mean(a) -> np.ndarray:
    """``ranks.op_costs(inst, "mean")`` as an array."""
    return _row_sums(a.dur) / a.m


@njit
def segment_sums(x, order, ptr):
    """``sum(x[o] for o in order[ptr[k]:ptr[k + 1]])`` per k, left to right."""
    out = np.zeros(len(ptr) - 1)
    for k in range(len(ptr) - 1):
        s = 0.0
        for i in range(ptr[k], ptr[k + 1]):
            s += x[order[i]]
        out[k] = s
    return out


def edge_cost_mean(a) -> np.ndarray:
    """``ranks.edge_costs(inst, "mean")`` as an array (Python's loop for the two scalars: m x m values)."""
    m = a.m
    if m < 2:
        return np.zeros(len(a.esrc))
    pairs = [(x, y) for x in range(m) for y in range(m) if x != y]
    lat = sum(float(a.lat[x, y]) for x, y in pairs) / len(pairs)
    inv = sum(1.0 / float(a.bw[x, y]) for x, y in pairs) / len(pairs)
    return lat + a.ebytes * inv


@njit
def _longest_to(topo, succ_ptr, succ_edge, edst, w, c):
    n = len(topo)
    to = np.zeros(n)
    for i in range(n):
        u = topo[i]
        f = to[u] + w[u]
        for k in range(succ_ptr[u], succ_ptr[u + 1]):
            e = succ_edge[k]
            x = f + c[e]
            v = edst[e]
            if x > to[v]:
                to[v] = x
    return to


def longest_from(a, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``graph.longest_from(inst, inst.topo, w, c)`` (own weight included)."""
    return _longest_from(a.topo, np.asarray(w, dtype=np.float64), np.asarray(c, dtype=np.float64),
                         a.succ_ptr, a.succ_edge, a.edst)


def longest_to(a, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The ``to`` of ``graph.longest_to(inst, inst.topo, w, c)``."""
    return _longest_to(a.topo, a.succ_ptr, a.succ_edge, a.edst, np.asarray(w, dtype=np.float64),
                       np.asarray(c, dtype=np.float64))


def upward_rank(a) -> np.ndarray:
    """``ranks.upward_rank(inst, "mean", "mean")`` (= Celeritas' blevel)."""
    return longest_from(a, op_cost_mean(a), edge_cost_mean(a))


def cpath(a) -> np.ndarray:
    """``orders.cpath(inst)`` with mean costs: tlevel + blevel."""
    w, c = op_cost_mean(a), edge_cost_mean(a)
    return longest_to(a, w, c) + longest_from(a, w, c)
