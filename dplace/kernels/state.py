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

The commit's steps and the settling loop serve both comm modes (:mod:`dplace.kernels.seqstate` passes
its link state ``L``; here ``L`` is None and numba compiles the link branches out): ``link_in``,
``time_in``, ``settle``, ``_retime``, ``_replay``.

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

The per-candidate and per-commit kernels (``est``, ``commit``, ``commit_at``, ``_retime``, ``_replay``, the
device orders', gaps', rules' and heap's) are ``njit(borrow=True)``: no reference counts on the arrays of their
tuple arguments (:func:`dplace.kernels.njit`), so they allocate nothing (``_replay``'s scratch is ``S.left``).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from . import njit
from .heap import enqueue, heapify, hpop, hpush, release, release_as
from .orders import (_B, _BL, _INF, BUDGET, N_BLOCKS, N_PLACED, REPLAYS, RETIMED, _first_from,  # noqa: F401
                     _gap_add, _rebuild, _seq_insert, device_free, earliest, order_arrays, order_lists)
from .ready import placed_pred, ready_at
from .seqlinks import COMMIT_NO, FREEZE_AFTER
from .rules import (RulesState, new_rules, rules_assign, rules_candidates, rules_fits,  # noqa: F401
                    rules_forced, rules_need)

Inst = namedtuple("Inst", "dur mem capacity esrc edst ebytes pred_ptr pred_edge succ_ptr succ_edge lat bw "
                          "pinned group_of group_ptr group_members")
State = namedtuple("State", "placement start end ready dprev dnext blk bn dbl dnb where tail seqn gs ge gmax gn "
                            "free stale mem_used cnt moved pending heap_t heap_x left")


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
        left=np.empty(n, dtype=np.int64),  # _replay's scratch (it allocates nothing: it is called by borrowing kernels)
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
    ``S`` costs ~0.1 µs per call (numba's reference counts, unless the callee borrows its arrays:
    :func:`dplace.kernels.njit`), more than the query."""
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



@njit(borrow=True)
def _retime(I, S, L, size, fresh):
    """``ScheduleState._retime`` on the items ``hx[:size]`` of the re-timing heap (ops as -1 - o; in
    sequential comm, ``L`` the links of :mod:`dplace.kernels.seqlinks`, also sends k >= 0; ``L`` None:
    parallel comm, numba compiles the link branches out): settle them in (start before they grew, item)
    order, the reference's, until nothing moves. True when an op other than ``fresh`` moved: S.moved[d] then holds
    the earliest start such an op had on d. Past the reference's budget the reference replays everything
    committed (the same times) and marks every device's gaps stale: so does this (returns False).

    Every array is taken out of the tuples once, before the loop, and the heap pushes are inline: an
    array read from a tuple, or passed to a helper, inside the loop costs an atomic reference-count
    increment and decrement per step. Measured on the 36k-op Transformer (parallel comm, every op
    committed at its data-ready time with insertion: 23-26M ops re-timed): 9.2-9.7 -> 1.5-1.7 CPU s;
    the op push written as a shared inline helper taking the arrays instead: 3.3-3.6 s. In sequential
    comm (with ``_rebuild``'s per-op ``_gap_add(S, ...)`` calls) they were half of HEFT's CPU time on the
    36k-op sequential Transformer: 33.8 -> 8.6 CPU s.

    Tried and dropped (session 15): switching a long cascade to a first-in first-out replay of only the
    items that start at or after its earliest key (the rest cannot move). A replay costs about what a
    heap step costs per item (97 against ~115 ns on that graph), but that suffix holds 2.2-3.3x the items
    the cascade moves, so HEFT's loop got slower (3.6-6.9 against 3.3-4.1 CPU s, whatever the switch point)."""
    m = I.lat.shape[0]
    pl, st, en, rd, dprev, dnext = S.placement, S.start, S.end, S.ready, S.dprev, S.dnext
    pending, moved = S.pending, S.moved
    dur, lat, bw, ebytes = I.dur, I.lat, I.bw, I.ebytes
    succ_ptr, succ_edge, edst = I.succ_ptr, I.succ_edge, I.edst
    if L is None:
        ht, hx = S.heap_t, S.heap_x
        budget = S.cnt[BUDGET] * (S.cnt[N_PLACED] + 250)
    else:
        ht, hx = L.heap_t, L.heap_x
        tx_s, tx_f, tx_b, lprev, lnext, pend, has = L.tx_s, L.tx_f, L.tx_b, L.lprev, L.lnext, L.pend, L.has
        dmask, stamp = L.dmask, L.stamp
        fz = L.pol[FREEZE_AFTER] >= 0 and S.cnt[RETIMED] >= L.pol[FREEZE_AFTER]  # seqlinks.frozen: only this
        now = L.pol[COMMIT_NO]  # commit's sends pull the send behind them
        budget = S.cnt[BUDGET] * (S.cnt[N_PLACED] + L.cnt[0] + 250)
    for i in range(size):  # each item keyed by its start before it grows
        x = hx[i]
        if x < 0:
            ht[i] = st[-1 - x]
            pending[-1 - x] = True
        elif L is not None:
            ht[i] = tx_s[x]
            pend[x] = True
    heapify(ht, hx, size)
    moved_any = False
    retimed = 0
    while size > 0:
        budget -= 1
        if budget < 0:  # a long cascade: one replay of everything committed costs less
            for i in range(size):
                x = hx[i]
                if x < 0:
                    pending[-1 - x] = False
                elif L is not None:
                    pend[x] = False
            moved[:] = _INF
            S.cnt[RETIMED] += retimed
            _replay(I, S, L)
            return False
        x = hx[0]
        size = hpop(ht, hx, size)
        if x < 0:  # an op: then the next op on its device, its sends and its consumers
            p = -1 - x
            pv = dprev[p]
            s = en[pv] if pv >= 0 and en[pv] > rd[p] else rd[p]
            pending[p] = False
            d = pl[p]
            f = s + dur[p, d]
            if s == st[p] and f == en[p]:
                continue
            if p != fresh:
                if st[p] < moved[d]:
                    moved[d] = st[p]
                moved_any = True
                retimed += 1
            st[p] = s
            if f == en[p]:
                continue
            en[p] = f
            nx = dnext[p]
            if L is not None and dmask[p]:  # its sends (bit d2 of dmask[p]: one to d2)
                mk = dmask[p]
                for d2 in range(m):
                    y = p * m + d2
                    if (mk >> d2) & 1 and has[y] and not pend[y]:
                        q = lprev[y]
                        pf = tx_f[q] if q >= 0 else 0.0
                        c = f if f >= pf else pf
                        if c > tx_s[y]:
                            pend[y] = True
                            size = hpush(ht, hx, size, tx_s[y], y)
        else:  # a send (p -> d2, sequential comm): then its consumers on d2 and the next send on its link
            if L is None:
                continue
            p = x // m
            q = lprev[x]
            pf = tx_f[q] if q >= 0 else 0.0
            s = en[p] if en[p] >= pf else pf
            pend[x] = False
            d = x - p * m
            dp = pl[p]
            f = s + lat[dp, d] + tx_b[x] / bw[dp, d]
            if f == tx_f[x]:
                tx_s[x] = s
                continue
            tx_s[x], tx_f[x] = s, f
            nx = -1
            y = lnext[x]
            if y >= 0 and not pend[y] and (not fz or stamp[y] == now):
                q = y // m
                c = en[q] if en[q] >= f else f
                if c > tx_s[y]:
                    pend[y] = True
                    size = hpush(ht, hx, size, tx_s[y], y)
        # p's value is on d at f (and, in parallel comm, on each other device later): the ops that may start
        # later (the next op on d first, when any)
        j0 = succ_ptr[p]
        for j in range(j0 - 1 if nx >= 0 else j0, succ_ptr[p + 1]):
            if j < j0:
                v = nx
            else:
                e = succ_edge[j]
                v = edst[e]
                dv = pl[v]
                if L is None:
                    if dv < 0:
                        continue
                    a = f if dv == d else f + lat[d, dv] + ebytes[e] / bw[d, dv]
                else:  # from other devices by sends
                    if dv != d:
                        continue
                    a = f
                if a <= rd[v]:
                    continue
                rd[v] = a
            if not pending[v]:  # queued when its start would grow
                pv = dprev[v]
                c = en[pv] if pv >= 0 and en[pv] > rd[v] else rd[v]
                if c > st[v]:
                    pending[v] = True
                    size = hpush(ht, hx, size, st[v], -1 - v)
    S.cnt[RETIMED] += retimed
    return moved_any


@njit(borrow=True)
def _replay(I, S, L):
    """``ScheduleState._replay``: every committed op (and in sequential comm, ``L`` not None, every send)
    timed again from scratch in dependency order, the same recurrences, hence the simulator's times
    (an op starts when the previous op on its device ended and its inputs are there; a send when its
    producer ended and the send before it on its link arrived); every device's gaps stale."""
    m = I.lat.shape[0]
    pl, st, en, rd = S.placement, S.start, S.end, S.ready
    n = len(pl)
    left = S.left  # set below for every committed op, the only ones read
    if L is None:
        queue = S.heap_x  # items (ops -1 - o, sends k) in an order where each comes after what it needs
    else:
        queue = L.heap_x
        tx_s, tx_f, tx_b, lprev, lnext, has = L.tx_s, L.tx_f, L.tx_b, L.lprev, L.lnext, L.has
        tleft = L.tleft  # set below for every send, the only ones read
    qn = 0
    for o in range(n):
        if pl[o] < 0:
            continue
        # every predecessor of a committed op is committed
        c = (1 if S.dprev[o] >= 0 else 0) + I.pred_ptr[o + 1] - I.pred_ptr[o]
        left[o] = c
        rd[o] = 0.0
        if c == 0:
            qn = enqueue(queue, qn, -1 - o)
        if L is not None:
            for d2 in range(m):
                y = o * m + d2
                if has[y]:
                    tleft[y] = 1 + (1 if lprev[y] >= 0 else 0)
    qi = 0
    timed = 0
    while qi < qn:
        x = queue[qi]
        qi += 1
        if x < 0:
            p = -1 - x
            d = pl[p]
            pv = S.dprev[p]
            s = en[pv] if pv >= 0 and en[pv] > rd[p] else rd[p]
            f = s + I.dur[p, d]
            st[p], en[p] = s, f
            timed += 1
            nx = S.dnext[p]
            if nx >= 0:
                qn = release_as(left, nx, -1 - nx, queue, qn)
            if L is not None:
                for d2 in range(m):
                    y = p * m + d2
                    if has[y]:
                        qn = release(tleft, y, queue, qn)
        else:
            if L is None:
                continue
            p = x // m
            d2 = x - p * m
            dp = pl[p]
            q = lprev[x]
            pf = tx_f[q] if q >= 0 else 0.0
            s = en[p] if en[p] >= pf else pf
            f = s + I.lat[dp, d2] + tx_b[x] / I.bw[dp, d2]
            tx_s[x], tx_f[x] = s, f
            y = lnext[x]
            if y >= 0:
                qn = release(tleft, y, queue, qn)
            d = d2  # p's value is on d2 at f
        for j in range(I.succ_ptr[p], I.succ_ptr[p + 1]):  # p's consumers: their input is there at a
            e = I.succ_edge[j]
            v = I.edst[e]
            dv = pl[v]
            if L is None:
                if dv < 0:
                    continue
                a = f if dv == d else f + I.lat[d, dv] + I.ebytes[e] / I.bw[d, dv]
            else:  # from other devices by sends
                if dv != d:
                    continue
                a = f
            if a > rd[v]:
                rd[v] = a
            qn = release_as(left, v, -1 - v, queue, qn)
    if timed < S.cnt[N_PLACED]:
        raise ValueError("ScheduleState: the device orders and the graph form a cycle")
    S.cnt[REPLAYS] += 1
    S.stale[:] = -_INF


@njit
def commit(I, S, o, d, start, has_start, insertion):
    """``ScheduleState.commit(o, d, start if has_start else None, insertion)``: returns o's start."""
    ready = data_ready(I, S, o, d)
    return commit_at(I, S, o, d, ready, start if has_start else est_at(I, S, o, d, ready, insertion), insertion)


@njit(inline="always")
def link_in(I, S, o, d, t, insertion):
    """Op o joins device d's order where a start asked for at ``t`` puts it (at the end; with insertion
    before the first op starting after t, behind the zero-time ops at t), placed there: returns the ops
    before and after it on d (-1: none). Both comm modes' commit."""
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
    return pv, nx


@njit(inline="always")
def time_in(I, S, L, o, d, pv, nx, ready):
    """Op o, just linked in after pv and before nx on d, timed with its inputs there at ``ready``; when
    it now ends after nx starts, nx and what follows are re-timed (:func:`_retime`; ``L`` as there).
    True when an op other than o moved."""
    st, en = S.start, S.end
    S.ready[o] = ready
    st[o] = en[pv] if pv >= 0 and en[pv] > ready else ready
    en[o] = st[o] + I.dur[o, d]
    if nx >= 0 and en[o] > st[nx]:
        if L is None:
            S.heap_x[0] = -1 - nx
        else:
            L.heap_x[0] = -1 - nx
        return _retime(I, S, L, 1, o)
    return False


@njit(inline="always")
def settle(S, o, d, moved, insertion):
    """After o's commit on d: every device's gaps stale from the earliest start an op the commit moved
    had (``S.moved``, when ``moved``); d's gaps given o's slot (with insertion, when they are up to
    date) or stale from o's start. Returns o's start."""
    stale = S.stale
    if moved:
        for dd in range(len(stale)):
            if S.moved[dd] < stale[dd]:
                stale[dd] = S.moved[dd]
            S.moved[dd] = _INF
    st = S.start[o]
    if stale[d] == _INF and insertion:
        if not _gap_add(S, d, st, S.end[o]):
            stale[d] = -_INF
    elif st < stale[d]:
        stale[d] = st
    return st


@njit(borrow=True)
def commit_at(I, S, o, d, ready, t, insertion):
    """``commit`` with o's inputs on d at ``ready`` (``data_ready``) and its start asked for at ``t``
    (given, or the est the caller just computed)."""
    pv, nx = link_in(I, S, o, d, t, insertion)
    return settle(S, o, d, time_in(I, S, None, o, d, pv, nx, ready), insertion)


class StateView:
    """The reference's read side of a compiled schedule ``self.S`` (both comm modes): ``placement``,
    ``start`` / ``end`` (lists), ``makespan``, ``retimed``, ``replays``, ``order()``."""

    S: State

    @property
    def placement(self) -> list[int]:
        return self.S.placement.tolist()

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

    @property
    def replays(self) -> int:
        return int(self.S.cnt[REPLAYS])

    def order(self) -> list[list[int]]:
        return order_lists(self.S)


class ArrayState(StateView):
    """A finished compiled schedule with the reference's read side (:class:`StateView`; ``placement``
    built on first use)."""

    def __init__(self, I: Inst, S: State) -> None:
        self.I, self.S = I, S

    @property
    def placement(self) -> list[int]:
        got = self.__dict__.get("_pl")
        if got is None:
            got = self.__dict__["_pl"] = self.S.placement.tolist()
        return got
