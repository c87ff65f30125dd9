""":class:`dplace.schedule.state.ScheduleState` for sequential comm on arrays, compiled: ``data_ready`` /
``est`` / ``commit`` with the sends that wait for each other on a link, and the incremental re-timing
of a link's queue (``ScheduleState._retime``) and its replay, beside :mod:`dplace.kernels.state` (the
device orders, idle gaps and placement rules are that module's, shared); the link state and
``data_ready`` are :mod:`dplace.kernels.seqlinks`' (re-exported here).

Deliberate pair, kept apart on a measurement: ``_retime`` / ``_replay`` here and in
:mod:`dplace.kernels.state` (parallel comm) are the same settling loop, this one with sends as heap
items beside the ops (a version sharing the op push and the consumer/replay steps gave the same
schedules but was slower). The heap is :mod:`dplace.kernels.heap`'s. ``_retime`` takes every array out
of the tuples once, before its loop, and pushes inline: an array read from a tuple, or passed to an
inlined helper, inside the loop costs an atomic reference-count increment and decrement per array per
step (with ``_rebuild``'s per-op ``_gap_add(S, ...)`` calls, they were half of HEFT's CPU time on the
36k-op sequential Transformer: 33.8 -> 8.6 CPU s, the same schedule). Each is tested op by op against the one
reference, :class:`dplace.schedule.state.ScheduleState` (``tests/kernels/``), and against each other
where they must agree (instant transfers: ``test_seq_kernels.py::test_seq_state_equals_parallel_state_without_queues``).

Results are those of the reference, float for float and in the same order: the same recurrences in the
same operation order (a send's start = max(producer ended, previous send on the link arrived), its
arrival = start + latency + bytes / bandwidth; an op's start = max(previous op on its device ended, last
input arrived)); the same items re-timed in the same (time, item) heap order with the same budget
before a replay, so the same ``retimed`` and ``replays`` counts and the same stale gaps
(tests compare op by op, both on the schedule after each commit and on whole list schedules).

Layout: the link state ``Links`` (:func:`dplace.kernels.seqlinks.new_links`) beside the parallel ``State``::

    pos[o]                 labels increasing along each device's order (relabelled when too close)
    tx_s, tx_f, tx_b[k]    send k = p * m + d2: start, arrival, bytes (tx_b < 0: no send)
    lprev, lnext[k]        the sends before / after k on its link (-1: none)
    lk[l, :ln[l]]          link l = d1 * m + d2: its producers in send order (d1's execution order)
    need_b[p], plist       scratch of data_ready (bytes needed per producer, the producers listed)
    harm[0]                after data_ready: the most a committed send on o's links would arrive later
                           if o were committed there (the link-aware schedulers' penalty)
    pend[k]                send k queued for re-timing; heap_t / heap_x: the re-timing heap
                           (:mod:`dplace.kernels.heap`; ops as -1 - o, sends as k >= 0), cnt[0] the
                           number of sends

Functions (compiled)::

    data_ready(I, S, L, o, d) -> float
    est(I, S, L, o, d, insertion) -> float
    commit(I, S, L, o, d, start, has_start, insertion) -> float
    commit_at(I, S, L, o, d, t, insertion) -> float     # commit with its start asked for at t
"""
from __future__ import annotations

import numpy as np

from . import njit
from .heap import heapify, hpop, hpush
from .seqlinks import Links, _bisect_pos, data_ready, fits, new_links  # noqa: F401 - re-exported
from .state import (_INF, BUDGET, N_PLACED, REPLAYS, RETIMED, _first_from, _gap_add, _rebuild,
                    _seq_insert, device_free, earliest)

@njit
def est(I, S, L, o, d, insertion):
    ready = data_ready(I, S, L, o, d)
    if not insertion:
        free = device_free(S, d)
        return ready if ready > free else free
    if S.stale[d] < _INF:
        _rebuild(S, d)
    return earliest(S, d, ready, I.dur[o, d])


# ----------------------------------------------------------------------------------- commit


@njit
def _ready_of(I, S, L, o):
    m = I.lat.shape[0]
    pl, en = S.placement, S.end
    d = pl[o]
    r = 0.0
    for j in range(I.pred_ptr[o], I.pred_ptr[o + 1]):
        e = I.pred_edge[j]
        p = I.esrc[e]
        a = en[p] if pl[p] == d else L.tx_f[p * m + d]
        if a > r:
            r = a
    return r


@njit
def commit(I, S, L, o, d, start, has_start, insertion):
    """``ScheduleState.commit(o, d, start if has_start else None, insertion)``: returns o's start."""
    ready = data_ready(I, S, L, o, d)
    if has_start:
        t = start
    elif insertion:
        if S.stale[d] < _INF:
            _rebuild(S, d)
        t = earliest(S, d, ready, I.dur[o, d])
    else:
        t = device_free(S, d)
        t = ready if ready > t else t
    return commit_at(I, S, L, o, d, ready, t, insertion)


@njit
def commit_at(I, S, L, o, d, ready, t, insertion):
    """``commit`` with o's inputs on d at ``ready`` (``data_ready``) and its start asked for at ``t``."""
    m = I.lat.shape[0]
    if S.placement[o] >= 0:
        raise ValueError("ScheduleState: op committed twice")
    st, en, pos = S.start, S.end, L.pos
    pv = S.tail[d]
    if insertion and pv >= 0 and t < en[pv]:
        nx = _first_from(S, d, t, True)
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
    lo = pos[pv] if pv >= 0 else 0.0
    pos[o] = lo + 1.0 if nx < 0 else (lo + pos[nx]) / 2
    if nx >= 0 and not (lo < pos[o] and pos[o] < pos[nx]):  # too close: number the device's ops again
        x = S.blk[S.dbl[d, 0], 0]
        i = 1.0
        while x >= 0:
            pos[x] = i
            i += 1.0
            x = S.dnext[x]
    pl = S.placement
    pl[o] = d
    S.mem_used[d] += I.mem[o]
    S.cnt[N_PLACED] += 1
    st[o] = en[o] = en[pv] if pv >= 0 else 0.0
    # new or longer sends of o's inputs from other devices (scratch: need_b / plist)
    nb, ps = L.need_b, L.plist
    k = 0
    for j in range(I.pred_ptr[o], I.pred_ptr[o + 1]):
        e = I.pred_edge[j]
        p = I.esrc[e]
        if pl[p] != d:
            if nb[p] < 0.0:
                ps[k] = p
                k += 1
            if I.ebytes[e] > nb[p]:
                nb[p] = I.ebytes[e]
    size = 0
    for j in range(k):
        p = ps[j]
        b = nb[p]
        nb[p] = -1.0
        y = p * m + d
        if L.tx_b[y] < 0.0:  # a new send: where the one before it on the link arrives, below its timing
            l = pl[p] * m + d
            i = _bisect_pos(L, l, pos[p])
            n_l = L.ln[l]
            for a in range(n_l, i, -1):
                L.lk[l, a] = L.lk[l, a - 1]
            L.lk[l, i] = p
            L.ln[l] = n_l + 1
            q = L.lk[l, i - 1] * m + d if i else -1
            r = L.lk[l, i + 1] * m + d if i + 1 < n_l + 1 else -1
            L.lprev[y], L.lnext[y] = q, r
            if q >= 0:
                L.lnext[q] = y
            if r >= 0:
                L.lprev[r] = y
            f0 = L.tx_f[q] if q >= 0 else 0.0
            L.tx_s[y], L.tx_f[y], L.tx_b[y] = f0, f0, b
            L.cnt[0] += 1
            L.heap_x[size] = y
            size += 1
        elif b > L.tx_b[y]:
            L.tx_b[y] = b
            L.heap_x[size] = y
            size += 1
    moved_any = False
    if size:  # new or longer sends: they may delay committed sends and ops
        S.ready[o] = _ready_of(I, S, L, o)
        L.heap_x[size] = -1 - o
        size += 1
        moved_any = _retime(I, S, L, size, o)
    else:
        S.ready[o] = ready
        st[o] = en[pv] if pv >= 0 and en[pv] > ready else ready
        en[o] = st[o] + I.dur[o, d]
        if nx >= 0 and en[o] > st[nx]:
            L.heap_x[0] = -1 - nx
            moved_any = _retime(I, S, L, 1, o)
    stale = S.stale
    if moved_any:
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


@njit
def _retime(I, S, L, size, fresh):
    """``ScheduleState._retime`` on the items heap_x[:size] (sends k >= 0, ops -1 - o). True when some
    op other than ``fresh`` moved or everything was replayed (then S.moved holds, per device, the
    earliest start a moved op had, or every device is already stale). Every array is taken out of the
    tuples once, before the loop: an array read from a tuple inside it costs an atomic reference
    count increment and decrement each time (they were 20 % of HEFT's time on 36k ops)."""
    m = I.lat.shape[0]
    pl, st, en, rd, dprev, dnext = S.placement, S.start, S.end, S.ready, S.dprev, S.dnext
    pending, moved = S.pending, S.moved
    tx_s, tx_f, tx_b, lprev, lnext, pend = L.tx_s, L.tx_f, L.tx_b, L.lprev, L.lnext, L.pend
    ht, hx = L.heap_t, L.heap_x
    dur, lat, bw = I.dur, I.lat, I.bw
    succ_ptr, succ_edge, edst = I.succ_ptr, I.succ_edge, I.edst
    for i in range(size):
        x = hx[i]
        if x >= 0:
            q = lprev[x]
            pf = tx_f[q] if q >= 0 else 0.0
            ep = en[x // m]
            ht[i] = ep if ep >= pf else pf
            pend[x] = True
        else:
            v = -1 - x
            pv = dprev[v]
            r = rd[v]
            ht[i] = en[pv] if pv >= 0 and en[pv] > r else r
            pending[v] = True
    heapify(ht, hx, size)
    moved_any = False
    retimed = 0
    budget = S.cnt[BUDGET] * (S.cnt[N_PLACED] + L.cnt[0] + 250)
    while size > 0:
        budget -= 1
        if budget < 0:  # a long cascade: one replay of everything committed costs less
            for i in range(size):
                x = hx[i]
                if x >= 0:
                    pend[x] = False
                else:
                    pending[-1 - x] = False
            moved[:] = _INF
            S.cnt[RETIMED] += retimed
            _replay(I, S, L)
            return False
        t, x = ht[0], hx[0]
        size = hpop(ht, hx, size)
        if x >= 0:  # a send (p -> d2): then its consumers on d2 and the next send on its link
            p = x // m
            q = lprev[x]
            pf = tx_f[q] if q >= 0 else 0.0
            s = en[p] if en[p] >= pf else pf
            if s > t:
                size = hpush(ht, hx, size, s, x)
                continue
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
            if y >= 0 and not pend[y]:
                q = y // m
                c = en[q] if en[q] >= f else f
                if c > tx_s[y]:
                    pend[y] = True
                    size = hpush(ht, hx, size, c, y)
        else:  # an op: then the next op on its device, its sends and its consumers on its device
            p = -1 - x
            pv = dprev[p]
            s = en[pv] if pv >= 0 and en[pv] > rd[p] else rd[p]
            if s > t:
                size = hpush(ht, hx, size, s, x)
                continue
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
            for d2 in range(m):
                y = p * m + d2
                if tx_b[y] >= 0.0 and not pend[y]:
                    q = lprev[y]
                    pf = tx_f[q] if q >= 0 else 0.0
                    c = f if f >= pf else pf
                    if c > tx_s[y]:
                        pend[y] = True
                        size = hpush(ht, hx, size, c, y)
        # p's value on d is now f: the ops that may start later (the next op on d first, when any)
        j0 = succ_ptr[p]
        for j in range(j0 - 1 if nx >= 0 else j0, succ_ptr[p + 1]):
            if j < j0:
                v = nx
            else:
                v = edst[succ_edge[j]]
                if pl[v] != d or f <= rd[v]:
                    continue
                rd[v] = f
            if not pending[v]:  # queued when its start would grow
                pv = dprev[v]
                c = en[pv] if pv >= 0 and en[pv] > rd[v] else rd[v]
                if c > st[v]:
                    pending[v] = True
                    size = hpush(ht, hx, size, c, -1 - v)
    S.cnt[RETIMED] += retimed
    return moved_any


@njit
def _replay(I, S, L):
    """``ScheduleState._replay`` in sequential mode: every committed op and send timed again from
    scratch in dependency order (the same recurrences, hence the simulator's times), every device's
    gaps stale."""
    m = I.lat.shape[0]
    pl, st, en, rd = S.placement, S.start, S.end, S.ready
    tx_s, tx_f, tx_b, lprev, lnext = L.tx_s, L.tx_f, L.tx_b, L.lprev, L.lnext
    n = len(pl)
    left = np.zeros(n, dtype=np.int64)
    tleft = np.zeros(n * m, dtype=np.int64)
    queue = L.heap_x  # items (ops -1 - o, sends k) in an order where each comes after what it needs
    qn = 0
    for o in range(n):
        d = pl[o]
        if d < 0:
            continue
        c = 1 if S.dprev[o] >= 0 else 0
        c += I.pred_ptr[o + 1] - I.pred_ptr[o]
        left[o] = c
        rd[o] = 0.0
        if c == 0:
            queue[qn] = -1 - o
            qn += 1
        for d2 in range(m):
            y = o * m + d2
            if tx_b[y] >= 0.0:
                tleft[y] = 1 + (1 if lprev[y] >= 0 else 0)
    qi = 0
    while qi < qn:
        x = queue[qi]
        qi += 1
        if x >= 0:
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
                tleft[y] -= 1
                if tleft[y] == 0:
                    queue[qn] = y
                    qn += 1
            d = d2  # p's value is on d2 at f
        else:
            p = -1 - x
            d = pl[p]
            pv = S.dprev[p]
            s = en[pv] if pv >= 0 and en[pv] > rd[p] else rd[p]
            f = s + I.dur[p, d]
            st[p], en[p] = s, f
            nx = S.dnext[p]
            if nx >= 0:
                left[nx] -= 1
                if left[nx] == 0:
                    queue[qn] = -1 - nx
                    qn += 1
            for d2 in range(m):
                y = p * m + d2
                if tx_b[y] >= 0.0:
                    tleft[y] -= 1
                    if tleft[y] == 0:
                        queue[qn] = y
                        qn += 1
        for j in range(I.succ_ptr[p], I.succ_ptr[p + 1]):  # p's consumers on d: their input is there at f
            v = I.edst[I.succ_edge[j]]
            if pl[v] != d:
                continue
            if f > rd[v]:
                rd[v] = f
            left[v] -= 1
            if left[v] == 0:
                queue[qn] = -1 - v
                qn += 1
    S.cnt[REPLAYS] += 1
    S.stale[:] = -_INF


class ArraySeqState:
    """The compiled sequential state behind :class:`dplace.schedule.state.ScheduleState`'s API (``data_ready``,
    ``est``, ``eft``, ``commit``, ``device_free``, ``fits``, ``placement``, ``order()``, ``makespan``), for
    list schedulers whose loop stays in Python (m-ETF / m-SCT): each call runs compiled."""

    def __init__(self, inst) -> None:
        from . import inst_arrays
        from .state import inst_tuple, new_state

        a = inst_arrays(inst)
        self.inst = inst
        self.I, self.S, self.L = inst_tuple(a), new_state(a.n, a.m), new_links(a.n, a.m)
        self._dur = a.dur

    def data_ready(self, o: int, d: int, insertion: bool = False) -> float:
        return data_ready(self.I, self.S, self.L, o, d)

    def est(self, o: int, d: int, insertion: bool = False) -> float:
        return est(self.I, self.S, self.L, o, d, insertion)

    def eft(self, o: int, d: int, insertion: bool = False) -> float:
        return est(self.I, self.S, self.L, o, d, insertion) + self._dur[o, d]

    def commit(self, o: int, d: int, start: float | None = None, insertion: bool = False) -> float:
        return commit(self.I, self.S, self.L, o, d, 0.0 if start is None else float(start), start is not None,
                      insertion)

    def device_free(self, d: int) -> float:
        k = int(self.S.tail[d])
        return float(self.S.end[k]) if k >= 0 else 0.0

    def fits(self, o: int, d: int, extra_bytes: int = 0) -> bool:
        return int(self.S.mem_used[d]) + self.inst.mem[o] + extra_bytes <= self.inst.capacity[d]

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
        return float(self.S.end.max()) if len(self.S.end) else 0.0

    @property
    def retimed(self) -> int:
        return int(self.S.cnt[RETIMED])

    @property
    def replays(self) -> int:
        return int(self.S.cnt[REPLAYS])

    def order(self) -> list[list[int]]:
        from .state import order_lists

        return order_lists(self.S)
