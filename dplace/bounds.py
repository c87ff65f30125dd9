"""Proven lower bounds on the makespan, and the early memory-feasibility check (issue #2 §6)."""
from __future__ import annotations

from .errors import InfeasibleError
from .model import Instance


def critical_path_length(inst: Instance) -> float:
    """Longest path with every op on its fastest device and no transfers (µs)."""
    best = [0.0] * inst.n
    dur, succ, edst = inst.dur, inst.succ, inst.edst
    top = 0.0
    for o in inst.topo:
        f = best[o] + min(dur[o])
        if f > top:
            top = f
        for e in succ[o]:
            v = edst[e]
            if f > best[v]:
                best[v] = f
    return top


def work_bound(inst: Instance) -> float:
    """Total work over total capacity to do work.

    With scalar op times (time / speed on each device), a device's busy time is its work over its
    speed, so makespan >= total work / sum of speeds. With per-device times every op needs at least
    its smallest time on some device, so makespan >= sum of smallest times / device count.
    """
    if all(not isinstance(op.time, dict) for op in inst.ops):
        total = sum(float(op.time) for op in inst.ops)
        return total / sum(dev.speed for dev in inst.devices)
    return sum(min(row) for row in inst.dur) / inst.m


def pinned_bound(inst: Instance) -> float:
    """Each device must run the ops pinned to it one after another."""
    load = [0.0] * inst.m
    for o, d in enumerate(inst.pinned):
        if d >= 0:
            load[d] += inst.dur[o][d]
    return max(load) if load else 0.0


def lower_bound_parts(inst: Instance) -> dict[str, float]:
    return {
        "critical_path": critical_path_length(inst),
        "work": work_bound(inst),
        "longest_op": max((min(row) for row in inst.dur), default=0.0),
        "pinned": pinned_bound(inst),
    }


def lower_bound(inst: Instance) -> float:
    """Max of the critical path (fastest devices, no transfers), work / capacity, the longest op and
    the pinned load; a proven lower bound on every schedule's makespan. Raises
    :class:`InfeasibleError` first when the ops cannot fit in the devices' memory at all."""
    check_memory_feasible(inst)
    return max(lower_bound_parts(inst).values())


def check_memory_feasible(inst: Instance) -> None:
    """Fail early when no placement can respect memory (necessary conditions only)."""
    largest = max(inst.capacity)
    for o in range(inst.n):
        if inst.mem[o] > largest:
            raise InfeasibleError(f"op {inst.ops[o].id!r}: memory {inst.mem[o]} exceeds the largest device ({largest})")
    for g, members in enumerate(inst.groups):
        total = sum(inst.mem[o] for o in members)
        if total > largest:
            raise InfeasibleError(
                f"colocation {inst.group_names[g]!r}: memory {total} exceeds the largest device ({largest})"
            )
    total = sum(inst.mem)
    cap = sum(inst.capacity)
    if total > cap:
        raise InfeasibleError(f"ops need {total} bytes in all, devices hold {cap}")
    pinned = [0] * inst.m
    for o, d in enumerate(inst.pinned):
        if d >= 0:
            pinned[d] += inst.mem[o]
    for d in range(inst.m):
        if pinned[d] > inst.capacity[d]:
            raise InfeasibleError(
                f"device {inst.devices[d].name!r}: pinned ops need {pinned[d]} bytes, it holds {inst.capacity[d]}"
            )
