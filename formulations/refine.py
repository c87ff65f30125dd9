"""Exact refinement of large graphs: ``refine`` and ``portfolio``.

``refine``: start from the best heuristic; coarsen the graph to at most K nodes with Celeritas' Optimal
Operation Fusion (:func:`dplace.heuristics.coarsen.coarsen`, Celeritas §5.1.3), solve the coarse graph
with CP-SAT hinted by the heuristic's placement, map back and simulate; then large-neighbourhood search
on the original graph (each step frees the ops of a window of the current critical path, keeps every
other op on its device and in its order, and re-solves with CP-SAT) until the time limit. Every
candidate is judged by :func:`dplace.simulate`; the answer is never worse than the starting heuristic.
Graphs of at most K ops are solved by CP-SAT directly (with its proven bound).

The coarse answer is mapped back with the best of three orders (the clusters' order, the executor's order,
and a HEFT-style insertion order for the placement: :func:`list_order`).

``portfolio``: run every registered heuristic, keep the best by simulated makespan, refine it within the
remaining budget; ``extra["winner"]`` names the heuristic that won.

Limits: every phase draws on the one time limit (:class:`Budget`): the starting heuristics get
``start_share`` of it (each at most a tenth), then coarsening, the coarse model, its solve (``coarse_share``
of what is left), mapping back, and neighbourhood steps, each started only when its measured cost (the
first: estimated from the graph's size) fits in what is left. On a 36k-op graph one step's model takes
about 15 s to build, so short limits there end after the coarse solve (``extra["lns_stopped"]`` says why).
Ctrl-C (:mod:`dplace.interrupt`) stops the current CP-SAT search and returns the best answer so far with
``interrupted=True``. Phases and the incumbent are reported through :mod:`dplace.progress`.

Both are registered with kind "exact" (they run CP-SAT under a time limit with parallel workers, so a
seed does not fix their placement; they report ``optimal`` only with a proof), which also keeps them out
of the heuristics that hint the exact methods.
"""
from __future__ import annotations

import math
import os
import random
import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Sequence

from dplace.verify import claims
from dplace import interrupt, progress
from dplace.bounds import lower_bound
from dplace.budget import Budget
from dplace.errors import InfeasibleError, bad_option
from dplace.instance.model import Instance
from dplace.registry import method_info, methods, register
from dplace.result import Result, make_result

from .cpsat import Ticks, finish, hinted_model, memory_fits, reachability, solve_model, tick_schedule
from .frame import OutOfTime
from .heuristic_start import best_heuristic, hint_heuristics, slowdown_guess
from .heuristic_start import run_heuristics as _run_heuristics
from .lns import sim_cost_s
from .neighbourhood import neighbourhood_model

__all__ = ["PortfolioOptions", "RefineOptions", "critical_ops", "list_order", "portfolio", "refine"]


@dataclass(frozen=True)
class RefineOptions:
    K: int = 60  # most nodes of the coarse graph solved exactly
    start: str = "best"  # starting heuristic: "best" of the registered ones, or a method name
    window: int = 24  # ops freed per large-neighbourhood step
    step_time_s: float = 3.0  # CP-SAT time per neighbourhood step
    coarse_share: float = 0.25  # share of the budget left after the start for the coarse solve
    start_share: float = 0.3  # share of the budget for the starting heuristics (each: at most a tenth)
    workers: int | None = None  # CP-SAT workers; None: os.cpu_count()
    default_time_limit_s: float = 60.0  # used when time_limit_s is None
    progress: bool = False  # CP-SAT progress lines on stderr

    def __post_init__(self) -> None:
        if self.K < 1:
            raise bad_option("K", ">= 1", self.K)
        if self.window < 1:
            raise bad_option("window", ">= 1", self.window)
        if not 0.0 <= self.coarse_share <= 1.0:
            raise bad_option("coarse_share", "in [0, 1]", self.coarse_share)
        if not 0.0 < self.start_share <= 1.0:
            raise bad_option("start_share", "in (0, 1]", self.start_share)


@dataclass(frozen=True)
class PortfolioOptions(RefineOptions):
    pass


def _order_of(res: Result) -> list[list[int]]:
    return [list(x) for x in (res.order if res.order is not None else res.schedule.order)]


def critical_ops(inst: Instance, res: Result) -> list[int]:
    """Ops of one critical path of ``res``'s simulated schedule, first to last: from the op that ends
    last, step back to whatever fixed its start (an input's arrival or the previous op on its device)."""
    from .lns import critical_path_of

    return [o for o, _ in critical_path_of(inst, res.schedule, _order_of(res))][::-1]


def list_order(inst: Instance, placement: Sequence[int]) -> list[list[int]]:
    """Per-device order for a fixed placement: ops by decreasing upward rank (a topological order),
    each inserted at its earliest start on its device (HEFT's insertion policy, ScheduleState)."""
    from dplace.schedule.ranks import upward_rank

    from .units import list_schedule

    return list_schedule(inst, placement, upward_rank(inst, "mean", "mean"))


# first estimate of one neighbourhood step's model building (s per op + edge, before one was measured;
# measured here: 15 s for a 36k-op, 71k-edge graph, 0.45 s for BERT-12's 2k ops)
_BUILD_S_PER_ELEMENT = 0.15e-3
_OVERRUN_PER_BUILD = 1.5


def heuristic_names() -> list[str]:
    """The registered heuristics and baselines that start refine/portfolio (those that hint CP-SAT)."""
    return hint_heuristics()


def run_heuristics(inst: Instance, names: Sequence[str], clock: Budget, budget_s: float, seed: int,
                   keep: dict[str, Result] | None = None) -> tuple[dict[str, Any], tuple[str, Result] | None]:
    """:func:`.heuristic_start.run_heuristics` within ``budget_s`` seconds from now (each heuristic gets at most a
    tenth of the whole limit): a heuristic is skipped once it would end past that, or on Ctrl-C, unless
    nothing gave a placement yet; the best by (memory kept, simulated makespan). ``keep``: filled with
    every heuristic's Result."""
    return _run_heuristics(inst, names, budget=clock.child(budget_s), seed=seed,
                           time_limit_s=max(0.05, min(0.1 * clock.limit_s, budget_s)), keep=keep)


_COARSEN_S_PER_OP = 3e-5  # CPU s per op of coarsen(n/K): 1.06 s on the 36k-op graph, 0.05 s on BERT-12


def _coarse_step(inst: Instance, start: Result, K: int, share: float, clock: Budget, sim_s: float, workers: int,
                 seed: int, progress_lines: bool) -> tuple[Result | None, dict[str, Any]]:
    """Coarsen to <= K nodes, solve with CP-SAT hinted by the start placement, map back; within ``share``
    of the time left (mapping back and its simulations included)."""
    from dplace.heuristics.coarsen import coarsen

    info: dict[str, Any] = {}
    post_s = 4 * sim_s + 0.05  # mapping back: up to three simulations and one list order
    need = _COARSEN_S_PER_OP * inst.n * slowdown_guess() + post_s + 0.2
    if clock.left() < need:
        info["coarse_status"] = f"skipped: coarsening and mapping back need about {need:.1f} s"
        return None, info
    progress.phase("coarsen (Celeritas fusion)")
    # exploration range n/K: clusters of at most n/K ops, so the DP leaves at least K and the merge pass
    # brings them down to K (with the default range the DP may stop at far fewer, coarser clusters)
    c = coarsen(inst, R=max(1, math.ceil(inst.n / K)), max_nodes=K)
    ci = c.coarse
    info["coarse_nodes"] = ci.n
    if clock.left() < post_s + 0.2:
        info["coarse_status"] = "skipped: no time left after coarsening"
        return None, info
    T = Ticks(ci, None, start.makespan)
    # hint candidates: the start placement by majority (time-weighted) per cluster, and heft on the coarse
    # graph; the one with the shorter tick schedule is the hint
    cands = []
    vote = []
    for k, mem in enumerate(c.members):
        w = [0.0] * inst.m
        for o in mem:
            w[start.placement[o]] += inst.dur[o][start.placement[o]] + 1e-9
        vote.append(max(range(inst.m), key=lambda d: (w[d], -d)))
    cands.append((vote, [[k for k in ci.topo if vote[k] == d] for d in range(ci.m)]))
    with progress.nested(f"coarse graph ({ci.n} nodes)"):  # its makespans are not the graph's
        h = best_heuristic(ci, "heft")
    if h is not None:
        cands.append((h[1].placement, _order_of(h[1])))
    best = None
    for pl, od in cands:
        sch = tick_schedule(ci, T, pl, od)
        if memory_fits(ci, pl) and (best is None or (sch is not None and sch.makespan < best[0])):
            best = (sch.makespan if sch is not None else math.inf, (pl, od))
    progress.phase("coarse CP-SAT model")
    coarse = clock.share(share)
    V, _ = hinted_model(ci, T, best[1] if best else None, symmetry=True,
                        hint_time_s=max(0.05, min(0.5, 0.1 * coarse.left())),
                        lb_ticks=int(math.ceil(lower_bound(ci) / T.tick - 1e-9)), windows=True)
    coarse = coarse.child(clock.child(reserve=post_s).left())  # mapping back keeps its time
    if coarse.left() < 0.05:
        info["coarse_status"] = "skipped: no time left for the coarse solve"
        return None, info
    progress.phase(f"coarse CP-SAT ({ci.n} nodes, {coarse.left():.1f} s)")
    out = solve_model(V, workers=workers, seed=seed, progress=progress_lines, label="refine coarse", budget=coarse)
    info["coarse_status"] = out.status_name
    if out.placement is None:
        return None, info
    progress.phase("map the coarse answer back")
    pl = c.expand(out.placement)
    od = c.expand_order(out.order, out.placement)
    res = make_result(inst, "refine", pl, od, status="feasible")
    for alt_order in (lambda: make_result(inst, "refine", pl, None).schedule.order,  # the executor's order
                      lambda: list_order(inst, pl)):  # HEFT-style insertion order for this placement
        if clock.left() < 2.5 * sim_s or interrupt.requested():
            break
        alt = make_result(inst, "refine", pl, alt_order(), status="feasible")
        if alt.makespan < res.makespan:
            res = alt
    info["coarse_makespan"] = res.makespan
    return res, info


def _lns(inst: Instance, best: Result, opts: RefineOptions, clock: Budget, sim_s: float, lb: float,
         workers: int, seed: int) -> tuple[Result, dict[str, Any]]:
    """Large-neighbourhood search from ``best`` until the budget is spent or Ctrl-C; each step frees a
    window of the current critical path. A step starts only if its measured (first: estimated) model
    building, CP-SAT overrun and simulation fit in the time left."""
    rng = random.Random(seed)
    T = None  # tick data and reachability: built for the first step only (seconds on a 36k-op graph)
    build_s = _BUILD_S_PER_ELEMENT * (inst.n + len(inst.edges))  # replaced by the measured cost
    # CP-SAT's overrun of its limit: loading a model into its full-problem worker does not look at the
    # clock (3.8 s past a 2.5 s limit on BERT-12's 2k-op neighbourhood model on a loaded machine, whose
    # Python build took 2.5 s): priced at 1.5 x the build until measured
    over_s = _OVERRUN_PER_BUILD * build_s
    iters = improved = 0
    stop = "time limit"
    while True:
        if interrupt.requested():
            stop = "interrupted"
            break
        if clock.left() < build_s + over_s + sim_s + 0.1:
            if iters == 0:
                stop = f"time limit (one step needs about {build_s + over_s + sim_s:.1f} s, {max(0.0, clock.left()):.1f} s left)"
            break
        if T is None:
            progress.phase("LNS: tick data")
            reach = reachability(inst) if inst.comm == "sequential" else []
            T = Ticks(inst, None, best.makespan)
            lb_ticks = int(math.ceil(lb / T.tick - 1e-9))
            continue  # the clock is checked again
        iters += 1
        progress.phase(f"LNS step {iters}: model")
        path = critical_ops(inst, best)
        w = min(opts.window, inst.n)
        if len(path) > w:
            i = rng.randrange(len(path) - w + 1)
            window = path[i:i + w]
        else:
            window = list(path)
            others = [o for o in range(inst.n) if o not in set(window)]
            rng.shuffle(others)
            window += others[: w - len(window)]
        tb = time.perf_counter()
        try:  # the build is stopped when only the simulation of its answer's time is left
            V, vals = neighbourhood_model(
                inst, best.placement, _order_of(best), window, T, reach, lb_ticks,
                hint_time_s=max(0.05, min(opts.step_time_s, clock.left() - over_s - sim_s)),
                budget=clock.child(reserve=sim_s))
        except OutOfTime:
            stop = "time limit (a step's model was not built in time)"
            break
        took = time.perf_counter() - tb
        build_s = max(0.8 * build_s, took)  # keep some memory of a slow first build
        over_s = max(over_s, _OVERRUN_PER_BUILD * took) if iters == 1 else over_s
        step = clock.child(opts.step_time_s, reserve=over_s + sim_s)
        limit = step.left()
        if vals is None or limit < 0.05 or interrupt.requested():
            continue
        progress.phase(f"LNS step {iters}: CP-SAT ({limit:.1f} s)")
        out = solve_model(V, workers=workers, seed=seed + iters, budget=step)
        over_s = max(0.5 * over_s, out.wall_s - limit, 0.0)
        if out.placement is None:
            continue
        ts = time.perf_counter()
        cand = make_result(inst, "refine", out.placement, out.order, status="feasible",
                           claimed_makespan=T.to_us(out.objective_ticks))
        sim_s = max(0.5 * sim_s, time.perf_counter() - ts)
        if cand.memory_ok and cand.makespan < best.makespan - 1e-9:
            best = cand
            improved += 1
            progress.update(incumbent=best.makespan)
    return best, {"lns_steps": iters, "lns_improvements": improved, "lns_stopped": stop}


def _refine_from(inst: Instance, start_name: str, start: Result, opts: RefineOptions, clock: Budget, seed: int,
                 method: str, extra: dict[str, Any]) -> Result:
    workers = opts.workers or os.cpu_count() or 1
    extra = dict(extra, start_method=start_name, start_makespan=start.makespan)
    base = claims.base_bound(inst)
    lb = base.value
    progress.update(incumbent=start.makespan, bound=lb)
    if inst.n <= opts.K:  # small enough: CP-SAT on the graph itself, with its proven bound
        from .cpsat import CpsatOptions

        progress.phase("CP-SAT model")
        T = Ticks(inst, None, start.makespan)
        V, _ = hinted_model(inst, T, (start.placement, _order_of(start)) if start.memory_ok else None,
                            lb_ticks=int(math.ceil(lb / T.tick - 1e-9)), symmetry=True,
                            hint_time_s=max(0.05, min(0.5, 0.1 * clock.limit_s, clock.left())))
        progress.phase("CP-SAT")
        # the search gets most of what is left; the rest confirms its claims (the other formulation)
        out = solve_model(V, workers=workers, seed=seed, progress=opts.progress, label=method,
                          budget=clock.share(0.8))
        res = finish(inst, method, V, out, [base], start if start.memory_ok else None, CpsatOptions(workers=opts.workers),
                     dict(extra, tick_us=T.tick, stage="cpsat"), budget=clock, workers=workers, seed=seed)
        return replace(res, options=asdict(opts), interrupted=interrupt.requested())
    # the start's own simulated schedule is the answer when nothing improves on it; a simulation's cost
    # (for later steps) is estimated from the graph's size until one is timed
    best = replace(start, method=method, status="feasible", order=_order_of(start))
    sim_s = sim_cost_s(inst)
    stage = "start"
    if opts.coarse_share > 0 and clock.left() > 0.5 and not interrupt.requested():
        try:
            cres, cinfo = _coarse_step(inst, start, opts.K, opts.coarse_share, clock, sim_s, workers, seed,
                                       opts.progress)
        except (InfeasibleError, ValueError) as exc:
            cres, cinfo = None, {"coarse_error": str(exc)}
        extra.update(cinfo)
        if cres is not None and cres.memory_ok and cres.makespan < best.makespan - 1e-9:
            best, stage = cres, "coarse"
            progress.update(incumbent=best.makespan)
    before = best
    best, info = _lns(inst, best, opts, clock, sim_s, lb, workers, seed)
    if best is not before:
        stage = "lns"
    extra.update(info, stage=stage)
    progress.phase("result")
    out = replace(best, method=method, status="feasible", options=asdict(opts), extra=extra,
                  claimed_makespan=best.makespan, order=_order_of(best), interrupted=interrupt.requested())
    return claims.settle(out, [base])


def _clock(opts: RefineOptions, time_limit_s: float | None, budget: Budget | None) -> Budget:
    """The method's budget, drawn on by every phase (starting heuristics, coarsening, model building,
    CP-SAT, mapping back), 0.05 s kept back for the final result."""
    return Budget.resolve(budget, time_limit_s, opts.default_time_limit_s).child(reserve=0.05)


@register("refine", options=RefineOptions, kind="exact",
          summary="Coarsen to K nodes, CP-SAT on the coarse graph, then CP-SAT neighbourhood search.")
def refine(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
           **options) -> Result:
    """Celeritas fusion (§5.1.3) + CP-SAT on the coarse graph + large-neighbourhood search; see module doc."""
    opts = RefineOptions(**options)
    clock = _clock(opts, time_limit_s, budget)
    if opts.start != "best":
        method_info(opts.start)  # an unknown name is the user's error, before anything runs
    with interrupt.polling():
        if opts.start == "best":
            scores, got = run_heuristics(inst, heuristic_names(), clock, opts.start_share * clock.limit_s, seed)
        else:
            scores, got = run_heuristics(inst, [opts.start], clock, opts.start_share * clock.limit_s, seed)
        if got is None:
            raise InfeasibleError(f"refine: the starting heuristic {opts.start!r} gave no placement ({scores})")
        return _refine_from(inst, got[0], got[1], opts, clock, seed, "refine", {})


def _portfolio_large(inst: Instance, best: Result, ran: dict[str, Result], scores: dict[str, Any],
                     opts: PortfolioOptions, clock: Budget, seed: int) -> Result | None:
    """Above K ops: the coarse CP-SAT answer as one more start (not where :func:`.anneal.applies`), then
    :func:`.large.portfolio_large` (segment bound, every start re-ordered, annealing, group-move LNS) for the
    rest of the budget."""
    from .anneal import applies
    from .large import portfolio_large

    # where the annealing runs, its time is worth more than the coarse answer's (measured on the bundled
    # real graphs: the coarse start never won there and cost a quarter of the budget)
    if opts.coarse_share > 0 and best.memory_ok and clock.left() > 1.0 and not applies(inst):
        try:
            ran["coarse"], _ = _coarse_step(inst, best, opts.K, opts.coarse_share, clock, sim_cost_s(inst),
                                            opts.workers or os.cpu_count() or 1, seed, opts.progress)
        except (InfeasibleError, ValueError):
            pass
    out = portfolio_large(inst, ran, budget=clock, seed=seed,
                          options=asdict(opts), extra={"heuristics": scores}, should_stop=interrupt.requested)
    return None if out is None else replace(out, interrupted=interrupt.requested())


@register("portfolio", options=PortfolioOptions, kind="exact",
          summary="Every registered heuristic, the best one refined (refine) within the budget.")
def portfolio(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
              **options) -> Result:
    """Run the registered heuristics, keep the best by simulated makespan, refine it."""
    opts = PortfolioOptions(**options)
    clock = _clock(opts, time_limit_s, budget)
    with interrupt.polling():
        ran: dict[str, Result] = {}
        scores, got = run_heuristics(inst, heuristic_names(), clock, opts.start_share * clock.limit_s, seed, keep=ran)
        if got is None:
            raise InfeasibleError("portfolio: no heuristic gave a placement")
        if inst.n > opts.K:  # large graphs: segment bound + group-move LNS from every answer so far (large.py)
            out = _portfolio_large(inst, got[1], ran, scores, opts, clock, seed)
            if out is not None:
                return out
        out = _refine_from(inst, got[0], got[1], RefineOptions(**asdict(opts)), clock, seed, "portfolio",
                           {"winner": got[0], "heuristics": scores})
    return replace(out, options=asdict(opts))
