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
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from dplace.errors import InvalidInstanceError
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

    def __post_init__(self) -> None:
        if not isinstance(self.R, int) or isinstance(self.R, bool) or self.R < 1:
            raise InvalidInstanceError(f"option 'R' must be an integer >= 1, got {self.R!r}")
        if not (isinstance(self.M, (int, float)) and 0 < self.M < math.inf):
            raise InvalidInstanceError(f"option 'M' must be a fraction > 0 of device memory, got {self.M!r}")


@dataclass(frozen=True)
class StandardEvaluationOptions:
    pass


def fill_placement(inst: Instance, order: list[int]) -> list[int]:
    """Sequential fill: ops in ``order`` go to the current device while it has room, then the next.

    Pins and placed colocation groups force their device. An op that fits no later device goes to the
    first earlier one with room; if none has room, to the device using the least memory (best effort,
    flagged by ``memory_ok``).
    """
    rules = Rules(inst)
    m = inst.m
    cur = 0
    pl = [-1] * inst.n
    for o in order:
        f = rules.forced(o)
        if f >= 0:
            d = f
        else:
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
    state = ScheduleState(inst)
    rules = Rules(inst)
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


def _coarse(inst: Instance, opts: CeleritasOptions) -> Coarsening:
    return coarsen(inst, R=opts.R, M=opts.M)


def _extra(inst: Instance, cz: Coarsening, **more) -> dict:
    return {"coarse_nodes": cz.coarse.n, "coarse_edges": len(cz.coarse.esrc), "ccr_before": ccr(inst),
            "ccr_after": ccr(cz.coarse), "oversize_ops": len(cz.oversize), "cut_cost_us": cz.cut_cost, **more}


@register("standard_evaluation", options=StandardEvaluationOptions,
          summary="Celeritas §4.2: DFS-TOPO order, fill each device to its memory, then the next.")
def standard_evaluation(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Celeritas §4.2.2: DFS-TOPO sequential placement to the memory limit, best effort when full."""
    StandardEvaluationOptions(**options)
    return make_result(inst, "standard_evaluation", fill_placement(inst, dfs_topo_order(inst)), options=options)


@register("order_place", options=CeleritasOptions,
          summary="Celeritas §5.2 Order-Place: fusion, then coarse nodes fill devices in CPD-TOPO order.")
def order_place(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Celeritas §5.2/§6.2 Order-Place: Optimal Operation Fusion, sequential fill of the coarse graph."""
    opts = CeleritasOptions(**options)
    cz = _coarse(inst, opts)
    cpl = fill_placement(cz.coarse, cpd_topo_order(cz.coarse))
    return make_result(inst, "order_place", cz.expand(cpl), options=options, extra=_extra(inst, cz))


@register("celeritas", options=CeleritasOptions,
          summary="Celeritas Alg. 1+2: Optimal Operation Fusion, then Adjusting Placement of the coarse graph.")
def celeritas(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Celeritas (Xu et al.) §5.1-5.2, Alg. 1 and 2: fusion, Adjusting Placement, map back, simulate."""
    opts = CeleritasOptions(**options)
    cz = _coarse(inst, opts)
    cpl, state = adjusting_placement(cz.coarse)
    return make_result(inst, "celeritas", cz.expand(cpl), options=options,
                       extra=_extra(inst, cz, coarse_makespan=state.makespan))


def add_cli(subparsers) -> None:
    """No sub-command of its own: ``dplace solve --method celeritas --R --M`` and ``dplace info --coarsen``."""
    return None
