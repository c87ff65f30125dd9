"""Baechi's memory-constrained placers m-TOPO, m-ETF and m-SCT (Jeon et al., SoCC'20, §2.2-§2.4)
with the §3 design options as switches (colocation co-adjust, co-placement, safe operator fusion,
forward-operator-based placement).

How the pieces fit (one timing model, one set of placement rules):

* ``build_units`` groups ops that must or should share a device: colocation groups (always: they
  are hard constraints here), backward ops with their forward op (``forward_of``, §3.2 (ii)/§3.3 (ii)),
  and an op whose output feeds exactly one op with that op (co-placement, §3.2 (i)). The paper's
  methods cap soft units only by memory (a unit must fit the smallest device, dplace's choice);
  the ``*_capped`` variants (dplace's) also at ``unit_cap`` x total/m of memory and of work.
* Forward-operator-based placement (§3.3 (ii), the paper's methods): when one device could hold the
  whole model, only the forward graph (:func:`forward_graph`) is placed and each backward op takes its
  forward op's device; otherwise every op is placed, each forward/backward pair forced into one unit.
* ``fuse`` merges directly connected ops of one unit into clusters, only in Baechi's safe cases
  (§3.3, Fig. 5 d/e): the source has out-degree <= 1 or the destination in-degree <= 1 in the current
  fused graph, so no cycle can appear. A cluster is scheduled as one meta-op (its ops back to back).
* ``_UnitRules`` is :class:`dplace.schedule.rules.Rules` lifted to units: pins, the unit's device once its first
  op is placed, and memory (the whole unit is reserved when its first op is placed: co-adjust, §3.1).
* The list schedulers ask :class:`dplace.schedule.state.ScheduleState` for every time (data ready, earliest
  start, commit); they keep no clock of their own. m-ETF and m-SCT keep, per device, a heap of
  clusters waiting for data (keyed by data-ready time) and a heap of clusters already available
  (keyed by priority), refreshed lazily, so a step costs O(m log n) instead of a rescan of all
  ready ops.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from dplace import kernels
from dplace.budget import Budget
from dplace.instance.columns import forward_of_index
from dplace.errors import InvalidInstanceError, bad_option
from dplace.instance.graph import DisjointSets, components, queue_order
from dplace.instance.model import Instance, Op
from dplace.schedule.ranks import edge_costs, op_costs, upward_rank
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.schedule.simulate import seq_kernel_wanted
from dplace.schedule.state import ScheduleState

__all__ = ["BaechiOptions", "CappedOptions", "CappedSctOptions", "Clusters", "ForwardGraph", "SctOptions", "build_units",
           "forward_graph", "fuse", "m_etf", "m_etf_capped", "m_sct", "m_sct_capped", "m_topo", "m_topo_capped"]


@dataclass(frozen=True)
class BaechiOptions:
    """The paper's §3 design options, all on by default as in Baechi."""

    colocation_coadjust: bool = True  # §3.1: placing a group's first op reserves memory for the whole group
    coplacement: bool = True  # §3.2 (i): an op whose output feeds only one op goes with that op
    fusion: bool = True  # §3.3 (i): fuse ops of one co-placement unit, safe cases only
    # §3.3 (ii) forward-operator-based placement: when one device could hold the whole model, place the
    # forward graph and put each backward op (field forward_of) on its forward op's device; otherwise
    # place every op with each forward/backward pair forced into one unit (§3.2 (ii))
    forward_placement: bool = True


def _check_unit_cap(value: float) -> None:
    if not (value > 0):
        raise bad_option("unit_cap", "> 0", value)


@dataclass(frozen=True)
class CappedOptions(BaechiOptions):
    """Options of the ``*_capped`` variants (dplace's, not the paper's)."""

    unit_cap: float = 1.0  # a soft unit holds at most unit_cap x (total memory, work)/m

    def __post_init__(self) -> None:
        _check_unit_cap(self.unit_cap)


LP_SOLVERS = ("ipm", "highs", "glop")


@dataclass(frozen=True)
class SctOptions(BaechiOptions):
    threshold: float = 0.1  # §2.4: x_ij < threshold after the LP => j is i's favorite child
    # "ipm": HiGHS's interior-point method without crossover (the paper's "interior point method", through
    # highspy in a child process); "highs" (dual simplex, OR-Tools' bundled HiGHS) or "glop" (simplex):
    # a vertex of the optimal face, which on degenerate LPs gives other favourites. See heuristics/sct_lp.py
    lp_solver: str = "ipm"
    # None: the paper's one global LP up to GLOBAL_LP_MAX clusters, windows of LP_WINDOW beyond (dplace
    # addition, for speed); n > 0: windows of n clusters (dplace addition); 0: always the global LP
    lp_window: int | None = None

    def __post_init__(self) -> None:
        if not (0.0 < self.threshold < 1.0):
            raise bad_option("threshold", "in (0, 1)", self.threshold)
        if self.lp_solver not in LP_SOLVERS:
            raise bad_option("lp_solver", " or ".join(LP_SOLVERS), self.lp_solver)
        if self.lp_window is not None and int(self.lp_window) < 0:
            raise bad_option("lp_window", ">= 0", self.lp_window)


@dataclass(frozen=True)
class CappedSctOptions(SctOptions):
    """Options of ``m_sct_capped``: unit cap and the dual-simplex LP (the project's former defaults)."""

    lp_solver: str = "highs"
    unit_cap: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_unit_cap(self.unit_cap)


def _unit_cap(opts: BaechiOptions) -> float | None:
    """The soft-unit cap of a ``*_capped`` variant; None for the paper's methods (no cap)."""
    return getattr(opts, "unit_cap", None)


# ----------------------------------------------------------------------------------------- units
def _forward_pairs(inst: Instance) -> list[tuple[int, int]]:
    """(forward op, backward op) index pairs from the optional op field ``forward_of``, in op order.

    Read from the instance's columns (:func:`dplace.instance.columns.forward_of_index`), not from ``inst.ops``: a
    large instance loaded from .npz then builds no Op objects and parses no JSON."""
    fwd = forward_of_index(inst)
    back = np.flatnonzero(fwd >= 0)
    return list(zip(fwd[back].tolist(), back.tolist()))


def _caps(inst: Instance, opts: BaechiOptions, total_mem: float, total_work: float) -> tuple[float, float, bool]:
    """(memory cap, work cap of a soft unit, whether forward/backward pairs obey them).

    The paper's methods: soft units are limited only by memory -- a unit must fit the smallest device
    (dplace's choice: Baechi does not say what happens to a co-placement chain larger than a device) --
    and pairs are forced together within that limit. ``*_capped``: also at most unit_cap x total/m of
    memory and of work, and pairs ignore the cap only when one device could hold the whole model."""
    cap = _unit_cap(opts)
    if cap is None:
        return float(min(inst.capacity)), math.inf, True
    return (min(min(inst.capacity), cap * total_mem / inst.m), cap * total_work / inst.m,
            total_mem > max(inst.capacity))


def build_units(inst: Instance, opts: BaechiOptions | None = None) -> list[int]:
    """Unit id (a representative op index) per op: the ops each unit must or should share a device.

    Colocation groups are always merged (hard). Soft merges (forward/backward pairs, co-placement)
    never join two different pins and keep within the caps of :func:`_caps`.
    """
    opts = opts or BaechiOptions()
    n = inst.n
    dsu = DisjointSets(n)
    mem = list(inst.mem)
    work = op_costs(inst, "mean")
    pin = list(inst.pinned)
    mem_cap, work_cap, pairs_capped = _caps(inst, opts, sum(inst.mem), sum(work))
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
        for f, b in _forward_pairs(inst):
            merge(f, b, capped=pairs_capped)
    if opts.coplacement:
        edst = inst.edst
        for o in inst.topo:
            outs = {edst[e] for e in inst.succ[o]}
            if len(outs) == 1:
                merge(o, next(iter(outs)), capped=True)
    return components(dsu, range(n))


# ------------------------------------------------------------------------- forward-only (§3.3 ii)
@dataclass(frozen=True)
class ForwardGraph:
    """The graph Baechi places under forward-operator-based placement (§3.3 (ii)).

    ``inst``: the ops of the original graph that are not followers, with the edges among them (the
    induced subgraph: an op whose inputs all came from backward ops becomes a source), each op holding
    its own memory plus its followers'. A *follower* is an op whose ``forward_of`` names another op,
    that has no pin and whose colocation group, if any, is its lead's (hard constraints keep other such
    ops in the placed graph, without their ``forward_of``). Backward ops that name no forward op (a
    gradient sum, an optimizer update) are placed with the forward graph: Baechi does not say. ``kept[i]``: op of the original graph behind op i of ``inst``; ``lead[o]``:
    the original op whose device o takes (o itself when kept; ``forward_of`` followed to a kept op)."""

    inst: Instance
    kept: list[int]
    lead: list[int]

    def expand(self, placement: list[int]) -> list[int]:
        """A placement of ``inst`` as a placement of the original graph (followers on their lead's device)."""
        at = {o: i for i, o in enumerate(self.kept)}
        return [placement[at[ld]] for ld in self.lead]


def forward_graph(inst: Instance) -> ForwardGraph | None:
    """The forward graph of ``inst`` when Baechi places only it: some op carries ``forward_of`` and one
    device could hold the whole model (sum of op memory <= the largest device). None otherwise, or when
    the forward graph is not a valid instance (a pinned op with its followers' memory beyond its device)."""
    fwd = forward_of_index(inst)
    n = inst.n
    cand = (fwd >= 0) & (np.asarray(inst.pinned) < 0)
    if not cand.any() or sum(inst.mem) > max(inst.capacity):
        return None
    group = inst.group_of
    lead = list(range(n))
    for o in np.flatnonzero(cand).tolist():
        r, steps = o, 0
        while cand[r] and steps <= n:  # forward_of may chain (a backward op of a backward op)
            r, steps = int(fwd[r]), steps + 1
        if cand[r] or (group[o] >= 0 and group[o] != group[r]):
            continue  # a forward_of cycle, or a colocation group the lead is not in: stays placed
        lead[o] = r
    if all(lead[o] == o for o in range(n)):
        return None
    kept = [o for o in range(n) if lead[o] == o]
    extra_mem = [0] * n
    for o in range(n):
        if lead[o] != o:
            extra_mem[lead[o]] += inst.mem[o]
    ops = []
    for o in kept:
        op = inst.ops[o]
        ops.append(Op(op.id, op.time, int(op.memory) + extra_mem[o], op.type, op.colocation, op.device,
                      {k: v for k, v in op.extra.items() if k != "forward_of"}))
    keep = set(kept)
    edges = [ed for e, ed in enumerate(inst.edges) if inst.esrc[e] in keep and inst.edst[e] in keep]
    try:
        sub = inst.replace(name=f"{inst.name}+forward", ops=ops, edges=edges)
    except InvalidInstanceError:
        return None
    return ForwardGraph(sub, kept, lead)


def _forward_only(inst: Instance, opts: BaechiOptions, method: str, options: dict, place) -> Result | None:
    """Forward-operator-based placement (§3.3 (ii)) for the paper's methods: ``place(forward instance)``
    -> Result on it, expanded to ``inst``. The per-device order is left to the executor (as Baechi leaves
    it to TensorFlow): the simulator runs ready ops in the order their inputs arrive. None when it does not
    apply (option off, a ``*_capped`` variant, no pairing, or memory short)."""
    if not opts.forward_placement or _unit_cap(opts) is not None:
        return None
    fg = forward_graph(inst)
    if fg is None:
        return None
    sub = place(fg.inst)
    extra = {**sub.extra, "forward_only": {"placed_ops": fg.inst.n, "followers": inst.n - fg.inst.n,
                                           "forward_makespan": sub.makespan}}
    return make_result(inst, method, fg.expand(sub.placement), None, options=options, extra=extra)


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
    """Pins, unit devices and memory for clusters (``dplace.schedule.rules.Rules`` lifted to units)."""

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
    n = inst.n
    work = op_cost_mean(a)
    mem_cap, work_cap, pairs_capped = _caps(inst, opts, int(a.mem.sum()), sum(work.tolist()))
    fwd = _forward_pairs(inst) if opts.forward_placement else []
    units = kb.units(a, work, np.array(fwd, dtype=np.int64).reshape(-1, 2), pairs_capped,
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
@register("m_topo", options=BaechiOptions, paper="Baechi §2.2, §3 (SoCC'20)",
          summary="Baechi §2.2 m-TOPO: BFS topological order, fill devices up to total/m + largest op; §3 as in the paper.")
def m_topo(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
           **options) -> Result:
    """m-TOPO (Baechi §2.2): walk a BFS topological order, fill devices in id order up to
    Cap = sum(d_i)/m + max(d_i); each device runs its ops in that order. §3 options as the paper's
    (no unit cap; forward-only placement when one device holds the model). Ties: the BFS queues sources in
    the instance's topological order and children in edge order (dplace's choice)."""
    return _m_topo(inst, "m_topo", BaechiOptions(**options), options, Budget.resolve(None, time_limit_s))


def _m_topo(inst: Instance, method: str, opts: BaechiOptions, options: dict, budget: Budget) -> Result:
    fo = _forward_only(inst, opts, method, options, lambda g: _m_topo(g, method, opts, options, budget))
    if fo is not None:
        return fo
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
    return make_result(inst, method, placement, order, options=options,
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
    if seq_kernel_wanted(inst):  # sequential comm on the compiled state (the same times: tests compare)
        from dplace.kernels.seqstate import ArraySeqState

        state = ArraySeqState(inst)
    else:
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


@register("m_etf", options=BaechiOptions, paper="Baechi §2.3, §3 (SoCC'20)",
          summary="Baechi §2.3 m-ETF: earliest (op, device) start first, full devices dropped; §3 as in the paper.")
def m_etf(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
          **options) -> Result:
    """m-ETF (Baechi §2.3, ETF of Hwang et al. 1989 made memory-aware): a queue of (op, device) pairs
    by earliest schedulable time; a pair whose device cannot hold the op is dropped. §3 options as the
    paper's. Ties (the paper is silent): larger bottom level, then topological position, then device id."""
    return _m_etf(inst, "m_etf", BaechiOptions(**options), options, Budget.resolve(None, time_limit_s))


def _m_etf(inst: Instance, method: str, opts: BaechiOptions, options: dict, budget: Budget) -> Result:
    fo = _forward_only(inst, opts, method, options, lambda g: _m_etf(g, method, opts, options, budget))
    if fo is not None:
        return fo
    if _use_kernel(inst):
        units, ca = _prepare_arrays(inst, opts)
        pl, order, makespan, fallbacks = _schedule_arrays(inst, units, ca, opts.colocation_coadjust, None)
        extra = {"units": int(np.count_nonzero(units == np.arange(inst.n))), "clusters": ca.n, "ops": inst.n}
        return make_result(inst, method, pl, order, options=options, claimed_makespan=makespan,
                           extra={**extra, "fallbacks": fallbacks})
    units, cl, ur = _prepare(inst, opts)
    state, fallbacks = _list_schedule(inst, cl, ur, None)
    return make_result(inst, method, state.placement, state.order(), options=options,
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
# The interior point (m_sct's "ipm", load ~10): windows of 1,000 / global, 10,665 clusters 2.3 / 8.4 s;
# 31,977 clusters 3.5 / 98 s. The windows beyond 2,000 clusters are dplace's, for speed (the paper: one LP).
GLOBAL_LP_MAX = 2000
LP_WINDOW = 1000


@register("m_sct", options=SctOptions, paper="Baechi §2.4 eq. 2, §3 (SoCC'20)",
          summary="Baechi §2.4 m-SCT: favourite-child LP (eq. 2) by interior point, x < 0.1 rounded, memory-aware SCT list scheduling.")
def m_sct(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
          **options) -> Result:
    """m-SCT (Baechi §2.4; SCT of Hanen & Munier): solve the favorite-child LP relaxation (eq. 2) by an
    interior-point method without crossover (HiGHS ``ipm``), round x_ij < threshold to "favorite", then
    list-schedule like ETF preferring each favorite child on its parent's device and urgent ops; a full
    device is excluded. §3 options as the paper's. Ties (the paper is silent): see :func:`_list_schedule`;
    two children under the threshold (possible only above 0.5): the smaller x, then edge order."""
    return _m_sct(inst, "m_sct", SctOptions(**options), options, Budget.resolve(budget, time_limit_s))


def _m_sct(inst: Instance, method: str, opts: SctOptions, options: dict, budget: Budget) -> Result:
    """m-SCT under ``budget``: the LP gets what is left of it (windows left at its end: greedy favourites)."""
    from dplace.heuristics.sct_lp import favorite_children, solve_sct_lp_windows

    fo = _forward_only(inst, opts, method, options, lambda g: _m_sct(g, method, opts, options, budget))
    if fo is not None:
        return fo
    units, cl, ur = _prepare(inst, opts)
    k, edges = _cluster_lp_data(inst, cl)
    window = int(opts.lp_window) if opts.lp_window is not None else (0 if cl.n <= GLOBAL_LP_MAX else LP_WINDOW)
    lp = solve_sct_lp_windows(k, edges, window=window, solver=opts.lp_solver, budget=budget)
    fav_child, _ = favorite_children(cl.n, edges, lp.x, opts.threshold)
    state, fallbacks = _list_schedule(inst, cl, ur, fav_child)
    extra = {**_extra(inst, units, cl), "fallbacks": fallbacks,
             # the SCT relaxation's optimum (infinite devices): NOT a lower bound of this problem
             "sct_lp_objective": lp.objective, "sct_lp_status": lp.status, "sct_lp_time_s": lp.time_s,
             "sct_lp_windows": len(lp.window_objectives), "favorite_children": sum(1 for f in fav_child if f >= 0)}
    if len(lp.window_objectives) > 1:
        extra["sct_lp_window_objectives"] = lp.window_objectives
    return make_result(inst, method, state.placement, state.order(), options=options,
                       claimed_makespan=state.makespan, extra=extra)


# ------------------------------------------------------------------------------ dplace's variants
def _register_capped(paper_name: str, impl, options: type, paper: str, more: str = ""):
    """Register ``<paper_name>_capped``: ``impl`` with co-placement units capped at ``unit_cap`` x
    (total memory, total work) / m, forward/backward pairs as units of the whole graph (no forward-only
    placement; pairs capped too when memory is short) -- the project's settings before the paper
    methods got the paper's -- and ``more``."""
    name = f"{paper_name}_capped"

    def place(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
              **opts) -> Result:
        return impl(inst, name, options(**opts), opts, Budget.resolve(budget, time_limit_s))

    place.__name__ = place.__qualname__ = name
    place.__doc__ = f":func:`{paper_name}` with dplace's unit cap{more}: see :func:`_register_capped`."
    summary = f"{paper_name} with dplace's unit cap (soft units <= unit_cap x total/m memory and work), whole graph placed{more}."
    return register(name, options=options, paper=paper, variant_of=paper_name, summary=summary)(place)


m_topo_capped = _register_capped("m_topo", _m_topo, CappedOptions, "Baechi §2.2, §3")
m_etf_capped = _register_capped("m_etf", _m_etf, CappedOptions, "Baechi §2.3, §3")
m_sct_capped = _register_capped("m_sct", _m_sct, CappedSctOptions, "Baechi §2.4, §3", ", LP by dual simplex (HiGHS)")
