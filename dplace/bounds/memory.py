"""Device changes that memory forces on the critical path, and what they cost.

Walk along a path P = (c_0, ..., c_{K-1}) of the instance (consecutive ops joined by an edge) in a
schedule and cut it into *runs*: maximal stretches of consecutive path ops on one device. A run's device
holds every op of the run and every op colocated with one of them (a colocation group is placed whole),
so the run's *units* (each op's colocation group, or the op alone) must fit together in one device's
memory, on a device every pinned op of them allows. Between two runs the path changes device, on the
edge (c_j, c_{j+1}), and that edge's transfer takes at least its cheapest time between two devices.

:func:`forced_cut_cost` is the least total cost of the run boundaries over all ways of cutting P into
runs that fit (a dynamic programme over the path; a boundary inside a colocation group, or between two
ops pinned to one device, is impossible). Every schedule cuts P into runs that fit, so its boundaries
cost at least that much. Two bounds use it:

* :func:`memory_cuts_bound` (``memory_cuts``): every schedule runs P's ops one after another, each for at
  least its smallest time, and pays every transfer on P's edges between devices, so its makespan is at
  least sum_j p_min(c_j) + :func:`forced_cut_cost` (P: the critical path, cost: each edge's cheapest
  transfer). It refines ``memory_path`` (which counts only how many devices P needs in all).
* the segment bound plus forced cuts (``segments_memory``, :func:`segment_cut_costs`): the segment
  decomposition (:mod:`dplace.formulations.bounds_segments`) cuts P into segments whose spans add up to at most the
  makespan, each span at least the segment's proven bound lb_k. A segment that holds only c_j and the
  cut c_{j+1} after it (a *trivial* segment) has lb_k <= p_min(c_j) (its sub-instance's critical
  path in ticks rounded down, or c_j's smallest time when the bound's time ran out) and, when c_j and c_{j+1} are on different devices, span_k =
  start(c_{j+1}) - start(c_j) >= p_min(c_j) + cheapest transfer of (c_j, c_{j+1}) >= lb_k + that
  transfer. With cost = that transfer on the edges of trivial segments and 0 on every other edge of P,
  the schedule's run boundaries add at least :func:`forced_cut_cost` on top of the sum of the lb_k:
  makespan >= segment bound + forced_cut_cost.

Memory is the only reason a run must end here, so on instances whose whole path (with its groups) fits
on one device both add nothing.
"""
from __future__ import annotations

import math
from typing import Sequence

from .shared import critical_path_ops
from ..instance.model import Instance

__all__ = ["forced_cut_cost", "memory_cuts_bound", "path_edge_costs", "segment_cut_costs"]


# Everything here reads the instance's arrays for the path's ops (and their groups) only: a path of ~1,300 ops
# of a 36k-op graph costs milliseconds, where building the per-op lists (``inst.mem``, ``inst.succ``, ...)
# cost 0.1 s.

def _unit(inst: Instance, o: int) -> tuple[int, ...]:
    g = int(inst._group_of_a[o])
    ptr = inst._group_ptr
    return tuple(inst._group_members[ptr[g]:ptr[g + 1]].tolist()) if g >= 0 else (o,)


def path_edge_costs(inst: Instance, path: Sequence[int]) -> list[float]:
    """Per edge (c_j, c_{j+1}) of the path: the cheapest transfer between two distinct devices of the
    devices the two ops may use (the largest over parallel edges: each is paid); 0 with one device."""
    import numpy as np

    out = [0.0] * max(0, len(path) - 1)
    if len(path) < 2:
        return out
    at = np.full(inst.n, -1, dtype=np.int64)  # path position of each op but the last
    at[np.asarray(path[:-1], dtype=np.int64)] = np.arange(len(path) - 1)
    nxt = np.asarray(path, dtype=np.int64)[np.maximum(at, 0) + 1]
    es, ed = inst._esrc_a, inst._edst_a
    on = np.flatnonzero((at[es] >= 0) & (nxt[es] == ed))  # the path's edges (parallel ones too), in edge order
    pinned, every = inst._pinned_a, list(range(inst.m))
    links = {(inst.lat[a][d], inst.bw[a][d]) for a in every for d in every if a != d}  # the distinct links
    for e, j, b in zip(on.tolist(), at[es[on]].tolist(), inst._ebytes_a[on].tolist()):
        u, v = path[j], path[j + 1]
        if pinned[u] < 0 and pinned[v] < 0:  # any two devices: the same values, each link once
            c = min((lat + b / bw for lat, bw in links), default=0.0)
        else:
            au = [int(pinned[u])] if pinned[u] >= 0 else every
            av = [int(pinned[v])] if pinned[v] >= 0 else every
            c = min((inst.lat[a][d] + b / inst.bw[a][d] for a in au for d in av if a != d), default=0.0)
        out[j] = max(out[j], c)  # Instance.transfer_time's sum
    return out


def forced_cut_cost(inst: Instance, path: Sequence[int], cost: Sequence[float]) -> float:
    """Least total ``cost[j]`` over the boundaries j (between path[j] and path[j+1]) of a cut of
    ``path`` into runs that each fit on one device (module docstring); ``inf`` if no cut fits.

    Dynamic programme: f[0] = 0, f[j + 1] = min over runs path[i..j] that fit of f[i] + cost[i - 1]
    (nothing for i = 0). A run that fits stays fitting when shortened, so the runs ending at j start at
    i in [lo_j, j] with lo_j nondecreasing: one sliding window (units counted once however many of its
    path ops share them, pins counted per device) and a sliding-window minimum, O(K · unit size)."""
    from collections import Counter, deque

    K = len(path)
    if K == 0 or inst.m < 2:
        return 0.0
    units = [_unit(inst, o) for o in path]
    held = sorted({x for u in units for x in u})
    ops_mem = dict(zip(held, inst._mem_a[held].tolist()))
    ops_pin = dict(zip(held, inst._pinned_a[held].tolist()))
    caps = inst.capacity
    big = max(caps)
    count: Counter[int] = Counter()  # op -> how many units of the window hold it
    pins: Counter[int] = Counter()  # device -> pinned ops of the window on it
    mem = 0

    def add(j: int, sign: int) -> None:
        nonlocal mem
        for x in units[j]:
            before = count[x]
            count[x] += sign
            if (before == 0) != (count[x] == 0):  # x enters or leaves the window
                mem += sign * ops_mem[x]
                d = ops_pin[x]
                if d >= 0:
                    pins[d] += sign
                    if not pins[d]:
                        del pins[d]

    def fits() -> bool:
        if len(pins) > 1:
            return False
        return mem <= (caps[next(iter(pins))] if pins else big)

    f = [math.inf] * (K + 1)
    f[0] = 0.0
    win: deque[tuple[int, float]] = deque()  # (i, f[i] + cost[i - 1]), values increasing
    lo = 0
    for j in range(K):
        val = f[j] + (cost[j - 1] if j > 0 else 0.0)  # a run may start at j
        while win and win[-1][1] >= val:
            win.pop()
        win.append((j, val))
        add(j, 1)
        while lo <= j and not fits():
            add(lo, -1)
            lo += 1
        while win and win[0][0] < lo:
            win.popleft()
        if win:
            f[j + 1] = win[0][1]
    return f[K]


def _guard(inst: Instance, path: Sequence[int], cost: list[float]) -> list[float]:
    """A boundary between two ops that always share a device (one colocation group, or pinned to one
    device) cannot be a run boundary."""
    g = inst._group_of_a[list(path)].tolist()
    pin = inst._pinned_a[list(path)].tolist()
    return [math.inf if (g[j] >= 0 and g[j] == g[j + 1]) or (pin[j] >= 0 and pin[j] == pin[j + 1]) else c
            for j, c in enumerate(cost)]


def memory_cuts_bound(inst: Instance) -> float:
    """The critical path's smallest times plus the transfers memory forces on it (module docstring)."""
    path = critical_path_ops(inst)
    base = sum(inst._dur_a[path].min(axis=1).tolist()) if path else 0  # min(inst.dur[o]) per op, added in order
    if len(path) < 2 or inst.m < 2:
        return base
    extra = forced_cut_cost(inst, path, _guard(inst, path, path_edge_costs(inst, path)))
    return base + (extra if extra < math.inf else 0.0)


def segment_cut_costs(inst: Instance, path: Sequence[int], trivial: Sequence[int]) -> float:
    """What memory adds to the segment bound: :func:`forced_cut_cost` with each trivial segment's edge
    (path indices j in ``trivial``: the segment is path[j] and the cut path[j+1], nothing between) at its
    cheapest transfer and every other edge of the path at 0 (module docstring)."""
    if len(path) < 2 or inst.m < 2 or not trivial:
        return 0.0
    edge = path_edge_costs(inst, path)
    cost = [0.0] * (len(path) - 1)
    for j in trivial:
        cost[j] = edge[j]
    extra = forced_cut_cost(inst, path, _guard(inst, path, cost))
    return extra if extra < math.inf else 0.0
