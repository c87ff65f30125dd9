"""Baechi's units and safe fusion compiled, the same decisions as :mod:`dplace.heuristics.baechi` (the
reference, ``DPLACE_KERNEL=python``).

* :func:`units` — ``build_units``' merges in the same order (union by size, path halving, the same caps
  compared with the same sums), so the same partition.
* :func:`fuse` — the same safe-fusion decisions; the fused graph's distinct edges are kept in a hash
  set (open addressing) keyed ``a * n + b`` (membership, exact in/out degrees) with per-node lists of neighbours checked
  against it, where the reference keeps Python sets.
* :func:`cluster_arrays` — ``_clusters_from_labels`` with numpy: clusters numbered by their first op in
  topological order, members in topological order, distinct neighbours sorted.

The list scheduler that runs on these clusters (m-ETF / m-SCT) is :mod:`dplace.kernels.etf`.
"""
from __future__ import annotations

import numpy as np

from . import njit

__all__ = ["units", "fuse", "cluster_arrays"]


# ------------------------------------------------------------------------------------- union-find
@njit(inline="always")
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(inline="always")
def _union(parent, size, a, b):
    a = _find(parent, a)
    b = _find(parent, b)
    if a == b:
        return a
    if size[a] < size[b]:
        a, b = b, a
    parent[b] = a
    size[a] += size[b]
    return a


@njit
def _units(n, mem, work, pin0, groups_ptr, groups, fwd, fwd_capped, topo, succ_ptr, succ_edge, edst,
           coplacement, mem_cap, work_cap):
    parent = np.arange(n)
    size = np.ones(n, dtype=np.int64)
    umem = mem.copy()
    uwork = work.copy()
    pin = pin0.copy()
    # the reference's order: colocation groups (hard), forward/backward pairs, co-placement in topo order
    for g in range(len(groups_ptr) - 1):
        lo, hi = groups_ptr[g], groups_ptr[g + 1]
        for k in range(lo + 1, hi):
            _merge(parent, size, umem, uwork, pin, groups[lo], groups[k], False, mem_cap, work_cap)
    for i in range(len(fwd)):
        _merge(parent, size, umem, uwork, pin, fwd[i, 0], fwd[i, 1], fwd_capped, mem_cap, work_cap)
    if coplacement:
        for o in topo:
            lo, hi = succ_ptr[o], succ_ptr[o + 1]
            if hi == lo:
                continue
            v = edst[succ_edge[lo]]
            one = True
            for k in range(lo + 1, hi):
                if edst[succ_edge[k]] != v:
                    one = False
                    break
            if one:
                _merge(parent, size, umem, uwork, pin, o, v, True, mem_cap, work_cap)
    out = np.empty(n, dtype=np.int64)
    for o in range(n):
        out[o] = _find(parent, o)
    return out


@njit
def _merge(parent, size, umem, uwork, pin, a, b, capped, mem_cap, work_cap):
    ra = _find(parent, a)
    rb = _find(parent, b)
    if ra == rb:
        return
    if pin[ra] >= 0 and pin[rb] >= 0 and pin[ra] != pin[rb]:
        return
    if capped and (umem[ra] + umem[rb] > mem_cap or uwork[ra] + uwork[rb] > work_cap):
        return
    r = _union(parent, size, ra, rb)
    m_ = umem[ra] + umem[rb]
    w_ = uwork[ra] + uwork[rb]
    p_ = pin[ra] if pin[ra] >= 0 else pin[rb]
    umem[r] = m_
    uwork[r] = w_
    pin[r] = p_


def units(a, work: np.ndarray, fwd: np.ndarray, fwd_capped: bool, coplacement: bool,
          mem_cap: float, work_cap: float) -> np.ndarray:
    """``build_units``' representative op per op (the same roots). ``fwd``: (k, 2) forward/backward pairs
    in the reference's order (empty when forward placement is off)."""
    return _units(a.n, a.mem, np.asarray(work, dtype=np.float64), a.pinned, a.group_ptr, a.group_members,
                  np.asarray(fwd, dtype=np.int64).reshape(-1, 2), bool(fwd_capped), a.topo, a.succ_ptr,
                  a.succ_edge, a.edst, bool(coplacement), float(mem_cap), float(work_cap))


# ------------------------------------------------------------------------------------------ fusion
@njit
def _push(head, nxt, val, cnt, owner, value):
    """Prepend ``value`` to ``owner``'s list in a pool of linked lists; grows the pool when full."""
    if cnt == len(nxt):
        nxt2 = np.empty(2 * len(nxt), dtype=np.int64)
        val2 = np.empty(2 * len(nxt), dtype=np.int64)
        for k in range(cnt):  # (a loop: slice assignment costs seconds of compile time)
            nxt2[k] = nxt[k]
            val2[k] = val[k]
        nxt, val = nxt2, val2
    nxt[cnt] = head[owner]
    val[cnt] = value
    head[owner] = cnt
    return nxt, val, cnt + 1


# A set of int64 keys >= 0 (open addressing, linear probing, -1 empty, -2 deleted) in ``keys``;
# ``cnt`` = [live keys, used slots, log2 of the capacity]. (numba's typed Dict does the same job but
# takes ~15 s to compile.)
@njit
def _slot(key, bits):
    return np.int64((np.uint64(key) * np.uint64(11400714819323198485)) >> np.uint64(64 - bits))


@njit
def _hs_new(n):
    bits = 4
    while (1 << bits) < 2 * n + 2:
        bits += 1
    return np.full(1 << bits, -1, dtype=np.int64), np.array([0, 0, bits], dtype=np.int64)


@njit
def _hs_has(keys, cnt, key):
    mask = len(keys) - 1
    i = _slot(key, cnt[2])
    while True:
        k = keys[i]
        if k == key:
            return True
        if k == -1:
            return False
        i = (i + 1) & mask


@njit
def _hs_del(keys, cnt, key):
    mask = len(keys) - 1
    i = _slot(key, cnt[2])
    while keys[i] != key:
        i = (i + 1) & mask
    keys[i] = -2
    cnt[0] -= 1


@njit
def _hs_add(keys, cnt, key):
    """Add ``key`` (not in the set); returns the (maybe rebuilt) key array."""
    mask = len(keys) - 1
    i = _slot(key, cnt[2])
    while keys[i] >= 0:
        i = (i + 1) & mask
    if keys[i] == -1:
        cnt[1] += 1
    keys[i] = key
    cnt[0] += 1
    if 4 * cnt[1] > 3 * len(keys):  # too few empty slots: rebuild without the deleted ones
        old = keys
        keys, c2 = _hs_new(cnt[0])
        cnt[1] = cnt[0]
        cnt[2] = c2[2]
        mask = len(keys) - 1
        for k in old:
            if k >= 0:
                i = _slot(k, cnt[2])
                while keys[i] != -1:
                    i = (i + 1) & mask
                keys[i] = k
    return keys


@njit
def _add_edge(a, b, n, edges, ecnt, outdeg, indeg, shead, snxt, sval, sc, phead, pnxt, pval, pc):
    """a -> b into the fused graph unless there already."""
    if not _hs_has(edges, ecnt, a * n + b):
        edges = _hs_add(edges, ecnt, a * n + b)
        outdeg[a] += 1
        indeg[b] += 1
        snxt, sval, sc = _push(shead, snxt, sval, sc, a, b)
        pnxt, pval, pc = _push(phead, pnxt, pval, pc, b, a)
    return edges, snxt, sval, sc, pnxt, pval, pc


@njit
def _move_edges(x, r, n, out, edges, ecnt, outdeg, indeg, shead, snxt, sval, sc, phead, pnxt, pval, pc):
    """x's out-edges (``out``) or in-edges leave x and join r (self-loops dropped)."""
    head, nxt, val = (shead, snxt, sval) if out else (phead, pnxt, pval)
    j = head[x]
    while j >= 0:
        y = val[j]
        j = nxt[j]
        a, b = (x, y) if out else (y, x)
        if _hs_has(edges, ecnt, a * n + b):
            _hs_del(edges, ecnt, a * n + b)
            outdeg[a] -= 1
            indeg[b] -= 1
            if y != r:
                a, b = (r, y) if out else (y, r)
                edges, snxt, sval, sc, pnxt, pval, pc = _add_edge(a, b, n, edges, ecnt, outdeg, indeg, shead, snxt,
                                                                  sval, sc, phead, pnxt, pval, pc)
    return edges, snxt, sval, sc, pnxt, pval, pc


@njit
def _fuse(n, topo, succ_ptr, succ_edge, esrc, edst, unit, use_units):
    parent = np.arange(n)
    size = np.ones(n, dtype=np.int64)
    edges, ecnt = _hs_new(len(esrc))  # a * n + b: a -> b in the fused graph
    outdeg = np.zeros(n, dtype=np.int64)
    indeg = np.zeros(n, dtype=np.int64)
    cap = 2 * len(esrc) + 16
    shead = np.full(n, -1, dtype=np.int64)  # per node: its successors / predecessors as linked lists,
    phead = np.full(n, -1, dtype=np.int64)  # entries checked against ``edges`` when read
    snxt, sval = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    pnxt, pval = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    sc = pc = 0
    for e in range(len(esrc)):
        edges, snxt, sval, sc, pnxt, pval, pc = _add_edge(esrc[e], edst[e], n, edges, ecnt, outdeg, indeg, shead,
                                                          snxt, sval, sc, phead, pnxt, pval, pc)
    for o in topo:
        for k in range(succ_ptr[o], succ_ptr[o + 1]):
            v = edst[succ_edge[k]]
            if use_units and unit[o] != unit[v]:
                continue
            a = _find(parent, o)
            b = _find(parent, v)
            if a == b or not _hs_has(edges, ecnt, a * n + b):
                continue
            if outdeg[a] > 1 and indeg[b] > 1:
                continue  # unsafe: a second path a ~> b may exist
            r = _union(parent, size, a, b)
            x = b if r == a else a
            _hs_del(edges, ecnt, a * n + b)
            outdeg[a] -= 1
            indeg[b] -= 1
            for out in (True, False):
                edges, snxt, sval, sc, pnxt, pval, pc = _move_edges(x, r, n, out, edges, ecnt, outdeg, indeg, shead,
                                                                    snxt, sval, sc, phead, pnxt, pval, pc)
            shead[x] = -1
            phead[x] = -1
    out = np.empty(n, dtype=np.int64)
    for o in range(n):
        out[o] = _find(parent, o)
    return out


def fuse(a, unit: np.ndarray | None) -> np.ndarray:
    """``fuse``'s label (a representative op) per op; ``unit=None``: no unit restriction."""
    use = unit is not None
    u = np.asarray(unit, dtype=np.int64) if use else np.zeros(1, dtype=np.int64)
    return _fuse(a.n, a.topo, a.succ_ptr, a.succ_edge, a.esrc, a.edst, u, use)


class ClusterArrays:
    """``Clusters`` as arrays: ``of`` (n,), members ``ops[ops_ptr[c]:ops_ptr[c + 1]]`` in topological
    order, distinct sorted neighbours ``succ``/``pred`` in CSR."""

    def __init__(self, of, ops_ptr, ops, succ_ptr, succ, pred_ptr, pred) -> None:
        self.of, self.ops_ptr, self.ops = of, ops_ptr, ops
        self.succ_ptr, self.succ, self.pred_ptr, self.pred = succ_ptr, succ, pred_ptr, pred

    @property
    def n(self) -> int:
        return len(self.ops_ptr) - 1

    def lists(self):
        """(of, ops, succ, pred) as the reference's lists."""
        def split(ptr, flat):
            flat = flat.tolist()
            return [flat[ptr[i]:ptr[i + 1]] for i in range(len(ptr) - 1)]

        ptr = self.ops_ptr.tolist()
        return (self.of.tolist(), split(ptr, self.ops), split(self.succ_ptr.tolist(), self.succ),
                split(self.pred_ptr.tolist(), self.pred))


@njit
def _bucket(keys, values, k):
    """Counting sort: ``values`` grouped by ``keys`` (0 <= key < k), in their order within a group; CSR."""
    ptr = np.zeros(k + 1, dtype=np.int64)
    for x in keys:
        ptr[x + 1] += 1
    for c in range(k):
        ptr[c + 1] += ptr[c]
    fill = ptr[:-1].copy()
    out = np.empty(len(values), dtype=np.int64)
    for j in range(len(keys)):
        out[fill[keys[j]]] = values[j]
        fill[keys[j]] += 1
    return ptr, out


@njit
def _cluster_arrays(n, topo, label, succ_ptr, succ_edge, edst):
    cid = np.full(n, -1, dtype=np.int64)
    of = np.empty(n, dtype=np.int64)
    nc = 0
    for o in topo:  # clusters numbered by their first op in topological order
        r = label[o]
        if cid[r] < 0:
            cid[r] = nc
            nc += 1
        of[o] = cid[r]
    ops_ptr, ops = _bucket(of[topo], topo, nc)
    stamp = np.full(nc, -1, dtype=np.int64)
    succ_ptr_c = np.zeros(nc + 1, dtype=np.int64)
    succ = np.empty(len(edst), dtype=np.int64)
    ns = 0
    for c in range(nc):  # distinct successor clusters, sorted
        first = ns
        for j in range(ops_ptr[c], ops_ptr[c + 1]):
            o = ops[j]
            for k in range(succ_ptr[o], succ_ptr[o + 1]):
                t = of[edst[succ_edge[k]]]
                if t != c and stamp[t] != c:
                    stamp[t] = c
                    succ[ns] = t
                    ns += 1
        succ[first:ns].sort()
        succ_ptr_c[c + 1] = ns
    succ = succ[:ns].copy()
    src = np.empty(ns, dtype=np.int64)  # sources in increasing order
    for c in range(nc):
        for j in range(succ_ptr_c[c], succ_ptr_c[c + 1]):
            src[j] = c
    pred_ptr_c, pred = _bucket(succ, src, nc)
    return of, ops_ptr, ops, succ_ptr_c, succ, pred_ptr_c, pred


def cluster_arrays(a, label: np.ndarray) -> ClusterArrays:
    """``_clusters_from_labels(inst, label)``."""
    return ClusterArrays(*_cluster_arrays(a.n, a.topo, np.asarray(label, dtype=np.int64), a.succ_ptr, a.succ_edge,
                                          a.edst))
