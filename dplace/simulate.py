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

``simulate`` is an event-driven simulation in O((V + E) log V) (the loop is
:func:`dplace.events.run_events`, which ``ScheduleState`` also replays). ``ScheduleState`` is the incremental
API for list schedulers (earliest start of op o on device d given what is already committed, with or
without insertion into idle gaps; commit), timed by these same rules: once every op is committed its
makespan is ``simulate(inst, placement, order())``'s. Schedulers hand their placement and per-device
order back to ``simulate``, which has the last word on every makespan.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Sequence

import numpy as np

from .errors import InvalidInstanceError
from .events import run_events
from .model import Instance
from .timeline import Timeline

_Timeline = Timeline  # the name tests and older callers use
_INF = float("inf")

Placement = list  # list[int]: device index of each op
Order = list  # list[list[int]]: per device, op indices in execution order


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

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(placement, start, end) as numpy arrays (int64, float64, float64), for bulk readers."""
        return (np.asarray(self.placement, dtype=np.int64), np.asarray(self.start, dtype=np.float64),
                np.asarray(self.end, dtype=np.float64))


def _listed(key: str, how=lambda a: a.tolist()) -> cached_property:
    def get(self):
        return how(self._arrays[key])

    return cached_property(get)


class ArraySchedule(Schedule):
    """A :class:`Schedule` computed on arrays (the compiled simulator): the same fields, each list built
    from its array on first use; :meth:`arrays` hands the arrays over without building them."""

    def __init__(self, placement: np.ndarray, start: np.ndarray, end: np.ndarray, transfers: tuple,
                 makespan: float, memory: list[int], memory_ok: bool, order: tuple[np.ndarray, np.ndarray]) -> None:
        self._arrays = {"placement": placement, "start": start, "end": end, "transfers": transfers,
                        "order": order}
        self.makespan, self.memory, self.memory_ok = makespan, memory, memory_ok

    placement = _listed("placement")
    start = _listed("start")
    end = _listed("end")
    transfers = _listed("transfers", lambda tr: list(zip(*(x.tolist() for x in tr))))
    order = _listed("order", lambda po: [po[1][a:b].tolist() for a, b in zip(po[0][:-1].tolist(), po[0][1:].tolist())])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = self._arrays
        return a["placement"], a["start"], a["end"]


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
    """Normalise an order (per-device lists or int arrays, by index or name) and check it lists every op
    once."""
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
        if not isinstance(order, (list, tuple)) or not all(isinstance(x, (list, tuple, np.ndarray)) for x in order):
            raise InvalidInstanceError(f"order: expected one list of ops per device, got {order!r:.60}")
        lists = [x.tolist() if isinstance(x, np.ndarray) else list(x) for x in order]
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


def use_kernel(inst: Instance) -> bool:
    """Whether :func:`simulate` runs the compiled event loop (:mod:`dplace.kernels.sim`) on ``inst``
    (parallel comm; the kernel policy, :func:`dplace.kernels.use`)."""
    from . import kernels

    return inst.comm == "parallel" and kernels.use(inst.n)


def seq_kernel_wanted(inst: Instance) -> bool:
    """Whether list schedulers run ``inst`` (sequential comm) on the compiled state
    (:mod:`dplace.kernels.seqstate`, the same schedule as :class:`ScheduleState`: tests compare): the one
    kernel policy for ``seqlist`` (:func:`dplace.kernels.use`), and link arrays that fit."""
    from . import kernels

    if inst.comm != "sequential" or inst.m * inst.m * (inst.n + 1) > 1 << 31:
        return False
    return kernels.use(inst.n, "seqlist")


def placement_array(inst: Instance, placement: Any) -> np.ndarray:
    """:func:`as_placement` as an int64 array, checked in bulk (a bad placement is worded by
    :func:`as_placement`)."""
    if not isinstance(placement, Mapping):
        a = np.asarray(placement)
        if a.ndim == 1 and a.dtype.kind in "iu" and len(a) == inst.n and (not len(a) or (a.min() >= 0 and a.max() < inst.m)):
            return a.astype(np.int64, copy=False)
    return np.array(as_placement(inst, placement), dtype=np.int64)


def order_arrays(inst: Instance, pl: np.ndarray, order: Any) -> tuple[np.ndarray, np.ndarray]:
    """:func:`as_order` as (ptr, ops) int64 arrays, device d's list ``ops[ptr[d]:ptr[d + 1]]``, checked
    in bulk; each device's list may be a list or an int array (a bad order is worded by :func:`as_order`)."""
    n, m = inst.n, inst.m
    if isinstance(order, (list, tuple)) and len(order) == m and all(isinstance(x, (list, tuple, np.ndarray)) for x in order):
        parts = [np.asarray(x) for x in order]
        if all(p.ndim == 1 and (p.dtype.kind in "iu" or not len(p)) for p in parts):
            sizes = np.array([len(p) for p in parts], dtype=np.int64)
            ptr = np.zeros(m + 1, dtype=np.int64)
            np.cumsum(sizes, out=ptr[1:])
            ops = np.concatenate(parts).astype(np.int64) if m else np.zeros(0, np.int64)
            if len(ops) == n and (not n or (ops.min() >= 0 and ops.max() < n and (np.bincount(ops, minlength=n) == 1).all()
                                            and (pl[ops] == np.repeat(np.arange(m), sizes)).all())):
                return ptr, ops
    lists = as_order(inst, pl.tolist(), order)
    ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum([len(x) for x in lists], out=ptr[1:])
    return ptr, np.array([o for x in lists for o in x], dtype=np.int64)


def memory_array(inst: Instance, pl: np.ndarray) -> list[int]:
    """:func:`memory_use` in bulk (exact: int64 sums when they cannot overflow)."""
    mem = inst._mem_a
    if not len(mem) or int(mem.max()) * len(mem) < 2**62:
        used = np.zeros(inst.m, dtype=np.int64)
        np.add.at(used, pl, mem)
        return used.tolist()
    return memory_use(inst, pl.tolist())


def simulate_arrays(inst: Instance, pl: np.ndarray, order: tuple[np.ndarray, np.ndarray] | None) -> ArraySchedule:
    """:func:`simulate` with the compiled event loop (parallel comm) on a checked placement array and
    order arrays (:func:`placement_array`, :func:`order_arrays`)."""
    from .kernels import inst_arrays
    from .kernels.sim import run_events_parallel

    n, m = inst.n, inst.m
    start, end, tr, done, nxt = run_events_parallel(inst_arrays(inst), pl, order)
    if done < n:
        assert order is not None
        ptr, ops = order
        for d in range(m):
            if ptr[d] + nxt[d] < ptr[d + 1]:
                _deadlock(inst, d, int(ops[ptr[d] + nxt[d]]))
        raise InvalidInstanceError("order: deadlock")  # pragma: no cover
    used = memory_array(inst, pl)
    if order is None:
        by_time = np.lexsort((inst._topo_pos_a, end, start))
        ops = by_time[np.argsort(pl[by_time], kind="stable")]
        ptr = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(np.bincount(pl, minlength=m), out=ptr[1:])
        order = (ptr, ops)
    return ArraySchedule(pl, start, end, tr, float(end.max()) if n else 0.0, used,
                         all(used[d] <= inst.capacity[d] for d in range(m)), order)


def _deadlock(inst: Instance, d: int, o: int) -> None:
    raise InvalidInstanceError(
        f"order: device {inst.devices[d].name!r} waits for op {inst.ops[o].id!r} whose inputs "
        f"never arrive (the order contradicts the graph's precedence)"
    )


def simulate(inst: Instance, placement: Any, order: Any = None) -> Schedule:
    """Simulate one training step of ``placement`` (and optional per-device ``order``)."""
    if use_kernel(inst):
        pa = placement_array(inst, placement)
        return simulate_arrays(inst, pa, order_arrays(inst, pa, order) if order is not None else None)
    pl = as_placement(inst, placement)
    lists = as_order(inst, pl, order) if order is not None else None
    n, m = inst.n, inst.m
    start, end, transfers, done, nxt = run_events(inst, pl, lists)
    if done < n:
        assert lists is not None
        for d in range(m):
            if nxt[d] < len(lists[d]):
                _deadlock(inst, d, lists[d][nxt[d]])
        raise InvalidInstanceError("order: deadlock")  # pragma: no cover
    used = memory_use(inst, pl)
    if lists is not None:
        per_dev_order = [list(x) for x in lists]
    else:
        per_dev_order = [[] for _ in range(m)]
        topo_pos = inst.topo_pos
        for o in sorted(range(n), key=lambda x: (start[x], end[x], topo_pos[x])):
            per_dev_order[pl[o]].append(o)
    return Schedule(
        placement=pl, start=start, end=end, transfers=transfers,
        makespan=max(end) if n else 0.0, memory=used,
        memory_ok=all(used[d] <= inst.capacity[d] for d in range(m)), order=per_dev_order,
    )




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
        self._stale = [_INF] * m  # the gaps on device d are right before this time (_INF: all of them)
        self._links: dict[tuple[int, int], list[int]] = {}  # producers sending on link, in send order
        self._tx: dict[int, list[float]] = {}  # p * m + dst -> [send start, arrival, bytes]
        self._dests: list[list[int]] = [[] for _ in range(n)]  # devices producer p sends to
        self._lprev: dict[int, int] = {}  # send -> the send before it on its link (-1: first)
        self._lnext: dict[int, int] = {}  # send -> the send after it on its link (-1: last)
        self._ready = [0.0] * n  # committed op: when its last input arrived (max over its inputs)
        self.harm = 0.0  # set by data_ready(..., harm=True)

    # -- queries
    def fits(self, o: int, d: int, extra_bytes: int = 0) -> bool:
        return self.mem_used[d] + self.inst.mem[o] + extra_bytes <= self.inst.capacity[d]

    def device_free(self, d: int) -> float:
        seq = self._dseq[d]
        return self.end[seq[-1]] if seq else 0.0

    def _timeline(self, d: int) -> _Timeline:
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
        for p in ps:
            while i < len(lst) and pos[lst[i]] < pos[p]:  # sends of other producers before p
                q = lst[i]
                tx = txs[q * m + d]
                if moved:
                    s = end[q] if end[q] >= prev_f else prev_f
                    f = s + lat + tx[2] / bw
                    moved = f != tx[1]
                    if f - tx[1] > self.harm:
                        self.harm = f - tx[1]
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
                q = lst[i]
                tx = txs[q * m + d]
                s = end[q] if end[q] >= prev_f else prev_f
                f = s + lat + tx[2] / bw
                moved = f != tx[1]
                if f - tx[1] > self.harm:
                    self.harm = f - tx[1]
                prev_f = f
                i += 1
        return out

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
                    todo.append(key)
                elif b > tx[2]:
                    tx[2] = b
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
        timing): an item is queued only when its start grows, keyed by that start, and items are
        settled in time order (one whose inputs grew past its key waits for its new time). Returns the
        devices on which an op other than ``fresh`` moved, each with the earliest start such an op had."""
        inst = self.inst
        m, pl, S, E, R = inst.m, self.placement, self.start, self.end, self._ready
        succ, edst, lat, bw, ebytes, dur = inst.succ, inst.edst, inst.lat, inst.bw, inst.ebytes, inst.dur
        txs, dests, timed, dnext, dprev = self._tx, self._dests, self._timed, self._dnext, self._dprev
        lprev, lnext = self._lprev, self._lnext
        seq = self._seq
        hpush, pop = heapq.heappush, heapq.heappop
        pending: set[int] = set(todo)
        heap: list[tuple[float, int]] = []
        for x in todo:
            if x >= 0:
                q = lprev[x]
                pf = txs[q][1] if q >= 0 else 0.0
                ep = E[x // m]
                heap.append((ep if ep >= pf else pf, x))
            else:
                pv = dprev[-1 - x]
                r = R[-1 - x]
                heap.append((E[pv] if pv >= 0 and E[pv] > r else r, x))
        heapq.heapify(heap)

        def push_op(v: int) -> None:  # v's inputs or previous op grew
            x = -1 - v
            if x not in pending:
                pv = dprev[v]
                c = E[pv] if pv >= 0 and E[pv] > R[v] else R[v]
                if c > S[v]:
                    pending.add(x)
                    hpush(heap, (c, x))

        moved: dict[int, float] = {}
        budget = self._cascade_budget * (self.n_placed + len(txs) + 250)
        while heap:
            budget -= 1
            if budget < 0:  # a long cascade: one replay of everything committed costs less
                self.replays += 1
                self._replay()
                return {}
            t, x = pop(heap)
            if x >= 0:  # a send (p -> d2)
                p = x // m
                tx = txs[x]
                q = lprev[x]
                pf = txs[q][1] if q >= 0 else 0.0
                s = E[p] if E[p] >= pf else pf
                if s > t:  # an input grew past this item's turn: settle it at its new time
                    hpush(heap, (s, x))
                    continue
                pending.discard(x)
                d2 = x - p * m
                dp = pl[p]
                f = s + lat[dp][d2] + tx[2] / bw[dp][d2]
                if f == tx[1]:
                    tx[0] = s
                    continue
                tx[0], tx[1] = s, f
                y = lnext[x]
                if y >= 0 and y not in pending:
                    py = y // m
                    c = E[py] if E[py] >= f else f
                    if c > txs[y][0]:
                        pending.add(y)
                        hpush(heap, (c, y))
                for e in succ[p]:
                    v = edst[e]
                    if pl[v] == d2 and timed[v] and f > R[v]:
                        R[v] = f
                        push_op(v)
                continue
            o = -1 - x  # an op
            pv = dprev[o]
            s = E[pv] if pv >= 0 and E[pv] > R[o] else R[o]
            if s > t:
                hpush(heap, (s, x))
                continue
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
                        hpush(heap, (c, y))
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
        start, end, transfers, _, _ = run_events(self.inst, self.placement, self._dseq, self._timed)
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
