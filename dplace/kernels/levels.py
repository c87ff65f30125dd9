"""The one compiled-graph module: representative op and edge costs, longest paths and levels on arrays,
bit for bit those of :mod:`dplace.schedule.ranks` and :mod:`dplace.instance.graph`'s list loops (the reference); every
kernel that needs them (list schedulers, Baechi, Celeritas, coarsening, bounds) takes them from here.

Same arithmetic in the same order: an op's mean time is ``sum(row) / m`` as Python's ``sum`` does it
(left to right before 3.12, compensated from 3.12; numpy's pairwise sum would differ in the last bits),
an edge's mean cost is ``lat + bytes * inv`` with the mean latency and mean inverse bandwidth over
ordered pairs of distinct devices, and the level recurrences visit edges in the instance's order. ``longest_to_via`` / ``tails``: :func:`dplace.instance.graph.longest_to`
(without edge costs, with the predecessor on the path) and :func:`dplace.instance.graph.longest_from`
(``own=False``) with the same visiting order.
"""
from __future__ import annotations

import sys

import numpy as np

from ..instance.graph import link_means
from . import njit

__all__ = ["op_costs", "op_cost_mean", "edge_costs", "longest_from", "longest_to", "longest_to_via", "tails", "row_sums",
           "segment_sums", "upward_rank", "cpath"]

# Python's sum() of floats is compensated (Neumaier) from 3.12 on, plain left to right before
_NEUMAIER = sys.version_info >= (3, 12)


@njit
def _row_sums(dur, neumaier):
    n, m = dur.shape
    out = np.empty(n)
    for o in range(n):
        if m == 0:
            out[o] = 0.0
            continue
        s = dur[o, 0]  # sum() starts from the int 0: 0 + x is x
        if neumaier:
            c = 0.0
            for j in range(1, m):
                x = dur[o, j]
                t = s + x
                if abs(s) >= abs(x):
                    c += (s - t) + x
                else:
                    c += (x - t) + s
                s = t
            if c != 0.0 and np.isfinite(c):
                s += c
        else:
            for j in range(1, m):
                s += dur[o, j]
        out[o] = s
    return out


def op_costs(dur: np.ndarray, how: str) -> np.ndarray:
    """:func:`dplace.schedule.ranks.op_costs` on the (n, m) time array."""
    n, m = dur.shape
    if how == "mean":
        return _row_sums(dur, _NEUMAIER) / m
    if how == "max":
        return dur.max(axis=1) if m else np.zeros(n)
    if how == "min":
        return dur.min(axis=1) if m else np.zeros(n)
    raise ValueError(f"how must be mean, max or min, got {how!r}")


@njit
def _longest_from(topo, w, c, succ_ptr, succ_edge, edst):
    n = len(w)
    frm = np.zeros(n)
    for i in range(len(topo) - 1, -1, -1):
        u = topo[i]
        best = 0.0
        for k in range(succ_ptr[u], succ_ptr[u + 1]):
            e = succ_edge[k]
            x = c[e] + frm[edst[e]]
            if x > best:
                best = x
        frm[u] = w[u] + best
    return frm


@njit
def longest_to_via(n, topo, succ_ptr, succ_edge, edst, w):
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


def row_sums(a) -> np.ndarray:
    """``sum(inst.dur[o])`` per op (as Python's ``sum``)."""
    return _row_sums(a.dur, _NEUMAIER)


def op_cost_mean(a) -> np.ndarray:
    """``ranks.op_costs(inst, "mean")`` as an array."""
    return op_costs(a.dur, "mean")


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


def edge_costs(a, how: str = "mean") -> np.ndarray:
    """:func:`dplace.schedule.ranks.edge_costs` on arrays (mean, max or zero), the same floats: the mean's
    two scalars from :func:`dplace.instance.graph.link_means` (the one definition), each edge's the same
    operations."""
    m = a.m
    if how == "zero" or m < 2:
        return np.zeros(len(a.esrc))
    if how == "mean":
        lat, inv = link_means(a.lat, a.bw, m)
        return lat + a.ebytes * inv
    if how == "max":
        out = np.full(len(a.esrc), -np.inf)
        for x in range(m):
            for y in range(m):
                if x != y:
                    np.maximum(out, float(a.lat[x, y]) + a.ebytes / float(a.bw[x, y]), out=out)
        return out
    raise ValueError(f"how must be mean, max or zero, got {how!r}")


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


def upward_rank(a, op_cost: str = "mean", comm_cost: str = "mean") -> np.ndarray:
    """``ranks.upward_rank(inst, op_cost, comm_cost)`` (with means: Celeritas' blevel)."""
    return longest_from(a, op_costs(a.dur, op_cost), edge_costs(a, comm_cost))


def cpath(a) -> np.ndarray:
    """``orders.cpath(inst)`` with mean costs: tlevel + blevel."""
    w, c = op_cost_mean(a), edge_costs(a, "mean")
    return longest_to(a, w, c) + longest_from(a, w, c)
