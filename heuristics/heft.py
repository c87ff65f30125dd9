"""``heft``: HEFT list scheduling (Topcuoglu, Hariri, Wu, IEEE TPDS 2002), insertion-based, memory-aware.

Compiled twin: :mod:`dplace.kernels.lists` (``run_heft``; tests/kernels/test_list_kernels.py,
test_seq_kernels.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from dplace import kernels
from dplace.budget import Budget
from dplace.instance.model import Instance
from dplace.schedule.ranks import priority_order, upward_rank
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.schedule.rules import Rules
from dplace.schedule.simulate import seq_kernel_wanted
from dplace.schedule.state import ScheduleState


@dataclass(frozen=True)
class HeftOptions:
    insertion: bool = True  # insertion-based policy (the paper's)


@register("heft", options=HeftOptions, summary="HEFT list scheduling, insertion-based, memory-aware.")
def heft(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
         **options) -> Result:
    """HEFT (Topcuoglu et al., IEEE TPDS 2002, §4.1): ops by decreasing upward rank, each on the device
    of earliest finish time with insertion; devices without room (memory, colocation) are skipped."""
    opts = HeftOptions(**options)
    state = heft_schedule(inst, opts.insertion)
    return make_result(inst, "heft", state.placement, state.order(), options=options,
                       claimed_makespan=state.makespan)


@register("heft_links", options=HeftOptions,
          summary="HEFT whose EFT test adds the delay its sends impose on committed sends (sequential comm).")
def heft_links(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
               **options) -> Result:
    """HEFT planning with the link queues it meets (not in the HEFT paper, hence its own name): in
    ``comm: "sequential"`` a new send joins its link in producer order, before the sends of producers
    that finish later, and delays them; HEFT's EFT test sees only its own input's arrival. This one
    scores each device by EFT + the most a committed send on the op's links would arrive later
    (:meth:`dplace.schedule.state.ScheduleState.data_ready` with ``harm``), so it stops sending across busy
    links for a small gain. With parallel comm it is ``heft``."""
    opts = HeftOptions(**options)
    state = heft_schedule(inst, opts.insertion, link_aware=True)
    return make_result(inst, "heft_links", state.placement, state.order(), options=options,
                       claimed_makespan=state.makespan)


def heft_schedule(inst: Instance, insertion: bool = True, link_aware: bool = False):
    """HEFT's schedule state (``placement``, ``order()``, ``makespan``); compiled when
    :func:`dplace.kernels.use` says so (the same schedule: tests compare).
    ``link_aware``: :func:`heft_links`'s test (sequential comm)."""
    if (inst.comm == "parallel" and kernels.use(inst.n, "list")) or seq_kernel_wanted(inst):
        from dplace.kernels.lists import run_heft

        return run_heft(inst, insertion, link_aware)
    link_aware = link_aware and inst.comm == "sequential"
    rank = upward_rank(inst, "mean", "mean")
    tp = inst.topo_pos
    # decreasing rank, a valid topological order even when zero costs tie ranks (topo position breaks ties)
    state = ScheduleState(inst)
    rules = Rules(inst)
    for o in priority_order(inst, lambda o: (-rank[o], tp[o])):
        best_d, best_f = -1, float("inf")
        for d in rules.choose_or_fallback(o):
            f = state.eft(o, d, insertion)
            if link_aware:
                state.data_ready(o, d, harm=True)
                f += state.harm
            if f < best_f:
                best_d, best_f = d, f
        state.commit(o, best_d, insertion=insertion)
        rules.assign(o, best_d)
    return state
