"""Celeritas (Xu, Liao, Xie, Zhou): Standard-Evaluation placement, Order-Place and Adjusting Placement.

* ``standard_evaluation`` (§4.2.2): ops in DFS-TOPO order fill one device up to its memory, then the
  next; best effort (the device using the least memory) when none has room.
* ``order_place`` (§5.2, §6.2): Optimal Operation Fusion (:mod:`dplace.heuristics.coarsen`), then the
  coarse nodes in CPD-TOPO order fill one device to its memory, then the next; mapped back.
* ``celeritas`` (§5.2, Alg. 2, eqs. 7-9): fusion, then Adjusting Placement on the coarse graph: each
  coarse node (CPD-TOPO order) stays on the previous node's device d_k unless the earliest start
  (with insertion, from :class:`dplace.simulate.ScheduleState`) on the best device d_1 beats it by
  more than ``back_cost`` = the longest transfer of its outputs from d_1 back to d_k (eq. 8); a device
  without room has EST = ∞; when all are full, the device using the least memory. The coarse
  placement is mapped back to the original ops, and the simulator schedules the original graph.

Memory, pins and colocation go through :class:`dplace.rules.Rules` on the coarse instance, whose
clusters carry their group's colocation value and their pin (see :mod:`dplace.heuristics.coarsen`).
Two departures keep memory: the fusion keeps pinned ops out of unpinned clusters (``pins_alone``: a
49 KB pinned input must not pin a cluster holding a quarter of a device), and the memory of pinned
ops is reserved on their device before anything is placed (:class:`PinFirstRules`).

``balance`` (default True). With ample memory the paper's M = 0.25·capacity bounds nothing, fusion
swallows the graph and the fill puts it all on one device (on classic task graphs with unlimited
memory: 125 % above the optimum on average, ``benchmarks/bench_celeritas.py --classic``). So the
fusion is also run with a cluster work limit (total work / m / k, k in ``BALANCE_SPLITS``) and
Order-Place also tries a fill that moves on once a device holds its work share; every setting is
simulated and the best kept. The paper's setting is always among them, so ``balance`` never
returns a worse simulated makespan than ``balance=False`` (the paper's behaviour, kept as an option).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dplace import kernels
from dplace.errors import bad_option
from dplace.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.rules import Rules
from dplace.simulate import ScheduleState

from .coarsen import Coarsening, ccr, coarsen, coarsen_report
from .orders import cpd_topo_order, dfs_topo_order

__all__ = [
    "CeleritasOptions", "StandardEvaluationOptions", "adjusting_placement", "add_cli", "celeritas",
    "coarsen_report", "fill_placement", "order_place", "standard_evaluation",
]


@dataclass(frozen=True)
class CeleritasOptions:
    R: int = 200  # fusion exploration range: most ops per cluster (§5.1.3)
    M: float = 0.25  # cluster memory limit, fraction of the (smallest) device memory (§5.1.3)
    # True: also limit cluster work and (Order-Place) fill each device to its work share, trying the
    # granularities in BALANCE_SPLITS and the paper's own setting, keeping the best simulated one.
    # False: the paper's behaviour (clusters and fill limited by memory only).
    balance: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.R, int) or isinstance(self.R, bool) or self.R < 1:
            raise bad_option("R", "an integer >= 1", self.R)
        if not (isinstance(self.M, (int, float)) and 0 < self.M < math.inf):
            raise bad_option("M", "a fraction > 0 of device memory", self.M)
        if not isinstance(self.balance, bool):
            raise bad_option("balance", "true or false", self.balance)


# balance=True: cluster work limits tried, as the number of clusters per device's work share (total
# mean op time / devices / k); None = memory only (the paper's clusters)
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
            order: list[int] | None = None, total: float | None = None) -> Coarsening:
    """Fusion with the options' R and M; ``split`` k also limits a cluster's work (:func:`_work_limit`)."""
    return coarsen(inst, order, R=opts.R, M=opts.M, work_limit=_work_limit(inst, split, total), pins_alone=True)


def _extra(inst: Instance, cz: Coarsening, ccr_before: float, **more) -> dict:
    return {"coarse_nodes": cz.coarse.n, "coarse_edges": len(cz.coarse.esrc), "ccr_before": ccr_before,
            "ccr_after": ccr(cz.coarse), "oversize_ops": len(cz.oversize), "cut_cost_us": cz.cut_cost, **more}


def _best_of(inst: Instance, method: str, opts: CeleritasOptions, options: dict, place,
             fills: tuple[bool, ...] = (False,)) -> Result:
    """Run ``place(cz, balanced) -> (coarse placement, extra)`` for each fusion granularity (and each
    of ``fills``) and keep the best simulated result (memory kept first, then makespan; ties: the
    earlier setting). Without ``balance`` only the paper's setting (memory-only clusters and fill)."""
    settings = BALANCE_SPLITS if opts.balance else (None,)
    order = cpd_topo_order(inst)
    best = None
    widest = math.inf  # most work in one cluster of the memory-only fusion
    ccr_before = ccr(inst)
    total = _total_time(inst)
    for split in settings:
        wl = _work_limit(inst, split, total)
        if wl is not None and wl >= widest:
            continue  # the limit binds no cluster: same fusion as without it
        cz = _coarse(inst, opts, split, order, total)
        if split is None:
            widest = _widest(inst, cz)
        for balanced in (fills if opts.balance else (False,)):
            cpl, more = place(cz, balanced)
            res = make_result(inst, method, cz.expand(cpl, array=True), options=options,
                              extra=_extra(inst, cz, ccr_before, work_split=split, balanced_fill=balanced, **more))
            if best is None or (not res.memory_ok, res.makespan) < (not best.memory_ok, best.makespan):
                best = res
    return best


@register("standard_evaluation", options=StandardEvaluationOptions,
          summary="Celeritas §4.2: DFS-TOPO order, fill each device to its memory, then the next.",
          best_effort=True)
def standard_evaluation(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Celeritas §4.2.2: DFS-TOPO sequential placement to the memory limit, best effort when full."""
    StandardEvaluationOptions(**options)
    return make_result(inst, "standard_evaluation", fill_placement(inst, dfs_topo_order(inst)), options=options)


@register("order_place", options=CeleritasOptions,
          summary="Celeritas §5.2 Order-Place: fusion, then coarse nodes fill devices in CPD-TOPO order.",
          best_effort=True)
def order_place(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Celeritas §5.2/§6.2 Order-Place: Optimal Operation Fusion, sequential fill of the coarse graph.

    ``balance`` (default): the fill also moves on once a device holds its work share (total / m)."""
    opts = CeleritasOptions(**options)

    def place(cz: Coarsening, balanced: bool):
        cg = cz.coarse
        share = sum(sum(r) for r in cg.dur) / cg.m / cg.m if balanced else None
        return fill_placement(cg, cpd_topo_order(cg), share), {}

    return _best_of(inst, "order_place", opts, options, place, fills=(False, True))


@register("celeritas", options=CeleritasOptions,
          summary="Celeritas Alg. 1+2: Optimal Operation Fusion, then Adjusting Placement of the coarse graph.",
          best_effort=True)
def celeritas(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Celeritas (Xu et al.) §5.1-5.2, Alg. 1 and 2: fusion, Adjusting Placement, map back, simulate."""
    opts = CeleritasOptions(**options)

    def place(cz: Coarsening, balanced: bool):
        cpl, state = adjusting_placement(cz.coarse)
        return cpl, {"coarse_makespan": state.makespan}

    return _best_of(inst, "celeritas", opts, options, place)


def add_cli(subparsers) -> None:
    """No sub-command of its own: ``dplace solve --method celeritas --R --M`` and ``dplace info --coarsen``."""
    return None
