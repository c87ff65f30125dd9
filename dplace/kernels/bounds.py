"""The cheap lower bounds of :mod:`dplace.bounds` on arrays, for large graphs: longest paths compiled
(numba; the same recurrences, visiting order and float operations as :func:`dplace.instance.graph.longest_to` /
:func:`~dplace.instance.graph.longest_from`, so the values are equal to the last bit), the other parts with numpy,
sums taken in the reference's order. No per-op Python lists are built.

:func:`dplace.bounds.scale_parts` (built from these) is what :func:`dplace.bounds.lower_bound_parts`
returns from ``SCALE_FROM`` ops on:
``critical_path``, ``work``, ``longest_op``, ``pinned``, ``memory_path`` and ``energetic`` (each the same
value as the reference's); the parts whose reference walks every op in Python (``anchored_work``, and any
part not listed here) are left out there, so the bound is the max of fewer proven bounds: still a bound.
"""
from __future__ import annotations

import numpy as np

from ..errors import InfeasibleError
from . import use

SCALE_FROM = 100_000  # ops: from here lower_bound_parts returns scale_parts (when the kernels are enabled)


def use_arrays(inst, at_least: int = 0) -> bool:
    """Whether the bounds of ``inst`` are computed here (:func:`dplace.kernels.use`, and ``at_least`` ops)."""
    return inst.n >= at_least and use(inst.n)


def _min_dur(inst) -> np.ndarray:
    return inst._dur_a.min(axis=1)


def heads_tails(inst) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`dplace.bounds.shared.heads_tails`: (smallest time, longest path to o, longest path after o)."""
    from .levels import longest_to_via as longest_to, tails

    p = _min_dur(inst)
    ptr, edges = inst._succ_csr
    head, _ = longest_to(inst.n, inst._topo_a, ptr, edges, inst._edst_a, p)
    return p, head, tails(inst.n, inst._topo_a, ptr, edges, inst._edst_a, p)


def critical_path(inst) -> tuple[float, list[int]]:
    """:func:`dplace.instance.graph.longest_path` with smallest times, no transfers: (length, ops first to last)."""
    if not inst.n:
        return 0.0, []
    from .levels import longest_to_via as longest_to

    p = _min_dur(inst)
    ptr, edges = inst._succ_csr
    to, via = longest_to(inst.n, inst._topo_a, ptr, edges, inst._edst_a, p)
    total = to + p
    topo = inst._topo_a
    end = int(topo[int(np.argmax(total[topo]))])  # the first of equals in topological order
    path = [end]
    while via[path[-1]] >= 0:
        path.append(int(via[path[-1]]))
    path.reverse()
    return float(total[end]), path


def work_bound(inst) -> float:
    """:func:`dplace.bounds.work_bound` from the columns."""
    cols = inst.columns
    scalar = not cols.time_map if isinstance(cols.time, np.ndarray) else not any(isinstance(t, dict) for t in cols.time)
    if scalar:
        t = np.asarray(cols.time, dtype=np.float64)
        return sum(t.tolist()) / sum(dev.speed for dev in inst.devices)
    return sum(_min_dur(inst).tolist()) / inst.m


def pinned_bound(inst) -> float:
    """:func:`dplace.bounds.pinned_bound`: per device the times of its pinned ops added in op order."""
    pinned = inst._pinned_a
    load = [sum(inst._dur_a[np.flatnonzero(pinned == d), d].tolist()) + 0.0 for d in range(inst.m)]
    return max(load) if load else 0.0


def longest_op(inst) -> float:
    """The ``longest_op`` part of :func:`dplace.bounds.lower_bound_parts`: the largest smallest op time."""
    return float(_min_dur(inst).max()) if inst.n else 0.0


def memory_path_bound(inst, devices_needed, critical: tuple[float, list[int]] | None = None) -> float:
    """:func:`dplace.bounds.memory_path_bound` on arrays; ``devices_needed``: the reference's
    :func:`dplace.bounds.devices_needed` (handed in: the kernels never import the bounds room);
    ``critical``: :func:`critical_path` when known."""
    length, path = critical if critical is not None else critical_path(inst)
    if len(path) < 2 or inst.m < 2:
        return length
    dmin = _min_dur(inst)
    g, mem, pinned = inst._group_of_a, inst._mem_a, inst._pinned_a
    gptr, gmem = inst._group_ptr, inst._group_members
    base = sum(dmin[path].tolist())
    groups = {int(g[o]) for o in path if g[o] >= 0}
    items = [int(mem[o]) for o in path if g[o] < 0]
    items += [sum(mem[gmem[gptr[x]:gptr[x + 1]]].tolist()) for x in groups]
    k = devices_needed(items, inst.capacity)
    if k <= 1:
        return base
    lat, bw, every = inst.lat, inst.bw, list(range(inst.m))
    links = {(lat[x][y], bw[x][y]) for x in every for y in every if x != y}  # the distinct links
    pa = np.asarray(path, dtype=np.int64)
    at = np.full(inst.n, -1, dtype=np.int64)  # path position of each op but the last
    at[pa[:-1]] = np.arange(len(path) - 1)
    es, ed = inst._esrc_a, inst._edst_a
    on = np.flatnonzero((at[es] >= 0) & (pa[np.maximum(at[es], 0) + 1] == ed))  # the path's edges, edge order
    js, first = np.unique(at[es[on]], return_index=True)  # each path edge's first edge (u, v)
    gp, pp = g[pa].tolist(), pinned[pa].tolist()
    costs = []
    for j, b in zip(js.tolist(), inst._ebytes_a[on[first]].tolist()):
        if (gp[j] >= 0 and gp[j] == gp[j + 1]) or (pp[j] >= 0 and pp[j] == pp[j + 1]):
            continue
        if pp[j] < 0 and pp[j + 1] < 0:  # any two devices: the same values, each link once
            c = min((la + b / w for la, w in links), default=None)
        else:
            au = [pp[j]] if pp[j] >= 0 else every
            av = [pp[j + 1]] if pp[j + 1] >= 0 else every
            c = min((lat[x][y] + b / bw[x][y] for x in au for y in av if x != y), default=None)
        if c is not None:
            costs.append(c)
    costs.sort()
    return base + sum(costs[: k - 1])


def check_memory_feasible(inst) -> None:
    """:func:`dplace.bounds.check_memory_feasible` on arrays (the same checks, in the same order, the
    same messages)."""
    mem, cap = inst._mem_a, inst.capacity
    largest = max(cap)
    over = np.flatnonzero(mem > largest)
    if over.size:
        o = int(over[0])
        raise InfeasibleError(f"op {inst.columns.ids[o]!r}: memory {int(mem[o])} exceeds the largest device ({largest})")
    gptr, gmem = inst._group_ptr, inst._group_members
    if len(gmem):
        sums = np.add.reduceat(mem[gmem].astype(np.float64), gptr[:-1]) if len(gptr) > 1 else np.zeros(0)
        for x in np.flatnonzero(sums > largest * (1 - 1e-9)).tolist():  # exact totals for the candidates
            total = sum(mem[gmem[gptr[x]:gptr[x + 1]]].tolist())
            if total > largest:
                raise InfeasibleError(
                    f"colocation {inst.group_names[x]!r}: memory {total} exceeds the largest device ({largest})")
    total = sum(mem.tolist())
    if total > sum(cap):
        raise InfeasibleError(f"ops need {total} bytes in all, devices hold {sum(cap)}")
    pinned = inst._pinned_a
    for d in range(inst.m):
        need = sum(mem[pinned == d].tolist())
        if need > cap[d]:
            raise InfeasibleError(f"device {inst.devices[d].name!r}: pinned ops need {need} bytes, it holds {cap[d]}")


def away(inst, p, head, tail, c) -> tuple[int, int, np.ndarray, np.ndarray]:
    """:func:`dplace.bounds.anchored._away` on arrays: (the one source or -1, the one sink or -1, hx, tx)
    from (p, head, tail) of :func:`heads_tails` and each edge's cheapest transfer ``c``; the same values."""
    n = inst.n
    srcs = np.flatnonzero(np.bincount(inst._edst_a, minlength=n) == 0)
    sinks = np.flatnonzero(np.bincount(inst._esrc_a, minlength=n) == 0)
    s = int(srcs[0]) if len(srcs) == 1 else -1
    t = int(sinks[0]) if len(sinks) == 1 else -1
    p, c = np.asarray(p, dtype=np.float64), np.asarray(c, dtype=np.float64)
    head, tail = np.asarray(head, dtype=np.float64), np.asarray(tail, dtype=np.float64)
    if s >= 0 or t >= 0:
        from .anchored import away_times  # imported where it runs (numba with it)
    if s < 0:
        hx = head.copy()
    else:
        ptr, edges = inst._pred_csr
        hx = away_times(inst._topo_a, ptr, edges, inst._esrc_a, head, p, c, s)
    if t < 0:
        tx = tail.copy()
    else:
        ptr, edges = inst._succ_csr
        tx = away_times(np.ascontiguousarray(inst._topo_a[::-1]), ptr, edges, inst._edst_a, tail, p, c, t)
    return s, t, hx, tx
