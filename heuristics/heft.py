"""``heft``: HEFT list scheduling (Topcuoglu, Hariri, Wu, IEEE TPDS 2002), insertion-based, memory-aware;
``heft_links``: dplace's HEFT for sequential comm (link harm + split-cost lookahead; not in the paper).
The lookahead weights (2, 10, 50) were picked by a sweep on the 3k-op sequential Transformer and the three
bundled graphs (``benchmarks/bench_seqcomm.py``): a setting of ours, not a paper's.

Compiled twin: :mod:`dplace.kernels.lists` (``run_heft``; tests/kernels/test_list_kernels.py,
test_seq_kernels.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from dplace import kernels
from dplace.budget import Budget
from dplace.errors import bad_option
from dplace.instance.columns import forward_of_index
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


@dataclass(frozen=True)
class HeftLinksOptions:
    insertion: bool = True  # insertion-based policy (HEFT's)
    # weights of the split cost tried, one list schedule each; the best simulated makespan is returned
    lookahead: tuple[float, ...] = (2.0, 10.0, 50.0)
    # each backward op (field ``forward_of``) on its forward op's device where it may go, as Baechi places
    # them (§3.2 (ii)); off by default: the best of the three weights on the sequential Transformers of
    # 294 / 996 / 3,006 ops (seed 0), without -> with: 59,713 -> 51,510 (m_topo 37,420), 464,307 ->
    # 582,065, 802,652 -> 907,726; the bundled graphs name no forward_of (the same schedules)
    coplace: bool = False

    def __post_init__(self) -> None:
        w = self.lookahead
        try:  # from the CLI: "2,10,50"
            w = tuple(float(x) for x in (w.split(",") if isinstance(w, str) else w))
        except (TypeError, ValueError):
            w = ()
        if not w or any(isinstance(x, bool) or not 0.0 <= x < float("inf") for x in w):
            raise bad_option("lookahead", "one or more finite weights >= 0 (e.g. 2,10,50)", self.lookahead)
        object.__setattr__(self, "lookahead", w)


@register("heft_links", options=HeftLinksOptions,
          summary="HEFT planning with the link queues it meets and the tensors its successors would send (sequential comm).")
def heft_links(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
               **options) -> Result:
    """HEFT planning with the link queues it meets (not in the HEFT paper, hence its own name). In
    ``comm: "sequential"`` HEFT's EFT (the state's, like every list scheduler's) already waits for each
    input's send on its busy link, but not for what its choice does to others: a new send joins its link
    in producer order, before the sends of producers that finish later, and delays them; and an op put
    away from where its successors' other inputs are makes their inputs cross links later. This one scores
    each device by EFT + the most a committed send on the op's links would arrive later
    (:meth:`dplace.schedule.state.ScheduleState.data_ready` with ``harm``) + ``w`` x the split cost
    (:func:`split_cost`: the link time its tensors would need to reach the successors whose committed
    inputs are all elsewhere), one list schedule per weight ``w`` in ``lookahead``, and returns the
    schedule of smallest makespan (its claim is that schedule's simulation: the state is); at the time
    limit it keeps the best of those already made (``extra["schedules"]``). With parallel comm it is
    ``heft``."""
    opts = HeftLinksOptions(**options)
    weights = opts.lookahead if inst.comm == "sequential" else (0.0,)
    budget = Budget.resolve(budget, time_limit_s)
    best, best_w, ran = None, 0.0, 0
    for w in weights:
        if best is not None and budget.expired():  # the first schedule always runs (as heft's)
            break
        ran += 1
        state = heft_schedule(inst, opts.insertion, link_aware=True, lookahead=w, coplace=opts.coplace)
        if best is None or state.makespan < best.makespan:
            best, best_w = state, w
    return make_result(inst, "heft_links", best.placement, best.order(), options=options,
                       claimed_makespan=best.makespan, extra={"lookahead": best_w, "schedules": ran})


def split_cost(inst: Instance, placement, o: int, d: int) -> float:
    """The link time ``o``'s tensors would need if ``o`` ran on ``d``: over ``o``'s successors not yet
    committed whose committed inputs (other than ``o``'s) are all on other devices, the cheapest
    transfer of ``o``'s edge from ``d`` to one of those devices (``heft_links``' lookahead; compiled twin
    :func:`dplace.kernels.lists.split_cost`)."""
    inf = float("inf")
    total = 0.0
    lat, bw, esrc = inst.lat, inst.bw, inst.esrc
    for e in inst.succ[o]:
        v = inst.edst[e]
        if placement[v] >= 0:
            continue
        c = inf
        for k in inst.pred[v]:
            p = esrc[k]
            dp = placement[p]
            if p == o or dp < 0:
                continue
            if dp == d:
                c = inf
                break
            x = lat[d][dp] + inst.ebytes[e] / bw[d][dp]
            if x < c:
                c = x
        if c < inf:
            total += c
    return total


def coplaced(devices, placement, f: int):
    """``devices`` narrowed to the device of op ``f`` (a backward op's forward op, ``forward_of``; -1:
    none) when ``f`` is placed and that device is among them (memory, colocation and pins allow it), as
    Baechi places a backward op with its forward op (§3.2 (ii)); otherwise ``devices`` unchanged."""
    d = placement[f] if f >= 0 else -1
    return [d] if d >= 0 and d in devices else devices


def heft_schedule(inst: Instance, insertion: bool = True, link_aware: bool = False, lookahead: float = 0.0,
                  coplace: bool = False):
    """HEFT's schedule state (``placement``, ``order()``, ``makespan``); compiled when
    :func:`dplace.kernels.use` says so (the same schedule: tests compare).
    ``link_aware``: :func:`heft_links`'s test (sequential comm) with split-cost weight ``lookahead``;
    ``coplace`` (with ``link_aware``): each backward op on its forward op's device (:func:`coplaced`)."""
    if (inst.comm == "parallel" and kernels.use(inst.n, "list")) or seq_kernel_wanted(inst):
        from dplace.kernels.lists import run_heft

        return run_heft(inst, insertion, link_aware, lookahead, coplace)
    link_aware = link_aware and inst.comm == "sequential"
    follow = forward_of_index(inst).tolist() if link_aware and coplace else None
    rank = upward_rank(inst, "mean", "mean")
    tp = inst.topo_pos
    # decreasing rank, a valid topological order even when zero costs tie ranks (topo position breaks ties)
    state = ScheduleState(inst)
    rules = Rules(inst)
    for o in priority_order(inst, lambda o: (-rank[o], tp[o])):
        best_d, best_f = -1, float("inf")
        devices = rules.choose_or_fallback(o)
        if follow is not None:
            devices = coplaced(devices, state.placement, follow[o])
        for d in devices:
            f = state.eft(o, d, insertion)
            if link_aware:
                state.data_ready(o, d, harm=True)
                f += state.harm
                if lookahead:
                    f += lookahead * split_cost(inst, state.placement, o, d)
            if f < best_f:
                best_d, best_f = d, f
        state.commit(o, best_d, insertion=insertion)
        rules.assign(o, best_d)
    return state
