"""The one timing model of dplace: ``simulate`` (the incremental ``ScheduleState`` of list schedulers is in :mod:`.state`).

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
:func:`dplace.schedule.events.run_events`, which ``ScheduleState`` also replays). ``ScheduleState`` is the incremental
API for list schedulers (earliest start of op o on device d given what is already committed, with or
without insertion into idle gaps; commit), timed by these same rules: once every op is committed its
makespan is ``simulate(inst, placement, order())``'s. Schedulers hand their placement and per-device
order back to ``simulate``, which has the last word on every makespan.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import InvalidInstanceError
from .events import run_events
from ..instance.model import Instance

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

    def transfer_columns(self) -> list[list]:
        """The transfers by column: [producers, src devices, dst devices, starts, ends, bytes] (lists), for
        bulk writers."""
        return [list(c) for c in zip(*self.transfers)] if self.transfers else [[] for _ in range(6)]


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

    def transfer_columns(self) -> list[list]:
        if "transfers" in self.__dict__:  # the rows are built already
            return super().transfer_columns()
        return [x.tolist() for x in self._arrays["transfers"]]

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
    (either comm mode, no receive costs; the kernel policy, :func:`dplace.kernels.use`)."""
    from .. import kernels

    return not inst.transfer_cpu and kernels.use(inst.n)


def seq_kernel_wanted(inst: Instance) -> bool:
    """Whether list schedulers run ``inst`` (sequential comm) on the compiled state
    (:mod:`dplace.kernels.seqstate`, the same schedule as :class:`ScheduleState`: tests compare): the one
    kernel policy for ``seqlist`` (:func:`dplace.kernels.use`), and link arrays that fit."""
    from .. import kernels

    if inst.comm != "sequential" or inst.transfer_cpu or inst.m * inst.m * (inst.n + 1) > 1 << 31:
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
    """:func:`simulate` with the compiled event loop (either comm mode) on a checked placement array and
    order arrays (:func:`placement_array`, :func:`order_arrays`)."""
    from ..kernels import inst_arrays
    from ..kernels.sim import run_events_arrays

    n, m = inst.n, inst.m
    start, end, tr, done, nxt = run_events_arrays(inst_arrays(inst), pl, order)
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
