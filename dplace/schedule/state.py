"""The incremental schedule state of list schedulers (:class:`ScheduleState`), timed by the simulator's own
rules (:mod:`.simulate`): the committed ops are always their simulation. Sequential comm from 2,000 ops runs
on the compiled twin :class:`dplace.kernels.seqstate.ArraySeqState` (same API; tests compare them op by op).
Parallel comm: the compiled twin is :mod:`dplace.kernels.state` (tests/kernels/test_list_kernels.py)."""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right

from .. import kernels
from ..errors import InvalidInstanceError
from ..instance.model import Instance
from .events import run_events
from .timeline import Timeline

__all__ = ["ScheduleState"]

_INF = float("inf")


class ScheduleState:
    """Partial schedule for list schedulers, timed by the simulator's own rules: query
    ``est``/``eft`` of (op, device), then ``commit``.

    All predecessors of an op must be committed before it is queried. ``insertion=True`` lets an op
    go into an idle gap of the device (HEFT's insertion policy); otherwise it goes after the last op.
    Memory is tracked per device (``fits``/``mem_used``) so memory-aware schedulers can skip devices.

    The committed ops are timed exactly as ``simulate(inst, placement, order())`` would time them if the
    graph held only those ops (in sequential mode: until the links freeze, :meth:`frozen`, between its
    replays, and always once every op is committed): one op at a time per device in ``order()``; in sequential
    mode one send per (producer, destination device) with the largest ``bytes`` among the committed
    consumers there, sent when the producer finishes, one at a time per directed link (d1, d2) in the
    order the producers finish, which is d1's execution order. Once every op is committed, ``makespan``
    is the simulated makespan. A consumer committed late on a new device adds a send that goes, in that
    order, before the sends of producers that finished later, and a consumer with a larger tensor
    lengthens a send: both can delay sends and ops already committed. ``commit`` re-times them
    (``retimed`` counts the ops moved so), so the state stays the simulation of what is committed
    (past ``LINK_MOVES`` x n moves, only a replay re-times the sends a new send would delay: :meth:`frozen`);
    ``est`` accounts for the sends the op adds on its own links but not for ops it would delay that
    feed it in turn (then its committed start is later than the ``est`` it was chosen by). Parallel
    mode never re-times.

    The instance's ``transfer_cpu`` (receive cost) is not modelled here: with it non-zero the state is
    the simulation of the instance without it (list schedulers choose by that; ``simulate`` judges).
    """

    def __init__(self, inst: Instance, link_moves: float | None = None, link_replays: int | None = None) -> None:
        self.inst = inst
        n, m = inst.n, inst.m
        self.placement = [-1] * n
        self.start = [0.0] * n
        self.end = [0.0] * n
        self.mem_used = [0] * m
        self.n_placed = 0
        self.retimed = 0  # times a commit moved an op committed before (sequential mode)
        self.replays = 0  # commits whose knock-on re-timing ran as one replay of everything committed
        self._seq = inst.comm == "sequential"
        self._dseq: list[list[int]] = [[] for _ in range(m)]  # committed ops per device, in execution order
        self._pos = [0.0] * n  # increasing along each device's order (labels, relabelled when too close)
        self._dprev = [-1] * n
        self._dnext = [-1] * n
        self._timed = [False] * n
        self._dev = [Timeline() for _ in range(m)]  # idle gaps, rebuilt from _dseq when stale
        self._stale = [_INF] * m  # the gaps on device d are right before this time (_INF: all of them)
        self._links: dict[tuple[int, int], list[int]] = {}  # producers sending on link, in send order
        self._tx: dict[int, list[float]] = {}  # p * m + dst -> [send start, arrival, bytes]
        self._dests: list[list[int]] = [[] for _ in range(n)]  # devices producer p sends to
        self._lprev: dict[int, int] = {}  # send -> the send before it on its link (-1: first)
        self._lnext: dict[int, int] = {}  # send -> the send after it on its link (-1: last)
        self._ready = [0.0] * n  # committed op: when its last input arrived (max over its inputs)
        self.harm = 0.0  # set by data_ready(..., harm=True)
        # the link policy (:meth:`frozen`; dplace.kernels.seqlinks.set_link_policy, the compiled twin's)
        moves = kernels.LINK_MOVES if link_moves is None else link_moves
        reps = kernels.LINK_REPLAYS if link_replays is None else link_replays
        self._freeze_after = -1 if moves < 0 or not self._seq else int(moves * n)
        self._replay_every = max(1, n // max(1, reps)) if reps > 0 else 0
        self._since_replay = 0
        self._commit_no = 0
        self._stamp: dict[int, int] = {}  # send -> the commit that made or lengthened it

    def frozen(self) -> bool:
        """Whether the links are frozen (sequential mode): once the commits have re-timed
        ``LINK_MOVES`` x n ops (``dplace.kernels.LINK_MOVES``), a commit's new or longer sends are timed
        behind the sends before them on their links, but the sends behind them keep their times (the
        simulator's rule delays them, and what waits for them: the cascades that make exact list scheduling
        cost ~n^2 on large graphs); ``data_ready`` walks the links alike. The state is then replayed exactly
        every n / ``LINK_REPLAYS`` commits and after the last, so a list schedule's final state is its
        simulation again."""
        return self._freeze_after >= 0 and self.retimed >= self._freeze_after

    # -- queries
    def fits(self, o: int, d: int, extra_bytes: int = 0) -> bool:
        return self.mem_used[d] + self.inst.mem[o] + extra_bytes <= self.inst.capacity[d]

    def device_free(self, d: int) -> float:
        seq = self._dseq[d]
        return self.end[seq[-1]] if seq else 0.0

    def _timeline(self, d: int) -> Timeline:
        t0 = self._stale[d]
        tl = self._dev[d]
        if t0 < _INF:  # bring the gaps from t0 on up to date: add the device's ops from there again
            seq, S, E = self._dseq[d], self.start, self.end
            k = bisect_left(seq, t0, key=S.__getitem__)
            tl.truncate(t0, E[seq[k - 1]] if k else 0.0)
            for o in seq[k:]:
                tl.add(S[o], E[o])
            self._stale[d] = _INF
        return tl

    def _link_arrival(self, dp: int, d: int, need: dict[int, float], harm: bool = False) -> float:
        """Latest arrival on ``d`` of the sends of producers ``need`` (p -> bytes) on link (dp, d) if
        they were sent with those bytes (new sends join the link in producer order): a walk along the
        link from the first of them, re-timing the sends in between while they move."""
        inst, m, end, pos = self.inst, self.inst.m, self.end, self._pos
        lat, bw = inst.lat[dp][d], inst.bw[dp][d]
        lst = self._links.get((dp, d), [])
        txs = self._tx
        ps = sorted(need, key=pos.__getitem__)
        i = bisect_left(lst, pos[ps[0]], key=pos.__getitem__)
        prev_f = txs[lst[i - 1] * m + d][1] if i else 0.0
        moved = False
        out = 0.0
        fz = self.frozen()
        for p in ps:
            if fz:  # frozen links: the sends in between keep their times
                moved = False
            while i < len(lst) and pos[lst[i]] < pos[p]:  # sends of other producers before p
                if moved:
                    prev_f, moved = self._retime_send(txs[lst[i] * m + d], end[lst[i]], prev_f, lat, bw)
                else:
                    prev_f = txs[lst[i] * m + d][1]
                i += 1
            tx = txs.get(p * m + d)
            if tx is not None:
                i += 1  # lst[i] is p
            b = need[p]
            if tx is None or moved or b != tx[2]:
                s = end[p] if end[p] >= prev_f else prev_f
                f = s + lat + b / bw
                if tx is not None and f - tx[1] > self.harm:
                    self.harm = f - tx[1]  # (a send that others wait for: its consumers too)
                moved = True
            else:
                f = tx[1]
            prev_f = f
            if f > out:
                out = f
        if harm:  # the sends after the last of them, while they move
            while moved and i < len(lst):
                prev_f, moved = self._retime_send(txs[lst[i] * m + d], end[lst[i]], prev_f, lat, bw)
                i += 1
        return out

    def _retime_send(self, tx, ready: float, prev_f: float, lat: float, bw: float) -> tuple[float, bool]:
        """A committed send ``tx`` (its producer ends at ``ready``) re-timed behind a send that now ends
        at ``prev_f``: (its new finish, whether it moved); ``self.harm`` keeps the largest delay."""
        s = ready if ready >= prev_f else prev_f
        f = s + lat + tx[2] / bw
        if f - tx[1] > self.harm:
            self.harm = f - tx[1]
        return f, f != tx[1]

    def data_ready(self, o: int, d: int, insertion: bool = False, harm: bool = False) -> float:
        """Time all inputs of ``o`` would be on device ``d`` if ``o`` were committed there. With
        ``harm`` (sequential mode), ``self.harm`` gets the most a committed send on ``o``'s links would
        arrive later if ``o`` were committed there (0 when none moves): the link-aware schedulers'
        penalty."""
        inst = self.inst
        self.harm = 0.0
        t = 0.0
        pl, end, m = self.placement, self.end, inst.m
        seq = self._seq
        groups: dict[int, dict[int, float]] | None = None
        for e in inst.pred[o]:
            p = inst.esrc[e]
            dp = pl[p]
            if dp < 0:
                raise InvalidInstanceError(f"ScheduleState: predecessor {inst.ops[p].id!r} of {inst.ops[o].id!r} is not committed")
            if dp == d:
                a = end[p]
            elif seq:
                if groups is None:
                    groups = {}
                need = groups.setdefault(dp, {})
                if inst.ebytes[e] > need.get(p, -1.0):
                    need[p] = inst.ebytes[e]
                continue
            else:
                a = end[p] + inst.lat[dp][d] + inst.ebytes[e] / inst.bw[dp][d]
            if a > t:
                t = a
        if groups:
            txs = self._tx
            for dp, need in groups.items():
                grows = False
                for p, b in need.items():
                    tx = txs.get(p * m + d)
                    if tx is None or b > tx[2]:
                        grows = True
                    else:
                        need[p] = tx[2]
                if grows:
                    a = self._link_arrival(dp, d, need, harm)
                else:
                    a = max(txs[p * m + d][1] for p in need)
                if a > t:
                    t = a
        return t

    def est(self, o: int, d: int, insertion: bool = False) -> float:
        """Earliest start of ``o`` on ``d`` given the committed ops."""
        ready = self.data_ready(o, d, insertion)
        if not insertion:
            free = self.device_free(d)
            return ready if ready > free else free
        tl = self._timeline(d)
        return tl.earliest(ready, self.inst.dur[o][d], True)

    def eft(self, o: int, d: int, insertion: bool = False) -> float:
        return self.est(o, d, insertion) + self.inst.dur[o][d]

    # -- updates
    def commit(self, o: int, d: int, start: float | None = None, insertion: bool = False) -> float:
        """Commit ``o`` to ``d``: after the device's last op, or with ``insertion`` into the idle gap
        at ``start`` (default: its earliest start). Returns its start, which the simulator's rules
        decide (``start`` only picks the place in the device's order); may re-time committed ops."""
        inst = self.inst
        m = inst.m
        if self.placement[o] >= 0:
            raise InvalidInstanceError(f"ScheduleState: op {inst.ops[o].id!r} committed twice")
        ready = self.data_ready(o, d, insertion)
        if start is not None:
            t = float(start)
        elif insertion:
            t = self._timeline(d).earliest(ready, inst.dur[o][d], True)
        else:
            t = self.device_free(d)
            t = ready if ready > t else t
        seq = self._dseq[d]
        S, E, pos = self.start, self.end, self._pos
        k = len(seq)
        if insertion and seq and t < E[seq[-1]]:
            k = bisect_right(seq, t, key=S.__getitem__)
            while k > 0 and S[seq[k - 1]] == t and E[seq[k - 1]] > t:  # a zero-time op goes first
                k -= 1
        seq.insert(k, o)
        pv = seq[k - 1] if k else -1
        nx = seq[k + 1] if k + 1 < len(seq) else -1
        self._dprev[o], self._dnext[o] = pv, nx
        if pv >= 0:
            self._dnext[pv] = o
        if nx >= 0:
            self._dprev[nx] = o
        if self._seq:  # labels that order the device's ops, for the links' send order
            lo = pos[pv] if pv >= 0 else 0.0
            pos[o] = lo + 1.0 if nx < 0 else (lo + pos[nx]) / 2
            if nx >= 0 and not lo < pos[o] < pos[nx]:  # too close: number the device's ops again
                for i, x in enumerate(seq):
                    pos[x] = i + 1.0
        self.placement[o] = d
        self._timed[o] = True
        self.mem_used[d] += inst.mem[o]
        self.n_placed += 1
        self._commit_no += 1
        now = self._commit_no
        # not timed yet: a zero-length op where the previous one ends, below its timing (values only grow)
        S[o] = E[o] = E[pv] if pv >= 0 else 0.0
        todo: list[int] = []  # items to re-time: sends as p * m + d, ops as -1 - o
        if self._seq:
            need: dict[int, float] = {}
            for e in inst.pred[o]:
                p = inst.esrc[e]
                if self.placement[p] != d and inst.ebytes[e] > need.get(p, -1.0):
                    need[p] = inst.ebytes[e]
            txs, lprev, lnext = self._tx, self._lprev, self._lnext
            for p, b in need.items():
                key = p * m + d
                tx = txs.get(key)
                if tx is None:  # a new send: where the one before it on the link arrives, below its timing
                    lst = self._links.setdefault((self.placement[p], d), [])
                    i = bisect_left(lst, pos[p], key=pos.__getitem__)
                    lst.insert(i, p)
                    q = lst[i - 1] * m + d if i else -1
                    r = lst[i + 1] * m + d if i + 1 < len(lst) else -1
                    lprev[key], lnext[key] = q, r
                    if q >= 0:
                        lnext[q] = key
                    if r >= 0:
                        lprev[r] = key
                    f0 = txs[q][1] if q >= 0 else 0.0
                    txs[key] = [f0, f0, b]
                    self._dests[p].append(d)
                    self._stamp[key] = now
                    todo.append(key)
                elif b > tx[2]:
                    tx[2] = b
                    self._stamp[key] = now
                    todo.append(key)
        if todo:  # new or longer sends: they may delay committed sends and ops
            self._ready[o] = self._ready_of(o)
            todo.append(-1 - o)
            moved = self._retime(todo, o)
        else:  # every input was already on d (or on its way): ``ready`` is the simulator's
            self._ready[o] = ready
            S[o] = E[pv] if pv >= 0 and E[pv] > ready else ready
            E[o] = S[o] + inst.dur[o][d]
            moved = {}
            if nx >= 0 and E[o] > S[nx]:
                moved = self._retime([-1 - nx], o)
        stale = self._stale
        for dd, t0 in moved.items():
            if t0 < stale[dd]:
                stale[dd] = t0
        if stale[d] == _INF and insertion:
            try:
                self._dev[d].add(S[o], E[o])
            except InvalidInstanceError:
                stale[d] = -_INF
        elif S[o] < stale[d]:  # brought up to date only if an insertion query ever comes
            stale[d] = S[o]
        if self.frozen():
            self._since_replay += 1
            if 0 < self._replay_every <= self._since_replay or self.n_placed == inst.n:
                self._since_replay = 0
                self.replays += 1
                self._replay()
        return S[o]

    def _ready_of(self, o: int) -> float:
        """When the last input of committed ``o`` arrives, from the committed times and sends."""
        inst = self.inst
        m, pl, E, txs, seq = inst.m, self.placement, self.end, self._tx, self._seq
        d = pl[o]
        r = 0.0
        for e in inst.pred[o]:
            p = inst.esrc[e]
            dp = pl[p]
            if dp == d:
                a = E[p]
            elif seq:
                a = txs[p * m + d][1]
            else:
                a = E[p] + inst.lat[dp][d] + inst.ebytes[e] / inst.bw[dp][d]
            if a > r:
                r = a
        return r

    def _retime(self, todo: list[int], fresh: int) -> dict[int, float]:
        """Bring every value that depends on a changed one back to the simulator's recurrences
        (start = max(inputs arrived, previous op on the device ended); send start = max(producer
        ended, previous send on the link arrived)). Orders on devices and links are fixed and a commit
        only adds or lengthens work, so values only grow (a new op or send starts out below its
        timing): an item is queued only when its start grows, keyed by its start before it grows, and
        items are settled in that order. Before the commit every input of an item started no later than
        the item, so what an item waits for is settled before it (ties aside): each item moves about once
        per commit. Keyed by the grown start instead, an item could settle before an input that grew
        later and move again: 22.9M moves and 83 replays for HEFT on the 36k-op sequential Transformer,
        14.6M and none so (the same times: the recurrences' fixed point does not depend on the order).
        Returns the devices on which an op other than ``fresh`` moved, each with the earliest start such
        an op had."""
        inst = self.inst
        m, pl, S, E, R = inst.m, self.placement, self.start, self.end, self._ready
        succ, edst, lat, bw, ebytes, dur = inst.succ, inst.edst, inst.lat, inst.bw, inst.ebytes, inst.dur
        txs, dests, timed, dnext, dprev = self._tx, self._dests, self._timed, self._dnext, self._dprev
        lprev, lnext = self._lprev, self._lnext
        seq = self._seq
        fz, now, stamp = self.frozen(), self._commit_no, self._stamp  # frozen: only this commit's sends pull
        hpush, pop = heapq.heappush, heapq.heappop
        pending: set[int] = set(todo)
        heap: list[tuple[float, int]] = []
        for x in todo:
            heap.append((txs[x][0] if x >= 0 else S[-1 - x], x))
        heapq.heapify(heap)

        def push_op(v: int) -> None:  # v's inputs or previous op grew
            x = -1 - v
            if x not in pending:
                pv = dprev[v]
                c = E[pv] if pv >= 0 and E[pv] > R[v] else R[v]
                if c > S[v]:
                    pending.add(x)
                    hpush(heap, (S[v], x))

        moved: dict[int, float] = {}
        budget = kernels.CASCADE_BUDGET * (self.n_placed + len(txs) + 250)
        while heap:
            budget -= 1
            if budget < 0:  # a long cascade: one replay of everything committed costs less
                self.replays += 1
                self._replay()
                return {}
            _, x = pop(heap)
            if x >= 0:  # a send (p -> d2)
                p = x // m
                tx = txs[x]
                q = lprev[x]
                pf = txs[q][1] if q >= 0 else 0.0
                s = E[p] if E[p] >= pf else pf
                pending.discard(x)
                d2 = x - p * m
                dp = pl[p]
                f = s + lat[dp][d2] + tx[2] / bw[dp][d2]
                if f == tx[1]:
                    tx[0] = s
                    continue
                tx[0], tx[1] = s, f
                y = lnext[x]
                if y >= 0 and y not in pending and (not fz or stamp[y] == now):
                    py = y // m
                    c = E[py] if E[py] >= f else f
                    if c > txs[y][0]:
                        pending.add(y)
                        hpush(heap, (txs[y][0], y))
                for e in succ[p]:
                    v = edst[e]
                    if pl[v] == d2 and timed[v] and f > R[v]:
                        R[v] = f
                        push_op(v)
                continue
            o = -1 - x  # an op
            pv = dprev[o]
            s = E[pv] if pv >= 0 and E[pv] > R[o] else R[o]
            pending.discard(x)
            d = pl[o]
            f = s + dur[o][d]
            if s == S[o] and f == E[o]:
                continue
            if o != fresh:  # (the new op may be timed more than once: it is not a move)
                if S[o] < moved.get(d, _INF):
                    moved[d] = S[o]
                self.retimed += 1
            S[o] = s
            if f == E[o]:
                continue
            E[o] = f
            nx = dnext[o]
            if nx >= 0:
                push_op(nx)
            for d2 in dests[o]:
                y = o * m + d2
                if y not in pending:
                    q = lprev[y]
                    pf = txs[q][1] if q >= 0 else 0.0
                    c = f if f >= pf else pf
                    if c > txs[y][0]:
                        pending.add(y)
                        hpush(heap, (txs[y][0], y))
            for e in succ[o]:
                v = edst[e]
                if not timed[v]:
                    continue
                dv = pl[v]
                if dv == d:
                    a = f
                elif seq:
                    continue
                else:
                    a = f + lat[d][dv] + ebytes[e] / bw[d][dv]
                if a > R[v]:
                    R[v] = a
                    push_op(v)
        return moved

    def _replay(self) -> None:
        """Re-time every committed op and send from scratch with the simulator's event loop (the
        committed ops, ``order()``, the sends of the committed consumers)."""
        start, end, transfers, _, _ = run_events(self.inst, self.placement, self._dseq, self._timed, receive=False)
        self.start[:] = start  # callers hold these lists
        self.end[:] = end
        if self._seq:
            m, txs = self.inst.m, self._tx
            for p, _, d2, s, f, _ in transfers:
                tx = txs[p * m + d2]
                tx[0], tx[1] = s, f
        timed, R = self._timed, self._ready
        for o in range(self.inst.n):
            if timed[o]:
                R[o] = self._ready_of(o)
        self._stale = [-_INF] * self.inst.m

    @property
    def makespan(self) -> float:
        return max(self.end) if self.inst.n else 0.0

    def order(self) -> list[list[int]]:
        """Per-device lists of the committed ops in execution order."""
        return [list(s) for s in self._dseq]
