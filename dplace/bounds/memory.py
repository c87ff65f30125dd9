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

A boundary may cost more than its edge's transfer, and both bounds count that:

* **Any segment** (``segments_memory``, since session 25): a segment (a, b) that holds boundaries spans
  start(c_b) - start(c_a) >= sum_{a <= r < b} p_min(c_r) + the boundaries' costs (its path ops run one after
  another on their runs' devices) as well as its proven bound lb_k. So span_k >= lb_k + sum_j max(0, cost_j -
  s_k) with *slack* s_k = max(0, lb_k - sum_{a <= r < b} p_min(c_r)). Proof: with J the boundaries whose
  cost passes s_k (none: span_k >= lb_k), lb_k + sum_J (cost_j - s_k) <= lb_k - s_k + sum_J cost_j <= the
  chain + every boundary's cost <= span_k, as lb_k - s_k = min(lb_k, the chain). Consecutive segments
  without slack (lb_k <= their chain) are taken together: their spans add up to the chain across all of
  them plus their boundaries' costs, so a boundary's queue (below) may be counted from any path op of the
  group, not only of its own segment. A trivial segment has s_k = 0, so its edge keeps its whole cost as
  before. Pieces that the mirror step (:func:`dplace.bounds.mirror.mirror_split_bound`) bounded together
  with another, or that hold such a piece, count a boundary at 0: their spans are bounded only as a pair.
* **Sequential comm, the link's queue** (:func:`sequential_cut_cost`). Let the boundary fall between c_k
  (device d1) and c_{k+1} (d2), the run before it hold c_i .. c_k and the run after c_{k+1} .. c_l. A path op
  c_t of the run before (t <= k) with an edge to an op of a unit of the run after (held on d2) sends on the
  link d1 -> d2, at least as long as its largest such tensor on the cheapest link (``latency + bytes /
  bandwidth``), and the link sends in the order the producers finish: c_t finishes before c_k (an ancestor on
  the same device; a zero-time c_k finishes a round later), so the send c_{k+1} waits for comes after every
  such send of c_t .. c_k, each starting after its producer ends. Hence start(c_{k+1}) >= end(c_t) + the sum
  of those sends from c_t on, while the chain counts end(c_t) + sum_{t < r <= k} p_min(c_r) + cost_k: the
  boundary costs max(cost_k, max_t [sum of the sends from c_t on - sum_{t < r <= k} p_min(c_r)]). Each
  boundary's detour runs from c_t (t > the previous boundary; in a segment t >= a, or its group's first)
  to c_{k+1}, so the detours of different boundaries do not overlap and their costs add along the path. The
  runs' ends are the dynamic programme's state, each capped at ``SEQ_WINDOW`` path ops from the boundary
  (fewer ops known on each side: smaller sends and fewer of them, still a bound).

Memory is the only reason a run must end here, so on instances whose whole path (with its groups) fits
on one device both add nothing.
"""
from __future__ import annotations

import math
from typing import Sequence

from .shared import critical_path_ops
from ..instance.model import Instance

__all__ = ["SEQ_WINDOW", "cheapest_forced_cut", "forced_cut_cost", "forced_cuts", "memory_cuts_bound",
           "path_edge_costs", "segment_cut_costs", "sequential_cut_cost", "sequential_cuts"]

SEQ_WINDOW = 16  # path ops on each side of a run boundary whose sends sequential_cut_cost counts


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


def _run_starts(inst: Instance, path: Sequence[int]) -> list[int]:
    """lo[j]: the first i such that the run path[i..j] fits on one device (units counted once however many
    of its path ops share them, pins counted per device); lo[j] > j when path[j] alone does not fit. A run
    that fits stays fitting when shortened, so lo is nondecreasing: one sliding window."""
    from collections import Counter

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

    lo, i = [], 0
    for j in range(len(path)):
        add(j, 1)
        while i <= j and not fits():
            add(i, -1)
            i += 1
        lo.append(i)
    return lo


def forced_cut_cost(inst: Instance, path: Sequence[int], cost: Sequence[float]) -> float:
    """Least total ``cost[j]`` over the boundaries j (between path[j] and path[j+1]) of a cut of
    ``path`` into runs that each fit on one device (module docstring); ``inf`` if no cut fits.

    Dynamic programme: f[0] = 0, f[j + 1] = min over runs path[i..j] that fit of f[i] + cost[i - 1]
    (nothing for i = 0). The runs ending at j start at i in [lo_j, j] (:func:`_run_starts`, lo_j
    nondecreasing): a sliding-window minimum, O(K · unit size)."""
    return forced_cuts(inst, path, cost)[0]


def forced_cuts(inst: Instance, path: Sequence[int], cost: Sequence[float]) -> tuple[float, list[int]]:
    """:func:`forced_cut_cost` and one cut that costs it: its boundaries j, increasing (none when the value
    is ``inf`` or 0 boundaries are needed)."""
    K = len(path)
    if K == 0 or inst.m < 2:
        return 0.0, []
    lo = _run_starts(inst, path)
    f = [math.inf] * (K + 1)
    f[0] = 0.0
    arg = [0] * (K + 1)  # arg[j + 1]: the start of the last run of f[j + 1]'s cut
    win = _SlidingMin()  # over i: f[i] + cost[i - 1]
    for j in range(K):
        win.push(j, f[j] + (cost[j - 1] if j > 0 else 0.0))  # a run may start at j
        arg[j + 1], f[j + 1] = win.argleast(lo[j])
    return f[K], (_walk_back(arg, K) if f[K] < math.inf else [])


def _walk_back(arg: Sequence[int], K: int) -> list[int]:
    """The boundaries of the cut whose runs start at arg[end] for each run's end + 1, from K back to 0."""
    out, j = [], K
    while j > 0:
        j = arg[j]
        if j > 0:
            out.append(j - 1)
    return out[::-1]


class _SlidingMin:
    """The least of values pushed at increasing positions, over the positions from a nondecreasing lower end on
    (a monotone queue: amortised O(1) a step)."""

    def __init__(self) -> None:
        from collections import deque

        self._q: deque[tuple[int, float]] = deque()  # (position, value), values increasing

    def push(self, i: int, v: float) -> None:
        q = self._q
        while q and q[-1][1] >= v:
            q.pop()
        q.append((i, v))

    def least(self, lo: int) -> float:
        """The least value pushed at a position >= ``lo`` (inf: none)."""
        return self.argleast(lo)[1]

    def argleast(self, lo: int) -> tuple[int, float]:
        """(position, value) of the least value pushed at a position >= ``lo`` ((-1, inf): none)."""
        q = self._q
        while q and q[0][0] < lo:
            q.popleft()
        return q[0] if q else (-1, math.inf)


def sequential_cut_cost(inst: Instance, path: Sequence[int], cost: Sequence[float],
                        slack: Sequence[float] | None = None, first: Sequence[int] | None = None,
                        window: int = SEQ_WINDOW) -> float:
    """:func:`forced_cut_cost` where, in sequential comm, a boundary also costs the link queue in front of
    its send (module docstring, "the link's queue"): boundary k costs max(0, max(cost[k], detour) - slack[k]),
    the detour counted from path ops c_t with t >= first[k] only (``slack`` default 0, ``first`` default 0:
    the whole path one segment). ``cost[k]`` inf: no boundary there.

    Dynamic programme over (boundary k, x = path ops of the run before it, y = of the run after), x and y
    capped at ``window``: g[k][y] = min_x f[k][x] + c(k, x, y), f[k][x] = min over runs path[s..k] that fit of
    g[s - 1][min(k - s + 1, window)] (0 for s = 0; for x = window a sliding-window minimum). O(K · window² ·
    edges per op)."""
    return sequential_cuts(inst, path, cost, slack, first, window)[0]


def sequential_cuts(inst: Instance, path: Sequence[int], cost: Sequence[float],
                    slack: Sequence[float] | None = None, first: Sequence[int] | None = None,
                    window: int = SEQ_WINDOW) -> tuple[float, list[int]]:
    """:func:`sequential_cut_cost` and one cut that costs it: its boundaries, increasing."""
    K = len(path)
    if K < 2 or inst.m < 2:
        return 0.0, []
    lo = _run_starts(inst, path)
    if lo[-1] == 0:  # the whole path fits on one device: no boundary is forced
        return 0.0, []
    W = max(1, int(window))
    slack = slack if slack is not None else [0.0] * (K - 1)
    first = first if first is not None else [0] * (K - 1)
    units = [_unit(inst, o) for o in path]
    at: dict[int, list[int]] = {}  # op -> the path positions whose unit holds it
    for j, u in enumerate(units):
        for x in u:
            at.setdefault(x, []).append(j)
    dmin = inst._dur_a[list(path)].min(axis=1).tolist()
    links = {(inst.lat[a][d], inst.bw[a][d]) for a in range(inst.m) for d in range(inst.m) if a != d}
    ed, eb = inst._edst_a, inst._ebytes_a
    # per path position t: (q, bytes) for each edge of path[t] to an op of the unit at position q, t < q <= t + 2W
    outs: list[list[tuple[int, float]]] = []
    ptr, eids = inst._succ_csr  # arrays: the per-op lists are not built (they cost 0.1 s at 36k ops)
    for t, o in enumerate(path):
        row = []
        for e in eids[ptr[o]:ptr[o + 1]].tolist():
            b = float(eb[e])
            row.extend((q, b) for q in at.get(int(ed[e]), ()) if t < q <= t + 2 * W)
        outs.append(row)

    def send(b: float) -> float:  # the shortest a send of ``b`` bytes takes on any link
        return min(lat + b / bw for lat, bw in links)

    def costs(k: int) -> list[list[float]]:
        """c[y][x] for x, y in 1..W (index 0 unused)."""
        out = [[math.inf] * (W + 1) for _ in range(W + 1)]
        if cost[k] == math.inf:
            return out
        low = max(0, first[k], k - W + 1)
        for y in range(1, W + 1):
            top = min(K - 1, k + y)
            best, acc, dsum = cost[k], 0.0, 0.0
            row = out[y]
            for x in range(1, W + 1):
                t = k - x + 1
                if t >= low:
                    big = -1.0
                    for q, b in outs[t]:
                        if k < q <= top and b > big:
                            big = b
                    if big >= 0.0:
                        acc += send(big)
                        if acc - dsum > best:
                            best = acc - dsum
                    dsum += dmin[t]
                row[x] = max(0.0, best - slack[k])
        return out

    inf = math.inf
    f = [[inf] * (W + 1) for _ in range(K)]
    fs = [[-1] * (W + 1) for _ in range(K)]  # the start s of f[k][x]'s last run
    g = [[inf] * (W + 1) for _ in range(K)]
    gx = [[0] * (W + 1) for _ in range(K)]  # the x of g[k][y]'s least
    longest = _SlidingMin()  # over s: g[s - 1][W] (0 for s = 0), runs s..k of W ops or more
    for k in range(K):
        fk = f[k]
        for x in range(1, min(W - 1, k + 1) + 1):  # the run before is s..k, exactly x < W ops
            s = k - x + 1
            if s >= lo[k]:
                fk[x], fs[k][x] = (0.0 if s == 0 else g[s - 1][x]), s
        s = k - W + 1  # runs of W ops or more: a sliding-window minimum over their starts s in [lo_k, k - W + 1]
        if s >= 0:
            longest.push(s, 0.0 if s == 0 else g[s - 1][W])
        fs[k][W], fk[W] = longest.argleast(lo[k])
        if k == K - 1 or all(v == inf for v in fk):
            continue
        c = costs(k)
        gk = g[k]
        for y in range(1, W + 1):
            cy = c[y]
            gk[y], gx[k][y] = min((fk[x] + cy[x], x) for x in range(1, W + 1))
    value, x = min((v, x) for x, v in enumerate(f[K - 1]))
    cuts, k = [], K - 1
    while value < inf:  # back from the last run: its start s, the boundary s - 1 and the run before it
        s = fs[k][x]
        if s <= 0:
            break
        cuts.append(s - 1)
        k, x = s - 1, gx[s - 1][min(k - s + 1, W)]
    return value, cuts[::-1]


def _guard(inst: Instance, path: Sequence[int], cost: list[float]) -> list[float]:
    """A boundary between two ops that always share a device (one colocation group, or pinned to one
    device) cannot be a run boundary."""
    g = inst._group_of_a[list(path)].tolist()
    pin = inst._pinned_a[list(path)].tolist()
    return [math.inf if (g[j] >= 0 and g[j] == g[j + 1]) or (pin[j] >= 0 and pin[j] == pin[j + 1]) else c
            for j, c in enumerate(cost)]


def memory_cuts_bound(inst: Instance) -> float:
    """The critical path's smallest times plus the transfers memory forces on it (module docstring); in
    sequential comm each boundary with the link queue in front of its send (:func:`sequential_cut_cost`)."""
    path = critical_path_ops(inst)
    base = sum(inst._dur_a[path].min(axis=1).tolist()) if path else 0  # min(inst.dur[o]) per op, added in order
    if len(path) < 2 or inst.m < 2:
        return base
    extra = cheapest_forced_cut(inst, path)[0]
    return base + (extra if extra < math.inf else 0.0)


def cheapest_forced_cut(inst: Instance, path: Sequence[int]) -> tuple[float, list[int]]:
    """The least cost of the run boundaries memory forces on ``path`` (each edge its cheapest transfer, none inside
    a colocation group or between two ops pinned to one device; in sequential comm with the link's queue) and one
    cut that costs it: :func:`sequential_cuts` or :func:`forced_cuts`."""
    cost = _guard(inst, path, path_edge_costs(inst, path))
    return (sequential_cuts if inst.comm == "sequential" else forced_cuts)(inst, path, cost)


def segment_cut_costs(inst: Instance, path: Sequence[int], pieces: Sequence[tuple[int, int, float, bool]],
                      queue: bool = True) -> float:
    """What memory adds to the segment bound (module docstring, "any segment"): ``pieces`` are the widest
    level's segments as (a, b, proven bound in µs, paired by the mirror step or holding such a piece), their
    path index ranges [a, b) covering the path's edges; each edge j of a segment costs its cheapest transfer
    (in sequential comm with the link's queue, counted from the segment's first path op on, or from the first
    of the consecutive segments without slack it belongs to) less the segment's slack, and 0 in a paired
    segment. ``queue`` False: the link's queue is not counted (each boundary its edge's transfer only, a
    smaller cost: still a bound, in O(K) instead of the queue's O(K · window²))."""
    K = len(path)
    if K < 2 or inst.m < 2 or not pieces:
        return 0.0
    dmin = inst._dur_a[list(path)].min(axis=1).tolist()
    slack = [0.0] * (K - 1)
    first = [0] * (K - 1)
    group = None  # the first path index of the run of consecutive pieces without slack this one belongs to
    for a, b, lb, paired in sorted(pieces):
        lo_, hi = max(a, 0), min(b, K)
        s = math.inf if paired else max(0.0, lb - sum(dmin[lo_:hi]))
        group = (lo_ if group is None else group) if s == 0.0 else None
        for j in range(lo_, min(b, K - 1)):
            slack[j], first[j] = s, (lo_ if group is None else group)
    cost = _guard(inst, path, path_edge_costs(inst, path))
    if inst.comm == "sequential" and queue:
        extra = sequential_cut_cost(inst, path, cost, slack, first)
    else:
        extra = forced_cut_cost(inst, path, [c if c == math.inf else max(0.0, c - s) for c, s in zip(cost, slack)])
    return extra if extra < math.inf else 0.0
