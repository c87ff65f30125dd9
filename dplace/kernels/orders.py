"""A device's order and idle gaps in the arrays of the compiled schedule state (:mod:`dplace.kernels.state`
holds the ``State`` layout; the sequential-comm state :mod:`dplace.kernels.seqstate` shares these): the
device orders in blocks linked op to op, the gaps sorted with a maximum per block, ``earliest`` (the
:class:`dplace.schedule.timeline.Timeline` query) and ``_rebuild`` (the reference's ``_timeline``).

Device orders: blk[b, :bn[b]] the ops of block b in order; dbl[d, :dnb[d]] device d's blocks in order;
where[o] the block holding o; tail[d] d's last op (-1: none); seqn[d] its number of ops. Every block
but a device's last holds at least half a block (blocks only grow or split in halves), hence the sizes."""
from __future__ import annotations

import numpy as np

from . import njit

_B = 64  # gaps per block of the per-block maximum gap length
_BL = 256  # ops per block of a device order (read by new_state; kernels read S.blk.shape[1])
_INF = np.inf
# cnt: [ops committed, ops re-timed by later commits, replays, re-timing steps per committed op before a
# replay (kernels.CASCADE_BUDGET), blocks of device orders in use]
N_PLACED, RETIMED, REPLAYS, BUDGET, N_BLOCKS = 0, 1, 2, 3, 4


def order_lists(S) -> list[list[int]]:
    """Per-device lists of the committed ops in execution order (``ScheduleState.order()``)."""
    return [a.tolist() for a in order_arrays(S)]


def order_arrays(S) -> list[np.ndarray]:
    """Per-device int64 arrays of the committed ops in execution order."""
    flat = _orders_flat(S)
    cuts = np.cumsum(S.seqn)[:-1]
    return np.split(flat, cuts)


@njit
def _orders_flat(S):
    out = np.empty(S.seqn.sum(), dtype=np.int64)
    i = 0
    for d in range(len(S.seqn)):
        for j in range(S.dnb[d]):
            b = S.dbl[d, j]
            for k in range(S.bn[b]):
                out[i] = S.blk[b, k]
                i += 1
    return out


# ----------------------------------------------------------------------------------- device orders


@njit(borrow=True)
def _first_from(S, d, t, after):
    """Device d's first op that starts after t (``after``) / at or after t; -1 if none. Starts grow
    along a device order (re-timing keeps it): bisect the blocks' first ops, then the block."""
    st, blk = S.start, S.blk
    lo, hi = 0, S.dnb[d]
    while lo < hi:  # the blocks whose first op comes before the answer
        mid = (lo + hi) >> 1
        x = st[blk[S.dbl[d, mid], 0]]
        if x < t or (after and x == t):
            lo = mid + 1
        else:
            hi = mid
    if lo == 0:
        return blk[S.dbl[d, 0], 0] if S.dnb[d] else -1
    b = S.dbl[d, lo - 1]
    k, hi = 1, S.bn[b]
    while k < hi:
        mid = (k + hi) >> 1
        x = st[blk[b, mid]]
        if x < t or (after and x == t):
            k = mid + 1
        else:
            hi = mid
    if k < S.bn[b]:
        return blk[b, k]
    return blk[S.dbl[d, lo], 0] if lo < S.dnb[d] else -1


@njit(borrow=True)
def _new_block(S):
    b = S.cnt[N_BLOCKS]
    S.cnt[N_BLOCKS] = b + 1
    S.bn[b] = 0
    return b


@njit(borrow=True)
def _seq_insert(S, d, pv, o):
    """Put o right after pv (-1: first) in device d's blocks (the links are the caller's)."""
    blk, bn = S.blk, S.bn
    bl = blk.shape[1]
    j = -1  # the block's index in d's list, found only when needed
    if S.dnb[d] == 0:
        b = _new_block(S)
        S.dbl[d, 0] = b
        S.dnb[d] = 1
        p = 0
    elif pv < 0:
        j, b, p = 0, S.dbl[d, 0], 0
    else:
        b = S.where[pv]
        p = bn[b] - 1
        while blk[b, p] != pv:
            p -= 1
        p += 1
    if bn[b] == bl:
        if j < 0:
            j = S.dnb[d] - 1
            while S.dbl[d, j] != b:
                j -= 1
        nb = _new_block(S)
        nd = S.dnb[d]
        for i in range(nd, j + 1, -1):
            S.dbl[d, i] = S.dbl[d, i - 1]
        S.dbl[d, j + 1] = nb
        S.dnb[d] = nd + 1
        if p == bl and j == nd - 1:  # appended: a new last block (the full one stays full)
            b, p = nb, 0
        else:  # split in halves
            h = bl // 2
            for i in range(h, bl):
                x = blk[b, i]
                blk[nb, i - h] = x
                S.where[x] = nb
            bn[nb] = bl - h
            bn[b] = h
            if p > h:
                b, p = nb, p - h
    for i in range(bn[b], p, -1):
        blk[b, i] = blk[b, i - 1]
    blk[b, p] = o
    bn[b] += 1
    S.where[o] = b
    S.seqn[d] += 1


# ----------------------------------------------------------------------------------- device gaps


@njit(inline="always")
def _bisect_left(a, d, x, hi):
    """bisect_left on row d of a (rows indexed in place: a row view costs more than the search)."""
    lo = 0
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[d, mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(inline="always")
def _bisect_right(a, d, x, hi):
    lo = 0
    while lo < hi:
        mid = (lo + hi) >> 1
        if x < a[d, mid]:
            hi = mid
        else:
            lo = mid + 1
    return lo


@njit(borrow=True)
def _block_max(gs, ge, gmax, gn, d, b):
    lo = b * _B
    hi = min(lo + _B, gn[d])
    mx = -_INF
    for k in range(lo, hi):
        v = ge[d, k] - gs[d, k]
        if v > mx:
            mx = v
    gmax[d, b] = mx


@njit
def _blocks_from(gs, ge, gmax, gn, d, k):
    g = gn[d]
    for b in range(k // _B, (g - 1) // _B + 1):
        _block_max(gs, ge, gmax, gn, d, b)


@njit(inline="always")
def earliest(S, d, ready, length):
    """``Timeline.earliest(ready, length, True)`` on device d's gaps: the start in the first gap
    (in time) that ends after ``ready`` and holds ``length`` from max(gap start, ready); else after
    the device's busy time."""
    g = S.gn[d]
    if g > 0:
        k = _bisect_right(S.ge, d, ready, g)
        while k < g:
            if k % _B == 0:  # a whole block: skip it when no gap in it is long enough
                b = k // _B
                while k < g and S.gmax[d, b] < length:
                    b += 1
                    k = b * _B
                if k >= g:
                    break
            t = S.gs[d, k] if S.gs[d, k] > ready else ready
            if S.ge[d, k] - t >= length:
                return t
            k += 1
    free = S.free[d]
    return ready if ready > free else free


@njit(borrow=True)
def _gap_add(S, d, s, f):
    """``Timeline.add(s, f)``; False where the reference raises (the interval overlaps busy time)."""
    return _gap_put(S.gs, S.ge, S.gmax, S.gn, S.free, d, s, f)


@njit(borrow=True)
def _gap_put(gs, ge, gmax, gn, free_, d, s, f):
    """:func:`_gap_add` on the gap arrays themselves (``S.gs, S.ge, S.gmax, S.gn, S.free``): what a
    loop of calls passes, since each call with ``S`` cost an atomic reference count increment and
    decrement per array in it (``_rebuild``'s loop spent more on them than on its gaps; both now borrow
    their arrays, ``njit(borrow=True)``, which removes those counts too)."""
    free = free_[d]
    eps = 1e-9 * max(1.0, abs(s))
    if s >= free - eps:
        if s > free:
            g = gn[d]
            gs[d, g] = free
            ge[d, g] = s
            gn[d] = g + 1
            v = s - free
            b = g // _B
            if g % _B == 0 or v > gmax[d, b]:
                gmax[d, b] = v
        if f > free:
            free_[d] = f
        return True
    g = gn[d]
    k = _bisect_left(ge, d, s - eps, g)
    for _ in range(4):  # the containing gap is this one or a following one (zero-length ops)
        if k >= g:
            break
        if gs[d, k] > s + eps:
            break
        if f > ge[d, k] + eps:
            k += 1
            continue
        a, b = gs[d, k], ge[d, k]
        right = b > f + eps
        left = s > a + eps
        if left and right:
            for j in range(g, k + 1, -1):
                gs[d, j] = gs[d, j - 1]
                ge[d, j] = ge[d, j - 1]
            gs[d, k], ge[d, k] = a, s
            gs[d, k + 1], ge[d, k + 1] = f, b
            gn[d] = g + 1
            _blocks_from(gs, ge, gmax, gn, d, k)
        elif left or right:
            if left:
                ge[d, k] = s
            else:
                gs[d, k] = f
            _block_max(gs, ge, gmax, gn, d, k // _B)
        else:
            for j in range(k, g - 1):
                gs[d, j] = gs[d, j + 1]
                ge[d, j] = ge[d, j + 1]
            gn[d] = g - 1
            if g - 1 > k:
                _blocks_from(gs, ge, gmax, gn, d, k)
            elif k % _B:
                _block_max(gs, ge, gmax, gn, d, k // _B)
        return True
    return False


@njit(borrow=True)
def _rebuild(S, d):
    """Bring device d's gaps up to date from its stale time on (``ScheduleState._timeline``); callers
    test ``S.stale[d] < inf`` first (the test inline, the call rare: cheaper than an inlined wrapper)."""
    t0 = S.stale[d]
    if t0 < _INF:
        st, en, dnext = S.start, S.end, S.dnext
        gs, ge, gmax, gn, free = S.gs, S.ge, S.gmax, S.gn, S.free
        o = _first_from(S, d, t0, False)
        # truncate(t0, end of the op before): forget the gaps that end at or after t0
        g = _bisect_left(ge, d, t0, gn[d])
        gn[d] = g
        if g % _B:
            _block_max(gs, ge, gmax, gn, d, g // _B)
        pv = S.dprev[o] if o >= 0 else S.tail[d]
        free[d] = en[pv] if pv >= 0 else 0.0
        while o >= 0:  # _gap_put's appending case inline (ops come in time order): a call costs more
            s, f = st[o], en[o]
            fr = free[d]
            if s >= fr - 1e-9 * max(1.0, abs(s)):
                if s > fr:
                    g = gn[d]
                    gs[d, g] = fr
                    ge[d, g] = s
                    gn[d] = g + 1
                    b = g // _B
                    if g % _B == 0 or s - fr > gmax[d, b]:
                        gmax[d, b] = s - fr
                if f > fr:
                    free[d] = f
            elif not _gap_put(gs, ge, gmax, gn, free, d, s, f):
                raise ValueError("ScheduleState: an interval overlaps work already committed")
            o = dnext[o]
        S.stale[d] = _INF


@njit(inline="always")
def device_free(S, d):
    k = S.tail[d]
    return S.end[k] if k >= 0 else 0.0

