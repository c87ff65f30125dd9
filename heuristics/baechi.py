"""Baechi's memory-constrained placers m-TOPO, m-ETF and m-SCT (Jeon et al., SoCC'20, §2.2-§2.4)
with the §3 design options as switches (colocation co-adjust, co-placement, safe operator fusion,
forward-operator-based placement).

How the pieces fit (one timing model, one set of placement rules):

* ``build_units`` groups ops that must or should share a device: colocation groups (always: they
  are hard constraints here), backward ops with their forward op (``forward_of``, §3.2 (ii)/§3.3 (ii)),
  and an op whose output feeds exactly one op with that op (co-placement, §3.2 (i)).
* ``fuse`` merges directly connected ops of one unit into clusters, only in Baechi's safe cases
  (§3.3, Fig. 5 d/e): the source has out-degree <= 1 or the destination in-degree <= 1 in the current
  fused graph, so no cycle can appear. A cluster is scheduled as one meta-op (its ops back to back).
* ``_UnitRules`` is :class:`dplace.rules.Rules` lifted to units: pins, the unit's device once its first
  op is placed, and memory (the whole unit is reserved when its first op is placed: co-adjust, §3.1).
* The list schedulers ask :class:`dplace.simulate.ScheduleState` for every time (data ready, earliest
  start, commit); they keep no clock of their own. m-ETF and m-SCT keep, per device, a heap of
  clusters waiting for data (keyed by data-ready time) and a heap of clusters already available
  (keyed by priority), refreshed lazily, so a step costs O(m log n) instead of a rescan of all
  ready ops.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from dplace import kernels
from dplace.columns import forward_of_index
from dplace.errors import bad_option
from dplace.graph import DisjointSets, components, queue_order
from dplace.model import Instance
from dplace.ranks import edge_costs, op_costs, upward_rank
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.simulate import ScheduleState

__all__ = ["BaechiOptions", "SctOptions", "Clusters", "build_units", "fuse", "m_topo", "m_etf", "m_sct"]


@dataclass(frozen=True)
class BaechiOptions:
    colocation_coadjust: bool = True  # §3.1: placing a group's first op reserves memory for the whole group
    coplacement: bool = True  # §3.2 (i): an op whose output feeds only one op goes with that op
    fusion: bool = True  # §3.3 (i): fuse ops of one co-placement unit, safe cases only
    forward_placement: bool = True  # §3.3 (ii): a backward op (field forward_of) goes with its forward op
    unit_cap: float = 1.0  # dplace addition: a soft unit holds at most unit_cap x (total memory, work)/m

    def __post_init__(self) -> None:
        if not (self.unit_cap > 0):
            raise bad_option("unit_cap", "> 0", self.unit_cap)


@dataclass(frozen=True)
class SctOptions(BaechiOptions):
    threshold: float = 0.1  # §2.4: x_ij < threshold after the LP => j is i's favorite child
    lp_solver: str = "highs"  # "highs" (OR-Tools' bundled HiGHS, faster here) or "glop"; see formulations/sct_lp.py
    # None: the paper's one global LP up to GLOBAL_LP_MAX clusters, windows of LP_WINDOW beyond;
    # n > 0: windows of n clusters (dplace addition); 0: always the global LP
    lp_window: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (0.0 < self.threshold < 1.0):
            raise bad_option("threshold", "in (0, 1)", self.threshold)
        if self.lp_solver not in ("highs", "glop"):
            raise bad_option("lp_solver", "highs or glop", self.lp_solver)
        if self.lp_window is not None and int(self.lp_window) < 0:
            raise bad_option("lp_window", ">= 0", self.lp_window)


# ----------------------------------------------------------------------------------------- units
def _forward_pairs(inst: Instance) -> list[tuple[int, int]]:
    """(forward op, backward op) index pairs from the optional op field ``forward_of``, in op order.

    Read from the instance's columns (:func:`dplace.columns.forward_of_index`), not from ``inst.ops``: a
    large instance loaded from .npz then builds no Op objects and parses no JSON."""
    fwd = forward_of_index(inst)
    back = np.flatnonzero(fwd >= 0)
    return list(zip(fwd[back].tolist(), back.tolist()))


def build_units(inst: Instance, opts: BaechiOptions | None = None) -> list[int]:
    """Unit id (a representative op index) per op: the ops each unit must or should share a device.

    Colocation groups are always merged (hard). Soft merges (forward/backward pairs, co-placement)
    never join two different pins and keep a unit within ``unit_cap`` x total/m of memory and of work,
    so a chain of co-placements cannot collapse the graph onto one device. Forward/backward pairs
    ignore that cap when one device could hold the whole model (Baechi's "memory is sufficient").
    """
    opts = opts or BaechiOptions()
    n, m = inst.n, inst.m
    dsu = DisjointSets(n)
    mem = list(inst.mem)
    work = op_costs(inst, "mean")
    pin = list(inst.pinned)
    total_mem, total_work = sum(inst.mem), sum(work)
    mem_cap = min(min(inst.capacity), opts.unit_cap * total_mem / m)
    work_cap = opts.unit_cap * total_work / m
    umem, uwork = mem[:], work[:]

    def merge(a: int, b: int, capped: bool) -> None:
        ra, rb = dsu[a], dsu[b]
        if ra == rb:
            return
        if pin[ra] >= 0 and pin[rb] >= 0 and pin[ra] != pin[rb]:
            return
        if capped and (umem[ra] + umem[rb] > mem_cap or uwork[ra] + uwork[rb] > work_cap):
            return
        r = dsu.union(ra, rb)
        umem[r] = umem[ra] + umem[rb]
        uwork[r] = uwork[ra] + uwork[rb]
        pin[r] = pin[ra] if pin[ra] >= 0 else pin[rb]

    for g in inst.groups:  # hard: colocation (the instance already validated pins within a group)
        for o in g[1:]:
            merge(g[0], o, capped=False)
    if opts.forward_placement:
        sufficient = total_mem <= max(inst.capacity)
        for f, b in _forward_pairs(inst):
            merge(f, b, capped=not sufficient)
    if opts.coplacement:
        edst = inst.edst
        for o in inst.topo:
            outs = {edst[e] for e in inst.succ[o]}
            if len(outs) == 1:
                merge(o, next(iter(outs)), capped=True)
    return components(dsu, range(n))


# ---------------------------------------------------------------------------------------- fusion
@dataclass
class Clusters:
    """A partition of the ops into clusters whose quotient graph is a DAG.

    ``of[o]`` is op o's cluster; ``ops[c]`` lists cluster c's ops in topological order; ``succ[c]`` /
    ``pred[c]`` are the distinct neighbouring clusters. Clusters are numbered in topological order of
    their first op.
    """

    of: list[int]
    ops: list[list[int]]
    succ: list[list[int]]
    pred: list[list[int]]

    @property
    def n(self) -> int:
        return len(self.ops)


def _clusters_from_labels(inst: Instance, label: list[int]) -> Clusters:
    first: dict[int, int] = {}
    ops: list[list[int]] = []
    of = [0] * inst.n
    for o in inst.topo:
        r = label[o]
        c = first.get(r)
        if c is None:
            c = first[r] = len(ops)
            ops.append([])
        ops[c].append(o)
        of[o] = c
    succ = [set() for _ in ops]
    pred = [set() for _ in ops]
    for s, d in zip(inst.esrc, inst.edst):
        a, b = of[s], of[d]
        if a != b:
            succ[a].add(b)
            pred[b].add(a)
    return Clusters(of, ops, [sorted(x) for x in succ], [sorted(x) for x in pred])


def fuse(inst: Instance, units: list[int] | None = None) -> Clusters:
    """Baechi's safe operator fusion (§3.3): merge the ends of an edge when both are in one unit and,
    in the current fused graph, the source has out-degree <= 1 or the destination in-degree <= 1.

    Either condition rules out a second path from source to destination, so the fused graph stays a
    DAG (property-tested). ``units=None`` fuses without unit restriction. O((V + E) log V).
    """
    n = inst.n
    dsu = DisjointSets(n)
    succ = [set() for _ in range(n)]
    pred = [set() for _ in range(n)]
    for s, d in zip(inst.esrc, inst.edst):
        succ[s].add(d)
        pred[d].add(s)
    for o in inst.topo:
        for e in inst.succ[o]:
            v = inst.edst[e]
            if units is not None and units[o] != units[v]:
                continue
            a, b = dsu[o], dsu[v]
            if a == b or b not in succ[a]:
                continue
            if len(succ[a]) > 1 and len(pred[b]) > 1:
                continue  # unsafe: a second path a ~> b may exist (Fig. 5a-c)
            r = dsu.union(a, b)
            x = b if r == a else a  # the absorbed node
            # rewire x's neighbours to r, dropping the a-b edge
            succ[a].discard(b)
            pred[b].discard(a)
            for y in succ[x]:
                pred[y].discard(x)
                if y != r:
                    pred[y].add(r)
                    succ[r].add(y)
            for y in pred[x]:
                succ[y].discard(x)
                if y != r:
                    succ[y].add(r)
                    pred[r].add(y)
            succ[x] = set()
            pred[x] = set()
    return _clusters_from_labels(inst, components(dsu, range(n)))


def _singletons(inst: Instance) -> Clusters:
    return _clusters_from_labels(inst, list(range(inst.n)))


# --------------------------------------------------------------------------------- unit rules
class _UnitRules:
    """Pins, unit devices and memory for clusters (``dplace.rules.Rules`` lifted to units)."""

    def __init__(self, inst: Instance, units: list[int], cl: Clusters, reserve_whole: bool) -> None:
        self.inst = inst
        self.cl = cl
        self.reserve_whole = reserve_whole
        self.used = [0] * inst.m
        ids = {u: i for i, u in enumerate(sorted(set(units)))}
        self.unit = [ids[units[o]] for o in range(inst.n)]
        nu = len(ids)
        self.unit_mem = [0] * nu
        self.unit_pin = [-1] * nu
        for o in range(inst.n):
            u = self.unit[o]
            self.unit_mem[u] += inst.mem[o]
            if inst.pinned[o] >= 0:
                self.unit_pin[u] = inst.pinned[o]
        self.unit_dev = [-1] * nu
        self.cunit = [self.unit[ops[0]] for ops in cl.ops]
        self.cmem = [sum(inst.mem[o] for o in ops) for ops in cl.ops]

    def need(self, c: int) -> int:
        if self.reserve_whole:
            u = self.cunit[c]
            return 0 if self.unit_dev[u] >= 0 else self.unit_mem[u]
        return self.cmem[c]

    def forced(self, c: int) -> int:
        u = self.cunit[c]
        if self.unit_pin[u] >= 0:
            return self.unit_pin[u]
        return self.unit_dev[u]

    def fits(self, c: int, d: int) -> bool:
        return self.used[d] + self.need(c) <= self.inst.capacity[d]

    def allowed(self, c: int, d: int) -> bool:
        f = self.forced(c)
        return (f < 0 or f == d) and self.fits(c, d)

    def candidates(self, c: int) -> list[int]:
        f = self.forced(c)
        if f >= 0:
            return [f] if self.fits(c, f) else []
        return [d for d in range(self.inst.m) if self.fits(c, d)]

    def fallback(self, c: int) -> int:
        f = self.forced(c)
        if f >= 0:
            return f
        return max(range(self.inst.m), key=lambda d: (self.inst.capacity[d] - self.used[d], -d))

    def assign(self, c: int, d: int) -> None:
        self.used[d] += self.need(c)
        u = self.cunit[c]
        if self.unit_dev[u] < 0:
            self.unit_dev[u] = d


def _prepare(inst: Instance, opts: BaechiOptions) -> tuple[list[int], Clusters, _UnitRules]:
    if kernels.use(inst.n, "etf"):  # the same units and clusters, compiled
        ku, ca = _prepare_arrays(inst, opts)
        units = ku.tolist()
        cl = Clusters(*ca.lists())
    else:
        units = build_units(inst, opts)
        cl = fuse(inst, units) if opts.fusion else _singletons(inst)
    return units, cl, _UnitRules(inst, units, cl, opts.colocation_coadjust)


# ------------------------------------------------------------------------- compiled (dplace.kernels)
def _prepare_arrays(inst: Instance, opts: BaechiOptions):
    """``build_units`` and ``fuse`` / ``_singletons`` on arrays: (unit root per op, ClusterArrays)."""
    from dplace.kernels import baechi as kb
    from dplace.kernels.levels import op_cost_mean

    a = kernels.inst_arrays(inst)
    n, m = inst.n, inst.m
    work = op_cost_mean(a)
    total_mem, total_work = int(a.mem.sum()), sum(work.tolist())
    mem_cap = min(min(inst.capacity), opts.unit_cap * total_mem / m)
    work_cap = opts.unit_cap * total_work / m
    fwd = _forward_pairs(inst) if opts.forward_placement else []
    units = kb.units(a, work, np.array(fwd, dtype=np.int64).reshape(-1, 2), total_mem > max(inst.capacity),
                     opts.coplacement, mem_cap, work_cap)
    label = kb.fuse(a, units) if opts.fusion else np.arange(n)
    return units, kb.cluster_arrays(a, label)


def _schedule_arrays(inst: Instance, units: np.ndarray, ca, reserve_whole: bool,
                     fav_child: np.ndarray | None) -> tuple[list[int], list[list[int]], float, int]:
    """``_list_schedule`` compiled (parallel comm): placement, per-device order, makespan, fallbacks."""
    from dplace.kernels import baechi as kb
    from dplace.kernels.levels import upward_rank as kupward_rank

    a = kernels.inst_arrays(inst)
    nc, starts = ca.n, ca.ops_ptr[:-1]
    root = np.zeros(inst.n, dtype=bool)  # unit ids numbered by increasing root, as _UnitRules does
    root[units] = True
    nu = int(root.sum())
    uid = (np.cumsum(root) - 1)[units]
    unit_mem = np.zeros(nu, dtype=np.int64)
    np.add.at(unit_mem, uid, a.mem)
    unit_pin = np.full(nu, -1, dtype=np.int64)
    pinned = a.pinned >= 0
    unit_pin[uid[pinned]] = a.pinned[pinned]
    first = ca.ops[starts]
    cmem = np.add.reduceat(a.mem[ca.ops], starts) if nc else np.zeros(0, dtype=np.int64)
    prio = -np.maximum.reduceat(kupward_rank(a)[ca.ops], starts) if nc else np.zeros(0)
    sct = fav_child is not None
    fav = np.asarray(fav_child if sct else np.full(nc, -1), dtype=np.int64)
    pl, _, end, seq, fallbacks = kb.etf(
        inst.m, ca.ops_ptr, ca.ops, ca.succ_ptr, ca.succ, np.diff(ca.pred_ptr), prio, uid[first], unit_mem,
        unit_pin, cmem, a.capacity, reserve_whole, fav, sct, a.pred_ptr, a.pred_edge, a.esrc, a.ebytes, a.lat,
        a.bw, a.dur)
    dev_of = pl[seq]
    order = [seq[dev_of == d].tolist() for d in range(inst.m)]
    return pl.tolist(), order, float(end.max()) if inst.n else 0.0, int(fallbacks)


def _use_kernel(inst: Instance) -> bool:
    """The compiled list scheduler: numba on and parallel comm (sequential comm stays on the reference,
    whose sends re-time committed work)."""
    return inst.comm == "parallel" and kernels.use(inst.n, "etf")


def _extra(inst: Instance, units: list[int], cl: Clusters) -> dict:
    return {"units": len(set(units)), "clusters": cl.n, "ops": inst.n}


# ------------------------------------------------------------------------------------------ m-TOPO
@register("m_topo", options=BaechiOptions, summary="Baechi m-TOPO: BFS topological order, fill devices up to total/m + largest op.")
def m_topo(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """m-TOPO (Baechi §2.2): walk a BFS topological order, fill devices in id order up to
    Cap = sum(d_i)/m + max(d_i); each device runs its ops in that order."""
    opts = BaechiOptions(**options)
    units, cl, ur = _prepare(inst, opts)
    cap = sum(inst.mem) / inst.m + (max(inst.mem) if inst.n else 0)
    # BFS (M-TOPO) order over the cluster graph; with singleton clusters this is m_topo_order(inst)
    bfs = queue_order(cl.succ, [c for c in range(cl.n) if not cl.pred[c]], to_head=False)
    placement = [-1] * inst.n
    order: list[list[int]] = [[] for _ in range(inst.m)]
    cur = fallbacks = 0
    for c in bfs:
        d = ur.forced(c)
        if d >= 0 and not ur.fits(c, d):
            fallbacks += 1
        if d < 0:
            need = ur.need(c)
            while cur < inst.m - 1 and (ur.used[cur] + need > cap or not ur.fits(c, cur)):
                cur += 1
            if ur.fits(c, cur):
                d = cur
            else:
                cands = ur.candidates(c)
                d = cands[0] if cands else ur.fallback(c)
                fallbacks += not cands
        ur.assign(c, d)
        for o in cl.ops[c]:
            placement[o] = d
            order[d].append(o)
    return make_result(inst, "m_topo", placement, order, options=options,
                       extra={**_extra(inst, units, cl), "cap_bytes": cap, "fallbacks": fallbacks})


# ---------------------------------------------------------------------------- m-ETF / m-SCT engine
def _list_schedule(inst: Instance, cl: Clusters, ur: _UnitRules,
                   fav_child: list[int] | None) -> tuple[ScheduleState, int]:
    """Memory-constrained ETF over clusters (Baechi §2.3), or SCT's finite-device rule (§2.4) when
    ``fav_child`` is given.

    At each step the (cluster, device) pair with the earliest start max(device free, data ready) is
    scheduled; a device that cannot hold the cluster is dropped for it. Ties: for SCT, first the
    favorite child of a cluster on that cluster's device, then urgent clusters (data already on every
    device), then the rest; within a class, larger bottom level first, then topological position.
    Every time comes from ``ScheduleState``. Returns the state and the number of clusters placed
    best-effort because no device had room (then the Result's memory is flagged).
    """
    m = inst.m
    state = ScheduleState(inst)
    nc = cl.n
    sct = fav_child is not None
    b = upward_rank(inst, "mean", "mean")
    prio = [-max(b[o] for o in ops) for ops in cl.ops]  # bigger bottom level first
    need = [len(p) for p in cl.pred]
    done = [False] * nc
    drmax = [0.0] * nc
    fav_dev = [-1] * nc
    wait = [[] for _ in range(m)]  # (data ready on d, prio, c)
    avail = [[] for _ in range(m)]  # (class, prio, c): data ready no later than the device is free
    promote = [[] for _ in range(m)]  # SCT: (drmax, prio, c): available, becomes urgent when free >= drmax
    ready_seq: list[int] = []
    ready_ptr = 0
    first = [ops[0] for ops in cl.ops]

    def make_ready(c: int) -> None:
        o = first[c]
        dr = [state.data_ready(o, d) for d in range(m)]
        drmax[c] = max(dr)
        for d in range(m):
            if ur.allowed(c, d):
                heapq.heappush(wait[d], (dr[d], prio[c], c))
        ready_seq.append(c)

    def cls(c: int, d: int, t: float) -> int:
        if not sct:
            return 0
        if fav_dev[c] == d:
            return 0
        return 1 if drmax[c] <= t else 2

    def commit(c: int, d: int) -> None:
        for o in cl.ops[c]:
            state.commit(o, d)
        ur.assign(c, d)
        done[c] = True
        if sct and fav_child[c] >= 0:
            fav_dev[fav_child[c]] = d
        for s in cl.succ[c]:
            need[s] -= 1
            if need[s] == 0:
                make_ready(s)

    for c in range(nc):
        if need[c] == 0:
            make_ready(c)
    placed = fallbacks = 0
    while placed < nc:
        best = None
        for d in range(m):
            free = state.device_free(d)
            w, a = wait[d], avail[d]
            while w and w[0][0] <= free:
                _, pr, c = heapq.heappop(w)
                if not done[c] and ur.allowed(c, d):
                    k = cls(c, d, free)
                    heapq.heappush(a, (k, pr, c))
                    if k == 2:
                        heapq.heappush(promote[d], (drmax[c], pr, c))
            if sct:
                pq = promote[d]
                while pq and pq[0][0] <= free:
                    _, pr, c = heapq.heappop(pq)
                    if not done[c] and ur.allowed(c, d):
                        heapq.heappush(a, (1, pr, c))
            while a and not (not done[a[0][2]] and ur.allowed(a[0][2], d)):
                heapq.heappop(a)
            if a:
                k, pr, c = a[0]
                key = (free, k, pr, d)
                src = 0
            else:
                while w and not (not done[w[0][2]] and ur.allowed(w[0][2], d)):
                    heapq.heappop(w)
                if not w:
                    continue
                t, pr, c = w[0]
                key = (t, cls(c, d, t), pr, d)
                src = 1
            if best is None or key < best[0]:
                best = (key, c, d, src)
        if best is None:  # every ready cluster lacks a device with room: best effort, flagged
            while done[ready_seq[ready_ptr]]:
                ready_ptr += 1
            c = ready_seq[ready_ptr]
            commit(c, ur.fallback(c))
            placed += 1
            fallbacks += 1
            continue
        key, c, d, src = best
        heapq.heappop(avail[d] if src == 0 else wait[d])
        if inst.comm == "sequential":  # link contention may have delayed the data since it was keyed
            t = state.est(first[c], d)
            if t > key[0] + 1e-9 * max(1.0, abs(t)):
                heapq.heappush(wait[d], (state.data_ready(first[c], d), prio[c], c))
                continue
        commit(c, d)
        placed += 1
    return state, fallbacks


@register("m_etf", options=BaechiOptions, summary="Baechi m-ETF: earliest (op, device) start first; full devices dropped.")
def m_etf(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """m-ETF (Baechi §2.3, ETF of Hwang et al. 1989 made memory-aware): a queue of (op, device) pairs
    by earliest schedulable time; a pair whose device cannot hold the op is dropped."""
    opts = BaechiOptions(**options)
    if _use_kernel(inst):
        units, ca = _prepare_arrays(inst, opts)
        pl, order, makespan, fallbacks = _schedule_arrays(inst, units, ca, opts.colocation_coadjust, None)
        extra = {"units": int(np.count_nonzero(units == np.arange(inst.n))), "clusters": ca.n, "ops": inst.n}
        return make_result(inst, "m_etf", pl, order, options=options, claimed_makespan=makespan,
                           extra={**extra, "fallbacks": fallbacks})
    units, cl, ur = _prepare(inst, opts)
    state, fallbacks = _list_schedule(inst, cl, ur, None)
    return make_result(inst, "m_etf", state.placement, state.order(), options=options,
                       claimed_makespan=state.makespan, extra={**_extra(inst, units, cl), "fallbacks": fallbacks})


def _cluster_lp_data(inst: Instance, cl: Clusters) -> tuple[list[float], list[tuple[int, int, float]]]:
    """SCT LP data on the cluster graph: k_c = mean work of the cluster, c_ab = the largest mean
    transfer time of an edge from a to b (parallel edges travel at once in the simulator)."""
    w = op_costs(inst, "mean")
    ce = edge_costs(inst, "mean")
    k = [sum(w[o] for o in ops) for ops in cl.ops]
    best: dict[tuple[int, int], float] = {}
    of = cl.of
    for e, (s, d) in enumerate(zip(inst.esrc, inst.edst)):
        a, b = of[s], of[d]
        if a != b and ce[e] >= best.get((a, b), -1.0):
            best[(a, b)] = ce[e]
    return k, [(a, b, c) for (a, b), c in sorted(best.items())]


# lp_window=None: one global LP (Baechi's) up to this many clusters, else windows of LP_WINDOW. Measured on
# the loaded 2-core VM (benchmarks/bench_baechi.py --lp 3000,12000), LP seconds, windowed GLOP / windowed
# HiGHS / global HiGHS: 881 clusters 0.70 / 0.31 / 0.30; 2,673: 2.27 / 1.05 / 2.91; 3,175: 1.09 / 1.93 /
# 2.25; 10,665: 7.54 / 4.50 / 23.17. The global LP is only faster on small LPs, and its placements were
# not better beyond them (700,793 vs 668,507 µs at 2,673 clusters), so it is the default up to 2,000.
GLOBAL_LP_MAX = 2000
LP_WINDOW = 1000


@register("m_sct", options=SctOptions, summary="Baechi m-SCT: SCT favorite-child LP (GLOP/HiGHS), rounded, memory-aware list scheduling.")
def m_sct(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """m-SCT (Baechi §2.4; SCT of Hanen & Munier): solve the favorite-child LP relaxation (eq. 2),
    round x_ij < threshold to "favorite", then list-schedule like ETF preferring each favorite child
    on its parent's device and urgent ops; a full device is excluded."""
    from dplace.formulations.sct_lp import favorite_children, solve_sct_lp_windows

    opts = SctOptions(**options)
    units, cl, ur = _prepare(inst, opts)
    k, edges = _cluster_lp_data(inst, cl)
    window = int(opts.lp_window) if opts.lp_window is not None else (0 if cl.n <= GLOBAL_LP_MAX else LP_WINDOW)
    lp = solve_sct_lp_windows(k, edges, window=window, solver=opts.lp_solver, time_limit_s=time_limit_s)
    fav_child, _ = favorite_children(cl.n, edges, lp.x, opts.threshold)
    state, fallbacks = _list_schedule(inst, cl, ur, fav_child)
    extra = {**_extra(inst, units, cl), "fallbacks": fallbacks,
             # the SCT relaxation's optimum (infinite devices): NOT a lower bound of this problem
             "sct_lp_objective": lp.objective, "sct_lp_status": lp.status, "sct_lp_time_s": lp.time_s,
             "sct_lp_windows": len(lp.window_objectives), "favorite_children": sum(1 for f in fav_child if f >= 0)}
    if len(lp.window_objectives) > 1:
        extra["sct_lp_window_objectives"] = lp.window_objectives
    return make_result(inst, "m_sct", state.placement, state.order(), options=options,
                       claimed_makespan=state.makespan, extra=extra)
