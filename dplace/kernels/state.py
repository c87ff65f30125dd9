""":class:`dplace.schedule.state.ScheduleState` for parallel comm on arrays, compiled: the list schedulers'
est / eft / commit (with and without insertion into idle gaps), and the placement rules of
:class:`dplace.schedule.rules.Rules` (pins, colocation groups reserving their whole memory at their first op,
fallback to the device with most free memory).

Results are those of the reference, float for float and in the same order: the same recurrences in
the same operation order (``data_ready`` = max over inputs of ``end + lat + bytes / bw``; a device's
idle gaps kept and queried with :class:`dplace.schedule.timeline.Timeline`'s rules, ``1e-9`` relative
tolerances and zero-length tie rules included; a commit that delays ops already committed re-times
them as ``ScheduleState._retime`` does and marks the gaps stale from the earliest moved op on, to be
rebuilt at the next insertion query exactly as the reference rebuilds them).

Differences that are not in the results: the reference keeps a device's gaps in chunks, this one in
one sorted array with a maximum per block of ``_B`` gaps (the same first fitting gap is found); the
reference keeps a device's order in one list (an insertion shifts everything after it), this one in
blocks of at most ``_BL`` ops (an insertion shifts at most one block; a full block is split in two),
linked op to op by ``dprev``/``dnext``, found by bisecting the blocks' first starts then a block.

Layout (all numpy arrays, every function takes them as two namedtuples):
``Inst`` (:func:`inst_tuple`): the instance's arrays; ``State`` (:func:`new_state`): the partial
schedule. Functions (compiled, ``I`` an ``Inst``, ``S`` a ``State``, ``R`` a ``RulesState``)::

    data_ready(I, S, o, d) -> float
    ready_on(I, S, o, devs, k, out)                # out[i] = data_ready(I, S, o, devs[i]), i < k
    est(I, S, o, d, insertion) -> float            # eft = est + I.dur[o, d]
    est_fresh(I, S, o, d, insertion) -> float      # est when d's gaps are up to date (hot loops)
    commit(I, S, o, d, start, has_start, insertion) -> float   # the start the simulator's rules give
    commit_at(I, S, o, d, ready, t, insertion) -> float        # commit, data_ready(o, d) and start t known
    makespan(S) -> float
    rules_forced(I, R, o) -> int; rules_need(I, R, o) -> int; rules_fits(I, R, o, d) -> bool
    rules_candidates(I, R, o, out) -> int          # devices into out[:k]; the fallback when none fits
    rules_assign(I, R, o, d)
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from . import njit

_B = 64  # gaps per block of the per-block maximum gap length
_BL = 256  # ops per block of a device order (read by new_state; kernels read S.blk.shape[1])
_INF = np.inf

Inst = namedtuple("Inst", "dur mem capacity esrc edst ebytes pred_ptr pred_edge succ_ptr succ_edge lat bw "
                          "pinned group_of group_ptr group_members")
State = namedtuple("State", "placement start end ready dprev dnext blk bn dbl dnb where tail seqn gs ge gmax gn "
                            "free stale mem_used cnt moved pending heap_t heap_x")
RulesState = namedtuple("RulesState", "used group_dev group_mem placed")

# cnt: [ops committed, ops re-timed by later commits, replays, re-timing steps per committed op before a
# replay (kernels.CASCADE_BUDGET), blocks of device orders in use]
N_PLACED, RETIMED, REPLAYS, BUDGET, N_BLOCKS = 0, 1, 2, 3, 4
# Device orders: blk[b, :bn[b]] the ops of block b in order; dbl[d, :dnb[d]] device d's blocks in order;
# where[o] the block holding o; tail[d] d's last op (-1: none); seqn[d] its number of ops. Every block
# but a device's last holds at least half a block (blocks only grow or split in halves), hence the sizes.


def inst_tuple(a) -> Inst:
    """The fields of :class:`dplace.kernels.InstArrays` the state needs."""
    return Inst(a.dur, a.mem, a.capacity, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge,
                a.succ_ptr, a.succ_edge, a.lat, a.bw, a.pinned, a.group_of, a.group_ptr, a.group_members)


def new_state(n: int, m: int, cascade_budget: int | None = None) -> State:
    """An empty schedule. Per-device arrays are (m, n + 2) but ``np.empty``: only what a device uses
    is ever touched (resident memory grows with the schedule, not with m * n)."""
    cap = n + 2
    if cascade_budget is None:
        from . import CASCADE_BUDGET

        cascade_budget = CASCADE_BUDGET
    cnt = np.zeros(5, dtype=np.int64)
    cnt[BUDGET] = cascade_budget
    bl = max(2, _BL)
    per_dev = n // (bl // 2) + 2
    return State(
        placement=np.full(n, -1, dtype=np.int64),
        start=np.zeros(n), end=np.zeros(n), ready=np.zeros(n),
        dprev=np.full(n, -1, dtype=np.int64), dnext=np.full(n, -1, dtype=np.int64),
        blk=np.empty((per_dev + m, bl), dtype=np.int64), bn=np.zeros(per_dev + m, dtype=np.int64),
        dbl=np.empty((m, per_dev), dtype=np.int64), dnb=np.zeros(m, dtype=np.int64),
        where=np.empty(n, dtype=np.int64), tail=np.full(m, -1, dtype=np.int64), seqn=np.zeros(m, dtype=np.int64),
        gs=np.empty((m, cap)), ge=np.empty((m, cap)), gmax=np.empty((m, cap // _B + 2)),
        gn=np.zeros(m, dtype=np.int64), free=np.zeros(m), stale=np.full(m, _INF),
        mem_used=np.zeros(m, dtype=np.int64), cnt=cnt,
        moved=np.full(m, _INF), pending=np.zeros(n, dtype=np.bool_),
        heap_t=np.empty(n + 1), heap_x=np.empty(n + 1, dtype=np.int64),
    )


def new_rules(I: Inst, n: int, m: int) -> RulesState:
    gp, gm = I.group_ptr, I.group_members
    ng = len(gp) - 1
    gsum = np.zeros(ng, dtype=np.int64)
    np.add.at(gsum, np.repeat(np.arange(ng), np.diff(gp)), I.mem[gm])
    return RulesState(used=np.zeros(m, dtype=np.int64), group_dev=np.full(ng, -1, dtype=np.int64),
                      group_mem=gsum, placed=np.zeros(n, dtype=np.bool_))


def order_lists(S: State) -> list[list[int]]:
    """Per-device lists of the committed ops in execution order (``ScheduleState.order()``)."""
    return [a.tolist() for a in order_arrays(S)]


def order_arrays(S: State) -> list[np.ndarray]:
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


@njit
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


@njit
def _new_block(S):
    b = S.cnt[N_BLOCKS]
    S.cnt[N_BLOCKS] = b + 1
    S.bn[b] = 0
    return b


@njit
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


@njit
def _block_max(S, d, b):
    lo = b * _B
    hi = min(lo + _B, S.gn[d])
    mx = -_INF
    for k in range(lo, hi):
        v = S.ge[d, k] - S.gs[d, k]
        if v > mx:
            mx = v
    S.gmax[d, b] = mx


@njit
def _blocks_from(S, d, k):
    g = S.gn[d]
    for b in range(k // _B, (g - 1) // _B + 1):
        _block_max(S, d, b)


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


@njit
def _gap_add(S, d, s, f):
    """``Timeline.add(s, f)``; False where the reference raises (the interval overlaps busy time)."""
    free = S.free[d]
    eps = 1e-9 * max(1.0, abs(s))
    if s >= free - eps:
        if s > free:
            g = S.gn[d]
            S.gs[d, g] = free
            S.ge[d, g] = s
            S.gn[d] = g + 1
            v = s - free
            b = g // _B
            if g % _B == 0 or v > S.gmax[d, b]:
                S.gmax[d, b] = v
        if f > free:
            S.free[d] = f
        return True
    g = S.gn[d]
    k = _bisect_left(S.ge, d, s - eps, g)
    for _ in range(4):  # the containing gap is this one or a following one (zero-length ops)
        if k >= g:
            break
        if S.gs[d, k] > s + eps:
            break
        if f > S.ge[d, k] + eps:
            k += 1
            continue
        a, b = S.gs[d, k], S.ge[d, k]
        right = b > f + eps
        left = s > a + eps
        if left and right:
            for j in range(g, k + 1, -1):
                S.gs[d, j] = S.gs[d, j - 1]
                S.ge[d, j] = S.ge[d, j - 1]
            S.gs[d, k], S.ge[d, k] = a, s
            S.gs[d, k + 1], S.ge[d, k + 1] = f, b
            S.gn[d] = g + 1
            _blocks_from(S, d, k)
        elif left or right:
            if left:
                S.ge[d, k] = s
            else:
                S.gs[d, k] = f
            _block_max(S, d, k // _B)
        else:
            for j in range(k, g - 1):
                S.gs[d, j] = S.gs[d, j + 1]
                S.ge[d, j] = S.ge[d, j + 1]
            S.gn[d] = g - 1
            if g - 1 > k:
                _blocks_from(S, d, k)
            elif k % _B:
                _block_max(S, d, k // _B)
        return True
    return False


@njit
def _rebuild(S, d):
    """Bring device d's gaps up to date from its stale time on (``ScheduleState._timeline``); callers
    test ``S.stale[d] < inf`` first (the test inline, the call rare: cheaper than an inlined wrapper)."""
    t0 = S.stale[d]
    if t0 < _INF:
        st, en = S.start, S.end
        o = _first_from(S, d, t0, False)
        # truncate(t0, end of the op before): forget the gaps that end at or after t0
        g = _bisect_left(S.ge, d, t0, S.gn[d])
        S.gn[d] = g
        if g % _B:
            _block_max(S, d, g // _B)
        pv = S.dprev[o] if o >= 0 else S.tail[d]
        S.free[d] = en[pv] if pv >= 0 else 0.0
        while o >= 0:
            if not _gap_add(S, d, st[o], en[o]):
                raise ValueError("ScheduleState: an interval overlaps work already committed")
            o = S.dnext[o]
        S.stale[d] = _INF


# ----------------------------------------------------------------------------------- queries


@njit(inline="always")
def data_ready(I, S, o, d):
    """Time all inputs of o would be on d (parallel comm: every transfer on its own)."""
    t = 0.0
    pl, end = S.placement, S.end
    for k in range(I.pred_ptr[o], I.pred_ptr[o + 1]):
        e = I.pred_edge[k]
        p = I.esrc[e]
        dp = pl[p]
        if dp < 0:
            raise ValueError("ScheduleState: a predecessor is not committed")
        if dp == d:
            a = end[p]
        else:
            a = end[p] + I.lat[dp, d] + I.ebytes[e] / I.bw[dp, d]
        if a > t:
            t = a
    return t


@njit(inline="always")
def ready_on(I, S, o, devs, k, out):
    """``data_ready`` on devices devs[:k] into out[:k], each input read once (the same floats)."""
    for i in range(k):
        out[i] = 0.0
    pl, end = S.placement, S.end
    for j in range(I.pred_ptr[o], I.pred_ptr[o + 1]):
        e = I.pred_edge[j]
        p = I.esrc[e]
        dp = pl[p]
        if dp < 0:
            raise ValueError("ScheduleState: a predecessor is not committed")
        f = end[p]
        nb = I.ebytes[e]
        for i in range(k):
            d = devs[i]
            a = f if dp == d else f + I.lat[dp, d] + nb / I.bw[dp, d]
            if a > out[i]:
                out[i] = a


@njit(inline="always")
def device_free(S, d):
    k = S.tail[d]
    return S.end[k] if k >= 0 else 0.0


@njit(inline="always")
def est_fresh(I, S, o, d, insertion):
    """``est`` when device d's gaps are up to date (``S.stale[d] == inf``). Loops call it after testing
    ``if S.stale[d] < inf: _rebuild(S, d)`` themselves: an inlined function that makes a call with
    ``S`` costs ~0.1 µs per call (numba's reference counts), more than the query."""
    ready = data_ready(I, S, o, d)
    if not insertion:
        free = device_free(S, d)
        return ready if ready > free else free
    return earliest(S, d, ready, I.dur[o, d])


@njit
def est(I, S, o, d, insertion):
    if insertion and S.stale[d] < _INF:
        _rebuild(S, d)
    return est_fresh(I, S, o, d, insertion)


@njit
def makespan(S):
    mx = 0.0
    for x in S.end:
        if x > mx:
            mx = x
    return mx


# ----------------------------------------------------------------------------------- commit


@njit
def _hpush(S, size, t, x):
    ht, hx = S.heap_t, S.heap_x
    i = size
    while i > 0:
        p = (i - 1) >> 1
        if ht[p] < t or (ht[p] == t and hx[p] <= x):
            break
        ht[i], hx[i] = ht[p], hx[p]
        i = p
    ht[i], hx[i] = t, x
    return size + 1


@njit
def _hpop(S, size):
    ht, hx = S.heap_t, S.heap_x
    size -= 1
    t, x = ht[size], hx[size]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and (ht[c + 1] < ht[c] or (ht[c + 1] == ht[c] and hx[c + 1] < hx[c])):
            c += 1
        if t < ht[c] or (t == ht[c] and x <= hx[c]):
            break
        ht[i], hx[i] = ht[c], hx[c]
        i = c
    ht[i], hx[i] = t, x
    return size


@njit
def _push_op(S, size, v):
    if not S.pending[v]:
        pv = S.dprev[v]
        r = S.ready[v]
        c = S.end[pv] if pv >= 0 and S.end[pv] > r else r
        if c > S.start[v]:
            S.pending[v] = True
            size = _hpush(S, size, c, -1 - v)
    return size


@njit
def _arrival(I, pl, e, d, f):
    """When edge e's tensor, produced on d at f, is on its consumer's device (committed)."""
    dv = pl[I.edst[e]]
    return f if dv == d else f + I.lat[d, dv] + I.ebytes[e] / I.bw[d, dv]


@njit
def _retime(I, S, first, fresh):
    """``ScheduleState._retime`` for parallel comm from op ``first`` (delayed by ``fresh``): settle
    ops in time order until nothing moves; S.moved[d] gets the earliest start an op other than
    ``fresh`` had on d before it moved. Past the reference's budget the reference replays everything
    (same times) and marks every device's gaps stale: so does this (returns True)."""
    pl, st, en, rd, dprev = S.placement, S.start, S.end, S.ready, S.dprev
    budget = S.cnt[BUDGET] * (S.cnt[N_PLACED] + 250)
    pv = dprev[first]
    r = rd[first]
    S.pending[first] = True
    # heap items (time, -1 - op): the reference's, so ties pop in its order and the step count is its
    size = _hpush(S, 0, en[pv] if pv >= 0 and en[pv] > r else r, -1 - first)
    while size > 0:
        budget -= 1
        if budget < 0:  # a long cascade: the reference replays everything committed instead
            for i in range(size):
                S.pending[-1 - S.heap_x[i]] = False
            S.moved[:] = _INF
            _replay(I, S)
            return True
        t, x = S.heap_t[0], S.heap_x[0]
        o = -1 - x
        size = _hpop(S, size)
        pv = dprev[o]
        s = en[pv] if pv >= 0 and en[pv] > rd[o] else rd[o]
        if s > t:
            size = _hpush(S, size, s, x)
            continue
        S.pending[o] = False
        d = pl[o]
        f = s + I.dur[o, d]
        if s == st[o] and f == en[o]:
            continue
        if o != fresh:
            if st[o] < S.moved[d]:
                S.moved[d] = st[o]
            S.cnt[RETIMED] += 1
        st[o] = s
        if f == en[o]:
            continue
        en[o] = f
        nx = S.dnext[o]
        if nx >= 0:
            size = _push_op(S, size, nx)
        for k in range(I.succ_ptr[o], I.succ_ptr[o + 1]):
            e = I.succ_edge[k]
            v = I.edst[e]
            if pl[v] >= 0 and _arrival(I, pl, e, d, f) > rd[v]:
                rd[v] = _arrival(I, pl, e, d, f)
                size = _push_op(S, size, v)
    return False


@njit
def _replay(I, S):
    """``ScheduleState._replay`` for parallel comm: every committed op timed again from scratch (start
    = max(previous op on its device ended, inputs arrived)), every device's gaps stale."""
    pl, st, en, rd = S.placement, S.start, S.end, S.ready
    n = len(pl)
    left = np.zeros(n, dtype=np.int64)
    queue = np.empty(n, dtype=np.int64)
    qn = 0
    for o in range(n):
        if pl[o] < 0:
            continue
        # every predecessor of a committed op is committed
        c = (1 if S.dprev[o] >= 0 else 0) + I.pred_ptr[o + 1] - I.pred_ptr[o]
        left[o] = c
        rd[o] = 0.0
        if c == 0:
            queue[qn] = o
            qn += 1
    qi = 0
    while qi < qn:
        o = queue[qi]
        qi += 1
        d = pl[o]
        pv = S.dprev[o]
        s = en[pv] if pv >= 0 and en[pv] > rd[o] else rd[o]
        f = s + I.dur[o, d]
        st[o], en[o] = s, f
        nx = S.dnext[o]
        if nx >= 0:
            left[nx] -= 1
            if left[nx] == 0:
                queue[qn] = nx
                qn += 1
        for k in range(I.succ_ptr[o], I.succ_ptr[o + 1]):
            e = I.succ_edge[k]
            v = I.edst[e]
            if pl[v] < 0:
                continue
            a = _arrival(I, pl, e, d, f)
            if a > rd[v]:
                rd[v] = a
            left[v] -= 1
            if left[v] == 0:
                queue[qn] = v
                qn += 1
    if qn < S.cnt[N_PLACED]:
        raise ValueError("ScheduleState: the device orders and the graph form a cycle")
    S.cnt[REPLAYS] += 1
    S.stale[:] = -_INF


@njit
def commit(I, S, o, d, start, has_start, insertion):
    """``ScheduleState.commit(o, d, start if has_start else None, insertion)``: returns o's start."""
    ready = data_ready(I, S, o, d)
    if has_start:
        t = start
    elif insertion:
        if S.stale[d] < _INF:
            _rebuild(S, d)
        t = earliest(S, d, ready, I.dur[o, d])
    else:
        t = device_free(S, d)
        t = ready if ready > t else t
    return commit_at(I, S, o, d, ready, t, insertion)


@njit
def commit_at(I, S, o, d, ready, t, insertion):
    """``commit`` with o's inputs on d at ``ready`` (``data_ready``) and its start asked for at ``t``
    (given, or the est the caller just computed)."""
    if S.placement[o] >= 0:
        raise ValueError("ScheduleState: op committed twice")
    st, en = S.start, S.end
    pv = S.tail[d]
    if insertion and pv >= 0 and t < en[pv]:
        nx = _first_from(S, d, t, True)  # bisect_right on the starts
        pv = S.dprev[nx] if nx >= 0 else S.tail[d]
        while pv >= 0 and st[pv] == t and en[pv] > t:  # a zero-time op goes first
            pv = S.dprev[pv]
    if pv >= 0:
        nx = S.dnext[pv]
    else:
        nx = S.blk[S.dbl[d, 0], 0] if S.dnb[d] else -1
    _seq_insert(S, d, pv, o)
    if pv == S.tail[d]:
        S.tail[d] = o
    S.dprev[o], S.dnext[o] = pv, nx
    if pv >= 0:
        S.dnext[pv] = o
    if nx >= 0:
        S.dprev[nx] = o
    S.placement[o] = d
    S.mem_used[d] += I.mem[o]
    S.cnt[N_PLACED] += 1
    S.ready[o] = ready
    s = en[pv] if pv >= 0 and en[pv] > ready else ready
    st[o] = s
    en[o] = s + I.dur[o, d]
    stale = S.stale
    if nx >= 0 and en[o] > st[nx]:
        if not _retime(I, S, nx, o):
            for dd in range(len(stale)):
                if S.moved[dd] < stale[dd]:
                    stale[dd] = S.moved[dd]
                S.moved[dd] = _INF
    if stale[d] == _INF and insertion:
        if not _gap_add(S, d, st[o], en[o]):
            stale[d] = -_INF
    elif st[o] < stale[d]:
        stale[d] = st[o]
    return st[o]


# ----------------------------------------------------------------------------------- rules


@njit(inline="always")
def rules_need(I, R, o):
    """Bytes that placing o now adds (its whole group's if it is the group's first op)."""
    g = I.group_of[o]
    if g >= 0:
        return 0 if R.group_dev[g] >= 0 else R.group_mem[g]
    return I.mem[o]


@njit(inline="always")
def rules_forced(I, R, o):
    if I.pinned[o] >= 0:
        return I.pinned[o]
    g = I.group_of[o]
    if g >= 0 and R.group_dev[g] >= 0:
        return R.group_dev[g]
    return -1


@njit(inline="always")
def rules_fits(I, R, o, d):
    return R.used[d] + rules_need(I, R, o) <= I.capacity[d]


@njit
def rules_candidates(I, R, o, out):
    """``Rules.choose_or_fallback(o)`` into ``out[:k]``; returns k."""
    f = rules_forced(I, R, o)
    if f >= 0:  # a forced device is the fallback too
        out[0] = f
        return 1
    need = rules_need(I, R, o)
    k = 0
    m = len(I.capacity)
    for d in range(m):
        if R.used[d] + need <= I.capacity[d]:
            out[k] = d
            k += 1
    if k == 0:  # most free memory, ties to the lowest device
        best = 0
        for d in range(1, m):
            if I.capacity[d] - R.used[d] > I.capacity[best] - R.used[best]:
                best = d
        out[0] = best
        k = 1
    return k


@njit
def rules_assign(I, R, o, d):
    R.used[d] += rules_need(I, R, o)
    g = I.group_of[o]
    if g >= 0 and R.group_dev[g] < 0:
        R.group_dev[g] = d
    R.placed[o] = True


class ArrayState:
    """A finished (or partial) compiled schedule with the reference's read side: ``placement``,
    ``order()``, ``makespan``, ``start``/``end`` (lists, built on first use)."""

    def __init__(self, I: Inst, S: State) -> None:
        self.I, self.S = I, S

    @property
    def placement(self) -> list[int]:
        got = self.__dict__.get("_pl")
        if got is None:
            got = self.__dict__["_pl"] = self.S.placement.tolist()
        return got

    @property
    def start(self) -> list[float]:
        return self.S.start.tolist()

    @property
    def end(self) -> list[float]:
        return self.S.end.tolist()

    @property
    def makespan(self) -> float:
        return float(makespan(self.S)) if len(self.S.end) else 0.0

    @property
    def retimed(self) -> int:
        return int(self.S.cnt[RETIMED])

    def order(self) -> list[list[int]]:
        return order_lists(self.S)
