"""Celeritas' orders and Optimal Operation Fusion compiled or vectorised, the same results as
:mod:`dplace.heuristics.orders` and :mod:`dplace.heuristics.coarsen` (the reference,
``DPLACE_KERNEL=python``).

* :func:`queue_order` — :func:`dplace.instance.graph.queue_order` on a CSR whose successor lists are already in
  scan order: freed nodes pushed to the head (a stack on top of the sources) or joining the tail.
* :func:`scan_csr` — each node's successors in CPD-TOPO's scan order (increasing cpath, then later
  topological position first) or DFS-TOPO's (reversed edge order), by one global sort.
* :func:`fusion_breakpoints` — Kernighan's DP of ``coarsen.fusion_breakpoints`` with the same window
  updates in the same order (the reference's numpy slices are elementwise, so a loop gives the same
  floats; ``argmin`` keeps the first minimum, so does the loop).
* :func:`cluster_time` — summed per-device times of each cluster, members added in fusion order.
"""
from __future__ import annotations

import numpy as np

from . import njit

__all__ = ["queue_order", "scan_csr", "fusion_breakpoints", "cluster_time"]


@njit
def _queue_order(n, ptr, child, sources, to_head):
    indeg = np.zeros(n, dtype=np.int64)
    for k in range(len(child)):
        indeg[child[k]] += 1
    out = np.empty(n, dtype=np.int64)
    nout = 0
    buf = np.empty(2 * n + len(sources), dtype=np.int64)  # a deque: room for n pushes at either end
    head = tail = n
    for s in sources:
        buf[tail] = s
        tail += 1
    while head < tail:
        u = buf[head]
        head += 1
        out[nout] = u
        nout += 1
        for k in range(ptr[u], ptr[u + 1]):
            v = child[k]
            indeg[v] -= 1
            if indeg[v] == 0:
                if to_head:
                    head -= 1
                    buf[head] = v
                else:
                    buf[tail] = v
                    tail += 1
    return out[:nout]


def queue_order(n: int, ptr: np.ndarray, child: np.ndarray, sources: np.ndarray, to_head: bool) -> np.ndarray:
    """Nodes in ``graph.queue_order`` order (shorter than n when sources miss a node or on a cycle)."""
    return _queue_order(int(n), ptr, child, np.asarray(sources, dtype=np.int64), bool(to_head))


def scan_csr(a, cp: np.ndarray | None) -> np.ndarray:
    """Children of each op in scan order, CSR with ``a.succ_ptr``: by (cp, -topo_pos) when ``cp`` is given
    (CPD-TOPO), else in reversed edge order (DFS-TOPO)."""
    v = a.edst[a.succ_edge]
    if cp is None:
        return _reverse_runs(v, a.succ_ptr)
    return _sort_runs(v, a.succ_ptr, np.asarray(cp, dtype=np.float64), a.topo_pos)


@njit
def _reverse_runs(v, ptr):
    out = np.empty_like(v)
    for u in range(len(ptr) - 1):
        lo, hi = ptr[u], ptr[u + 1]
        for k in range(lo, hi):
            out[k] = v[lo + hi - 1 - k]
    return out


@njit
def _sort_runs(v, ptr, cp, tp):
    """Each run ``v[ptr[u]:ptr[u + 1]]`` sorted by (cp, -tp): insertion sort on short runs, two stable
    sorts on long ones (a node's keys differ unless it is the same node: any sort gives one result)."""
    out = v.copy()
    for u in range(len(ptr) - 1):
        lo, hi = ptr[u], ptr[u + 1]
        if hi - lo <= 32:
            for i in range(lo + 1, hi):
                x = out[i]
                j = i - 1
                while j >= lo and (cp[out[j]] > cp[x] or (cp[out[j]] == cp[x] and tp[out[j]] < tp[x])):
                    out[j + 1] = out[j]
                    j -= 1
                out[j + 1] = x
        else:
            run = out[lo:hi].copy()
            run = run[np.argsort(-tp[run], kind="mergesort")]
            run = run[np.argsort(cp[run], kind="mergesort")]
            out[lo:hi] = run
    return out


@njit
def _fusion_dp(order, pos, c, succ_ptr, succ_edge, pred_ptr, pred_edge, esrc, prefix, wprefix, key, R,
               mem_limit, work_limit, use_work, pins_alone):
    n = len(order)
    C = np.zeros(n + 1)
    S = np.full(n + 1, np.inf)
    S[0] = 0.0
    parent = np.zeros(n + 1, dtype=np.int64)
    i_mem = 0
    i_work = 0
    last_k, last_k_pos, bound_k = -1, -1, 0
    run_start = 0
    wl = work_limit * (1 + 1e-12)
    for j in range(1, n + 1):
        q = j - 1
        o = order[q]
        lo_r = j - R if j > R else 0
        out = 0.0
        for k in range(succ_ptr[o], succ_ptr[o + 1]):
            out += c[succ_edge[k]]
        C[q] = 0.0
        if out:
            for i in range(lo_r, j):
                C[i] += out
        for k in range(pred_ptr[o], pred_ptr[o + 1]):
            e = pred_edge[k]
            pp = pos[esrc[e]]
            if pp >= lo_r and c[e]:
                ce = c[e]
                for i in range(lo_r, pp + 1):
                    C[i] -= ce
        while prefix[j] - prefix[i_mem] > mem_limit:
            i_mem += 1
        if use_work:
            while wprefix[j] - wprefix[i_work] > wl:
                i_work += 1
        kk = key[o]
        if pins_alone:
            if q > 0 and kk != key[order[q - 1]]:
                run_start = q
            bound_k = run_start
        elif kk >= 0:
            if kk != last_k:
                if last_k_pos >= 0:
                    bound_k = last_k_pos + 1
                last_k = kk
            last_k_pos = q
        lo = max(lo_r, i_mem, i_work, bound_k)
        if lo > q:
            lo = q
        if lo == q:
            S[j] = S[q] + C[q]
            parent[j] = q
        else:
            best = S[lo] + C[lo]
            bi = lo
            for i in range(lo + 1, j):
                x = S[i] + C[i]
                if x < best:
                    best = x
                    bi = i
            S[j] = best
            parent[j] = bi
    # breakpoints, last to first
    bps = np.empty(n + 1, dtype=np.int64)
    nb = 0
    b = n
    bps[nb] = b
    nb += 1
    while b > 0:
        b = parent[b]
        bps[nb] = b
        nb += 1
    return bps[:nb][::-1].copy(), S[n]


def fusion_breakpoints(a, order: np.ndarray, c: np.ndarray, R: int, mem_limit: int, work_limit: float | None,
                       pins_alone: bool, w: np.ndarray) -> tuple[list[int], float]:
    """``coarsen.fusion_breakpoints`` (``w``: mean op times, ``c``: mean edge costs)."""
    order = np.asarray(order, dtype=np.int64)
    n = len(order)
    pos = np.zeros(a.n, dtype=np.int64)
    pos[order] = np.arange(n)
    prefix = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(a.mem[order], out=prefix[1:])
    wprefix = np.zeros(n + 1)
    if work_limit is not None:
        np.cumsum(w[order], out=wprefix[1:])  # running sums left to right, as the reference's loop
    bps, s = _fusion_dp(order, pos, c, a.succ_ptr, a.succ_edge, a.pred_ptr, a.pred_edge, a.esrc, prefix, wprefix,
                        a.pinned, int(R), int(mem_limit), 0.0 if work_limit is None else float(work_limit),
                        work_limit is not None, bool(pins_alone))
    return bps.tolist(), float(s)


@njit
def _cluster_time(dur, order, bps):
    nk = len(bps) - 1
    m = dur.shape[1]
    t = np.zeros((nk, m))
    for k in range(nk):
        for i in range(bps[k], bps[k + 1]):
            o = order[i]
            for d in range(m):
                t[k, d] += dur[o, d]
    return t


def cluster_time(a, order: np.ndarray, bps) -> np.ndarray:
    """(clusters, m): each cluster's summed time per device, members added in ``order``."""
    return _cluster_time(a.dur, np.asarray(order, dtype=np.int64), np.asarray(bps, dtype=np.int64))
