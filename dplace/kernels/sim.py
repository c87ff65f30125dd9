"""The simulator's event loop compiled (numba), both comm modes: the same rules, the same event order and
the same float operations as :func:`dplace.schedule.events.run_events` (the reference), so start, end,
transfers and makespan are equal to the last bit (tests compare them on the test graphs and random
instances). Sequential comm: when an op ends, one send per destination device carrying the largest
tensor its consumers there need, the destinations in device order, each when the link is free (the
send before it on the link arrived).

Event order: the reference's heap holds ``(time, kind, topo_pos, op)`` with kind 0 = an op finished,
1 = an op's inputs all arrived; all keys differ (one event of each kind per op), so any priority queue on
the same keys pops them in the same sequence. Here the key is ``(time, kind * n + topo_pos)``. Each
device's ready ops (no order given) are keyed ``(ready time, topo_pos)`` as there.
"""
from __future__ import annotations

import numpy as np

from . import njit
from .arrays import InstArrays


@njit
def _less(t: np.ndarray, k: np.ndarray, i: int, j: int) -> bool:
    return t[i] < t[j] or (t[i] == t[j] and k[i] < k[j])


@njit
def _swap(t: np.ndarray, k: np.ndarray, v: np.ndarray, i: int, j: int) -> None:
    t[i], t[j] = t[j], t[i]
    k[i], k[j] = k[j], k[i]
    v[i], v[j] = v[j], v[i]


@njit
def _push(t: np.ndarray, k: np.ndarray, v: np.ndarray, lo: int, size: int, tt: float, kk: int, vv: int) -> None:
    """Push (tt, kk) -> vv onto the binary heap held in ``t/k/v[lo:lo + size]`` (the caller grows size)."""
    i = size
    t[lo + i], k[lo + i], v[lo + i] = tt, kk, vv
    while i > 0:
        p = (i - 1) >> 1
        if not _less(t, k, lo + i, lo + p):
            break
        _swap(t, k, v, lo + i, lo + p)
        i = p


@njit
def _pop(t: np.ndarray, k: np.ndarray, v: np.ndarray, lo: int, size: int) -> int:
    """Remove the smallest of ``t/k/v[lo:lo + size]`` (size >= 1; the caller shrinks size); return its v."""
    out = v[lo]
    size -= 1
    t[lo], k[lo], v[lo] = t[lo + size], k[lo + size], v[lo + size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _less(t, k, lo + c + 1, lo + c):
            c += 1
        if not _less(t, k, lo + c, lo + i):
            break
        _swap(t, k, v, lo + i, lo + c)
        i = c
    return out


@njit
def _events(n, m, dur, succ_ptr, succ_edge, edst, ebytes, lat, bw, topo_pos, pred_ptr, pl,
            has_order, order_ptr, order_ops, sequential):
    start = np.zeros(n)
    end = np.zeros(n)
    ready_at = np.zeros(n)
    waiting = np.empty(n, np.int64)
    for o in range(n):
        waiting[o] = pred_ptr[o + 1] - pred_ptr[o]
    is_ready = np.zeros(n, np.bool_)
    busy = np.zeros(m, np.bool_)
    nxt = np.zeros(m, np.int64)
    # the events' heap: at most one "inputs arrived" and one "finished" event per op
    et = np.empty(2 * n + 1)
    ek = np.empty(2 * n + 1, np.int64)
    ev = np.empty(2 * n + 1, np.int64)
    ne = 0
    # per device a heap of its ready ops (no order given), in its own segment of one array
    dlo = np.zeros(m + 1, np.int64)
    if not has_order:
        for o in range(n):
            dlo[pl[o] + 1] += 1
        for d in range(m):
            dlo[d + 1] += dlo[d]
    dsize = np.zeros(m, np.int64)
    ht = np.empty(n + 1)
    hk = np.empty(n + 1, np.int64)
    hv = np.empty(n + 1, np.int64)
    # transfers: at most one per (producer, destination device), so at most one per edge
    ne_all = len(edst)
    tr_p = np.empty(ne_all, np.int64)
    tr_a = np.empty(ne_all, np.int64)
    tr_b = np.empty(ne_all, np.int64)
    tr_s = np.empty(ne_all)
    tr_f = np.empty(ne_all)
    tr_n = np.empty(ne_all)
    ntr = 0
    slot = np.full(m, -1, np.int64)  # this producer's transfer to each device (-1: none yet)
    dirty = np.zeros(m, np.bool_)
    dirty_list = np.empty(m, np.int64)
    link_free = np.zeros((m, m))  # sequential comm: when each link's last send arrives
    need = np.zeros(m)  # sequential comm: per destination the bytes the finished op sends there
    has = np.zeros(m, np.bool_)
    arrive = np.zeros(m)

    for o in range(n):
        if waiting[o] == 0:
            _push(et, ek, ev, 0, ne, 0.0, n + topo_pos[o], o)
            ne += 1
    done = 0
    while ne > 0:
        t = et[0]
        nd = 0
        while ne > 0 and et[0] <= t:
            kind_key = ek[0]
            o = _pop(et, ek, ev, 0, ne)
            ne -= 1
            d = pl[o]
            if not dirty[d]:
                dirty[d] = True
                dirty_list[nd] = d
                nd += 1
            if kind_key >= n:  # its inputs all arrived
                is_ready[o] = True
                ready_at[o] = t
                if not has_order:
                    _push(ht, hk, hv, dlo[d], dsize[d], t, topo_pos[o], o)
                    dsize[d] += 1
                continue
            done += 1
            busy[d] = False
            if sequential:  # one send per destination device, in device order, each when its link is free
                for i in range(succ_ptr[o], succ_ptr[o + 1]):
                    e = succ_edge[i]
                    d2 = pl[edst[e]]
                    if d2 != d and (not has[d2] or ebytes[e] >= need[d2]):
                        has[d2] = True
                        need[d2] = ebytes[e]
                for d2 in range(m):
                    if not has[d2]:
                        continue
                    has[d2] = False
                    s = link_free[d, d2]
                    s = t if t >= s else s
                    f = s + lat[d, d2] + need[d2] / bw[d, d2]
                    link_free[d, d2] = f
                    tr_p[ntr], tr_a[ntr], tr_b[ntr] = o, d, d2
                    tr_s[ntr], tr_f[ntr], tr_n[ntr] = s, f, need[d2]
                    ntr += 1
                    arrive[d2] = f
            for i in range(succ_ptr[o], succ_ptr[o + 1]):
                e = succ_edge[i]
                v = edst[e]
                d2 = pl[v]
                if d2 == d:
                    a = t
                elif sequential:
                    a = arrive[d2]
                else:
                    a = t + lat[d, d2] + ebytes[e] / bw[d, d2]
                    k = slot[d2]
                    if k < 0:
                        slot[d2] = ntr
                        tr_p[ntr], tr_a[ntr], tr_b[ntr] = o, d, d2
                        tr_s[ntr], tr_f[ntr], tr_n[ntr] = t, a, ebytes[e]
                        ntr += 1
                    elif a > tr_f[k]:
                        tr_s[k], tr_f[k], tr_n[k] = t, a, ebytes[e]
                if a > ready_at[v]:
                    ready_at[v] = a
                waiting[v] -= 1
                if waiting[v] == 0:
                    _push(et, ek, ev, 0, ne, ready_at[v], n + topo_pos[v], v)
                    ne += 1
            if not sequential:
                for i in range(succ_ptr[o], succ_ptr[o + 1]):
                    slot[pl[edst[succ_edge[i]]]] = -1
        # dispatch every free device that has something to start at time t
        for j in range(nd):
            d = dirty_list[j]
            dirty[d] = False
            if busy[d]:
                continue
            if not has_order:
                if dsize[d] == 0:
                    continue
                o = _pop(ht, hk, hv, dlo[d], dsize[d])
                dsize[d] -= 1
            else:
                p = order_ptr[d] + nxt[d]
                if p >= order_ptr[d + 1] or not is_ready[order_ops[p]]:
                    continue
                o = order_ops[p]
                nxt[d] += 1
            busy[d] = True
            start[o] = t
            f = t + dur[o, d]
            end[o] = f
            _push(et, ek, ev, 0, ne, f, topo_pos[o], o)
            ne += 1
    return (start, end, tr_p[:ntr].copy(), tr_a[:ntr].copy(), tr_b[:ntr].copy(), tr_s[:ntr].copy(),
            tr_f[:ntr].copy(), tr_n[:ntr].copy(), done, nxt)


def run_events_arrays(a: InstArrays, pl: np.ndarray, order: tuple[np.ndarray, np.ndarray] | None):
    """:func:`dplace.schedule.events.run_events` on arrays (either comm mode; no receive costs): ``pl`` (n,)
    int64 devices, ``order`` None or (ptr (m + 1,), ops) with device d's list ``ops[ptr[d]:ptr[d + 1]]``.
    Returns (start, end, transfers as arrays (producer, src, dst, start, end, bytes), number of ops that
    ran, per device the position reached in its list)."""
    pl = np.ascontiguousarray(pl, dtype=np.int64)
    if order is None:
        optr, oops, has = np.zeros(a.m + 1, np.int64), np.zeros(0, np.int64), False
    else:
        optr, oops = np.ascontiguousarray(order[0], dtype=np.int64), np.ascontiguousarray(order[1], dtype=np.int64)
        has = True
    s, f, tp, ta, tb, ts, tf, tn, done, nxt = _events(
        a.n, a.m, a.dur, a.succ_ptr, a.succ_edge, a.edst, a.ebytes, a.lat, a.bw, a.topo_pos, a.pred_ptr, pl,
        has, optr, oops, bool(a.sequential))
    return s, f, (tp, ta, tb, ts, tf, tn), int(done), nxt
