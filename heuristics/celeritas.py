"""Celeritas (Xu, Liao, Xie, Zhou): Standard-Evaluation placement, Order-Place and Adjusting Placement.

* ``standard_evaluation`` (§4.2.2): ops in DFS-TOPO order fill one device up to its memory, then the
  next; best effort (the device using the least memory) when none has room.
* ``order_place`` (§5.2, §6.2): Optimal Operation Fusion (:mod:`dplace.heuristics.coarsen`), then the
  coarse nodes in CPD-TOPO order fill one device to its memory, then the next; mapped back.
* ``celeritas`` (§5.2, Alg. 2, eqs. 7-9): fusion, then Adjusting Placement on the coarse graph: each
  coarse node (CPD-TOPO order) stays on the previous node's device d_k unless the earliest start
  (with insertion, from :class:`dplace.schedule.state.ScheduleState`) on the best device d_1 beats it by
  more than ``back_cost`` = the longest transfer of its outputs from d_1 back to d_k (eq. 8); a device
  without room has EST = ∞; when all are full, the device using the least memory. The coarse
  placement is mapped back to the original ops, and the simulator schedules the original graph.

Memory, pins and colocation go through :class:`dplace.schedule.rules.Rules` on the coarse instance, whose
clusters carry their group's colocation value and their pin (see :mod:`dplace.heuristics.coarsen`).
Two departures keep memory: the fusion keeps pinned ops out of unpinned clusters (``pins_alone``: a
49 KB pinned input must not pin a cluster holding a quarter of a device), and the memory of pinned
ops is reserved on their device before anything is placed (:class:`PinFirstRules`).

Paper and dplace variants. ``celeritas`` and ``order_place`` run the paper's setting: clusters and
fill limited by memory only, and a colocation group follows its first placed node (§6.1: dplace takes
the group's member earliest in the CPD-TOPO order the fusion cuts, so its cluster is the group's
anchor). With ample memory the paper's M = 0.25·capacity bounds nothing, fusion swallows the graph and
the fill puts it all on one device (on classic task graphs with unlimited memory: 125 % above the
optimum on average, ``benchmarks/bench_celeritas.py --classic``). ``celeritas_balanced`` and
``order_place_balanced`` (dplace's) also run the fusion with a cluster work limit (total work / m / k,
k in ``BALANCE_SPLITS``) and Order-Place also tries a fill that moves on once a device holds its work
share, each with the colocation anchor at the group's largest member and at its first node; every
setting is simulated and the best kept. The paper's setting is among them, so they are never worse
than the paper's methods (BERT-12: celeritas 1,988k µs, the balanced variant with the largest-member
anchor alone 2,160k).

Where the paper is silent, dplace chose: CPD-TOPO ties by topological position; in eq. (9) a tie
keeps the previous node's device; the fill's "next device" is the next device id, wrapping to an
earlier one with room; op costs for the levels are mean times over devices and mean transfer times
over device pairs (:mod:`dplace.heuristics.orders`).

Compiled twins (from ``kernels.FROM`` sizes): :mod:`dplace.kernels.adjust` (Adjusting Placement) and
:mod:`dplace.kernels.celeritas` (orders, fusion); tests/kernels/test_etf_kernels.py compares them with this code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from dplace.budget import Budget
from dplace import kernels
from dplace.errors import bad_option
from dplace.instance.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.schedule.rules import Rules
from dplace.schedule.state import ScheduleState

from .coarsen import Coarsening, ccr, coarsen, coarsen_report
from .orders import cpd_topo_order, dfs_topo_order

__all__ = [
    "CeleritasOptions", "StandardEvaluationOptions", "adjusting_placement", "add_cli", "celeritas",
    "celeritas_balanced", "coarsen_report", "fill_placement", "fill_schedule", "order_place", "order_place_balanced",
    "standard_evaluation",
]


@dataclass(frozen=True)
class CeleritasOptions:
    R: int = 200  # fusion exploration range: most ops per cluster (§5.1.3)
    M: float = 0.25  # cluster memory limit, fraction of the (smallest) device memory (§5.1.3)

    def __post_init__(self) -> None:
        if not isinstance(self.R, int) or isinstance(self.R, bool) or self.R < 1:
            raise bad_option("R", "an integer >= 1", self.R)
        if not (isinstance(self.M, (int, float)) and 0 < self.M < math.inf):
            raise bad_option("M", "a fraction > 0 of device memory", self.M)


@dataclass(frozen=True)
class _Variant:
    """What a registered Celeritas method runs: ``balance`` (the work-limited granularities and fill,
    dplace's) and the colocation anchors tried (True: §6.1's first placed node; False: the group's
    largest member), the best simulated kept."""

    balance: bool
    anchors: tuple[bool, ...]


PAPER = _Variant(balance=False, anchors=(True,))
BALANCED = _Variant(balance=True, anchors=(False, True))


# the balanced variants: cluster work limits tried, as the number of clusters per device's work share
# (total mean op time / devices / k); None = memory only (the paper's clusters)
BALANCE_SPLITS: tuple[int | None, ...] = (None, 1, 2, 4, 8)


@dataclass(frozen=True)
class StandardEvaluationOptions:
    pass


class PinFirstRules(Rules):
    """:class:`Rules` that reserve the memory of pinned ops (and pinned groups) on their device from the
    start, so that a sequential fill never leaves a device too full for the ops that must go there."""

    def __init__(self, inst: Instance) -> None:
        super().__init__(inst)
        for o in range(inst.n):
            d = inst.pinned[o]
            if d < 0:
                continue
            g = inst.group_of[o]
            if g < 0:
                self.used[d] += inst.mem[o]
            elif self.group_dev[g] < 0:
                self.used[d] += self.group_mem[g]
                self.group_dev[g] = d

    def need(self, o: int) -> int:
        return 0 if self.inst.pinned[o] >= 0 else super().need(o)


def fill_placement(inst: Instance, order: list[int], work_share: float | None = None) -> list[int]:
    """Sequential fill: ops in ``order`` go to the current device while it has room, then the next.

    Pins and placed colocation groups force their device (pinned memory is reserved up front). An op
    that fits no later device goes to the first earlier one with room; if none has room, to the
    device using the least memory (best effort, flagged by ``memory_ok``). ``work_share`` (µs): a
    device also counts as full once the ops placed on it by the fill run that long (the last device
    takes the rest); None: memory only (the paper's fill).
    """
    rules = PinFirstRules(inst)
    m = inst.m
    cur = 0
    work = [0.0] * m
    pl = [-1] * inst.n
    for o in order:
        f = rules.forced(o)
        if f >= 0:
            d = f
        else:
            if work_share is not None and cur < m - 1 and work[cur] >= work_share:
                cur += 1
            d = -1
            for k in list(range(cur, m)) + list(range(cur)):
                if rules.fits(o, k):
                    d = k
                    break
            if d < 0:
                d = min(range(m), key=lambda x: (rules.used[x], x))
            elif d > cur:
                cur = d
        rules.assign(o, d)
        work[d] += inst.dur[o][d]
        pl[o] = d
    return pl


def fill_schedule(inst: Instance, order: list[int]) -> tuple[list[int], ScheduleState]:
    """Order-Place's answer as :func:`adjusting_placement` gives its own: :func:`fill_placement` of ``order``
    and the ScheduleState of it (the ops of ``order`` committed one after another, with insertion), the
    paper's model in which Alg. 2 is claimed never worse."""
    placement = fill_placement(inst, order)
    state = ScheduleState(inst)
    for v in order:
        state.commit(v, placement[v], insertion=True)
    return placement, state


def adjusting_placement(inst: Instance, order: list[int] | None = None,
                        trace: list | None = None) -> tuple[list[int], ScheduleState]:
    """Alg. 2 on ``inst`` (normally a coarse graph); returns the placement and the ScheduleState.

    ``order``: the node order (default CPD-TOPO of ``inst``). ``trace``: if a list, one dict per node
    is appended: ``v``, ``dk`` (previous node's device), ``d1`` (earliest EST), ``d`` (chosen),
    ``est`` (per device, ∞ when full), ``back`` (eq. 8, or None when not needed); ``d1 = -1`` when every
    device was full (best effort).
    """
    if order is None:
        order = cpd_topo_order(inst)
    if trace is None and inst.comm == "parallel" and kernels.use(kernels.size(inst), "large"):  # the same, compiled
        from dplace.kernels.adjust import adjusting_placement as compiled

        return compiled(inst, order)
    state = ScheduleState(inst)
    rules = PinFirstRules(inst)
    m = inst.m
    inf = math.inf
    succ = inst.succ
    prev = -1
    for v in order:
        cands = rules.candidates(v)
        est = [inf] * m
        for d in cands:
            est[d] = state.est(v, d, insertion=True)
        d1, dk, back = -1, prev, None
        if not cands:  # every allowed device is full: best effort
            f = rules.forced(v)
            d = f if f >= 0 else min(range(m), key=lambda x: (rules.used[x], x))
        else:
            d1 = min(range(m), key=lambda x: (est[x], x))
            dk = prev if prev >= 0 else d1
            if est[dk] < inf:
                back = max((inst.transfer_time(e, d1, dk) for e in succ[v]), default=0.0)  # eq. (8)
                d = d1 if est[dk] - est[d1] > back else dk  # eq. (9)
            else:
                d = d1
        if trace is not None:
            trace.append({"v": v, "dk": dk, "d1": d1, "d": d, "est": est, "back": back})
        state.commit(v, d, insertion=True)
        rules.assign(v, d)
        prev = d
    return state.placement, state


def _work_limit(inst: Instance, split: int | None, total: float | None = None) -> float | None:
    """The cluster work limit of granularity ``split``: mean total op time / m / split (µs); ``total``:
    :func:`_total_time` when known."""
    if split is None:
        return None
    return max((_total_time(inst) if total is None else total) / inst.m / inst.m / split, 1e-9)


def _total_time(inst: Instance) -> float:
    """Summed op times over all devices, op by op (compiled row sums on large graphs, same floats)."""
    if kernels.use(inst.n, "large"):
        from dplace.kernels.levels import row_sums

        return sum(row_sums(kernels.inst_arrays(inst)).tolist())
    return sum(sum(r) for r in inst.dur)


def _widest(inst: Instance, cz: Coarsening) -> float:
    """Most mean work in one cluster of several ops."""
    if kernels.use(inst.n, "large"):
        from dplace.kernels.levels import row_sums, segment_sums

        ptr = np.asarray(cz.breakpoints, dtype=np.int64)
        w = segment_sums(row_sums(kernels.inst_arrays(inst)), np.asarray(cz.order, dtype=np.int64), ptr)
        return max((x / inst.m for x, k in zip(w.tolist(), np.diff(ptr).tolist()) if k > 1), default=0.0)
    return max((sum(sum(inst.dur[o]) for o in ms) / inst.m for ms in cz.members if len(ms) > 1), default=0.0)


def _coarse(inst: Instance, opts: CeleritasOptions, split: int | None = None,
            order: list[int] | None = None, total: float | None = None, anchor_first: bool = True) -> Coarsening:
    """Fusion with the options' R and M; ``split`` k also limits a cluster's work (:func:`_work_limit`)."""
    return coarsen(inst, order, R=opts.R, M=opts.M, work_limit=_work_limit(inst, split, total), pins_alone=True,
                   anchor_first=anchor_first)


def _extra(inst: Instance, cz: Coarsening, ccr_before: float, **more) -> dict:
    return {"coarse_nodes": cz.coarse.n, "coarse_edges": len(cz.coarse.esrc), "ccr_before": ccr_before,
            "ccr_after": ccr(cz.coarse), "oversize_ops": len(cz.oversize), "cut_cost_us": cz.cut_cost, **more}


def _best_of(inst: Instance, method: str, opts: CeleritasOptions, variant: _Variant, options: dict, place,
             fills: tuple[bool, ...] = (False,), budget: Budget | None = None) -> Result:
    """Run ``place(cz, balanced) -> (coarse placement, extra)`` for each fusion granularity (and each
    of ``fills``) and keep the best simulated result (memory kept first, then makespan; ties: the
    earlier setting). The paper's variant: only the memory-only clusters and fill. ``budget``: a setting
    is started only while the time left is at least the slowest setting so far took (the first always
    runs), so the last one ends within the budget; the best one's extra says how many were tried
    (``time_limit``)."""
    settings = BALANCE_SPLITS if variant.balance else (None,)
    order = cpd_topo_order(inst)
    best = None
    widest = math.inf  # most work in one cluster of the memory-only fusions (inf until known)
    ccr_before = ccr(inst)
    total = _total_time(inst)
    tried = 0
    slowest = 0.0  # seconds the slowest setting took (fusion and placements)
    for split in settings:
        wl = _work_limit(inst, split, total)
        if wl is not None and wl >= widest:
            continue  # the limit binds no cluster: same fusion as without it
        for anchor_first in variant.anchors:
            if anchor_first and len(variant.anchors) > 1 and not inst.groups:
                continue  # no colocation: the same fusion
            if best is not None and budget is not None and (budget.expired() or budget.left() < slowest):
                return replace(best, extra={**best.extra, "time_limit": {
                    "settings_tried": tried, "stopped_before": {"work_split": split, "anchor_first": anchor_first},
                    "rest": "fusion settings not tried: the time left is less than one setting takes"}})
            t_setting = budget.elapsed() if budget is not None else 0.0
            cz = _coarse(inst, opts, split, order, total, anchor_first)
            if split is None:
                widest = _widest(inst, cz) if widest == math.inf else max(widest, _widest(inst, cz))
            for balanced in (fills if variant.balance else (False,)):
                tried += 1
                cpl, more = place(cz, balanced)
                if variant.balance:
                    more = dict(more, work_split=split, balanced_fill=balanced, anchor_first=anchor_first)
                res = make_result(inst, method, cz.expand(cpl, array=True), options=options,
                                  extra=_extra(inst, cz, ccr_before, **more))
                if best is None or (not res.memory_ok, res.makespan) < (not best.memory_ok, best.makespan):
                    best = res
            if budget is not None:
                slowest = max(slowest, budget.elapsed() - t_setting)
    return best


@register("standard_evaluation", options=StandardEvaluationOptions, paper="Celeritas §4.2.2 (placement only)",
          summary="Celeritas §4.2: DFS-TOPO order, fill each device to its memory, then the next.",
          best_effort=True)
def standard_evaluation(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
                        **options) -> Result:
    """Celeritas §4.2.2: DFS-TOPO sequential placement to the memory limit, best effort (§6.3: the device
    using the least memory) when full.

    This is the placement of Standard Evaluation's second step only. The measurement around it (§4.2.1:
    per-op time and memory at small batches regressed to the large one; step 2 re-measuring under this
    placement) is ``dplace profile`` (:mod:`dplace.runtime.profile`), which so far regresses and
    re-measures times only: measured memory waits for the runtime's memory measurement (issue 27 item 5).
    dplace's choice where the paper is silent: pinned ops' memory is reserved on their device first."""
    StandardEvaluationOptions(**options)
    return make_result(inst, "standard_evaluation", fill_placement(inst, dfs_topo_order(inst)), options=options)


def _order_place(inst: Instance, method: str, variant: _Variant, options: dict, budget: Budget | None = None) -> Result:
    opts = CeleritasOptions(**options)

    def place(cz: Coarsening, balanced: bool):
        cg = cz.coarse
        share = sum(sum(r) for r in cg.dur) / cg.m / cg.m if balanced else None
        return fill_placement(cg, cpd_topo_order(cg), share), {}

    return _best_of(inst, method, opts, variant, options, place, fills=(False, True), budget=budget)


def _celeritas(inst: Instance, method: str, variant: _Variant, options: dict, budget: Budget | None = None) -> Result:
    opts = CeleritasOptions(**options)

    def place(cz: Coarsening, balanced: bool):
        cpl, state = adjusting_placement(cz.coarse)
        return cpl, {"coarse_makespan": state.makespan}

    return _best_of(inst, method, opts, variant, options, place, budget=budget)


@register("order_place", options=CeleritasOptions, paper="Celeritas §5.1, §5.2/§6.2 Order-Place, §6.1",
          summary="Celeritas §5.2/§6.2 Order-Place: fusion (memory-limited clusters), coarse nodes fill devices in CPD-TOPO order.",
          best_effort=True)
def order_place(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
                **options) -> Result:
    """Celeritas §5.2/§6.2 Order-Place: Optimal Operation Fusion, sequential fill of the coarse graph
    (each device to its memory, then the next), colocation anchored at the first placed node (§6.1)."""
    return _order_place(inst, "order_place", PAPER, options)


@register("order_place_balanced", options=CeleritasOptions, paper="Celeritas §5.1-5.2", variant_of="order_place",
          summary="order_place with dplace's work-limited fusion granularities and work-share fill, best simulated kept.",
          best_effort=True)
def order_place_balanced(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
                         **options) -> Result:
    """dplace's Order-Place: fusion also at the work limits of ``BALANCE_SPLITS``, each coarse graph filled
    to memory and to each device's work share (total / m); the best simulated kept (module docstring)."""
    return _order_place(inst, "order_place_balanced", BALANCED, options, Budget.resolve(budget, time_limit_s))


@register("celeritas", options=CeleritasOptions, paper="Celeritas Alg. 1-2, §5.1-5.2, §6.1",
          summary="Celeritas Alg. 1+2 (§5.1-5.2): Optimal Operation Fusion, then Adjusting Placement of the coarse graph.",
          best_effort=True)
def celeritas(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
              **options) -> Result:
    """Celeritas (Xu et al.) §5.1-5.2, Alg. 1 and 2: fusion (clusters of at most R ops and M x memory),
    Adjusting Placement, map back, simulate; colocation anchored at the first placed node (§6.1)."""
    return _celeritas(inst, "celeritas", PAPER, options)


@register("celeritas_balanced", options=CeleritasOptions, paper="Celeritas Alg. 1-2", variant_of="celeritas",
          summary="celeritas with dplace's work-limited fusion granularities, best simulated kept.",
          best_effort=True)
def celeritas_balanced(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
                       **options) -> Result:
    """dplace's Celeritas: Adjusting Placement on the memory-only fusion and on fusions also limited to
    total work / m / k for k in ``BALANCE_SPLITS``; the best simulated kept (module docstring)."""
    return _celeritas(inst, "celeritas_balanced", BALANCED, options, Budget.resolve(budget, time_limit_s))


def add_cli(subparsers) -> None:
    """No sub-command of its own: ``dplace solve --method celeritas --R --M`` and ``dplace info --coarsen``."""
    return None
