"""Independent schedule checker.

Written apart from :mod:`dplace.simulate` on purpose: it reads the Result's JSON form (placement,
schedule, transfers) and recomputes every rule from the instance's raw fields, sharing no timing code
with the simulator. Rules: every op placed exactly once on an existing device; durations; no overlap
per device; precedence with transfer delays (and, in sequential mode, one transfer per (producer,
destination device), link exclusivity, transfers after their producer); colocation; pinned devices;
memory (a violation must be flagged by ``memory_ok = false``); the makespan is the last end; a given
order is followed.
"""
from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any

from .check_bulk import TOL, valid_in_bulk, valid_result_in_bulk
from ..instance.model import Instance

BULK_FROM = 1000  # ops: from this size a valid schedule is recognised in bulk (numpy) first


@dataclass
class CheckReport:
    """What :func:`check` found: ``errors`` (one sentence each, naming ops, devices and times; empty when
    the schedule is valid), ``memory_ok`` (every device's memory holds its ops; None when there is no
    placement). ``ok`` / ``bool(report)``: no errors; ``summary()``: "valid" or the first errors."""

    errors: list[str] = field(default_factory=list)
    memory_ok: bool | None = None

    @property
    def ok(self) -> bool:
        return not self.errors

    def __bool__(self) -> bool:
        return self.ok

    def summary(self, limit: int = 5) -> str:
        """``"valid"``, or the first ``limit`` errors joined by "; " and how many more there are."""
        if self.ok:
            return "valid"
        more = f" (+{len(self.errors) - limit} more)" if len(self.errors) > limit else ""
        return "; ".join(self.errors[:limit]) + more


def _close_ge(a: float, b: float) -> bool:
    """a >= b up to a relative/absolute tolerance."""
    return a >= b - TOL * max(1.0, abs(a), abs(b))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOL * max(1.0, abs(a), abs(b))


def _op_time(op, dev) -> float:
    if isinstance(op.time, dict):
        return float(op.time[dev.name])
    return float(op.time) / float(dev.speed)


def _link(inst: Instance, a: str, b: str) -> tuple[float, float]:
    lk = inst.pairs.get((a, b), inst.link)
    return float(lk.latency), float(lk.bandwidth)


def _receive_costs(inst: Instance, placement: dict) -> dict[str, float]:
    """op id -> µs of ``transfer_cpu`` it pays (the README's rule, from the raw fields): each tensor a
    producer sends to another device costs that device ``transfer_cpu`` once, paid by the tensor's
    consumer there with the smallest topological index (Kahn's order, smallest op index first)."""
    c = float(inst.transfer_cpu)
    if not c:
        return {}
    import networkx as nx

    index = {op.id: i for i, op in enumerate(inst.ops)}
    g = nx.DiGraph()
    g.add_nodes_from(range(len(inst.ops)))
    g.add_edges_from((index[e.src], index[e.dst]) for e in inst.edges)
    topo = {o: i for i, o in enumerate(nx.lexicographical_topological_sort(g))}
    first: dict[tuple[str, str], str] = {}
    for e in inst.edges:
        dv = placement[e.dst]
        if dv == placement[e.src]:
            continue
        w = first.get((e.src, dv))
        if w is None or topo[index[e.dst]] < topo[index[w]]:
            first[(e.src, dv)] = e.dst
    out: dict[str, float] = {}
    for v in first.values():
        out[v] = out.get(v, 0.0) + c
    return out


def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _shape_errors(data: Any, rows_too: bool = True) -> list[str]:
    """What keeps ``data`` from being read as a result at all (wrong JSON types); [] when readable
    (placement and schedule left out with ``rows_too=False``)."""
    if not isinstance(data, dict):
        return [f"result must be a JSON object, got {type(data).__name__}"]
    out = []
    pl = data.get("placement")
    if rows_too and (not isinstance(pl, dict)
                     or not all(isinstance(k, str) and isinstance(v, str) for k, v in pl.items())):
        out.append("placement must be an object of op name -> device name")
    rows = data.get("schedule")
    if rows_too and rows is not None and not (isinstance(rows, list) and all(
            isinstance(r, dict) and isinstance(r.get("op"), str) and _is_num(r.get("start")) and _is_num(r.get("end"))
            for r in rows)):
        out.append("schedule must be a list of objects with op, start and end (numbers)")
    trs = data.get("transfers")
    if trs is not None and not (isinstance(trs, list) and all(
            isinstance(t, dict) and all(isinstance(t.get(k), str) for k in ("op", "src", "dst"))
            and all(_is_num(t.get(k)) for k in ("start", "end", "bytes")) for t in trs)):
        out.append("transfers must be a list of objects with op, src, dst and start, end, bytes (numbers)")
    order = data.get("order")
    if order is not None and not (isinstance(order, dict) and all(
            isinstance(v, list) and all(isinstance(o, str) for o in v) for v in order.values())):
        out.append("order must be an object of device name -> list of op names")
    if data.get("makespan") is not None and not _is_num(data["makespan"]):
        out.append(f"makespan must be a number, got {data['makespan']!r}")
    return out


def check(inst: Instance, result: Any) -> CheckReport:
    """Validate ``result`` (a Result or its ``to_dict()``) against ``inst``; never raises on bad data
    (data of the wrong JSON types is reported as errors)."""
    if hasattr(result, "to_dict") and inst.n >= BULK_FROM and result.placement is not None:
        memory_ok = valid_result_in_bulk(inst, result)  # from its arrays, without building its JSON form
        if memory_ok is not None:
            return CheckReport(memory_ok=memory_ok)
    data = result.to_dict() if hasattr(result, "to_dict") else result
    rep = CheckReport()
    err = rep.errors.append
    if isinstance(data, dict) and data.get("status") in ("infeasible", "no_solution") and data.get("placement") is None:
        return rep
    if isinstance(data, dict) and inst.n >= BULK_FROM and not _shape_errors(data, rows_too=False):
        memory_ok = valid_in_bulk(inst, data)  # every rule at once; None: the rules one by one below say
        if memory_ok is not None:
            rep.memory_ok = memory_ok
            return rep
    rep.errors.extend(_shape_errors(data))
    if rep.errors:
        return rep
    placement = data.get("placement") or {}
    sched = data.get("schedule") or []
    devs = {d.name: d for d in inst.devices}
    ops = {op.id: op for op in inst.ops}

    # every op placed exactly once, on an existing device
    for oid, dname in placement.items():
        if oid not in ops:
            err(f"placement names unknown op {oid!r}")
        if dname not in devs:
            err(f"op {oid!r} placed on unknown device {dname!r}")
    for op in inst.ops:
        if op.id not in placement:
            err(f"op {op.id!r} is not placed")
    times: dict[str, tuple[float, float]] = {}
    for row in sched:
        oid = row.get("op")
        if oid in times:
            err(f"op {oid!r} appears twice in the schedule")
            continue
        if oid not in ops:
            err(f"schedule names unknown op {oid!r}")
            continue
        if row.get("device") != placement.get(oid):
            err(f"op {oid!r}: schedule device {row.get('device')!r} differs from placement {placement.get(oid)!r}")
        times[oid] = (float(row["start"]), float(row["end"]))
    for op in inst.ops:
        if op.id not in times:
            err(f"op {op.id!r} is missing from the schedule")
    if rep.errors:
        return rep

    # durations (plus receive costs) and start >= 0
    recv = _receive_costs(inst, placement)
    for oid, (s, f) in times.items():
        dev = devs[placement[oid]]
        if s < -TOL:
            err(f"op {oid!r} starts before 0 ({s})")
        want = _op_time(ops[oid], dev) + recv.get(oid, 0.0)
        # f - s carries the rounding of times as large as f: a few ulps of f (nothing below 1e9 µs)
        if not (_close(f - s, want) or abs(f - s - want) <= 4 * math.ulp(max(abs(s), abs(f)))):
            err(f"op {oid!r}: runs {f - s} µs on {dev.name!r}, its time there is {want}")

    # no overlap per device
    by_dev: dict[str, list[tuple[float, float, str]]] = {}
    for oid, (s, f) in times.items():
        by_dev.setdefault(placement[oid], []).append((s, f, oid))
    for dname, rows in by_dev.items():
        rows.sort()
        for (s1, f1, a), (s2, f2, b) in zip(rows, rows[1:]):
            if not _close_ge(s2, f1) and f2 > s2 and f1 > s1:
                err(f"device {dname!r}: ops {a!r} [{s1}, {f1}] and {b!r} [{s2}, {f2}] overlap")

    # precedence with transfer delays
    sequential = inst.comm == "sequential"
    tr_index: dict[tuple[str, str], dict] = {}
    if sequential:
        for t in data.get("transfers") or []:
            key = (t["op"], t["dst"])
            if key in tr_index:
                err(f"tensor of {t['op']!r} sent twice to {t['dst']!r}")
            tr_index[key] = t
    for ed in inst.edges:
        du, dv = placement[ed.src], placement[ed.dst]
        su, fu = times[ed.src]
        sv, _ = times[ed.dst]
        if du == dv:
            if not _close_ge(sv, fu):
                err(f"edge {ed.src!r}->{ed.dst!r}: {ed.dst!r} starts at {sv} before {ed.src!r} ends at {fu}")
            continue
        lat, bw = _link(inst, du, dv)
        if not sequential:
            need = fu + lat + float(ed.bytes) / bw
            if not _close_ge(sv, need):
                err(f"edge {ed.src!r}->{ed.dst!r}: {ed.dst!r} starts at {sv}, data arrives at {need}")
            continue
        t = tr_index.get((ed.src, dv))
        if t is None:
            err(f"edge {ed.src!r}->{ed.dst!r}: no transfer of {ed.src!r} to {dv!r}")
            continue
        if t["src"] != du:
            err(f"transfer of {ed.src!r} to {dv!r} leaves from {t['src']!r}, producer is on {du!r}")
        if float(t["bytes"]) + TOL < float(ed.bytes):
            err(f"transfer of {ed.src!r} to {dv!r} carries {t['bytes']} bytes, edge needs {ed.bytes}")
        if not _close_ge(float(t["start"]), fu):
            err(f"transfer of {ed.src!r} to {dv!r} starts at {t['start']} before its producer ends at {fu}")
        ts, te = float(t["start"]), float(t["end"])
        if not (_close(te - ts, lat + float(t["bytes"]) / bw)  # as for durations: a few ulps of the end
                or abs(te - ts - (lat + float(t["bytes"]) / bw)) <= 4 * math.ulp(max(abs(ts), abs(te)))):
            err(f"transfer of {ed.src!r} to {dv!r} lasts {float(t['end']) - float(t['start'])}, link needs {lat + float(t['bytes']) / bw}")
        if not _close_ge(sv, float(t["end"])):
            err(f"edge {ed.src!r}->{ed.dst!r}: {ed.dst!r} starts at {sv} before the transfer ends at {t['end']}")
    if sequential:
        by_link: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
        for t in tr_index.values():
            by_link.setdefault((t["src"], t["dst"]), []).append((float(t["start"]), float(t["end"]), t["op"]))
        for (a, b), rows in by_link.items():
            rows.sort()
            for (s1, f1, x), (s2, f2, y) in zip(rows, rows[1:]):
                if not _close_ge(s2, f1) and f1 > s1 and f2 > s2:
                    err(f"link {a!r}->{b!r}: transfers of {x!r} and {y!r} overlap")

    # colocation and pins
    groups: dict[str, set[str]] = {}
    for op in inst.ops:
        if op.colocation is not None:
            groups.setdefault(op.colocation, set()).add(placement[op.id])
        if op.device is not None and placement[op.id] != op.device:
            err(f"op {op.id!r} is pinned to {op.device!r} but placed on {placement[op.id]!r}")
    for g, ds in groups.items():
        if len(ds) > 1:
            err(f"colocation {g!r} split across devices {sorted(ds)}")

    # memory
    used = {d: 0 for d in devs}
    for op in inst.ops:
        used[placement[op.id]] += int(op.memory)
    rep.memory_ok = all(used[d] <= devs[d].memory for d in devs)
    claimed = data.get("memory_ok")
    if claimed is not None and bool(claimed) != rep.memory_ok:
        err(f"memory_ok says {claimed}, device use {used} says {rep.memory_ok}")

    # makespan and order
    last = max((f for _, f in times.values()), default=0.0)
    if data.get("makespan") is not None and not _close(float(data["makespan"]), last):
        err(f"makespan {data['makespan']} differs from the last end {last}")
    if data.get("order_given") and data.get("order"):
        for dname, lst in data["order"].items():
            starts = [times[o][0] for o in lst if o in times]
            for i, (a, b) in enumerate(zip(starts, starts[1:])):
                if not _close_ge(b, a):
                    err(f"device {dname!r}: op {lst[i + 1]!r} starts before {lst[i]!r} against the given order")
    return rep
