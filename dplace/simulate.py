"""The one timing model of dplace: ``simulate`` and the incremental ``ScheduleState``.

Rules:
* one op at a time per device; an op starts when its device is free and all its inputs have arrived;
* without an ``order``, a free device starts, among its ops whose inputs have arrived, the one that
  became ready first (ties: topological index) — how TensorFlow's executor behaves;
* with an ``order``, each device runs its list exactly, each op as early as inputs and device allow;
* ``comm="parallel"``: a transfer of edge (u, v), u on d1 != v on d2, is a pure delay of
  ``latency + bytes / bandwidth`` of link (d1, d2), starting when u ends;
* ``comm="sequential"``: a tensor is sent once per (producer, destination device), with the largest
  ``bytes`` among the producer's edges to that device, as soon as the producer finishes; transfers on
  one directed link run one at a time (the link is busy for the whole ``latency + bytes / bandwidth``),
  in the order producers finish — Baechi's sequential-communication model. All producers on link
  (d1, d2) run on d1, so that is d1's execution order (a zero-time op that starts when the op before
  it ends finishes after it).

``simulate`` is an event-driven simulation in O((V + E) log V). ``ScheduleState`` is the incremental
API for list schedulers (earliest start of op o on device d given what is already committed, with or
without insertion into idle gaps; commit), timed by these same rules: once every op is committed its
makespan is ``simulate(inst, placement, order())``'s. Schedulers hand their placement and per-device
order back to ``simulate``, which has the last word on every makespan.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .errors import InvalidInstanceError
from .model import Instance

Placement = list  # list[int]: device index of each op
Order = list  # list[list[int]]: per device, op indices in execution order

_FINISH, _READY = 0, 1


@dataclass
class Schedule:
    """Timing of one placement: per-op start/end (µs), transfers, makespan, memory per device."""

    placement: list[int]
    start: list[float]
    end: list[float]
    transfers: list[tuple[int, int, int, float, float, float]]  # (producer, src dev, dst dev, start, end, bytes)
    makespan: float
    memory: list[int]  # bytes used per device
    memory_ok: bool
    order: list[list[int]] = field(default_factory=list)  # per device, ops sorted by start

    @property
    def peak_memory(self) -> int:
        return max(self.memory) if self.memory else 0


def as_placement(inst: Instance, placement: Any) -> list[int]:
    """Normalise a placement given as a list of device indices or a mapping op id -> device name."""
    if isinstance(placement, Mapping):
        out = [-1] * inst.n
        for k, v in placement.items():
            o = inst.op_index.get(k) if not isinstance(k, int) else k
            if o is None or not 0 <= o < inst.n:
                raise InvalidInstanceError(f"placement: unknown op {k!r}")
            d = inst.device_index.get(v) if isinstance(v, str) else v
            if d is None or not isinstance(d, int) or not 0 <= d < inst.m:
                raise InvalidInstanceError(f"placement: op {inst.ops[o].id!r} on unknown device {v!r}")
            out[o] = d
        missing = [inst.ops[o].id for o in range(inst.n) if out[o] < 0]
        if missing:
            raise InvalidInstanceError(f"placement: op {missing[0]!r} is not placed ({len(missing)} ops unplaced)")
        return out
    out = [int(d) for d in placement]
    if len(out) != inst.n:
        raise InvalidInstanceError(f"placement: expected {inst.n} devices, got {len(out)}")
    for o, d in enumerate(out):
        if not 0 <= d < inst.m:
            raise InvalidInstanceError(f"placement: op {inst.ops[o].id!r} on unknown device index {d}")
    return out


def as_order(inst: Instance, placement: list[int], order: Any) -> list[list[int]]:
    """Normalise an order (per-device lists, by index or name) and check it lists every op once."""
    if isinstance(order, Mapping):
        lists: list[list[int]] = [[] for _ in range(inst.m)]
        for dname, ops in order.items():
            d = inst.device_index.get(dname) if isinstance(dname, str) else dname
            if d is None or not 0 <= d < inst.m:
                raise InvalidInstanceError(f"order: unknown device {dname!r}")
            if not isinstance(ops, (list, tuple)):
                raise InvalidInstanceError(f"order: device {dname!r} must map to a list of ops, got {ops!r}")
            lists[d] = [inst.op_index[x] if isinstance(x, str) and x in inst.op_index else x for x in ops]
    else:
        if not isinstance(order, (list, tuple)) or not all(isinstance(x, (list, tuple)) for x in order):
            raise InvalidInstanceError(f"order: expected one list of ops per device, got {order!r:.60}")
        lists = [list(x) for x in order]
        if len(lists) != inst.m:
            raise InvalidInstanceError(f"order: expected {inst.m} device lists, got {len(lists)}")
    seen = [False] * inst.n
    for d, ops in enumerate(lists):
        for o in ops:
            if not isinstance(o, int) or not 0 <= o < inst.n:
                raise InvalidInstanceError(f"order: device {inst.devices[d].name!r} lists unknown op {o!r}")
            if seen[o]:
                raise InvalidInstanceError(f"order: op {inst.ops[o].id!r} is listed twice")
            if placement[o] != d:
                raise InvalidInstanceError(
                    f"order: op {inst.ops[o].id!r} is listed on {inst.devices[d].name!r} but placed on "
                    f"{inst.devices[placement[o]].name!r}"
                )
            seen[o] = True
    for o in range(inst.n):
        if not seen[o]:
            raise InvalidInstanceError(f"order: op {inst.ops[o].id!r} is missing from the order")
    return lists


def memory_use(inst: Instance, placement: Sequence[int]) -> list[int]:
    used = [0] * inst.m
    mem = inst.mem
    for o, d in enumerate(placement):
        used[d] += mem[o]
    return used


def simulate(inst: Instance, placement: Any, order: Any = None) -> Schedule:
    """Simulate one training step of ``placement`` (and optional per-device ``order``)."""
    pl = as_placement(inst, placement)
    lists = as_order(inst, pl, order) if order is not None else None
    n, m = inst.n, inst.m
    dur, succ, edst, ebytes = inst.dur, inst.succ, inst.edst, inst.ebytes
    lat, bw, topo_pos = inst.lat, inst.bw, inst.topo_pos
    sequential = inst.comm == "sequential"

    start = [0.0] * n
    end = [0.0] * n
    ready_at = [0.0] * n
    waiting = [len(p) for p in inst.pred]
    is_ready = [False] * n
    busy = [False] * m
    dev_heap: list[list[tuple[float, int, int]]] = [[] for _ in range(m)]
    nxt = [0] * m  # order mode: position in the device's list
    link_free: dict[tuple[int, int], float] = {}
    transfers: list[tuple[int, int, int, float, float, float]] = []
    events: list[tuple[float, int, int, int]] = []
    for o in range(n):
        if waiting[o] == 0:
            events.append((0.0, _READY, topo_pos[o], o))
    heapq.heapify(events)
    done = 0
    push, pop = heapq.heappush, heapq.heappop

    while events:
        t = events[0][0]
        dirty: set[int] = set()
        while events and events[0][0] <= t:
            _, kind, _, o = pop(events)
            d = pl[o]
            if kind == _READY:
                is_ready[o] = True
                ready_at[o] = t
                if lists is None:
                    push(dev_heap[d], (t, topo_pos[o], o))
                dirty.add(d)
                continue
            # an op finished
            done += 1
            busy[d] = False
            dirty.add(d)
            if sequential:
                per_dev: dict[int, float] = {}
                for e in succ[o]:
                    d2 = pl[edst[e]]
                    if d2 != d and ebytes[e] >= per_dev.get(d2, -1.0):
                        per_dev[d2] = ebytes[e]
                arrive: dict[int, float] = {}
                for d2 in sorted(per_dev):
                    nbytes = per_dev[d2]
                    s = max(t, link_free.get((d, d2), 0.0))
                    f = s + lat[d][d2] + nbytes / bw[d][d2]
                    link_free[(d, d2)] = f
                    transfers.append((o, d, d2, s, f, nbytes))
                    arrive[d2] = f
                for e in succ[o]:
                    v = edst[e]
                    d2 = pl[v]
                    a = t if d2 == d else arrive[d2]
                    if a > ready_at[v]:
                        ready_at[v] = a
                    waiting[v] -= 1
                    if waiting[v] == 0:
                        push(events, (ready_at[v], _READY, topo_pos[v], v))
            else:
                seen_dev: dict[int, int] = {}
                for e in succ[o]:
                    v = edst[e]
                    d2 = pl[v]
                    if d2 == d:
                        a = t
                    else:
                        a = t + lat[d][d2] + ebytes[e] / bw[d][d2]
                        k = seen_dev.get(d2)
                        if k is None:
                            seen_dev[d2] = len(transfers)
                            transfers.append((o, d, d2, t, a, ebytes[e]))
                        elif a > transfers[k][4]:
                            transfers[k] = (o, d, d2, t, a, ebytes[e])
                    if a > ready_at[v]:
                        ready_at[v] = a
                    waiting[v] -= 1
                    if waiting[v] == 0:
                        push(events, (ready_at[v], _READY, topo_pos[v], v))
        # dispatch every free device that has something to start at time t
        for d in dirty:
            if busy[d]:
                continue
            if lists is None:
                h = dev_heap[d]
                if not h:
                    continue
                o = pop(h)[2]
            else:
                lst = lists[d]
                if nxt[d] >= len(lst) or not is_ready[lst[nxt[d]]]:
                    continue
                o = lst[nxt[d]]
                nxt[d] += 1
            busy[d] = True
            start[o] = t
            end[o] = t + dur[o][d]
            push(events, (end[o], _FINISH, topo_pos[o], o))

    if done < n:
        assert lists is not None
        for d in range(m):
            if nxt[d] < len(lists[d]):
                o = lists[d][nxt[d]]
                raise InvalidInstanceError(
                    f"order: device {inst.devices[d].name!r} waits for op {inst.ops[o].id!r} whose inputs "
                    f"never arrive (the order contradicts the graph's precedence)"
                )
        raise InvalidInstanceError("order: deadlock")  # pragma: no cover
    used = memory_use(inst, pl)
    per_dev_order: list[list[int]] = [[] for _ in range(m)]
    for o in sorted(range(n), key=lambda x: (start[x], end[x], topo_pos[x])):
        per_dev_order[pl[o]].append(o)
    if lists is not None:
        per_dev_order = [list(x) for x in lists]
    return Schedule(
        placement=pl, start=start, end=end, transfers=transfers,
        makespan=max(end) if n else 0.0, memory=used,
        memory_ok=all(used[d] <= inst.capacity[d] for d in range(m)), order=per_dev_order,
    )


class _Timeline:
    """Busy time of one resource (a device or a directed link), kept as its idle gaps.

    Gaps before ``free`` (the end of the last busy interval) are stored sorted, in chunks of at most
    ``2 * _CH`` with each chunk's largest gap, so an insertion query skips whole chunks of gaps that are
    too small: amortised O(sqrt(gaps)) instead of a walk over every gap.
    """

    __slots__ = ("free", "_gs", "_ge", "_mx", "_last")
    _CH = 64

    def __init__(self) -> None:
        self.free = 0.0
        self._gs: list[list[float]] = []  # per chunk: gap starts
        self._ge: list[list[float]] = []  # per chunk: gap ends
        self._mx: list[float] = []  # per chunk: largest gap
        self._last: list[float] = []  # per chunk: end of its last gap (sorted across chunks)

    def earliest(self, ready: float, length: float, insertion: bool) -> float:
        free = self.free
        if insertion and self._gs:
            last = self._last
            c = bisect_right(last, ready)
            nch = len(last)
            while c < nch:
                if self._mx[c] >= length:
                    gs, ge = self._gs[c], self._ge[c]
                    for k in range(bisect_right(ge, ready), len(gs)):
                        t = gs[k] if gs[k] > ready else ready
                        if ge[k] - t >= length:
                            return t
                c += 1
        return ready if ready > free else free

    def _recount(self, c: int) -> None:
        gs, ge = self._gs[c], self._ge[c]
        if not gs:
            del self._gs[c], self._ge[c], self._mx[c], self._last[c]
            return
        self._mx[c] = max(b - a for a, b in zip(gs, ge))
        self._last[c] = ge[-1]
        if len(gs) > 2 * self._CH:  # split a chunk that grew too long
            h = len(gs) // 2
            self._gs.insert(c + 1, gs[h:])
            self._ge.insert(c + 1, ge[h:])
            del gs[h:], ge[h:]
            self._mx.insert(c + 1, 0.0)
            self._last.insert(c + 1, 0.0)
            self._recount(c + 1)
            self._recount(c)

    def add(self, s: float, f: float) -> None:
        free = self.free
        eps = 1e-9 * max(1.0, abs(s))
        if s >= free - eps:
            if s > free:
                if not self._gs or len(self._gs[-1]) >= self._CH:
                    self._gs.append([])
                    self._ge.append([])
                    self._mx.append(0.0)
                    self._last.append(0.0)
                self._gs[-1].append(free)
                self._ge[-1].append(s)
                if s - free > self._mx[-1]:
                    self._mx[-1] = s - free
                self._last[-1] = s
            if f > free:
                self.free = f
            return
        c = bisect_left(self._last, s - eps)
        k = bisect_left(self._ge[c], s - eps) if c < len(self._last) else 0
        for _ in range(4):  # the containing gap is this one or a following one (zero-length ops)
            if c >= len(self._last):
                break
            gs, ge = self._gs[c], self._ge[c]
            if k >= len(gs):
                c, k = c + 1, 0
                continue
            if gs[k] > s + eps:
                break
            if f > ge[k] + eps:
                k += 1
                continue
            a, b = gs[k], ge[k]
            del gs[k], ge[k]
            if b > f + eps:
                gs.insert(k, f)
                ge.insert(k, b)
            if s > a + eps:
                gs.insert(k, a)
                ge.insert(k, s)
            self._recount(c)
            return
        raise InvalidInstanceError(f"ScheduleState: interval [{s}, {f}] overlaps work already committed")


class ScheduleState:
    """Partial schedule for list schedulers, timed by the simulator's own rules: query
    ``est``/``eft`` of (op, device), then ``commit``.

    All predecessors of an op must be committed before it is queried. ``insertion=True`` lets an op
    go into an idle gap of the device (HEFT's insertion policy); otherwise it goes after the last op.
    Memory is tracked per device (``fits``/``mem_used``) so memory-aware schedulers can skip devices.

    The committed ops are always timed exactly as ``simulate(inst, placement, order())`` would time
    them if the graph held only those ops: one op at a time per device in ``order()``; in sequential
    mode one send per (producer, destination device) with the largest ``bytes`` among the committed
    consumers there, sent when the producer finishes, one at a time per directed link (d1, d2) in the
    order the producers finish, which is d1's execution order. Once every op is committed, ``makespan``
    is the simulated makespan. A consumer committed late on a new device adds a send that goes, in that
    order, before the sends of producers that finished later, and a consumer with a larger tensor
    lengthens a send: both can delay sends and ops already committed. ``commit`` re-times them
    (``retimed`` counts the ops moved so), so the state stays the simulation of what is committed;
    ``est`` accounts for the sends the op adds on its own links but not for ops it would delay that
    feed it in turn (then its committed start is later than the ``est`` it was chosen by). Parallel
    mode never re-times.
    """

    _cascade_budget = 4  # re-timing steps per committed op or send before one full replay is cheaper

    def __init__(self, inst: Instance) -> None:
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
        self._dev = [_Timeline() for _ in range(m)]  # idle gaps, rebuilt from _dseq when stale
        self._stale = [False] * m
        self._links: dict[tuple[int, int], list[int]] = {}  # producers sending on link, in send order
        self._tx: dict[int, list[float]] = {}  # p * m + dst -> [send start, arrival, bytes]
        self._dests: list[list[int]] = [[] for _ in range(n)]  # devices producer p sends to

    # -- queries
    def fits(self, o: int, d: int, extra_bytes: int = 0) -> bool:
        return self.mem_used[d] + self.inst.mem[o] + extra_bytes <= self.inst.capacity[d]

    def device_free(self, d: int) -> float:
        seq = self._dseq[d]
        return self.end[seq[-1]] if seq else 0.0

    def _timeline(self, d: int) -> _Timeline:
        if self._stale[d]:
            tl = _Timeline()
            for o in self._dseq[d]:
                tl.add(self.start[o], self.end[o])
            self._dev[d], self._stale[d] = tl, False
        return self._dev[d]

    def _link_arrival(self, dp: int, d: int, need: dict[int, float]) -> float:
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
        for p in ps:
            while i < len(lst) and pos[lst[i]] < pos[p]:  # sends of other producers before p
                q = lst[i]
                tx = txs[q * m + d]
                if moved:
                    s = end[q] if end[q] >= prev_f else prev_f
                    f = s + lat + tx[2] / bw
                    moved = f != tx[1]
                    prev_f = f
                else:
                    prev_f = tx[1]
                i += 1
            tx = txs.get(p * m + d)
            if tx is not None:
                i += 1  # lst[i] is p
            b = need[p]
            if tx is None or moved or b != tx[2]:
                s = end[p] if end[p] >= prev_f else prev_f
                f = s + lat + b / bw
                moved = True
            else:
                f = tx[1]
            prev_f = f
            if f > out:
                out = f
        return out

    def data_ready(self, o: int, d: int, insertion: bool = False) -> float:
        """Time all inputs of ``o`` would be on device ``d`` if ``o`` were committed there."""
        inst = self.inst
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
                    a = self._link_arrival(dp, d, need)
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
        tl = self._timeline(d) if self._stale[d] else self._dev[d]
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
        S[o] = E[o] = -1.0  # not timed yet (times are >= 0): its first timing always counts as a change
        heap: list[tuple[float, int, int]] = []
        if self._seq:
            need: dict[int, float] = {}
            for e in inst.pred[o]:
                p = inst.esrc[e]
                if self.placement[p] != d and inst.ebytes[e] > need.get(p, -1.0):
                    need[p] = inst.ebytes[e]
            for p, b in need.items():
                dp = self.placement[p]
                key = p * m + d
                tx = self._tx.get(key)
                if tx is None:
                    lst = self._links.setdefault((dp, d), [])
                    i = bisect_left(lst, pos[p], key=pos.__getitem__)
                    lst.insert(i, p)
                    self._tx[key] = [-1.0, -1.0, b]
                    self._dests[p].append(d)
                    heap.append((E[p], 0, key))
                    if i + 1 < len(lst):
                        heap.append((E[p], 0, lst[i + 1] * m + d))
                elif b > tx[2]:
                    tx[2] = b
                    heap.append((tx[0], 0, key))
        if heap:  # new or longer sends: they may delay committed sends and ops
            heap.append((t, 1, o))
            if nx >= 0:
                heap.append((t, 1, nx))
            moved = self._retime(heap, o)
        else:  # every input was already on d (or on its way): ``ready`` is the simulator's
            S[o] = E[pv] if pv >= 0 and E[pv] > ready else ready
            E[o] = S[o] + inst.dur[o][d]
            moved = set()
            if nx >= 0 and E[o] > S[nx]:
                moved = self._retime([(E[o], 1, nx)], o)
        for dd in moved:
            self._stale[dd] = True
        if not self._stale[d] and insertion:
            try:
                self._dev[d].add(S[o], E[o])
            except InvalidInstanceError:
                self._stale[d] = True
        elif not insertion:
            self._stale[d] = True  # rebuilt only if an insertion query ever comes
        return S[o]

    def _retime(self, todo: list[tuple[float, int, int]], fresh: int) -> set[int]:
        """Bring every value that depends on a changed one back to the simulator's recurrences
        (start = max(inputs arrived, previous op on the device ended); send start = max(producer
        ended, previous send on the link arrived)). Orders on devices and links are fixed and a commit
        only adds or lengthens work, so values only grow: items are settled in time order (an item
        whose inputs moved past its turn waits for its new time). Returns the devices on which an op
        other than ``fresh`` moved."""
        inst = self.inst
        m, pl, S, E, pos = inst.m, self.placement, self.start, self.end, self._pos
        succ, edst = inst.succ, inst.edst
        lat, bw = inst.lat, inst.bw
        txs, links, dests, timed, dnext = self._tx, self._links, self._dests, self._timed, self._dnext
        seq = self._seq
        dur, pred, esrc, ebytes, dprev = inst.dur, inst.pred, inst.esrc, inst.ebytes, self._dprev
        hpush, pop = heapq.heappush, heapq.heappop
        # items: sends as p * m + d2, ops as -1 - o; pending: item -> its key in the heap
        pending: dict[int, float] = {}
        heap: list[tuple[float, int]] = []

        def push(t: float, x: int) -> None:
            old = pending.get(x)
            if old is None or t < old:
                pending[x] = t
                hpush(heap, (t, x))

        for t, kind, x in todo:
            push(t, x if kind == 0 else -1 - x)
        moved: set[int] = set()
        budget = self._cascade_budget * (self.n_placed + len(txs) + 250)
        while heap:
            budget -= 1
            if budget < 0:  # a long cascade: one replay of everything committed costs less
                self.replays += 1
                self._replay()
                return set(range(m))
            t, x = pop(heap)
            if pending.get(x) != t:  # a copy of an item pushed again with an earlier key
                continue
            if x >= 0:  # a send (p -> d2)
                p, d2 = divmod(x, m)
                tx = txs[x]
                dp = pl[p]
                lst = links[(dp, d2)]
                i = bisect_left(lst, pos[p], key=pos.__getitem__)
                prev_f = txs[lst[i - 1] * m + d2][1] if i else 0.0
                s = E[p] if E[p] >= prev_f else prev_f
                if s > t:  # an input moved past this item's turn: settle it at its new time
                    pending[x] = s
                    hpush(heap, (s, x))
                    continue
                del pending[x]
                f = s + lat[dp][d2] + tx[2] / bw[dp][d2]
                if s == tx[0] and f == tx[1]:
                    continue
                old_f = tx[1]
                tx[0], tx[1] = s, f
                if f != old_f:
                    if i + 1 < len(lst):
                        push(f, lst[i + 1] * m + d2)
                    for e in succ[p]:
                        v = edst[e]
                        if pl[v] == d2 and timed[v]:
                            push(f, -1 - v)
                continue
            o = -1 - x  # an op
            d = pl[o]
            r = 0.0
            for e in pred[o]:
                p = esrc[e]
                dp = pl[p]
                if dp == d:
                    a = E[p]
                elif seq:
                    a = txs[p * m + d][1]
                else:
                    a = E[p] + lat[dp][d] + ebytes[e] / bw[dp][d]
                if a > r:
                    r = a
            pv = dprev[o]
            s = E[pv] if pv >= 0 and E[pv] > r else r
            if s > t:
                pending[x] = s
                hpush(heap, (s, x))
                continue
            del pending[x]
            f = s + dur[o][d]
            if s == S[o] and f == E[o]:
                continue
            if o != fresh or S[o] >= 0:  # not the first timing of the new op
                moved.add(d)
                self.retimed += 1
            old_e = E[o]
            S[o], E[o] = s, f
            if f != old_e:
                nx = dnext[o]
                if nx >= 0:
                    push(f, -1 - nx)
                for d2 in dests[o]:
                    push(f, o * m + d2)
                for e in succ[o]:
                    v = edst[e]
                    if timed[v] and (pl[v] == d or not seq):
                        push(f, -1 - v)
        return moved

    def _replay(self) -> None:
        """Re-time every committed op and send from scratch with the simulator's event loop (the
        committed ops, ``order()``, the sends recorded)."""
        inst = self.inst
        n, m = inst.n, inst.m
        pl, S, E, timed = self.placement, self.start, self.end, self._timed
        dur, succ, edst, ebytes = inst.dur, inst.succ, inst.edst, inst.ebytes
        lat, bw, tp = inst.lat, inst.bw, inst.topo_pos
        seq, txs = self._seq, self._tx
        ready_at = [0.0] * n
        waiting = [len(p) for p in inst.pred]
        is_ready = [False] * n
        busy = [False] * m
        nxt = [0] * m
        link_free: dict[tuple[int, int], float] = {}
        events = [(0.0, _READY, tp[o], o) for o in range(n) if timed[o] and waiting[o] == 0]
        heapq.heapify(events)
        push, pop = heapq.heappush, heapq.heappop
        while events:
            t = events[0][0]
            dirty: set[int] = set()
            while events and events[0][0] <= t:
                _, kind, _, o = pop(events)
                d = pl[o]
                dirty.add(d)
                if kind == _READY:
                    is_ready[o] = True
                    ready_at[o] = t
                    continue
                busy[d] = False
                arrive: dict[int, float] = {}
                if seq:
                    for d2 in self._dests[o]:
                        tx = txs[o * m + d2]
                        s0 = link_free.get((d, d2), 0.0)
                        s0 = t if t >= s0 else s0
                        f = s0 + lat[d][d2] + tx[2] / bw[d][d2]
                        link_free[(d, d2)] = f
                        tx[0], tx[1] = s0, f
                        arrive[d2] = f
                for e in succ[o]:
                    v = edst[e]
                    if not timed[v]:
                        continue
                    d2 = pl[v]
                    a = t if d2 == d else (arrive[d2] if seq else t + lat[d][d2] + ebytes[e] / bw[d][d2])
                    if a > ready_at[v]:
                        ready_at[v] = a
                    waiting[v] -= 1
                    if waiting[v] == 0:
                        push(events, (ready_at[v], _READY, tp[v], v))
            for d in dirty:
                lst = self._dseq[d]
                if busy[d] or nxt[d] >= len(lst) or not is_ready[lst[nxt[d]]]:
                    continue
                o = lst[nxt[d]]
                nxt[d] += 1
                busy[d] = True
                S[o], E[o] = t, t + dur[o][d]
                push(events, (E[o], _FINISH, tp[o], o))
        self._stale = [True] * m

    @property
    def makespan(self) -> float:
        return max(self.end) if self.inst.n else 0.0

    def order(self) -> list[list[int]]:
        """Per-device lists of the committed ops in execution order."""
        return [list(s) for s in self._dseq]
