"""The first two methods: ``single`` (one device) and ``heft`` (Topcuoglu, Hariri, Wu 2002)."""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InfeasibleError
from .model import Instance
from .ranks import priority_order, upward_rank
from .registry import register
from .result import Result, make_result
from .rules import Rules
from .simulate import ScheduleState


@register("single", summary="Every op on one device: the fastest single device that holds them all.", kind="baseline")
def single(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0) -> Result:
    """Single-device baseline (the "single GPU" placement Baechi, SoCC'20, §5 compares against).

    All ops on the one device that fits them and finishes first; infeasible if none holds them."""
    total = sum(inst.mem)
    pins = {d for d in inst.pinned if d >= 0}
    best = None
    for d in range(inst.m):
        if total > inst.capacity[d] or (pins and pins != {d}):
            continue
        work = sum(row[d] for row in inst.dur)
        if best is None or work < best[0]:
            best = (work, d)
    if best is None:
        raise InfeasibleError(f"single: no device holds all {total} bytes" + (" with the pins given" if pins else ""))
    return make_result(inst, "single", [best[1]] * inst.n)


@dataclass(frozen=True)
class HeftOptions:
    insertion: bool = True  # insertion-based policy (the paper's)


@register("heft", options=HeftOptions, summary="HEFT list scheduling, insertion-based, memory-aware.")
def heft(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """HEFT (Topcuoglu et al., IEEE TPDS 2002, §4.1): ops by decreasing upward rank, each on the device
    of earliest finish time with insertion; devices without room (memory, colocation) are skipped."""
    opts = HeftOptions(**options)
    rank = upward_rank(inst, "mean", "mean")
    tp = inst.topo_pos
    # decreasing rank, a valid topological order even when zero costs tie ranks (topo position breaks ties)
    state = ScheduleState(inst)
    rules = Rules(inst)
    for o in priority_order(inst, lambda o: (-rank[o], tp[o])):
        best_d, best_f = -1, float("inf")
        for d in rules.choose_or_fallback(o):
            f = state.eft(o, d, opts.insertion)
            if f < best_f:
                best_d, best_f = d, f
        state.commit(o, best_d, insertion=opts.insertion)
        rules.assign(o, best_d)
    return make_result(inst, "heft", state.placement, state.order(), options=options,
                       claimed_makespan=state.makespan)
