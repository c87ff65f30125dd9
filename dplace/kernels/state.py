""":class:`dplace.schedule.state.ScheduleState` for parallel comm on arrays, compiled: the list schedulers'
est / eft / commit (with and without insertion into idle gaps). Beside it: the device orders and idle
gaps (:mod:`dplace.kernels.orders`), the placement rules of :class:`dplace.schedule.rules.Rules`
(:mod:`dplace.kernels.rules`, re-exported here), the re-timing heap (:mod:`dplace.kernels.heap`).

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
    est_at(I, S, o, d, ready, insertion) -> float  # est with data_ready(o, d) known (both comm modes)
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
from .heap import enqueue, hpop, hpush, release
from .orders import (_B, _BL, _INF, BUDGET, N_BLOCKS, N_PLACED, REPLAYS, RETIMED, _first_from,  # noqa: F401
                     _gap_add, _rebuild, _seq_insert, device_free, earliest, order_arrays, order_lists)
from .ready import placed_pred, ready_at
from .rules import (RulesState, new_rules, rules_assign, rules_candidates, rules_fits,  # noqa: F401
                    rules_forced, rules_need)

Inst = namedtuple("Inst", "dur mem capacity esrc edst ebytes pred_ptr pred_edge succ_ptr succ_edge lat bw "
                          "pinned group_of group_ptr group_members")
State = namedtuple("State", "placement start end ready dprev dnext blk bn dbl dnb where tail seqn gs ge gmax gn "
                            "free stale mem_used cnt moved pending heap_t heap_x")


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


# ----------------------------------------------------------------------------------- queries


@njit(inline="always")
def data_ready(I, S, o, d):
    """Time all inputs of o would be on d (parallel comm: every transfer on its own)."""
    return ready_at(o, d, S.placement, S.end, I.pred_ptr, I.pred_edge, I.esrc, I.ebytes, I.lat, I.bw)


@njit(inline="always")
def ready_on(I, S, o, devs, k, out):
    """``data_ready`` on devices devs[:k] into out[:k], each input read once (the same floats)."""
    for i in range(k):
        out[i] = 0.0
    pl, end = S.placement, S.end
    for j in range(I.pred_ptr[o], I.pred_ptr[o + 1]):
        e, p, dp = placed_pred(pl, I.pred_edge, I.esrc, j)
        f = end[p]
        nb = I.ebytes[e]
        for i in range(k):
            d = devs[i]
            a = f if dp == d else f + I.lat[dp, d] + nb / I.bw[dp, d]
            if a > out[i]:
                out[i] = a



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


@njit(inline="always")
def est_at(I, S, o, d, ready, insertion):
    """``est`` of o on d with its inputs there at ``ready`` (``data_ready``, of either comm mode)."""
    if not insertion:
        free = device_free(S, d)
        return ready if ready > free else free
    if S.stale[d] < _INF:
        _rebuild(S, d)
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
def _arrival(I, pl, e, d, f):
    """When edge e's tensor, produced on d at f, is on its consumer's device (committed)."""
    dv = pl[I.edst[e]]
    return f if dv == d else f + I.lat[d, dv] + I.ebytes[e] / I.bw[d, dv]


@njit
def _retime(I, S, first, fresh):
    """``ScheduleState._retime`` for parallel comm from op ``first`` (delayed by ``fresh``): settle
    ops in time order until nothing moves; S.moved[d] gets the earliest start an op other than
    ``fresh`` had on d before it moved. Past the reference's budget the reference replays everything
    (same times) and marks every device's gaps stale: so does this (returns True).
    With ``_replay``, the deliberate pair of :mod:`dplace.kernels.seqstate`'s (which also settles sends).
    Every array is taken out of the tuples once, before the loop, and the heap pushes are inline: an array
    read from a tuple, or passed to a helper, inside the loop costs an atomic reference-count increment
    and decrement per step (as in seqstate's ``_retime``). Measured on the 36k-op Transformer (parallel
    comm, every op committed at its data-ready time with insertion: 26.5M ops re-timed): 9.2-9.7 -> 1.5-1.7
    CPU s; the op push written as a shared inline helper taking the arrays instead: 3.3-3.6 s, hence the
    push is written out here and in seqstate's ``_retime`` (the same nine lines)."""
    pl, st, en, rd, dprev, dnext = S.placement, S.start, S.end, S.ready, S.dprev, S.dnext
    pending, moved, ht, hx = S.pending, S.moved, S.heap_t, S.heap_x
    dur, lat, bw, ebytes = I.dur, I.lat, I.bw, I.ebytes
    succ_ptr, succ_edge, edst = I.succ_ptr, I.succ_edge, I.edst
    budget = S.cnt[BUDGET] * (S.cnt[N_PLACED] + 250)
    retimed = 0
    pv = dprev[first]
    r = rd[first]
    pending[first] = True
    # heap items (time, -1 - op): the reference's, so ties pop in its order and the step count is its
    size = hpush(ht, hx, 0, en[pv] if pv >= 0 and en[pv] > r else r, -1 - first)
    while size > 0:
        budget -= 1
        if budget < 0:  # a long cascade: the reference replays everything committed instead
            for i in range(size):
                pending[-1 - hx[i]] = False
            moved[:] = _INF
            S.cnt[RETIMED] += retimed
            _replay(I, S)
            return True
        t, x = ht[0], hx[0]
        o = -1 - x
        size = hpop(ht, hx, size)
        pv = dprev[o]
        s = en[pv] if pv >= 0 and en[pv] > rd[o] else rd[o]
        if s > t:
            size = hpush(ht, hx, size, s, x)
            continue
        pending[o] = False
        d = pl[o]
        f = s + dur[o, d]
        if s == st[o] and f == en[o]:
            continue
        if o != fresh:
            if st[o] < moved[d]:
                moved[d] = st[o]
            retimed += 1
        st[o] = s
        if f == en[o]:
            continue
        en[o] = f
        # o's value is on each device later: the ops that may start later (the next op on d first, when any)
        nx = dnext[o]
        j0 = succ_ptr[o]
        for j in range(j0 - 1 if nx >= 0 else j0, succ_ptr[o + 1]):
            if j < j0:
                v = nx
            else:
                e = succ_edge[j]
                v = edst[e]
                dv = pl[v]
                if dv < 0:
                    continue
                a = f if dv == d else f + lat[d, dv] + ebytes[e] / bw[d, dv]
                if a <= rd[v]:
                    continue
                rd[v] = a
            if not pending[v]:  # queued when its start would grow
                pv = dprev[v]
                c = en[pv] if pv >= 0 and en[pv] > rd[v] else rd[v]
                if c > st[v]:
                    pending[v] = True
                    size = hpush(ht, hx, size, c, -1 - v)
    S.cnt[RETIMED] += retimed
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
            qn = enqueue(queue, qn, o)
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
            qn = release(left, nx, queue, qn)
        for k in range(I.succ_ptr[o], I.succ_ptr[o + 1]):
            e = I.succ_edge[k]
            v = I.edst[e]
            if pl[v] < 0:
                continue
            a = _arrival(I, pl, e, d, f)
            if a > rd[v]:
                rd[v] = a
            qn = release(left, v, queue, qn)
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
