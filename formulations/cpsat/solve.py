"""The ``cpsat`` method: heuristics, hinted model, search, confirmed claims.

Claims (:mod:`dplace.verify.claims`): CP-SAT's bound, OPTIMAL or INFEASIBLE is a claim. It counts only as far as
a check CP-SAT's failures cannot share confirms it: brute force on small graphs, else the MILP with HiGHS
(:func:`_cross_check`, up to ``claims.CROSS_MAX_OPS`` ops); a second search *without presolve*
(:func:`confirm_bound`: is there a schedule below the claimed bound?) runs first and may only weaken it. Status ``optimal`` only when the *simulated* makespan reaches the certified bound
(``claims.TOL``, 1e-6 relative). Time: heuristics, model building and hint completion count against the
limit (:class:`~dplace.formulations.frame.OutOfTime` -> the heuristic answer, labelled); Ctrl-C stops the search
(:func:`~.model.run_search`) and the best answer so far comes back with ``interrupted=True``.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ortools.sat.python import cp_model as cp

from dplace.verify import claims
from dplace import interrupt
from dplace.budget import Budget
from dplace.errors import bad_option
from dplace.instance.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result, no_solution

from ..heuristic_start import slowdown_guess
from .hint import hinted_model, memory_fits
from ..frame import (
    OutOfTime, check_time, cleanup_s, cross_check, fallback, options_dict, run_guarded, stop_building_on_interrupt,
)
from .model import CpModelVars, model_cost_s
from .search import KeepingCallback, run_search, status_name

# the status name's tail when dplace stopped waiting for a search that did not stop (model.run_search)
ABANDONED_NOTE = " (stopped by dplace: CP-SAT did not stop at the deadline; its last solution kept)"
from .windows import energetic_bound
from .ticks import Ticks, tick_schedule

__all__ = ["CLAIM_STAGES", "CpsatOptions", "SolveOutcome", "confirm_bound", "cpsat", "finish", "solve_model", "stage_limit"]


@dataclass(frozen=True)
class CpsatOptions:
    workers: int | None = None  # CP-SAT search workers; None: os.cpu_count()
    tick: float | None = None  # µs per integer tick; None: automatic (exact for integer data)
    hint: str = "best"  # "best": best registered heuristic; "heft"; or "none"
    symmetry: bool = True  # symmetry breaking when devices are identical
    progress: bool = True  # progress line (incumbent, bound) on stderr
    log: bool = False  # CP-SAT's own search log
    default_time_limit_s: float = 60.0  # used when time_limit_s is None

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise bad_option("workers", ">= 1", self.workers)
        if self.tick is not None and not (self.tick > 0 and math.isfinite(self.tick)):
            raise bad_option("tick", "> 0", self.tick)
        if self.hint not in ("best", "heft", "none"):
            raise bad_option("hint", "best, heft or none", self.hint)


class _Progress(KeepingCallback):
    def __init__(self, V: CpModelVars, show: bool, label: str) -> None:
        super().__init__()
        self.V, self.show, self.label = V, show, label
        self.t0 = time.perf_counter()
        self.n = 0

    def on_solution(self) -> None:
        self.n += 1
        if self.show:
            tk = self.V.T.tick
            print(f"{self.label}: solution {self.n}: incumbent {self.objective_value * tk:.6g} µs, "
                  f"bound {self.best_objective_bound * tk:.6g} µs, {time.perf_counter() - self.t0:.2f} s",
                  file=sys.stderr, flush=True)


@dataclass
class SolveOutcome:
    status: int
    status_name: str
    placement: list[int] | None
    order: list[list[int]] | None
    objective_ticks: float | None
    bound_ticks: float | None
    wall_s: float
    interrupted: bool = False
    presolve: bool = True  # False: found by a search without presolve
    tie_order: list[list[int]] | None = None  # the order with ties as the model's literals chose them


def _params(sv: cp.CpSolver, time_limit_s: float, workers: int, seed: int, log: bool = False) -> None:
    prm = sv.parameters
    prm.max_time_in_seconds = max(0.01, float(time_limit_s))
    prm.num_workers = int(workers)
    prm.random_seed = int(seed)
    prm.log_search_progress = bool(log)
    prm.relative_gap_limit = 0.0
    prm.absolute_gap_limit = 0.0


def solve_model(V: CpModelVars, *, time_limit_s: float | None = None, workers: int, seed: int, progress: bool = False,
                log: bool = False, label: str = "cpsat", presolve: bool = True,
                budget: Budget | None = None) -> SolveOutcome:
    """Solve ``V.model`` within ``budget`` (or ``time_limit_s`` from now): CP-SAT is told the limit and
    stopped at the deadline by dplace (it overruns its own limit on large NoOverlap models); the best
    solution found by then is kept. Its bound and status are the solver's claims: :func:`finish`
    confirms them."""
    budget = Budget.resolve(budget, time_limit_s)
    sv = cp.CpSolver()
    _params(sv, budget.seconds(0.01, cap=1e9), workers, seed, log)
    sv.parameters.cp_model_presolve = presolve
    cb = _Progress(V, progress, label)
    t0 = time.perf_counter()
    got = run_search(sv, V.model, cb, budget=budget)
    st, stopped, ans = got.status, got.interrupted, got.answer
    wall = time.perf_counter() - t0
    name = status_name(st) + (" (interrupted)" if stopped else "") + (ABANDONED_NOTE if got.abandoned else "")
    ties = None
    if st in (cp.OPTIMAL, cp.FEASIBLE):
        pl, order, _ = V.extract(ans.value)
        ties = V.tie_order(ans.value, pl, order)
        obj, bound = ans.objective_value, ans.best_objective_bound
    else:
        pl = order = obj = None
        bound = math.inf if st == cp.INFEASIBLE else ans.best_objective_bound if ans is not None else None
    if got.abandoned:
        bound = None  # proves nothing
    return SolveOutcome(st, name, pl, order, obj, bound, wall, stopped, presolve, ties)


def confirm_bound(V: CpModelVars, claim_ticks: float, *, time_limit_s: float | None = None, workers: int, seed: int,
                  budget: Budget | None = None) -> tuple[float | None, SolveOutcome | None]:
    """Independent check of a CP-SAT bound (or infeasibility, ``claim_ticks = inf``): is there a solution
    of makespan below ``claim_ticks``? Asked of a search *without presolve* (CP-SAT's presolve is where
    its wrong OPTIMAL/INFEASIBLE answers came from). Returns (the bound this search proves, in ticks, or
    None when it proves nothing; its outcome, whose solution — if any — beats the claim). Copying the
    model counts against the budget (``budget``, or ``time_limit_s`` from now)."""
    budget = Budget.resolve(budget, time_limit_s)
    md = V.model.clone()
    md.clear_hints()
    mk = md.get_int_var_from_proto_index(V.mk.index)
    if math.isfinite(claim_ticks):
        md.add(mk <= int(math.ceil(claim_ticks - 1e-9)) - 1)
    W = CpModelVars(V.inst, V.T, md, V.allowed, x=V.x, s=V.s, e=V.e, mk=V.mk, order_lits=V.order_lits,
                    relaxed_fifo=V.relaxed_fifo, tr=V.tr, symmetric=V.symmetric)
    sv = cp.CpSolver()
    _params(sv, budget.seconds(0.01, cap=1e9), workers, seed)
    sv.parameters.cp_model_presolve = False
    t0 = time.perf_counter()
    got = run_search(sv, md, budget=budget)
    st, ans = got.status, got.answer
    stopped = got.interrupted or got.abandoned
    wall = time.perf_counter() - t0
    if stopped:  # cut short: it proves nothing (a solution it found still counts)
        claim_ticks = -math.inf
    if st == cp.INFEASIBLE and not stopped:
        return claim_ticks, None
    if st in (cp.OPTIMAL, cp.FEASIBLE):
        pl, order, _ = W.extract(ans.value)
        out = SolveOutcome(st, status_name(st) + " (presolve off)", pl, order, ans.objective_value,
                           None if stopped else ans.best_objective_bound, wall, False, False,
                           W.tie_order(ans.value, pl, order))
        return (None if stopped else min(claim_ticks, ans.best_objective_bound)), out
    if stopped:
        return None, None
    b = ans.best_objective_bound
    return (min(claim_ticks, b) if math.isfinite(b) else None), None


@register("cpsat", options=CpsatOptions, kind="exact",
          summary="CP-SAT: optional intervals per (op, device), NoOverlap, transfers, memory; proven gap.")
def cpsat(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
          **options) -> Result:
    """Exact CP-SAT model (OR-Tools scheduling guide; Pesto/Moirai placement constraints), hinted by the
    best heuristic; see the module docstring for the model and the bound. Everything (heuristics, model
    building, hint completion, search, confirmation) counts against the time limit; when it runs out
    before the search, or on Ctrl-C, the best answer so far is returned (``interrupted`` on Ctrl-C)."""
    opts = CpsatOptions(**options)
    return run_guarded(inst, "cpsat", opts, Budget.resolve(budget, time_limit_s, opts.default_time_limit_s), seed,
                       lambda base, hint, bud: _cpsat_search(inst, opts, seed, base, hint, bud),
                       model_cost_s=model_cost_s(inst))


def _cpsat_search(inst: Instance, opts: CpsatOptions, seed: int, base: claims.Bound,
                  hint: tuple[str, Result] | None, budget: Budget) -> Result:
    limit = budget.limit_s if budget.limit_s is not None else opts.default_time_limit_s
    if model_cost_s(inst) * slowdown_guess() > 0.9 * budget.left():  # the machine's load
        raise OutOfTime("no time left to build the model")
    horizon_us = hint[1].makespan if hint else None
    T = Ticks(inst, opts.tick, horizon_us)
    lb_ticks = int(math.ceil(base.value / T.tick - 1e-9))
    extra: dict[str, Any] = {"tick_us": T.tick, "ticks_exact": T.exact}
    own = [base]
    start = None
    if hint is not None:
        hres = hint[1]
        start = (hres.placement, hres.order if hres.order is not None else hres.schedule.order)
    if start is not None and memory_fits(inst, start[0]):
        sch = tick_schedule(inst, T, *start)
        if sch is not None:
            eb = energetic_bound(inst, T, lb_ticks, int(round(sch.makespan)))
            extra["energetic_bound_ticks"] = eb
            if eb > lb_ticks:
                lb_ticks = eb
                own.append(claims.Bound(T.real_bound(eb), "energetic"))
    t0 = time.perf_counter()
    # the model and its hint leave time for reading the answer back and simulating it
    build = budget.child(reserve=cleanup_s(inst))
    with stop_building_on_interrupt():
        check_time(build)
        V, hint_vals = hinted_model(inst, T, start, lb_ticks=lb_ticks, symmetry=opts.symmetry,
                                    hint_time_s=max(0.05, min(0.1 * limit, build.left())), budget=build)
    _record(extra, "model", build.limit_s, build.limit_s, t0)
    if hint is not None:
        extra.update(hint_method=hint[0], hint_makespan=hint[1].makespan, hint_used=hint_vals is not None)
    left = budget.left()
    if left < 0.02:
        raise OutOfTime("no time left for the search")
    workers = opts.workers or os.cpu_count() or 1
    # the search gets most of what is left; the rest confirms its bound (presolve off) and cleans up
    t0 = time.perf_counter()
    search = budget.share(0.8)
    out = solve_model(V, workers=workers, seed=seed, progress=opts.progress, log=opts.log, budget=search)
    _record(extra, "search", left, search.limit_s, t0)
    hint_res = hint[1] if hint else None
    again = _on_finer_ticks(inst, opts, T, horizon_us, out, base, budget, workers, seed, extra)
    if again is not None:
        V, out, first = again
        if hint_res is None or first.makespan < hint_res.makespan:
            hint_res = first  # the first search's schedule stays a candidate
    return finish(inst, "cpsat", V, out, own, hint_res, opts, extra, budget=budget, workers=workers, seed=seed)


def _on_finer_ticks(inst: Instance, opts: CpsatOptions, T: Ticks, horizon_us: float | None, out: SolveOutcome,
                    base: claims.Bound, budget: Budget, workers: int, seed: int,
                    extra: dict[str, Any]) -> tuple[CpModelVars, SolveOutcome, Result] | None:
    """The tick is fitted to the hint's makespan; a poor heuristic (a schedule 10x or more above the
    search's) leaves it coarse, the times rounded and the bound weak (composed seeds 1002332 and 1002674:
    hints 1e9 and 6e4 times the optimum, ticks of 1e4 and 1e3 µs, optimum found, not proven). Then the
    model once more on ticks fitted to the search's schedule, hinted by it (the MILP's big-M rule alike):
    (its model, its outcome, the first search's schedule), or None when that does not apply or time is
    short."""
    if opts.tick is not None or T.exact or horizon_us is None or out.placement is None or out.interrupted:
        return None
    first = make_result(inst, "cpsat", out.placement, out.order, status="feasible")
    if not first.memory_ok or first.makespan * 10 > horizon_us or first.makespan <= 0:
        return None
    T2 = Ticks(inst, None, first.makespan)
    if T2.tick >= T.tick or model_cost_s(inst) * slowdown_guess() > 0.3 * budget.left():
        return None
    t0 = time.perf_counter()
    build = budget.child(reserve=cleanup_s(inst))
    with stop_building_on_interrupt():
        try:
            V2, vals = hinted_model(inst, T2, (first.placement, first.order), symmetry=opts.symmetry,
                                    lb_ticks=int(math.ceil(base.value / T2.tick - 1e-9)),
                                    hint_time_s=max(0.05, min(0.1 * build.left(), build.left())), budget=build)
        except OutOfTime:
            return None
    _record(extra, "model on finer ticks", build.limit_s, build.limit_s, t0)
    left = budget.left()
    if left < 0.1:
        return None
    t0 = time.perf_counter()
    search = budget.share(0.7)
    out2 = solve_model(V2, workers=workers, seed=seed, progress=opts.progress, log=opts.log, budget=search)
    _record(extra, "search on finer ticks", left, search.limit_s, t0)
    extra.update(first_tick_us=T.tick, tick_us=T2.tick, ticks_exact=T2.exact, first_bound_ticks=out.bound_ticks,
                 first_solver_status=out.status_name)
    return V2, out2, first


def finish(inst: Instance, method: str, V: CpModelVars, out: SolveOutcome, lb: float | Sequence[claims.Bound],
           hint_res: Result | None, opts: Any, extra: dict[str, Any], *, budget: Budget | None = None,
           workers: int = 1, seed: int = 0) -> Result:
    """Simulate the solver's answer, keep the hint if it is better, and make the claims through
    :mod:`dplace.verify.claims`: CP-SAT's bound (or INFEASIBLE) counts only as far as brute force or the MILP
    confirms it (a search without presolve, :func:`confirm_bound`, may only weaken it; all in what is left
    of ``budget``; by default a short check).
    ``lb``: proven bounds of dplace's own (a number is taken as ``dplace.lower_bound``)."""
    T = V.T
    extra = dict(extra)
    cross = inst.n <= claims.CROSS_MAX_OPS
    own = [claims.Bound(lb, "lower_bound")] if isinstance(lb, (int, float)) else list(lb)
    own_ticks = max(math.ceil(b.value / T.tick - 1e-9) for b in own) if own else 0
    # dplace's own bounds as proven: on exact ticks every makespan is a whole number of ticks, so the
    # best of them rounded up to one is proven too (no confirmation needed up to it)
    own_floor = max((b.value for b in own), default=0.0)
    if T.exact:
        own_floor = max(own_floor, T.real_bound(own_ticks))
    notes: list[str] = []
    if budget is None:
        budget = Budget(max(0.2, min(2.0, out.wall_s)))
    checks = budget.child(reserve=cleanup_s(inst))  # the claim checks leave time for the read-back
    extra.update(solver_status=out.status_name, solve_wall_s=round(out.wall_s, 4))
    outs = [out]
    certified: claims.Bound | None = None
    infeasible_confirmed = False
    claim = out.bound_ticks
    if out.interrupted:
        notes.append("search interrupted: its bound is not confirmed and not used")
    elif claim is not None and (claim == math.inf or claim > own_ticks):
        if cross and inst.n > claims.EXHAUSTIVE_MAX_OPS:  # brute force will not settle it: HiGHS's child
            from dplace.heuristics.highs_worker import prestart  # starts now (once per process)

            prestart()
        left = checks.left()
        lim = stage_limit("confirm", left, cross)  # with cross: time kept for the other formulation
        t0 = time.perf_counter()
        got, better = (None, None) if lim < 0.02 else confirm_bound(V, claim, workers=workers, seed=seed,
                                                                     budget=checks.child(lim))
        extra["confirm_wall_s"] = _record(extra, "confirm", left, lim, t0)
        if better is not None:
            outs.append(better)
            notes.append(f"a search without presolve found makespan {T.to_us(better.objective_ticks):.9g} below "
                         f"what CP-SAT claimed possible ({T.to_us(claim):.9g}): CP-SAT's presolve was wrong here")
        if claim == math.inf:
            infeasible_confirmed = got == math.inf and claims.SAME_SOLVER_CONFIRMS
        if got is None and not claims.SAME_SOLVER_CONFIRMS and claim != math.inf:
            # the re-solve is an extra: proving nothing in its time vetoes nothing; the claim goes on to the
            # independent checks as made
            certified = claims.Bound(T.real_bound(claim), method)
            notes.append(f"a search without presolve did not finish: {method}'s bound goes to the other checks")
        elif got != math.inf:
            certified, cn = claims.confirm(claims.Bound(T.real_bound(claim), method),
                                           [("a search without presolve", None if got is None else T.real_bound(got))])
            notes += cn
        else:
            certified = claims.Bound(T.real_bound(claim), f"{method}, confirmed by a search without presolve")
    elif claim is not None and math.isfinite(claim):
        certified = claims.Bound(T.real_bound(claim), method)  # no stronger than dplace's own bounds
    stopped = out.interrupted or interrupt.requested()
    ex = None
    if not stopped and not (out.status == cp.OPTIMAL and claim is not None and claim <= own_ticks):
        # small graph: brute force first (cheap there, and the last word; also where the search proved
        # nothing); the other formulation only where it did not complete
        left = checks.left()
        lim = stage_limit("brute force", left, cross)
        t0 = time.perf_counter()
        ex = claims.exhaustive(inst, lim)
        if inst.n <= claims.EXHAUSTIVE_MAX_OPS:
            _record(extra, "brute force", left, lim, t0)
    independent = ex is not None  # a check that no CP-SAT failure can share settled the claim
    # INFEASIBLE that the search without presolve refuted (it found a schedule): what is left to check is
    # the bound that search proved, not the infeasibility (composed seed 1002732)
    says_infeasible = claim == math.inf and (certified is None or certified.value == math.inf)
    if ex is None and cross and not stopped and (
            (certified is not None and own_floor < certified.value < math.inf) or says_infeasible):
        certified, infeasible_confirmed, independent = _cross_check(
            inst, T, outs, hint_res, own, certified, says_infeasible, infeasible_confirmed, checks, seed, notes,
            extra)
    own_floor = max([own_floor] + [b.value for b in own])  # brute force's optimum may have joined
    if (not independent and not claims.SAME_SOLVER_CONFIRMS and certified is not None
            and certified.value > own_floor + claims.tol(own_floor)):
        notes.append(f"{certified.source} bound {certified.value:.9g} not confirmed by an independent check "
                     f"(brute force or the other formulation{'' if cross else ': graph above CROSS_MAX_OPS'}): "
                     "not used")
        certified = None
    extra["bound_ticks"] = out.bound_ticks
    if ex is not None:  # small graph: brute force is the last word on the claim
        if ex.optimum is None:
            infeasible_confirmed = infeasible_confirmed or claim == math.inf
        else:
            if ex.placement is not None and (claim == math.inf or ex.optimum < T.to_us(min(
                    o.objective_ticks for o in outs if o.objective_ticks is not None) if any(
                    o.objective_ticks is not None for o in outs) else math.inf)):
                outs.append(SolveOutcome(cp.FEASIBLE, "brute force", ex.placement, ex.order, ex.optimum / T.tick,
                                         None, 0.0, False, False))
            prev = certified if certified is not None and math.isfinite(certified.value) else claims.Bound(
                ex.optimum, method)
            certified, cn = claims.confirm(prev, [("brute force", ex.optimum)])
            notes += cn
            own.append(claims.Bound(ex.optimum, "brute force"))  # the optimum itself, whatever the checks proved
    if out.status == cp.INFEASIBLE and len(outs) == 1:
        return claims.no_placement(inst, method, f"{method}: no placement keeps pins, colocation and memory",
                                   solver_says_infeasible=True, confirmed=infeasible_confirmed, heuristic=hint_res,
                                   bound=max(own, key=lambda b: b.value) if own else None,
                                   options=options_dict(opts), extra=dict(extra, claim_notes=notes))
    cand = []
    for o in outs:
        if o.placement is not None:
            for od in [o.order] + ([o.tie_order] if o.tie_order is not None else []):
                cand.append(make_result(inst, method, o.placement, od, status="feasible", options=options_dict(opts),
                                        claimed_makespan=T.to_us(o.objective_ticks), extra=dict(extra)))
    if hint_res is not None and hint_res.memory_ok:
        order = hint_res.order if hint_res.order is not None else hint_res.schedule.order
        cand.append(make_result(inst, method, hint_res.placement, order, status="feasible", options=options_dict(opts),
                                claimed_makespan=hint_res.makespan, extra=dict(extra, returned="hint")))
    if not cand:
        res = no_solution(inst, method, "no_solution", f"{method}: no solution within the time limit "
                          f"({out.status_name})", options=options_dict(opts), extra=extra, interrupted=out.interrupted)
        return claims.settle(res, own + [certified], notes=notes)
    best = min(cand, key=lambda r: (not r.memory_ok, r.makespan))
    return claims.settle(replace(best, interrupted=out.interrupted or interrupt.requested()), own + [certified],
                         notes=notes)


def _cross_check(inst: Instance, T: Ticks, outs: list[SolveOutcome], hint_res: Result | None,
                 own: list[claims.Bound], certified: claims.Bound | None, says_infeasible: bool,
                 infeasible_confirmed: bool, budget: Budget, seed: int, notes: list[str],
                 extra: dict[str, Any]) -> tuple[claims.Bound | None, bool, bool]:
    """CP-SAT's claim (``certified`` so far, or infeasibility) as far as the MILP of
    :func:`dplace.formulations.milp.cross_check` (HiGHS, rescaled times; registered with the frame:
    :func:`..frame.cross_check`) proves it; a schedule it finds joins ``outs``. Returns (the bound kept,
    infeasibility confirmed, whether the MILP proved anything: without that nothing independent stands
    behind the claim)."""
    inc = None
    for o in outs:
        if o.placement is not None:
            r = make_result(inst, "cpsat", o.placement, o.order, status="feasible")
            if r.memory_ok and (inc is None or r.makespan < inc.makespan):
                inc = r
    if hint_res is not None and hint_res.memory_ok and (inc is None or hint_res.makespan < inc.makespan):
        inc = hint_res
    name = "the MILP (HiGHS, presolve off)" if says_infeasible else "the MILP (HiGHS)"
    left = budget.left()
    lim = stage_limit("cross check", left, True)
    t0 = time.perf_counter()
    got, res = cross_check(inst, None if says_infeasible else inc, max(b.value for b in own), seed=seed,
                           budget=budget.child(lim))
    extra["cross_check_wall_s"] = _record(extra, "cross check", left, lim, t0)
    if res is not None and res.placement is not None:
        outs.append(SolveOutcome(cp.FEASIBLE, "milp check", res.placement, res.order, res.makespan / T.tick, None,
                                 0.0, False, False))
    if says_infeasible:
        if got != math.inf:
            notes.append(f"CP-SAT's infeasibility is not confirmed by {name}")
        else:
            notes.append(f"CP-SAT's infeasibility confirmed by {name}")
        confirmed = got == math.inf and (infeasible_confirmed or not claims.SAME_SOLVER_CONFIRMS)
        return certified, confirmed, got == math.inf
    kept, cn = claims.confirm(certified, [(name, got)])
    if got is not None and kept is not None:
        cn.append(f"CP-SAT's bound {kept.value:.9g} confirmed by {name}")
    notes += cn
    return kept, infeasible_confirmed, got is not None


CLAIM_STAGES = ("confirm", "brute force", "cross check")


def stage_limit(stage: str, left: float, cross: bool) -> float:
    """The limit of claim check ``stage`` (one of :data:`CLAIM_STAGES`, run in that order after the search)
    when ``left`` seconds remain before the deadline, the read-back kept aside. With ``cross`` (a small
    graph: the other formulation checks too) the CP-SAT re-solve without presolve takes at most 30 % and
    brute force 50 % of what is left when each starts, so the later checks keep their share; the MILP
    with HiGHS runs in a child that may answer up to two graces past its limit (asked to stop, then
    killed: :func:`~dplace.heuristics.highs_worker.limit_within`), and a tenth of ``left`` is kept
    for what surrounds the child (writing the model, ending the child, reading back: each step waits
    for the CPU on a loaded machine). A stage's limit plus what it may run past it never exceeds
    ``left``: the last check ends by the deadline too."""
    if left <= 0:
        return 0.0
    if stage == "confirm":
        return min(left, max(0.2, 0.3 * left)) if cross else left
    if stage == "brute force":
        return min(left, max(0.2, 0.5 * left)) if cross else left
    if stage == "cross check":  # a tenth kept for writing the model, ending the child, reading back
        from dplace.heuristics.highs_worker import limit_within

        return limit_within(0.9 * left)
    raise ValueError(f"unknown stage {stage!r}")


def _record(extra: dict[str, Any], stage: str, left: float | None, limit: float | None, t0: float) -> float:
    """Add a stage to ``extra["stages"]`` (seconds left when it started, its limit, its wall time) and
    return its wall time: where a run's time went."""
    wall = round(time.perf_counter() - t0, 4)
    extra.setdefault("stages", []).append({"stage": stage, "left_s": None if left is None else round(left, 6),
                                           "limit_s": None if limit is None else round(limit, 6), "wall_s": wall})
    return wall


