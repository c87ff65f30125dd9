"""The annealing's rank of a placement: each op's upward rank with its own device's duration and the
transfer time of every edge whose ends the placement puts on different devices (shared by the annealing's
judges, :mod:`dplace.kernels.anneal`, and the sequential judge with insertion, :mod:`dplace.kernels.seqjudge`)."""
from __future__ import annotations

import numpy as np

from . import njit

__all__ = ["op_rank", "placement_rank", "radix_sorted_ops", "sorted_ops"]


@njit(inline="always")
def op_rank(u, pl, dur, lat, bw, edst, ebytes, succ_ptr, succ_edge, rank):
    """Op ``u``'s rank under ``pl`` from its consumers' ranks: its time on its device plus the longest of its
    consumers' ranks, each plus the transfer time where the consumer is on another device."""
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
    return dur[u, d] + best


@njit
def placement_rank(pl, dur, lat, bw, topo, esrc, edst, ebytes, succ_ptr, succ_edge, rank):
    for i in range(len(topo) - 1, -1, -1):
        u = topo[i]
        rank[u] = op_rank(u, pl, dur, lat, bw, edst, ebytes, succ_ptr, succ_edge, rank)


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


@njit
def radix_sorted_ops(topo, value, sign):
    """:func:`sorted_ops`' order (the same permutation: all ops by ``sign * value[op]`` ascending, ties by
    topological position), by a stable LSD radix sort on the keys' bits (8 passes of 8 bits; a pass whose
    digit is the same for every key is skipped) instead of numba's merge sort, for the sequential judges,
    which sort two or three times per placement. Measured on NASNet-Mobile's 1,842 ops
    (``benchmarks/bench_opsort.py``): alone, one sort takes longer than the merge sort (~36 against ~24 µs
    in a compiled loop), but judge ``mixed`` costs ~205 µs a placement with it against ~236 µs with the
    merge sort in its place (``links`` ~425 against ~475), so the judges keep it. A key is made ordered as an
    unsigned integer by the usual map (negative: all bits flipped; else the sign bit set), after adding 0.0
    (so -0.0, which compares equal to 0.0, maps as 0.0); the values must not be NaN."""
    n = len(topo)
    kf = np.empty(n)
    for i in range(n):
        kf[i] = sign * value[topo[i]] + 0.0
    ku = kf.view(np.uint64)
    top = np.uint64(1) << np.uint64(63)
    key = np.empty(n, dtype=np.uint64)
    for i in range(n):
        u = ku[i]
        key[i] = ~u if u & top else u | top
    idx = topo.copy()
    key2 = np.empty(n, dtype=np.uint64)
    idx2 = np.empty_like(idx)
    cnt = np.empty(257, dtype=np.int64)
    mask = np.uint64(255)
    for p in range(8):
        sh = np.uint64(8 * p)
        for b in range(257):
            cnt[b] = 0
        for i in range(n):
            cnt[((key[i] >> sh) & mask) + 1] += 1
        if n == 0 or cnt[((key[0] >> sh) & mask) + 1] == n:
            continue  # one digit for all: the order stays
        for b in range(256):
            cnt[b + 1] += cnt[b]
        for i in range(n):
            d = (key[i] >> sh) & mask
            j = cnt[d]
            cnt[d] = j + 1
            key2[j] = key[i]
            idx2[j] = idx[i]
        key, key2 = key2, key
        idx, idx2 = idx2, idx
    return idx
