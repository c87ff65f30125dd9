"""Baechi's building blocks (Jeon et al., SoCC'20, §3), used by the placers in :mod:`.baechi`: the options,
co-placement units (colocation and forward/backward pairs), the forward-only graph (§3.3 ii), fusion of
units into clusters, and the memory rules a placer keeps per unit.

Compiled twin of the units and the fusion: :mod:`dplace.kernels.baechi` (tests/kernels/test_etf_kernels.py).
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
