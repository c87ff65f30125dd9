"""Baechi's m-ETF / m-SCT list scheduling (parallel comm) compiled, the same decisions as
``_list_schedule`` of :mod:`dplace.heuristics.baechi` (the reference, ``DPLACE_KERNEL=python``), on the
clusters of :mod:`dplace.kernels.baechi`.

* :func:`etf` — ``_list_schedule`` for ``comm="parallel"``: per device a heap of clusters waiting for
  data, of available ones and (SCT) of ones becoming urgent, the same keys and the same lazy
  deletions, so the same pops; times are the simulator's parallel-comm rules (an op starts when its
  device is free and its last input is there; an input from another device arrives at
  end + latency + bytes / bandwidth). Every key in a heap is distinct (the cluster index is in it),
  so the pops do not depend on how the heap breaks ties.
* A stop count (lowered from another thread at the caller's deadline: the kernel runs without the GIL)
  ends the method's rule; :func:`_complete` then places the rest as ``_complete_by_deadline`` does.
* One loop for both comm modes, :func:`list_loop`: parallel comm on its own arrays (``L`` None: numba
  compiles the sequential branches out), sequential comm on the compiled sequential state
  (:mod:`dplace.kernels.etfseq` wraps it); a step's choice (:func:`pick`), a ready cluster's pushes
  (:func:`push_ready`) and the bookkeeping (:func:`new_lists`, :func:`book`, :func:`fallback_next`) in it.

tests/kernels/test_etf_kernels.py compares it with the reference (m_etf, m_sct and their options).
"""
from __future__ import annotations

import numpy as np

from . import njit
from .heap import enqueue, release
from .ready import ready_at
from .seqstate import commit, data_ready, est
from .state import device_free

__all__ = ["etf"]


# --------------------------------------------------------------------------------------- heaps
# Heaps of keys (k1, k2, id) compared as Python compares tuples; heap h is row h of ``H`` (rows x cap x 3,
# one key's three numbers side by side: one cache line per comparison), ``size[h]`` its length. Ids are
# stored as floats (exact below 2**53).
@njit(inline="always")
def _less(H, h, j, k1, k2, i):
    """Key j of heap h < (k1, k2, i)."""
    a1 = H[h, j, 0]
    if a1 != k1:
        return a1 < k1
    a2 = H[h, j, 1]
    if a2 != k2:
        return a2 < k2
    return H[h, j, 2] < i


@njit(inline="always")
def _hset(H, h, j, k1, k2, i):
    H[h, j, 0] = k1
    H[h, j, 1] = k2
    H[h, j, 2] = i


@njit
def _hpush(H, size, h, k1, k2, i):
    n = size[h]
    if n == H.shape[1]:
        G = np.empty((H.shape[0], 2 * n, 3))
        for r in range(H.shape[0]):
            for k in range(size[r]):
                _hset(G, r, k, H[r, k, 0], H[r, k, 1], H[r, k, 2])
        H = G
    fi = float(i)
    j = n
    while j > 0:
        p = (j - 1) >> 1
        if _less(H, h, p, k1, k2, fi):
            break
        _hset(H, h, j, H[h, p, 0], H[h, p, 1], H[h, p, 2])
        j = p
    _hset(H, h, j, k1, k2, fi)
    size[h] = n + 1
    return H


@njit
def _hpop(H, size, h):
    n = size[h] - 1
    size[h] = n
    if n == 0:
        return
    k1, k2, i = H[h, n, 0], H[h, n, 1], H[h, n, 2]
    j = 0
    while True:
        c = 2 * j + 1
        if c >= n:
            break
        if c + 1 < n and _less(H, h, c + 1, H[h, c, 0], H[h, c, 1], H[h, c, 2]):
            c += 1
        if not _less(H, h, c, k1, k2, i):
            break
        _hset(H, h, j, H[h, c, 0], H[h, c, 1], H[h, c, 2])
        j = c
    _hset(H, h, j, k1, k2, i)


# ----------------------------------------------------------------------------------- m-ETF / m-SCT
@njit(inline="always")
def _need(c, cunit, unit_dev, unit_mem, cmem, reserve_whole):
    if reserve_whole:
        u = cunit[c]
        return 0 if unit_dev[u] >= 0 else unit_mem[u]
    return cmem[c]


@njit(inline="always")
def _forced(c, cunit, unit_pin, unit_dev):
    u = cunit[c]
    if unit_pin[u] >= 0:
        return unit_pin[u]
    return unit_dev[u]


@njit
def push_ready(c, m, H, size, dr, drmax, prio, ready_seq, cnt, cunit, unit_pin, unit_dev, unit_mem, cmem,
               reserve_whole, used, capacity):
    """Cluster c is ready, its first op's inputs on device d at dr[d]: it waits on every device it may use
    (both comm modes' ``make_ready``); returns the heaps."""
    mx = 0.0
    for d in range(m):
        if d == 0 or dr[d] > mx:
            mx = dr[d]
    drmax[c] = mx
    f = _forced(c, cunit, unit_pin, unit_dev)
    nd = _need(c, cunit, unit_dev, unit_mem, cmem, reserve_whole)
    for d in range(m):
        if (f < 0 or f == d) and used[d] + nd <= capacity[d]:
            H = _hpush(H, size, d, dr[d], prio[c], c)
    ready_seq[cnt[0]] = c
    cnt[0] += 1
    return H


@njit(inline="always")
def _allowed(c, d, done, cunit, unit_pin, unit_dev, unit_mem, cmem, reserve_whole, used, capacity):
    if done[c]:
        return False
    f = _forced(c, cunit, unit_pin, unit_dev)
    return (f < 0 or f == d) and used[d] + _need(c, cunit, unit_dev, unit_mem, cmem, reserve_whole) <= capacity[d]


@njit(inline="always")
def _fallback(c, m, cunit, unit_pin, unit_dev, capacity, used):
    """Best effort where no device has room: the forced device, else the one with the most room."""
    d = _forced(c, cunit, unit_pin, unit_dev)
    if d < 0:
        d = 0
        for x in range(1, m):
            if capacity[x] - used[x] > capacity[d] - used[d]:
                d = x
    return d


@njit
def _complete(m, nc, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, cunit, unit_mem, unit_pin, cmem, capacity,
              reserve_whole, used, unit_dev, done, need, pl, seq, nseq):
    """``_complete_by_deadline`` of :mod:`dplace.heuristics.baechi`: the clusters not done, in the order they
    become ready (those ready now by index first), each on its forced device if it fits; else on the device
    of its first predecessor (by index) where it fits, else where most memory is free; none: best effort,
    counted. Returns (fallbacks, nseq)."""
    fallbacks = 0
    queue = np.empty(nc, dtype=np.int64)
    qn = 0
    for c in range(nc):
        if not done[c] and need[c] == 0:
            qn = enqueue(queue, qn, c)
    qi = 0
    while qi < qn:
        c = queue[qi]
        qi += 1
        f = _forced(c, cunit, unit_pin, unit_dev)
        nd = _need(c, cunit, unit_dev, unit_mem, cmem, reserve_whole)
        d = -1
        if f >= 0:
            if used[f] + nd <= capacity[f]:
                d = f
        else:
            for j in range(cpred_ptr[c], cpred_ptr[c + 1]):
                x = pl[ops[ops_ptr[cpred[j]]]]
                if used[x] + nd <= capacity[x]:
                    d = x
                    break
            if d < 0:
                for x in range(m):
                    if used[x] + nd <= capacity[x] and (d < 0 or capacity[x] - used[x] > capacity[d] - used[d]):
                        d = x
        if d < 0:
            d = _fallback(c, m, cunit, unit_pin, unit_dev, capacity, used)
            fallbacks += 1
        used[d] += nd
        u = cunit[c]
        if unit_dev[u] < 0:
            unit_dev[u] = d
        done[c] = True
        for j in range(ops_ptr[c], ops_ptr[c + 1]):
            o = ops[j]
            pl[o] = d
            seq[nseq] = o
            nseq += 1
        for j in range(csucc_ptr[c], csucc_ptr[c + 1]):
            qn = release(need, csucc[j], queue, qn)
    return fallbacks, nseq


@njit
def pick(m, H, size, free, sct, fav_dev, drmax, done, cunit, unit_pin, unit_dev, unit_mem, cmem, reserve_whole,
         used, capacity):
    """One step's choice (both comm modes), device d free at free[d]: each device's heaps refreshed (waiting
    clusters whose data is there by then become available, SCT's promotions), then the smallest key
    (t, class, prio, d) over the devices. Returns (found, t, cluster, device, 0 if it is at the top of the
    device's available heap else 1 (waiting), the heaps)."""
    found = False
    bt, bk, bp, bd, bc, bsrc = 0.0, 0, 0.0, 0, 0, 0
    for d in range(m):
        fr = free[d]
        w, av, pq = d, m + d, 2 * m + d
        while size[w] > 0 and H[w, 0, 0] <= fr:
            pr, c = H[w, 0, 1], int(H[w, 0, 2])
            _hpop(H, size, w)
            if _allowed(c, d, done, cunit, unit_pin, unit_dev, unit_mem, cmem, reserve_whole, used, capacity):
                k = 0
                if sct and fav_dev[c] != d:
                    k = 1 if drmax[c] <= fr else 2
                H = _hpush(H, size, av, float(k), pr, c)
                if k == 2:
                    H = _hpush(H, size, pq, drmax[c], pr, c)
        if sct:
            while size[pq] > 0 and H[pq, 0, 0] <= fr:
                pr, c = H[pq, 0, 1], int(H[pq, 0, 2])
                _hpop(H, size, pq)
                if _allowed(c, d, done, cunit, unit_pin, unit_dev, unit_mem, cmem, reserve_whole, used, capacity):
                    H = _hpush(H, size, av, 1.0, pr, c)
        while size[av] > 0 and not _allowed(int(H[av, 0, 2]), d, done, cunit, unit_pin, unit_dev, unit_mem, cmem,
                                            reserve_whole, used, capacity):
            _hpop(H, size, av)
        if size[av] > 0:
            t, k, pr, c, src = fr, int(H[av, 0, 0]), H[av, 0, 1], int(H[av, 0, 2]), 0
        else:
            while size[w] > 0 and not _allowed(int(H[w, 0, 2]), d, done, cunit, unit_pin, unit_dev, unit_mem, cmem,
                                               reserve_whole, used, capacity):
                _hpop(H, size, w)
            if size[w] == 0:
                continue
            t, pr, c, src = H[w, 0, 0], H[w, 0, 1], int(H[w, 0, 2]), 1
            k = 0
            if sct and fav_dev[c] != d:
                k = 1 if drmax[c] <= t else 2
        # the reference's key (t, class, prio, d)
        if not found or t < bt or (t == bt and (k < bk or (k == bk and (pr < bp or (pr == bp and d < bd))))):
            found = True
            bt, bk, bp, bd, bc, bsrc = t, k, pr, d, c, src
    return found, bt, bc, bd, bsrc, H


@njit
def new_lists(nc, m, nu, cpred_ptr):
    """A list schedule's bookkeeping (both comm modes): memory used per device, each unit's device, each
    cluster's inputs left, done, largest data-ready time, favourite device; the ready clusters in order
    (and their count); the heaps (wait[d] row d, avail[d] row m + d, promote[d] row 2m + d) and their
    sizes; a per-device scratch row."""
    return (np.zeros(m, dtype=np.int64), np.full(nu, -1, dtype=np.int64), np.diff(cpred_ptr),
            np.zeros(nc, dtype=np.bool_), np.zeros(nc), np.full(nc, -1, dtype=np.int64), np.empty(nc, dtype=np.int64),
            np.zeros(1, dtype=np.int64), np.zeros(3 * m, dtype=np.int64), np.empty((3 * m, 64, 3)), np.zeros(m))


@njit(inline="always")
def fallback_next(m, ready_seq, ready_ptr, done, cunit, unit_pin, unit_dev, capacity, used):
    """No ready cluster fits anywhere: the first ready one not done, on the device :func:`_fallback` gives.
    Returns (cluster, device, the new read position in ready_seq)."""
    while done[ready_seq[ready_ptr]]:
        ready_ptr += 1
    c = ready_seq[ready_ptr]
    return c, _fallback(c, m, cunit, unit_pin, unit_dev, capacity, used), ready_ptr


@njit(inline="always")
def book(c, d, used, unit_dev, done, fav_dev, fav_child, sct, cunit, unit_mem, cmem, reserve_whole):
    """Cluster c is placed on d (``_UnitRules.assign``, done, SCT's favourite child follows it)."""
    used[d] += _need(c, cunit, unit_dev, unit_mem, cmem, reserve_whole)
    u = cunit[c]
    if unit_dev[u] < 0:
        unit_dev[u] = d
    done[c] = True
    if sct and fav_child[c] >= 0:
        fav_dev[fav_child[c]] = d


@njit
def _arrivals(I, S, L, P, o, m, dr):
    """dr[d] = when o's inputs would all be on device d: parallel comm on ``P``'s arrays (``L`` None), sequential
    comm on the compiled sequential state (``I``, ``S``, ``L``; ``P`` None), as :func:`list_loop`."""
    if P is not None:
        pl, end, pred_ptr, pred_edge, esrc, ebytes, lat, bw = P[0], P[2], P[4], P[5], P[6], P[7], P[8], P[9]
        for d in range(m):
            dr[d] = ready_at(o, d, pl, end, pred_ptr, pred_edge, esrc, ebytes, lat, bw)
    if L is not None:
        for d in range(m):
            dr[d] = data_ready(I, S, L, o, d)


@njit
def list_loop(I, S, L, P, m, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, prio, cunit, unit_mem, unit_pin, cmem,
              capacity, reserve_whole, fav_child, sct, stop):
    """``_list_schedule``'s loop in both comm modes, one given None: numba compiles the branches of the
    argument that is None out (``if X is not None``; it prunes no branch on an argument that is not None,
    hence no ``else``). Parallel comm: ``I``, ``S``, ``L`` None, ``P`` = (pl, start, end, seq, pred_ptr,
    pred_edge, esrc, ebytes, lat, bw, dur),
    each op appended to its device at max(device free, inputs there), ``seq`` the ops in commit order.
    Sequential comm: ``P`` None and the compiled sequential state ``I``, ``S``, ``L`` (:mod:`dplace.kernels.seqstate`):
    a device is free when its last op ends in the state (commits re-time committed work when a send
    delays it), and the reference's second look: the chosen cluster's start is asked again, and when link
    contention has delayed it since it was keyed (beyond 1e-9 relative) it waits again on that device,
    keyed by its new data-ready time, and the step is chosen anew; ``seq`` then holds only the ops the
    deadline rule placed. Returns (placement, seq, its length, fallbacks, clusters placed by the rule)."""
    nc = len(ops_ptr) - 1
    if P is not None:
        pl, start, end, seq, pred_ptr, pred_edge, esrc, ebytes, lat, bw, dur = P
    if L is not None:
        seq = np.empty(len(S.placement), dtype=np.int64)  # the ops placed by the deadline rule, in its order
    nseq = 0
    free = np.zeros(m)  # end of the device's last op
    used, unit_dev, need, done, drmax, fav_dev, ready_seq, cnt, size, H, dr = new_lists(nc, m, len(unit_mem),
                                                                                         cpred_ptr)
    ready_ptr = 0
    for c in range(nc):
        if need[c] == 0:
            _arrivals(I, S, L, P, ops[ops_ptr[c]], m, dr)
            H = push_ready(c, m, H, size, dr, drmax, prio, ready_seq, cnt, cunit, unit_pin, unit_dev, unit_mem, cmem,
                           reserve_whole, used, capacity)
    placed = 0
    fallbacks = 0
    while placed < nc:
        if placed >= stop[0]:  # the caller's budget expired (a timer thread lowers stop[0]; nogil)
            break
        if L is not None:
            for d in range(m):
                free[d] = device_free(S, d)
        found, bt, c, d, bsrc, H = pick(m, H, size, free, sct, fav_dev, drmax, done, cunit, unit_pin, unit_dev,
                                        unit_mem, cmem, reserve_whole, used, capacity)
        if found:
            _hpop(H, size, (m + d) if bsrc == 0 else d)
            if L is not None:
                o = ops[ops_ptr[c]]
                t = est(I, S, L, o, d, False)  # link contention may have delayed the data since it was keyed
                if t > bt + 1e-9 * max(1.0, abs(t)):
                    H = _hpush(H, size, d, data_ready(I, S, L, o, d), prio[c], c)
                    continue
        else:  # no ready cluster fits anywhere: best effort (the device with the most room), flagged
            c, d, ready_ptr = fallback_next(m, ready_seq, ready_ptr, done, cunit, unit_pin, unit_dev, capacity, used)
            fallbacks += 1
        for j in range(ops_ptr[c], ops_ptr[c + 1]):
            o = ops[j]
            if P is not None:
                ready = ready_at(o, d, pl, end, pred_ptr, pred_edge, esrc, ebytes, lat, bw)
                s = free[d] if free[d] > ready else ready
                start[o] = s
                end[o] = s + dur[o, d]
                free[d] = end[o]
                pl[o] = d
                seq[nseq] = o
                nseq += 1
            if L is not None:
                commit(I, S, L, o, d, 0.0, False, False)
        book(c, d, used, unit_dev, done, fav_dev, fav_child, sct, cunit, unit_mem, cmem, reserve_whole)
        for j in range(csucc_ptr[c], csucc_ptr[c + 1]):
            s2 = csucc[j]
            need[s2] -= 1
            if need[s2] == 0:
                _arrivals(I, S, L, P, ops[ops_ptr[s2]], m, dr)
                H = push_ready(s2, m, H, size, dr, drmax, prio, ready_seq, cnt, cunit, unit_pin, unit_dev, unit_mem,
                               cmem, reserve_whole, used, capacity)
        placed += 1
    if L is not None:
        pl = S.placement.copy()
    if placed < nc:
        more, nseq = _complete(m, nc, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, cunit, unit_mem, unit_pin,
                               cmem, capacity, reserve_whole, used, unit_dev, done, need, pl, seq, nseq)
        fallbacks += more
    return pl, seq, nseq, fallbacks, placed


@njit
def _etf(m, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, prio, cunit, unit_mem, unit_pin, cmem, capacity,
         reserve_whole, fav_child, sct, pred_ptr, pred_edge, esrc, ebytes, lat, bw, dur, stop):
    n = dur.shape[0]
    P = (np.full(n, -1, dtype=np.int64), np.zeros(n), np.zeros(n), np.empty(n, dtype=np.int64), pred_ptr, pred_edge,
         esrc, ebytes, lat, bw, dur)
    pl, seq, nseq, fallbacks, placed = list_loop(None, None, None, P, m, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr,
                                                 cpred, prio, cunit, unit_mem, unit_pin, cmem, capacity,
                                                 reserve_whole, fav_child, sct, stop)
    return pl, P[1], P[2], seq[:nseq], fallbacks, placed


def etf(m, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, prio, cunit, unit_mem, unit_pin, cmem, capacity,
        reserve_whole, fav_child, sct, pred_ptr, pred_edge, esrc, ebytes, lat, bw, dur, stop=None):
    """``_list_schedule`` on arrays: (placement, start, end, ops in commit order, fallbacks, clusters placed
    by the method's rule). ``stop``: a one-element int64 array, the number of clusters the method may place
    (looked at before each one; another thread may lower it while this runs: the GIL is released; None:
    all). The clusters left are placed by :func:`_complete` (start and end then hold nothing for them)."""
    i64 = np.int64
    if stop is None:
        stop = np.full(1, len(ops_ptr) - 1, dtype=i64)
    return _etf(int(m), ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, np.asarray(prio, dtype=np.float64),
                np.asarray(cunit, dtype=i64), unit_mem, unit_pin, np.asarray(cmem, dtype=i64), capacity,
                bool(reserve_whole), np.asarray(fav_child, dtype=i64), bool(sct), pred_ptr, pred_edge, esrc, ebytes,
                lat, bw, dur, stop)
