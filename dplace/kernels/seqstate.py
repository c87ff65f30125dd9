""":class:`dplace.schedule.state.ScheduleState` for sequential comm on arrays, compiled: ``data_ready`` /
``est`` / ``commit`` with the sends that wait for each other on a link, beside
:mod:`dplace.kernels.state` (the device orders, idle gaps, placement rules and the re-timing of what a
commit delays are that module's, shared); the link state and ``data_ready`` are
:mod:`dplace.kernels.seqlinks`' (re-exported here).

What both comm modes do alike is :mod:`dplace.kernels.state`'s, called from here: the device order
(``link_in``), an op's times (``time_in``), the gaps' staleness (``settle``), ``est_at``, and the settling
loop and its replay (``_retime`` / ``_replay``: ``L`` None compiles them for parallel comm, this module
passes its links, whose sends are heap items beside the ops). What is this module's: the sends a commit
adds or lengthens, and their place in their link's queue. Each function is tested op by op against the
one reference, :class:`dplace.schedule.state.ScheduleState` (``tests/kernels/``), and the two modes against
each other where they must agree (instant transfers:
``test_seq_kernels.py::test_seq_state_equals_parallel_state_without_queues``).

Results are those of the reference, float for float and in the same order: the same recurrences in the
same operation order (a send's start = max(producer ended, previous send on the link arrived), its
arrival = start + latency + bytes / bandwidth; an op's start = max(previous op on its device ended, last
input arrived)); the same items re-timed in the same (time, item) heap order with the same budget
before a replay, so the same ``retimed`` and ``replays`` counts and the same stale gaps
(tests compare op by op, both on the schedule after each commit and on whole list schedules).

Layout: the link state ``Links`` (:func:`dplace.kernels.seqlinks.new_links`) beside the parallel ``State``::

    pos[o]                 labels increasing along each device's order (relabelled when too close)
    tx_s, tx_f, tx_b[k]    send k = p * m + d2: start, arrival, bytes (has[k]: whether it exists)
    lprev, lnext[k]        the sends before / after k on its link (-1: none)
                           (these six and ``pend`` are columns of one 64-byte row per send, all
                           zero at first: the re-timing reads them together; HEFT's loop on the
                           36k-op sequential Transformer 5.4-5.9 -> 4.6-5.7 CPU s, old and new
                           alternated at load ~6)
    lk[l, :ln[l]]          link l = d1 * m + d2: its producers in send order (d1's execution order)
    need_b[p], plist       scratch of data_ready (bytes needed per producer, the producers listed)
    harm[0]                after data_ready: the most a committed send on o's links would arrive later
                           if o were committed there (the link-aware schedulers' penalty)
    dmask[p]               bit d2 set: send p * m + d2 exists (every bit when m >= 63): the re-timing
                           reads only the rows of sends that exist
    pend[k]                send k queued for re-timing; heap_t / heap_x: the re-timing heap
                           (:mod:`dplace.kernels.heap`; ops as -1 - o, sends as k >= 0), cnt[0] the
                           number of sends
    stamp[k]               the commit that made or lengthened send k (column 7 of its row)
    pol                    the link policy (:func:`dplace.kernels.seqlinks.frozen`): ops re-timed before
                           the links freeze (-1: never), commits between replays, commits since the
                           last replay, the number of the commit under way
    tleft[k]               scratch of the exact replay (``dplace.kernels.state._replay``: a borrowing kernel
                           allocates nothing)

Functions (compiled)::

    data_ready(I, S, L, o, d) -> float
    est(I, S, L, o, d, insertion) -> float
    commit(I, S, L, o, d, start, has_start, insertion) -> float
    commit_at(I, S, L, o, d, t, insertion) -> float     # commit with its start asked for at t
"""
from __future__ import annotations


from . import njit
from .orders import N_PLACED
from .seqlinks import (COMMIT_NO, REPLAY_EVERY, SINCE_REPLAY, Links, _bisect_pos, data_ready, fits,  # noqa: F401
                       frozen, new_links, set_link_policy)
from .state import StateView, _replay, _retime, est_at, link_in, settle, time_in

@njit(borrow=True)
def est(I, S, L, o, d, insertion):
    return est_at(I, S, o, d, data_ready(I, S, L, o, d), insertion)


# ----------------------------------------------------------------------------------- commit


@njit(borrow=True)
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


@njit(borrow=True)
def commit(I, S, L, o, d, start, has_start, insertion):
    """``ScheduleState.commit(o, d, start if has_start else None, insertion)``: returns o's start."""
    ready = data_ready(I, S, L, o, d)
    return commit_at(I, S, L, o, d, ready, start if has_start else est_at(I, S, o, d, ready, insertion), insertion)


@njit(borrow=True)
def commit_at(I, S, L, o, d, ready, t, insertion):
    """``commit`` with o's inputs on d at ``ready`` (``data_ready``) and its start asked for at ``t``."""
    m = I.lat.shape[0]
    st, en, pos = S.start, S.end, L.pos
    pv, nx = link_in(I, S, o, d, t, insertion)
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
    st[o] = en[o] = en[pv] if pv >= 0 else 0.0
    pol = L.pol
    now = pol[COMMIT_NO] + 1
    pol[COMMIT_NO] = now
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
        if not L.has[y]:  # a new send: where the one before it on the link arrives, below its timing
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
            L.has[y] = 1
            L.dmask[p] |= (1 << d) if m < 63 else -1
            L.cnt[0] += 1
            L.stamp[y] = now
            L.heap_x[size] = y
            size += 1
        elif b > L.tx_b[y]:
            L.tx_b[y] = b
            L.stamp[y] = now
            L.heap_x[size] = y
            size += 1
    if size:  # new or longer sends: they may delay committed sends and ops
        S.ready[o] = _ready_of(I, S, L, o)
        L.heap_x[size] = -1 - o
        moved = _retime(I, S, L, size + 1, o)
    else:
        moved = time_in(I, S, L, o, d, pv, nx, ready)
    s = settle(S, o, d, moved, insertion)
    if frozen(S, L):
        pol[SINCE_REPLAY] += 1
        if pol[SINCE_REPLAY] >= pol[REPLAY_EVERY] > 0 or S.cnt[N_PLACED] == len(pl):
            pol[SINCE_REPLAY] = 0
            _replay(I, S, L)
            s = st[o]
    return s


class ArraySeqState(StateView):
    """The compiled sequential state behind :class:`dplace.schedule.state.ScheduleState`'s API (``data_ready``,
    ``est``, ``eft``, ``commit``, ``device_free``, ``fits``; the read side, ``placement``, ``order()``,
    ``makespan``, is :class:`dplace.kernels.state.StateView`'s), for list schedulers whose loop stays in
    Python (m-ETF / m-SCT): each call runs compiled."""

    def __init__(self, inst, link_moves: float | None = None, link_replays: int | None = None) -> None:
        from . import inst_arrays
        from .state import inst_tuple, new_state

        a = inst_arrays(inst)
        self.inst = inst
        self.I, self.S = inst_tuple(a), new_state(a.n, a.m)
        self.L = set_link_policy(new_links(a.n, a.m), a.n, link_moves, link_replays)
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

    def frozen(self) -> bool:
        """:meth:`dplace.schedule.state.ScheduleState.frozen`."""
        return bool(frozen(self.S, self.L))

    def device_free(self, d: int) -> float:
        k = int(self.S.tail[d])
        return float(self.S.end[k]) if k >= 0 else 0.0

    def fits(self, o: int, d: int, extra_bytes: int = 0) -> bool:
        return int(self.S.mem_used[d]) + self.inst.mem[o] + extra_bytes <= self.inst.capacity[d]
