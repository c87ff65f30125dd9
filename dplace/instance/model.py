"""The problem model: ``Instance``, ``Op``, ``Edge``, ``Device``, ``Link``.

Units (the one documented place): time in microseconds (µs), memory and tensor sizes in bytes,
bandwidth in bytes per microsecond. ``transfer_cpu`` (µs, default 0): the core time a received tensor
costs the receiving device (see :meth:`Instance.receive_times`; measured by
``benchmarks/bench_transfer_cpu.py``: the receiver pays, once per tensor and destination device).
An op's ``time`` is either one number (µs on a device of speed 1; on device d it takes
``time / speed_d``) or a mapping ``{device name: µs}`` (heterogeneous costs).

The records (``Op``, ``Edge``, ``Device``, ``Link``) are :mod:`dplace.instance.records`, re-exported here. The
model knows no file format: :mod:`dplace.instance.io` writes and reads it (``instance_to_dict``,
``instance_from_dict``, ``load_instance``, ``save_instance``).

An :class:`Instance` is built once, validated once, and then read-only. Inside, ops, devices and edges
are indexed by integers; names are kept for people. Every method reuses the precomputed adjacency
lists, durations, transfer parameters and the deterministic topological order.
"""
from __future__ import annotations

from functools import cached_property
from typing import Any, Iterable, Mapping

import numpy as np

from .columns import (FREEZE_FROM, Columns, RowTimes, bulk_numbers, csr_arrays, csr_lists, gc_paused, is_kahn_order,
                      ordered_forward)
from ..errors import InvalidInstanceError, show_value
from .graph import digraph, edge_on_cycle, ready_order
from .records import COMM_MODES, FORMAT, Device, Edge, Link, Op  # noqa: F401 (re-exported)
from .values import (MAX_BYTES, MAX_MEMORY, MAX_SERIAL_US, MAX_TIME_US, MIN_BANDWIDTH, SPEED_RANGE,  # noqa: F401
                     check_number)


def _freeze(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
    """Mark an instance's own arrays read-only from the start: they are shared with every method and kernel,
    and numba compiles a separate specialization for a read-only array, so flags that changed the first time
    a kernel ran (``kernels.arrays.inst_arrays`` marks them) made later calls meet signatures that
    ``dplace warm`` had not compiled, a compile inside a timed run."""
    for a in arrays:
        a.flags.writeable = False
    return arrays


def _listed(array_attr: str) -> cached_property:
    """A per-op or per-edge list built on first use from the array the instance keeps."""
    def get(self):
        return getattr(self, array_attr).tolist()

    get.__doc__ = f"``{array_attr[1:-2]}`` as a list (built on first use from the array ``{array_attr}``)."
    return cached_property(get)


class Instance:
    """A validated, read-only placement problem.

    Integer views (all lists, for fast pure-Python loops):
      ``n``/``m``: op / device counts; ``dur[o][d]``: µs of op o on device d; ``mem[o]``: bytes;
      ``esrc[e]``, ``edst[e]``, ``ebytes[e]``; ``succ[o]``/``pred[o]``: edge indices;
      ``topo``: deterministic topological order, ``topo_pos[o]`` its position;
      ``graph``: the ``networkx.DiGraph`` on ``0 .. n-1`` (:mod:`dplace.instance.graph`), built on first use;
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
        transfer_cpu: float = 0.0,
    ) -> None:
        self.name = str(name)
        self.transfer_cpu = transfer_cpu
        self.devices: tuple[Device, ...] = tuple(devices)
        self._ops: tuple[Op, ...] | None = tuple(ops)
        self._edges: tuple[Edge, ...] | None = tuple(edges)
        self.link = link
        self.pairs: dict[tuple[str, str], Link] = dict(pairs or {})
        self.comm = comm
        self.extra: dict[str, Any] = dict(extra or {})
        with gc_paused(freeze=len(self._ops) >= FREEZE_FROM):
            self._cols = Columns.of_objects(self._ops, self._edges)
            self._validate_and_index()

    @classmethod
    def from_columns(cls, name: str, devices: Iterable[Device], cols: Columns, *, link: Link = Link(10.0, 12000.0),
                     pairs: Mapping[tuple[str, str], Link] | None = None, comm: str = "parallel",
                     extra: Mapping[str, Any] | None = None, transfer_cpu: float = 0.0,
                     topo: np.ndarray | None = None) -> "Instance":
        """A validated Instance from columns (arrays): no ``Op``/``Edge`` objects until ``ops``/``edges``
        is read. ``topo``: the ops' order by Kahn's algorithm (smallest index first among ready ops, what
        the instance computes) when the caller has it at less cost (a compiled walk over the edge arrays):
        taken only if it is exactly that order (:func:`is_kahn_order`, checked by arrays), else computed,
        so an instance is the same whichever way it was built."""
        self = cls.__new__(cls)
        self._topo_given = topo
        self.name = str(name)
        self.transfer_cpu = transfer_cpu
        self.devices = tuple(devices)
        self._ops = self._edges = None
        self.link = link
        self.pairs = dict(pairs or {})
        self.comm = comm
        self.extra = dict(extra or {})
        self._cols = cols
        with gc_paused(freeze=len(cols.ids) >= FREEZE_FROM):
            self._validate_and_index()
        return self

    @property
    def ops(self) -> tuple[Op, ...]:
        if self._ops is None:
            self._ops = self._cols.make_ops()
        return self._ops

    @property
    def edges(self) -> tuple[Edge, ...]:
        if self._edges is None:
            self._edges = self._cols.make_edges()
        return self._edges

    @property
    def columns(self) -> Columns:
        """The ops' and edges' raw fields by column (as given: names, times, memory, pins, colocation)."""
        return self._cols

    @cached_property
    def op_index(self) -> dict[str, int]:
        """op id -> op index."""
        return dict(zip(self._cols.ids, range(self.n)))

    @property
    def n_edges(self) -> int:
        return len(self._esrc_a)

    # Per-op and per-edge lists for pure-Python loops, built from the arrays on first use (a run that
    # reads only the arrays, :func:`dplace.kernels.inst_arrays`, never builds them).
    dur = _listed("_dur_a")  # list[list[float]]
    mem = _listed("_mem_a")  # list[int]
    esrc = _listed("_esrc_a")  # list[int]
    edst = _listed("_edst_a")  # list[int]
    ebytes = _listed("_ebytes_a")  # list[float]
    topo = _listed("_topo_a")  # list[int]
    topo_pos = _listed("_topo_pos_a")  # list[int]
    pinned = _listed("_pinned_a")  # list[int]
    group_of = _listed("_group_of_a")  # list[int]

    @cached_property
    def succ(self) -> list[list[int]]:
        return csr_lists(*self._succ_csr)

    @cached_property
    def pred(self) -> list[list[int]]:
        return csr_lists(*self._pred_csr)

    @cached_property
    def groups(self) -> list[list[int]]:
        return csr_lists(self._group_ptr, self._group_members)

    @cached_property
    def _succ_csr(self) -> tuple[np.ndarray, np.ndarray]:
        """(ptr, edges): op o's outgoing edges are ``edges[ptr[o]:ptr[o + 1]]``, in edge order."""
        return _freeze(*csr_arrays(self._esrc_a, self.n))

    @cached_property
    def _pred_csr(self) -> tuple[np.ndarray, np.ndarray]:
        return _freeze(*csr_arrays(self._edst_a, self.n))

    # ------------------------------------------------------------------ validation + indexes
    def _validate_and_index(self) -> None:
        if self.comm not in COMM_MODES:
            raise InvalidInstanceError(f"comm must be one of {', '.join(COMM_MODES)}, got {self.comm!r}")
        if not self.devices:
            raise InvalidInstanceError("devices: at least one device is required")
        self.transfer_cpu = check_number(self.transfer_cpu, "transfer_cpu", hi=MAX_TIME_US, unit="µs")
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

        cols = self._cols
        self.n = len(cols.ids)
        if not self._index_ops_bulk(cols):
            self._check_ops_one_by_one()  # raises the one-line error
            raise AssertionError("bulk op checks failed, per-op checks passed")  # pragma: no cover
        if self.n == 0:
            raise InvalidInstanceError("ops: at least one op is required, got an empty list")
        if not self._index_edges_bulk(cols):
            self._check_edges_one_by_one()
            raise AssertionError("bulk edge checks failed, per-edge checks passed")  # pragma: no cover
        given = self.__dict__.pop("_topo_given", None)
        if ordered_forward(self._esrc_a, self._edst_a):
            self._topo_a = np.arange(self.n, dtype=np.int64)
        elif given is not None and is_kahn_order(given, self._esrc_a, self._edst_a, self.n):
            self._topo_a = np.array(given, dtype=np.int64)
        else:
            self._topo_a = np.array(self._topological_order(), dtype=np.int64)
        self._topo_pos_a = np.empty(self.n, dtype=np.int64)
        self._topo_pos_a[self._topo_a] = np.arange(self.n, dtype=np.int64)

        # pinning and colocation
        self._index_pins_and_groups(cols)
        caps = np.array([dev.memory for dev in self.devices], dtype=np.int64)
        max_dev_mem = int(caps.max())
        mem, pinned = self._mem_a, self._pinned_a
        gptr, gmem = self._group_ptr, self._group_members
        for g in self._groups_to_check(max_dev_mem):
            members = gmem[gptr[g]:gptr[g + 1]]
            pins = set(pinned[members][pinned[members] >= 0].tolist())
            if len(pins) > 1:
                names_ = sorted(self.devices[d].name for d in pins)
                raise InvalidInstanceError(f"colocation {self.group_names[g]!r}: members pinned to different devices {names_}")
            if pins:
                pinned[members] = pins.pop()
            total = sum(mem[members].tolist())
            if total > max_dev_mem:
                raise InvalidInstanceError(
                    f"colocation {self.group_names[g]!r}: memory {total} is larger than every device "
                    f"(largest {max_dev_mem})"
                )
        cap_of = np.append(caps, max_dev_mem)[pinned]
        bad = np.flatnonzero((mem > max_dev_mem) | ((pinned >= 0) & (mem > cap_of)))
        if bad.size:
            o = int(bad[0])
            if mem[o] > max_dev_mem:
                raise InvalidInstanceError(f"op {cols.ids[o]!r}: memory {int(mem[o])} is larger than every device (largest {max_dev_mem})")
            raise InvalidInstanceError(
                f"op {cols.ids[o]!r}: memory {int(mem[o])} exceeds its pinned device "
                f"{self.devices[pinned[o]].name!r} ({self.devices[pinned[o]].memory})"
            )
        self.capacity = [int(dev.memory) for dev in self.devices]
        pinned_mem = [0] * self.m
        for o in np.flatnonzero(pinned >= 0).tolist():
            pinned_mem[int(pinned[o])] += int(mem[o])
        for d, need in enumerate(pinned_mem):
            if need > self.capacity[d]:
                raise InvalidInstanceError(f"device {self.devices[d].name!r}: the ops pinned to it need {need} bytes of memory, "
                           f"it has {self.capacity[d]}")
        self._check_serial_time()
        _freeze(self._dur_a, self._mem_a, self._esrc_a, self._edst_a, self._ebytes_a, self._pinned_a,
                self._group_of_a, self._group_ptr, self._group_members, self._topo_a, self._topo_pos_a)

    def _index_ops_bulk(self, cols: Columns) -> bool:
        """``op_index``, ``dur`` and ``mem`` from the columns checked in bulk; False when a value needs the
        per-op checks (which name it)."""
        n, devs = self.n, self.devices
        if isinstance(cols.src, np.ndarray):  # edges by index: the id -> index map is built on first use
            if len(set(cols.ids)) != n:
                return False
        else:
            self.op_index = dict(zip(cols.ids, range(n)))
            if len(self.op_index) != n:
                return False
        if isinstance(cols.time_map, RowTimes):  # every op's per-device times as one array
            return self._index_row_times(cols)
        tmap = dict(cols.time_map)
        times = cols.time
        if not isinstance(times, np.ndarray):
            if not set(map(type, times)) <= {int, float}:
                tmap.update((o, t) for o, t in enumerate(times) if isinstance(t, Mapping))
                times = [0.0 if o in tmap else t for o, t in enumerate(times)]
        elif tmap:
            times = times.copy()
            times[list(tmap)] = 0.0
        t = bulk_numbers(times, MAX_TIME_US)
        mem = bulk_numbers(cols.mem, MAX_MEMORY)
        if t is None or mem is None:
            return False
        speed = np.array([float(dev.speed) for dev in devs])
        dur = t[:, None] / speed[None, :]
        for o, tm in tmap.items():
            if not isinstance(tm, Mapping):
                return False
            dur[o] = self._time_row(cols.ids[o], tm)
        self._dmax = dur.max(axis=1) if n else dur[:, 0]
        self._dur_a = dur
        self._mem_a = mem.astype(np.int64)
        return True

    def _index_row_times(self, cols: Columns) -> bool:
        rt = cols.time_map
        if rt.devices != [dev.name for dev in self.devices] or rt.times.shape != (self.n, self.m):
            return False
        t = bulk_numbers(rt.times.ravel(), MAX_TIME_US)
        mem = bulk_numbers(cols.mem, MAX_MEMORY)
        if t is None or mem is None or len(set(cols.ids)) != self.n:
            return False
        self._dur_a = t.reshape(self.n, self.m).copy()
        self._dmax = self._dur_a.max(axis=1)
        self._mem_a = mem.astype(np.int64)
        return True

    def _time_row(self, oid: str, time: Mapping[str, Any]) -> list[float]:
        row = []
        for dev in self.devices:
            if dev.name not in time:
                raise InvalidInstanceError(f"op {oid!r}: time has no entry for device {dev.name!r}")
            row.append(check_number(time[dev.name], f"op {oid!r}: time[{dev.name!r}]", hi=MAX_TIME_US, unit="µs"))
        for k in time:
            if k not in self.device_index:
                raise InvalidInstanceError(f"op {oid!r}: time names unknown device {k!r}")
        return row

    def _check_ops_one_by_one(self) -> None:
        seen: set[str] = set()
        for op in self.ops:
            if op.id in seen:
                raise InvalidInstanceError(f"ops: duplicate op id {op.id!r}")
            seen.add(op.id)
            if isinstance(op.time, Mapping):
                self._time_row(op.id, op.time)
            else:
                check_number(op.time, f"op {op.id!r}: time", hi=MAX_TIME_US, unit="µs")
            check_number(op.memory, f"op {op.id!r}: memory", hi=MAX_MEMORY, unit="bytes")

    def _index_edges_bulk(self, cols: Columns) -> bool:
        """``esrc``/``edst``/``ebytes``, ``succ``/``pred`` from the columns checked in bulk; False when an
        edge needs the per-edge checks."""
        n = self.n
        if isinstance(cols.src, np.ndarray):
            src, dst = cols.src.astype(np.int64), cols.dst.astype(np.int64)
            for end, col in (("src", src), ("dst", dst)):
                bad = np.flatnonzero((col < 0) | (col >= n))
                if bad.size:
                    e = int(bad[0])
                    raise InvalidInstanceError(f"edges[{e}]: {end} must be an op index 0..{n - 1}, got {int(col[e])}")
        else:
            index = self.op_index
            try:
                src = np.fromiter(map(index.__getitem__, cols.src), dtype=np.int64, count=len(cols.src))
                dst = np.fromiter(map(index.__getitem__, cols.dst), dtype=np.int64, count=len(cols.dst))
            except (KeyError, TypeError):
                return False
        nbytes = bulk_numbers(cols.nbytes, MAX_BYTES)
        if nbytes is None or len(src) != len(dst) or len(src) != len(nbytes) or (src == dst).any():
            return False
        self._esrc_a, self._edst_a, self._ebytes_a = src, dst, nbytes
        return True

    def _check_edges_one_by_one(self) -> None:
        index = self.op_index
        for ed in self.edges:
            for end, nm in (("src", ed.src), ("dst", ed.dst)):
                if nm not in index:
                    raise InvalidInstanceError(f"edge {ed.src!r}->{ed.dst!r}: {end} names unknown op {nm!r}")
            check_number(ed.bytes, f"edge {ed.src!r}->{ed.dst!r}: bytes", hi=MAX_BYTES)
            if index[ed.src] == index[ed.dst]:
                raise InvalidInstanceError(f"edges: cycle through edge {ed.src!r}->{ed.dst!r} (self-loop)")

    def _groups_to_check(self, max_dev_mem: int) -> list[int]:
        """The colocation groups that have a pinned member or may hold more memory than the largest
        device (in group order; the others need no check), found in bulk."""
        if not self.group_names:
            return []
        g = self._group_of_a
        inside = g >= 0
        pinned = self._pinned_a
        mem = self._mem_a.astype(np.float64)
        k = len(self.group_names)
        has_pin = np.bincount(g[inside & (pinned >= 0)], minlength=k) > 0
        heavy = np.bincount(g[inside], weights=mem[inside], minlength=k) > max_dev_mem * (1 - 1e-9)
        return np.flatnonzero(has_pin | heavy).tolist()

    def _index_pins_and_groups(self, cols: Columns) -> None:
        """``pinned`` (own pins; groups are applied by the caller), ``group_of``, ``groups``, ``group_names``
        (groups numbered in order of their first op)."""
        n = self.n
        if cols.pin_names is None:
            where: dict[Any, int] = {**self.device_index, None: -1}
            try:  # every pin at once (a lookup per op in C); the loop names the first unknown device
                self._pinned_a = np.array(list(map(where.__getitem__, cols.pin)), dtype=np.int64)
            except (KeyError, TypeError):
                for o, dn in enumerate(cols.pin):
                    if dn is not None and dn not in self.device_index:
                        raise InvalidInstanceError(f"op {cols.ids[o]!r}: device {dn!r} does not exist") from None
                raise
        else:
            codes = np.asarray(cols.pin, dtype=np.int64)
            to_dev = []
            for k, dn in enumerate(cols.pin_names):
                if dn not in self.device_index:
                    o = int(np.flatnonzero(codes == k)[0]) if (codes == k).any() else 0
                    raise InvalidInstanceError(f"op {cols.ids[o]!r}: device {dn!r} does not exist")
                to_dev.append(self.device_index[dn])
            if n and (codes.min() < -1 or codes.max() >= len(to_dev)):
                raise InvalidInstanceError(f"ops: device code out of range ({int(codes.min())}..{int(codes.max())})")
            self._pinned_a = np.array(to_dev + [-1], dtype=np.int64)[codes]
        if cols.coloc_names is None:  # groups numbered in order of first appearance, by dicts (C loops)
            first = dict.fromkeys(cols.coloc)
            first.pop(None, None)
            names: dict[Any, int] = dict(zip(first, range(len(first))))
            names[None] = -1
            self.group_names: list[str] = [str(c) for c in first]
            self._set_groups(np.array(list(map(names.__getitem__, cols.coloc)), dtype=np.int64))
            return
        codes = np.asarray(cols.coloc, dtype=np.int64)
        if n and (codes.min() < -1 or codes.max() >= len(cols.coloc_names)):
            raise InvalidInstanceError(f"ops: colocation code out of range ({int(codes.min())}..{int(codes.max())})")
        members = np.flatnonzero(codes >= 0)
        used, first = np.unique(codes[members], return_index=True)
        by_first = used[np.argsort(first, kind="stable")]  # codes in order of their first op
        renum = np.full(len(cols.coloc_names) + 1, -1, dtype=np.int64)
        renum[by_first] = np.arange(len(by_first))
        self.group_names = [str(cols.coloc_names[c]) for c in by_first.tolist()]
        self._set_groups(renum[codes])

    def _set_groups(self, group_of: np.ndarray) -> None:
        """``group_of`` (array) and the groups' members as CSR (``_group_ptr``, ``_group_members``: op
        indices in increasing order within each group)."""
        self._group_of_a = group_of
        members = np.flatnonzero(group_of >= 0)
        self._group_ptr, self._group_members = csr_arrays(group_of[members], len(self.group_names), members)

    def _check_serial_time(self) -> None:
        """Every op on its slowest device and every transfer at its slowest, one after another, must stay
        within ``MAX_SERIAL_US`` (the horizon exact models start from)."""
        lat = max(max(row) for row in self.lat)
        bw = min(min(row) for row in self.bw)
        total = sum(self._dmax.tolist())  # each op on its slowest device
        if self.m > 1:
            total += sum((lat + self._ebytes_a / bw).tolist()) + self.transfer_cpu * len(self._ebytes_a)
        del self._dmax
        if total > MAX_SERIAL_US:
            raise InvalidInstanceError(f"instance: ops and transfers one after another take {total:.3g} µs, more than the "
                       f"limit {MAX_SERIAL_US:g} µs (see the README's value limits)")

    def _topological_order(self) -> list[int]:
        """Smallest input index first among ready ops (deterministic); names an edge of a cycle."""
        order = ready_order(self)
        if len(order) < self.n:
            u, v = edge_on_cycle(self.graph)
            raise InvalidInstanceError(f"edges: cycle through edge {self.ops[u].id!r}->{self.ops[v].id!r}")
        return order

    @cached_property
    def graph(self):
        """The ``networkx.DiGraph`` on ops ``0 .. n-1`` (:func:`dplace.instance.graph.digraph`), built on first use;
        read-only by convention."""
        return digraph(self.n, zip(self.esrc, self.edst))

    # ------------------------------------------------------------------ helpers
    def transfer_time(self, e: int, d1: int, d2: int) -> float:
        """µs to move edge ``e``'s tensor from device d1 to d2 (0 on the same device)."""
        if d1 == d2:
            return 0.0
        return self.lat[d1][d2] + self.ebytes[e] / self.bw[d1][d2]

    def receive_times(self, placement, active=None) -> list[float]:
        """Per op, the µs of ``transfer_cpu`` it pays on its device under ``placement``: a tensor received
        from another device (one per (producer, destination device), as TensorFlow's Send/Recv pairs)
        costs the receiving device ``transfer_cpu`` µs of its own time, paid by the tensor's first
        consumer there (smallest topological index) before it computes. ``active`` (optional): only
        these ops exist. All zeros when ``transfer_cpu`` is 0."""
        out = [0.0] * self.n
        c = self.transfer_cpu
        if not c or self.m < 2:
            return out
        topo_pos, succ, edst = self.topo_pos, self.succ, self.edst
        for u in range(self.n):
            if active is not None and not active[u]:
                continue
            du = placement[u]
            first: dict[int, int] = {}
            for e in succ[u]:
                v = edst[e]
                dv = placement[v]
                if dv != du and (active is None or active[v]):
                    w = first.get(dv)
                    if w is None or topo_pos[v] < topo_pos[w]:
                        first[dv] = v
            for v in first.values():
                out[v] += c
        return out

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
        if (self._dur_a != self._dur_a[:, :1]).any():
            return False
        if self.pairs and len({(lk.latency, lk.bandwidth) for lk in self.pairs.values()} | {(self.link.latency, self.link.bandwidth)}) > 1:
            return False
        return not (self._pinned_a >= 0).any()

    def __repr__(self) -> str:
        tc = f", transfer_cpu={self.transfer_cpu:g}" if self.transfer_cpu else ""
        return f"Instance({self.name!r}, ops={self.n}, edges={self.n_edges}, devices={self.m}, comm={self.comm!r}{tc})"

    def replace(self, **changes: Any) -> "Instance":
        """A new validated Instance with some constructor arguments changed (explicit transform)."""
        args = dict(
            name=self.name, devices=self.devices, ops=self.ops, edges=self.edges, link=self.link,
            pairs=self.pairs, comm=self.comm, extra=self.extra, transfer_cpu=self.transfer_cpu,
        )
        args.update(changes)
        name = args.pop("name")
        devices = args.pop("devices")
        ops = args.pop("ops")
        edges = args.pop("edges")
        return Instance(name, devices, ops, edges, **args)
