"""The problem model: ``Instance``, ``Op``, ``Edge``, ``Device``, ``Link``.

Units (the one documented place): time in microseconds (µs), memory and tensor sizes in bytes,
bandwidth in bytes per microsecond. An op's ``time`` is either one number (µs on a device of speed 1;
on device d it takes ``time / speed_d``) or a mapping ``{device name: µs}`` (heterogeneous costs).

An :class:`Instance` is built once, validated once, and then read-only. Inside, ops, devices and edges
are indexed by integers; names are kept for people. Every method reuses the precomputed adjacency
lists, durations, transfer parameters and the deterministic topological order.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .errors import InvalidInstanceError, show_value

FORMAT = "dplace-instance/1"
COMM_MODES = ("parallel", "sequential")


# Value limits, checked when an Instance is built. The real guard is MAX_SERIAL_US: every op on its
# slowest device plus every transfer at the slowest link, one after another, is the longest horizon any
# method forms (a trivial schedule; CP-SAT's horizon in integer ticks, the MILP's big-M, which HiGHS would
# read as infinity from 1e20), and fusing ops or edges never makes it longer. The per-value limits name the
# field at fault for values no instance needs. Documented in the README ("Value limits").
MAX_SERIAL_US = 1e18  # µs, about 31,700 years
MAX_TIME_US = 1e18  # an op's time (µs at speed 1, or per device), a link's latency
SPEED_RANGE = (1e-6, 1e6)  # relative device speed
MIN_BANDWIDTH = 1e-6  # bytes / µs (1 byte per second)
MAX_BYTES = 1e18  # one edge's tensor
MAX_MEMORY = 2**53  # bytes, an op's or a device's memory (8 PiB; exact as a float)


@dataclass(frozen=True)
class Device:
    """A device: ``memory`` in bytes (what its ops may hold at once), ``speed`` relative to 1 (a scalar
    op time ``t`` takes ``t / speed`` here)."""

    name: str
    memory: int  # bytes
    speed: float = 1.0  # relative speed; a scalar op time t takes t / speed here


@dataclass(frozen=True)
class Link:
    """A directed link's cost model: moving ``b`` bytes takes ``latency + b / bandwidth`` µs
    (latency in µs, bandwidth in bytes per µs)."""

    latency: float  # µs
    bandwidth: float  # bytes / µs

    def transfer_time(self, nbytes: float) -> float:
        """µs to move ``nbytes`` over this link."""
        return self.latency + nbytes / self.bandwidth


@dataclass(frozen=True)
class Op:
    """An operation of the graph. ``time``: µs on a device of speed 1, or ``{device name: µs}``;
    ``memory``: bytes it holds on its device for the whole step; ``type``: a label (e.g. ``MatMul``);
    ``colocation``: ops with the same value must share a device; ``device``: the device it is pinned
    to; ``extra``: unknown JSON fields, kept as given."""

    id: str
    time: float | Mapping[str, float]  # µs at speed 1, or µs per device name
    memory: int = 0  # bytes held on its device
    type: str | None = None
    colocation: str | None = None  # same value => same device
    device: str | None = None  # pinned device name
    extra: Mapping[str, Any] = field(default_factory=dict)  # unknown fields, kept as given


@dataclass(frozen=True)
class Edge:
    """A data dependency: ``dst`` starts after ``src`` ends and, on another device, after ``bytes``
    have crossed the link between them."""

    src: str
    dst: str
    bytes: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)


def check_number(value: Any, where: str, *, positive: bool = False, lo: float | None = None,
                 hi: float | None = None, unit: str = "") -> float:
    """Return ``value`` as a finite float >= 0 (or > 0 with ``positive``) inside ``[lo, hi]`` when
    given, else raise :class:`InvalidInstanceError` naming ``where`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInstanceError(f"{where} must be a number, got {show_value(value)}")
    unit = f" {unit}" if unit else ""
    try:
        v = float(value)
    except OverflowError:  # an integer beyond every float
        limit = f"<= {hi:g}{unit}" if hi is not None else "finite"
        raise InvalidInstanceError(f"{where} must be {limit}, got {show_value(value)}") from None
    if math.isnan(v) or math.isinf(v):
        raise InvalidInstanceError(f"{where} must be finite, got {show_value(value)}")
    if positive and v <= 0:
        raise InvalidInstanceError(f"{where} must be > 0, got {show_value(value)}")
    if v < 0:
        raise InvalidInstanceError(f"{where} must be >= 0, got {show_value(value)}")
    if lo is not None and v < lo:
        raise InvalidInstanceError(f"{where} must be >= {lo:g}{unit}, got {show_value(value)}")
    if hi is not None and (v > hi or (isinstance(value, int) and value > hi)):  # ints exactly
        raise InvalidInstanceError(f"{where} must be <= {hi:g}{unit}, got {show_value(value)}")
    return v


class Instance:
    """A validated, read-only placement problem.

    Integer views (all lists, for fast pure-Python loops):
      ``n``/``m``: op / device counts; ``dur[o][d]``: µs of op o on device d; ``mem[o]``: bytes;
      ``esrc[e]``, ``edst[e]``, ``ebytes[e]``; ``succ[o]``/``pred[o]``: edge indices;
      ``topo``: deterministic topological order, ``topo_pos[o]`` its position;
      ``lat[d1][d2]``, ``bw[d1][d2]``: link parameters; ``pinned[o]``: device index or -1 (a pin on any
      member of a colocation group pins the group); ``group_of[o]``: group index or -1;
      ``groups[g]``: op indices of group g, ``group_names[g]`` its name.
    """

    def __init__(
        self,
        name: str,
        devices: Iterable[Device],
        ops: Iterable[Op],
        edges: Iterable[Edge],
        *,
        link: Link = Link(10.0, 12000.0),
        pairs: Mapping[tuple[str, str], Link] | None = None,
        comm: str = "parallel",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = str(name)
        self.devices: tuple[Device, ...] = tuple(devices)
        self.ops: tuple[Op, ...] = tuple(ops)
        self.edges: tuple[Edge, ...] = tuple(edges)
        self.link = link
        self.pairs: dict[tuple[str, str], Link] = dict(pairs or {})
        self.comm = comm
        self.extra: dict[str, Any] = dict(extra or {})
        self._validate_and_index()

    # ------------------------------------------------------------------ validation + indexes
    def _validate_and_index(self) -> None:
        if self.comm not in COMM_MODES:
            raise InvalidInstanceError(f"comm must be one of {', '.join(COMM_MODES)}, got {self.comm!r}")
        if not self.devices:
            raise InvalidInstanceError("devices: at least one device is required")
        self.device_index: dict[str, int] = {}
        for d, dev in enumerate(self.devices):
            if dev.name in self.device_index:
                raise InvalidInstanceError(f"devices: duplicate device name {dev.name!r}")
            check_number(dev.memory, f"device {dev.name!r}: memory", hi=MAX_MEMORY, unit="bytes")
            check_number(dev.speed, f"device {dev.name!r}: speed", positive=True, lo=SPEED_RANGE[0], hi=SPEED_RANGE[1])
            self.device_index[dev.name] = d
        self.m = len(self.devices)
        check_number(self.link.latency, "links: latency", hi=MAX_TIME_US, unit="µs")
        check_number(self.link.bandwidth, "links: bandwidth", positive=True, lo=MIN_BANDWIDTH, unit="bytes/µs")
        self.lat = [[self.link.latency] * self.m for _ in range(self.m)]
        self.bw = [[self.link.bandwidth] * self.m for _ in range(self.m)]
        for (a, b), lk in self.pairs.items():
            for nm in (a, b):
                if nm not in self.device_index:
                    raise InvalidInstanceError(f"links.pairs: unknown device {nm!r}")
            check_number(lk.latency, f"links.pairs {a}->{b}: latency", hi=MAX_TIME_US, unit="µs")
            check_number(lk.bandwidth, f"links.pairs {a}->{b}: bandwidth", positive=True, lo=MIN_BANDWIDTH,
                         unit="bytes/µs")
            self.lat[self.device_index[a]][self.device_index[b]] = lk.latency
            self.bw[self.device_index[a]][self.device_index[b]] = lk.bandwidth

        self.op_index: dict[str, int] = {}
        self.dur: list[list[float]] = []
        self.mem: list[int] = []
        for o, op in enumerate(self.ops):
            if op.id in self.op_index:
                raise InvalidInstanceError(f"ops: duplicate op id {op.id!r}")
            self.op_index[op.id] = o
            if isinstance(op.time, Mapping):
                row = []
                for dev in self.devices:
                    if dev.name not in op.time:
                        raise InvalidInstanceError(f"op {op.id!r}: time has no entry for device {dev.name!r}")
                    row.append(check_number(op.time[dev.name], f"op {op.id!r}: time[{dev.name!r}]",
                                            hi=MAX_TIME_US, unit="µs"))
                for k in op.time:
                    if k not in self.device_index:
                        raise InvalidInstanceError(f"op {op.id!r}: time names unknown device {k!r}")
            else:
                t = check_number(op.time, f"op {op.id!r}: time", hi=MAX_TIME_US, unit="µs")
                row = [t / dev.speed for dev in self.devices]
            self.dur.append(row)
            self.mem.append(int(check_number(op.memory, f"op {op.id!r}: memory", hi=MAX_MEMORY, unit="bytes")))
        self.n = len(self.ops)
        if self.n == 0:
            raise InvalidInstanceError("ops: at least one op is required, got an empty list")

        self.esrc: list[int] = []
        self.edst: list[int] = []
        self.ebytes: list[float] = []
        self.succ: list[list[int]] = [[] for _ in range(self.n)]
        self.pred: list[list[int]] = [[] for _ in range(self.n)]
        for e, ed in enumerate(self.edges):
            for end, nm in (("src", ed.src), ("dst", ed.dst)):
                if nm not in self.op_index:
                    raise InvalidInstanceError(f"edge {ed.src!r}->{ed.dst!r}: {end} names unknown op {nm!r}")
            u, v = self.op_index[ed.src], self.op_index[ed.dst]
            b = check_number(ed.bytes, f"edge {ed.src!r}->{ed.dst!r}: bytes", hi=MAX_BYTES)
            if u == v:
                raise InvalidInstanceError(f"edges: cycle through edge {ed.src!r}->{ed.dst!r} (self-loop)")
            self.esrc.append(u)
            self.edst.append(v)
            self.ebytes.append(b)
            self.succ[u].append(e)
            self.pred[v].append(e)
        self.topo = self._topological_order()
        self.topo_pos = [0] * self.n
        for i, o in enumerate(self.topo):
            self.topo_pos[o] = i

        # pinning and colocation
        self.pinned = [-1] * self.n
        for o, op in enumerate(self.ops):
            if op.device is not None:
                if op.device not in self.device_index:
                    raise InvalidInstanceError(f"op {op.id!r}: device {op.device!r} does not exist")
                self.pinned[o] = self.device_index[op.device]
        names: dict[str, int] = {}
        self.group_of = [-1] * self.n
        self.groups: list[list[int]] = []
        self.group_names: list[str] = []
        for o, op in enumerate(self.ops):
            if op.colocation is None:
                continue
            g = names.get(op.colocation)
            if g is None:
                g = names[op.colocation] = len(self.groups)
                self.groups.append([])
                self.group_names.append(str(op.colocation))
            self.groups[g].append(o)
            self.group_of[o] = g
        max_dev_mem = max(dev.memory for dev in self.devices)
        for g, members in enumerate(self.groups):
            pins = {self.pinned[o] for o in members if self.pinned[o] >= 0}
            if len(pins) > 1:
                names_ = sorted(self.devices[d].name for d in pins)
                raise InvalidInstanceError(f"colocation {self.group_names[g]!r}: members pinned to different devices {names_}")
            if pins:
                d = pins.pop()
                for o in members:
                    self.pinned[o] = d
            total = sum(self.mem[o] for o in members)
            if total > max_dev_mem:
                raise InvalidInstanceError(
                    f"colocation {self.group_names[g]!r}: memory {total} is larger than every device "
                    f"(largest {max_dev_mem})"
                )
        for o in range(self.n):
            if self.mem[o] > max_dev_mem:
                raise InvalidInstanceError(f"op {self.ops[o].id!r}: memory {self.mem[o]} is larger than every device (largest {max_dev_mem})")
            if self.pinned[o] >= 0 and self.mem[o] > self.devices[self.pinned[o]].memory:
                raise InvalidInstanceError(
                    f"op {self.ops[o].id!r}: memory {self.mem[o]} exceeds its pinned device "
                    f"{self.devices[self.pinned[o]].name!r} ({self.devices[self.pinned[o]].memory})"
                )
        self.capacity = [int(dev.memory) for dev in self.devices]
        pinned_mem = [0] * self.m
        for o, d in enumerate(self.pinned):
            if d >= 0:
                pinned_mem[d] += self.mem[o]
        for d, need in enumerate(pinned_mem):
            if need > self.capacity[d]:
                raise InvalidInstanceError(f"device {self.devices[d].name!r}: the ops pinned to it need {need} bytes of memory, "
                           f"it has {self.capacity[d]}")
        self._check_serial_time()

    def _check_serial_time(self) -> None:
        """Every op on its slowest device and every transfer at its slowest, one after another, must stay
        within ``MAX_SERIAL_US`` (the horizon exact models start from)."""
        lat = max(max(row) for row in self.lat)
        bw = min(min(row) for row in self.bw)
        total = sum(max(row) for row in self.dur)
        if self.m > 1:
            total += sum(lat + b / bw for b in self.ebytes)
        if total > MAX_SERIAL_US:
            raise InvalidInstanceError(f"instance: ops and transfers one after another take {total:.3g} µs, more than the "
                       f"limit {MAX_SERIAL_US:g} µs (see the README's value limits)")

    def _topological_order(self) -> list[int]:
        """Kahn's algorithm, smallest input index first among ready ops (deterministic)."""
        indeg = [len(p) for p in self.pred]
        heap = [o for o in range(self.n) if indeg[o] == 0]
        heapq.heapify(heap)
        order: list[int] = []
        while heap:
            u = heapq.heappop(heap)
            order.append(u)
            for e in self.succ[u]:
                v = self.edst[e]
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(heap, v)
        if len(order) != self.n:
            edge = self._edge_on_cycle(indeg)
            raise InvalidInstanceError(f"edges: cycle through edge {edge[0]!r}->{edge[1]!r}")
        return order

    def _edge_on_cycle(self, indeg: list[int]) -> tuple[str, str]:
        # every op left with indeg > 0 lies on or after a cycle: walk predecessors until one repeats
        start = next(o for o in range(self.n) if indeg[o] > 0)
        seen: dict[int, int] = {}
        v = start
        while v not in seen:
            seen[v] = 1
            u = next(self.esrc[e] for e in self.pred[v] if indeg[self.esrc[e]] > 0)
            prev, v = v, u
        # v repeats: the edge v -> (its successor on the cycle)
        w = v
        nxt = next(self.esrc[e] for e in self.pred[w] if indeg[self.esrc[e]] > 0)
        return self.ops[nxt].id, self.ops[w].id

    # ------------------------------------------------------------------ helpers
    def transfer_time(self, e: int, d1: int, d2: int) -> float:
        """µs to move edge ``e``'s tensor from device d1 to d2 (0 on the same device)."""
        if d1 == d2:
            return 0.0
        return self.lat[d1][d2] + self.ebytes[e] / self.bw[d1][d2]

    def max_transfer_time(self, e: int) -> float:
        """Largest transfer time of edge e over all ordered pairs of distinct devices (0 if one device)."""
        if self.m < 2:
            return 0.0
        return max(self.transfer_time(e, a, b) for a in range(self.m) for b in range(self.m) if a != b)

    def min_dur(self, o: int) -> float:
        return min(self.dur[o])

    def allowed_devices(self, o: int) -> list[int]:
        return [self.pinned[o]] if self.pinned[o] >= 0 else list(range(self.m))

    @property
    def has_identical_devices(self) -> bool:
        """True when devices are interchangeable (same memory, speed, op times and links)."""
        if any(dev.memory != self.devices[0].memory for dev in self.devices):
            return False
        if any(len(set(row)) > 1 for row in self.dur):
            return False
        if self.pairs and len({(lk.latency, lk.bandwidth) for lk in self.pairs.values()} | {(self.link.latency, self.link.bandwidth)}) > 1:
            return False
        return not any(p >= 0 for p in self.pinned)

    def __repr__(self) -> str:
        return f"Instance({self.name!r}, ops={self.n}, edges={len(self.edges)}, devices={self.m}, comm={self.comm!r})"

    # ------------------------------------------------------------------ (de)serialisation
    @classmethod
    def from_dict(cls, data: Any) -> "Instance":
        from .io import instance_from_dict

        return instance_from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        from .io import instance_to_dict

        return instance_to_dict(self)

    def to_json(self, indent: int | None = None) -> str:
        import json

        return json.dumps(self.to_dict(), indent=indent)

    def replace(self, **changes: Any) -> "Instance":
        """A new validated Instance with some constructor arguments changed (explicit transform)."""
        args = dict(
            name=self.name, devices=self.devices, ops=self.ops, edges=self.edges, link=self.link,
            pairs=self.pairs, comm=self.comm, extra=self.extra,
        )
        args.update(changes)
        name = args.pop("name")
        devices = args.pop("devices")
        ops = args.pop("ops")
        edges = args.pop("edges")
        return Instance(name, devices, ops, edges, **args)
