"""The one timing model of dplace: ``simulate`` and the incremental ``ScheduleState``.

Rules (issue #2 §4):
* one op at a time per device; an op starts when its device is free and all its inputs have arrived;
* without an ``order``, a free device starts, among its ops whose inputs have arrived, the one that
  became ready first (ties: topological index) — how TensorFlow's executor behaves;
* with an ``order``, each device runs its list exactly, each op as early as inputs and device allow;
* ``comm="parallel"``: a transfer of edge (u, v), u on d1 != v on d2, is a pure delay of
  ``latency + bytes / bandwidth`` of link (d1, d2), starting when u ends;
* ``comm="sequential"``: a tensor is sent once per (producer, destination device), with the largest
  ``bytes`` among the producer's edges to that device; transfers on one directed link run one at a
  time (the link is busy for the whole ``latency + bytes / bandwidth``), in the order producers finish
  (ties: topological index) — Baechi's sequential-communication model.

``simulate`` is an event-driven simulation in O((V + E) log V). ``ScheduleState`` is the incremental
API for list schedulers (earliest start of op o on device d given what is already committed, with or
without insertion into idle gaps; commit). Schedulers then hand their placement and per-device order
back to ``simulate``, which has the last word on every makespan.
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
    """Partial schedule for list schedulers: query ``est``/``eft`` of (op, device), then ``commit``.

    All predecessors of an op must be committed before it is queried. ``insertion=True`` lets an op
    go into an idle gap of the device (HEFT's insertion policy); otherwise it goes after the last op.
    Memory is tracked per device (``fits``/``mem_used``) so memory-aware schedulers can skip devices.
    """

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.placement = [-1] * inst.n
        self.start = [0.0] * inst.n
        self.end = [0.0] * inst.n
        self.mem_used = [0] * inst.m
        self._dev = [_Timeline() for _ in range(inst.m)]
        self._links: dict[tuple[int, int], _Timeline] = {}
        self._sent: dict[tuple[int, int], float] = {}  # (producer, dst dev) -> arrival (sequential mode)
        self.n_placed = 0

    # -- queries
    def is_placed(self, o: int) -> bool:
        return self.placement[o] >= 0

    def fits(self, o: int, d: int, extra_bytes: int = 0) -> bool:
        return self.mem_used[d] + self.inst.mem[o] + extra_bytes <= self.inst.capacity[d]

    def device_free(self, d: int) -> float:
        return self._dev[d].free

    def _seq_arrival(self, p: int, d: int, insertion: bool) -> float:
        key = (p, d)
        if key in self._sent:
            return self._sent[key]
        inst = self.inst
        dp = self.placement[p]
        nbytes = self._seq_bytes(p, d)
        length = inst.lat[dp][d] + nbytes / inst.bw[dp][d]
        tl = self._links.get((dp, d))
        s = self.end[p] if tl is None else tl.earliest(self.end[p], length, insertion)
        return s + length

    def _seq_bytes(self, p: int, d: int) -> float:
        inst = self.inst
        best = 0.0
        for e in inst.succ[p]:
            v = inst.edst[e]
            if (self.placement[v] == d or self.placement[v] < 0) and inst.ebytes[e] > best:
                best = inst.ebytes[e]
        return best

    def data_ready(self, o: int, d: int, insertion: bool = False) -> float:
        """Time all inputs of ``o`` are available on device ``d``."""
        inst = self.inst
        t = 0.0
        pl, end = self.placement, self.end
        seq = inst.comm == "sequential"
        for e in inst.pred[o]:
            p = inst.esrc[e]
            dp = pl[p]
            if dp < 0:
                raise InvalidInstanceError(f"ScheduleState: predecessor {inst.ops[p].id!r} of {inst.ops[o].id!r} is not committed")
            if dp == d:
                a = end[p]
            elif seq:
                a = self._seq_arrival(p, d, insertion)
            else:
                a = end[p] + inst.lat[dp][d] + inst.ebytes[e] / inst.bw[dp][d]
            if a > t:
                t = a
        return t

    def est(self, o: int, d: int, insertion: bool = False) -> float:
        """Earliest start of ``o`` on ``d`` given the committed ops."""
        ready = self.data_ready(o, d, insertion)
        return self._dev[d].earliest(ready, self.inst.dur[o][d], insertion)

    def eft(self, o: int, d: int, insertion: bool = False) -> float:
        return self.est(o, d, insertion) + self.inst.dur[o][d]

    # -- updates
    def commit(self, o: int, d: int, start: float | None = None, insertion: bool = False) -> float:
        """Place ``o`` on ``d`` at ``start`` (default: its earliest start). Returns the start."""
        inst = self.inst
        if self.placement[o] >= 0:
            raise InvalidInstanceError(f"ScheduleState: op {inst.ops[o].id!r} committed twice")
        if inst.comm == "sequential":
            for e in inst.pred[o]:
                p = inst.esrc[e]
                dp = self.placement[p]
                if dp != d and (p, d) not in self._sent:
                    nbytes = self._seq_bytes(p, d)
                    length = inst.lat[dp][d] + nbytes / inst.bw[dp][d]
                    tl = self._links.setdefault((dp, d), _Timeline())
                    s = tl.earliest(self.end[p], length, insertion)
                    tl.add(s, s + length)
                    self._sent[(p, d)] = s + length
        if start is None:
            start = self.est(o, d, insertion)
        self.placement[o] = d
        self.start[o] = start
        self.end[o] = start + inst.dur[o][d]
        self._dev[d].add(start, self.end[o])
        self.mem_used[d] += inst.mem[o]
        self.n_placed += 1
        return start

    def place_only(self, o: int, d: int) -> None:
        """Record a device for ``o`` without timing (placement-only heuristics)."""
        self.placement[o] = d
        self.mem_used[self.placement[o]] += self.inst.mem[o]
        self.n_placed += 1

    @property
    def makespan(self) -> float:
        return max(self.end) if self.inst.n else 0.0

    def order(self) -> list[list[int]]:
        """Per-device op lists sorted by committed start time."""
        lists: list[list[int]] = [[] for _ in range(self.inst.m)]
        tp = self.inst.topo_pos
        for o in sorted(range(self.inst.n), key=lambda x: (self.start[x], self.end[x], tp[x])):
            if self.placement[o] >= 0:
                lists[self.placement[o]].append(o)
        return lists
