"""The registered ``milp`` method: the guarded run, the search, reading the solution back, and the claims
(confirmed by CP-SAT: :func:`cross_check`)."""
from __future__ import annotations

import math
import os
import re
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..cpsat import (  # noqa: I001 — OR-Tools before PuLP (see below)
    Ticks, build_model, confirm_bound, energetic_bound, horizon_ticks, reachability, tick_schedule,
)
from ..decode import choice_order
from ..frame import OutOfTime, check_time, fallback, homogeneous_links, register_cross_check, run_guarded  # noqa: I001

import pulp  # noqa: E402

from dplace.verify import claims
from dplace import interrupt
from dplace.budget import Budget
from dplace.errors import InfeasibleError, SolverError, bad_option
from dplace.instance.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result, no_solution
from .model import MilpModel, MilpOptions, build_milp, time_unit, warm_values
from .backends import _has_solution, _placed, _solve


@register("milp", options=MilpOptions, kind="exact", max_ops=300,
          summary="Pesto-style MILP (PuLP; CBC or HiGHS), big-M from the heuristic, warm start, proven gap.")
def milp(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
         **options) -> Result:
    """Pesto (Middleware'21, §4) MILP with memory limits; see the module docstring. Everything counts
    against the time limit; when it runs out before the solver starts, or on Ctrl-C, the best answer so
    far (the heuristic's) is returned, labelled."""
    opts = MilpOptions(**options)
    return run_guarded(inst, "milp", opts, Budget.resolve(budget, time_limit_s, opts.default_time_limit_s), seed,
                       lambda base, hint, bud: _milp_search(inst, opts, seed, base, hint, bud))


def _read_solution(P: MilpModel, info: dict[str, Any], optd: dict[str, Any], extra: dict[str, Any]) -> Result | None:
    """The solver's placement and per-device order (by start, end, topological position), simulated."""
    inst = P.inst
    if not _has_solution(P) or not _placed(P):  # a vector that places no op is not an answer (see _solve)
        return None
    pl = []
    for o in range(inst.n):
        al = P.allowed[o]
        pl.append(al[0] if len(al) == 1 else max(al, key=lambda d: P.x[o, d].varValue or 0.0))
    st = [(P.s[o].varValue or 0.0) * P.unit for o in range(inst.n)]
    order: list[list[int]] = [[] for _ in range(inst.m)]
    en = [st[o] + inst.dur[o][pl[o]] for o in range(inst.n)]
    for o in _start_order(inst, st, en):
        order[pl[o]].append(o)
    claimed = None if P.mk.varValue is None else P.mk.varValue * P.unit
    best: Result | None = None
    for cand in (order, _order_by_choices(P, pl, st, en, order)):
        if cand is None:
            continue
        try:
            r = make_result(inst, "milp", pl, cand, status="feasible", options=optd, claimed_makespan=claimed,
                            extra=dict(extra))
        except Exception:  # noqa: BLE001 — an order broken by solver tolerances
            continue
        if best is None or r.makespan < best.makespan:
            best = r
    if best is not None:
        return best
    return make_result(inst, "milp", pl, None, status="feasible", options=optd, claimed_makespan=claimed,
                       extra=dict(extra, order_dropped=True))


def _start_order(inst: Instance, st: list[float], en: list[float]) -> list[int]:
    """Every op by its start in the solver's schedule (then end, then topological position), as a
    topological order: an op comes only after all its inputs' producers (Kahn's order, the smallest key
    first). Sorted by start alone, a start a hair before its producer's end (within the solver's
    feasibility tolerance: composed seed 1208, HiGHS, times ~1e11 µs) put a consumer first on a device
    and the order deadlocked; the schedule was then thrown away for the heuristic's."""
    import heapq

    tp = inst.topo_pos
    key = [(round(st[o], 9), round(en[o], 9), tp[o], o) for o in range(inst.n)]
    waiting = [len({int(inst.esrc[k]) for k in inst.pred[o]}) for o in range(inst.n)]
    heap = [key[o] for o in range(inst.n) if waiting[o] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        o = heapq.heappop(heap)[3]
        out.append(o)
        for v in {int(inst.edst[k]) for k in inst.succ[o]}:
            waiting[v] -= 1
            if waiting[v] == 0:
                heapq.heappush(heap, key[v])
    return out


def _order_by_choices(P: MilpModel, pl: list[int], st: list[float], en: list[float],
                      order: list[list[int]]) -> list[list[int]] | None:
    """The per-device order the model chose: a topological order of the graph and its ordering binaries
    ``y`` where two ops share a device (:func:`~..decode.choice_order`), by start, end and topological
    position first. Start times alone lose these choices when the solver's tolerance puts a zero-time op a
    hair after the op it precedes (seen with HiGHS: starts 1e-6 apart, ``y`` saying the other way round),
    and where zero-time ops share an instant (their ``y`` orders their transfers on a link: composed seed
    1002930). None when the choices do not form one order (tolerances again) or agree with ``order``."""
    inst = P.inst
    tp = inst.topo_pos
    before = []
    for (a, b), y in P.y.items():
        if pl[a] == pl[b] and y.varValue is not None:
            before.append((a, b) if y.varValue > 0.5 else (b, a))
    key = [(round(st[o], 9), round(en[o], 9), tp[o]) for o in range(inst.n)]
    out = choice_order(inst, pl, key, before)
    return None if out is None or out == order else out


def _confirm_with_cpsat(inst: Instance, T: Ticks, claim: float, budget: Budget, seed: int,
                       optd: dict[str, Any], extra: dict[str, Any]) -> tuple[float | None, Result | None]:
    """Independent check of the MILP solver's bound ``claim`` (µs; ``inf`` for INFEASIBLE) by the CP-SAT
    model on exact integer ticks, searched without presolve (:func:`cpsat.confirm_bound`): (the bound it
    proves in µs, or None; a Result when it found a schedule below the claim)."""
    if budget.left() < 0.05:
        return None, None
    claim_t = claim / T.tick if math.isfinite(claim) else math.inf
    horizon = horizon_ticks(inst, T) if not math.isfinite(claim_t) else max(1, int(math.ceil(claim_t - 1e-9)))
    V = build_model(inst, T, horizon=horizon, symmetry=True, budget=budget.share(0.5))
    got, out = confirm_bound(V, claim_t, workers=1, seed=seed, budget=budget.child(reserve=0.01))
    res = None
    if out is not None and out.placement is not None:
        res = make_result(inst, "milp", out.placement, out.order, status="feasible", options=optd,
                          claimed_makespan=T.to_us(out.objective_ticks), extra=dict(extra, returned="cpsat check"))
    if got is None:
        return None, res
    return (math.inf if got == math.inf else T.real_bound(got)), res


def cross_check(inst: Instance, incumbent: Result | None, floor: float, time_limit_s: float | None = None,
                seed: int = 0, budget: Budget | None = None) -> tuple[float | None, Result | None]:
    """The other formulation's word on a CP-SAT claim: this MILP, solved by HiGHS, times rescaled
    (:func:`time_unit`), warm-started from ``incumbent`` (a memory-feasible Result, or None when CP-SAT
    claims infeasibility), ``floor``: a proven bound (µs) of dplace's own. A bound is checked with HiGHS's
    presolve on (off, HiGHS proved 117 of CP-SAT's 143 on a 30-task graph in 7 s; on, all of it in 2.5 s:
    a wrong claim now passes only where CP-SAT and HiGHS's presolve both overclaim on one instance, the
    weaker winning); infeasibility without it (HiGHS's presolve has said INFEASIBLE on feasible instances).
    Returns (the bound it proves in µs, ``inf`` when it proves that no placement fits, None when it proves
    nothing or has no time; a Result when it found a schedule). Within ``budget`` (or ``time_limit_s``
    from now)."""
    budget = Budget.resolve(budget, time_limit_s)
    if budget.left() < 0.3:
        return None, None
    if incumbent is not None:
        big_m = incumbent.makespan * (1 + 1e-6) + 1e-9
    else:
        big_m = sum(max(r) for r in inst.dur) + sum(inst.max_transfer_time(k) for k in range(len(inst.esrc))) + 1.0
    floor = min(floor, incumbent.makespan) if incumbent is not None else floor
    opts = MilpOptions(solver="highs", threads=1)
    try:
        P = build_milp(inst, big_m, floor, time_unit(big_m), budget=budget.share(0.3))
    except (OutOfTime, InfeasibleError):
        return None, None
    if incumbent is not None:
        vals = warm_values(P, incumbent)
        for v in P.prob.variables():
            if v.name in vals:
                v.setInitialValue(vals[v.name])
    left = budget.left()
    if left < 0.2:
        return None, None
    info = _solve(P, opts, left, incumbent is not None, seed, presolve=incumbent is not None)
    if info.get("interrupted"):
        return None, None
    res = _read_solution(P, info, {"solver": "highs"}, {"returned": "milp check"})
    if P.prob.status == pulp.LpStatusInfeasible:
        # no schedule below big_m: with an incumbent that is HiGHS contradicting a simulated schedule
        return (math.inf, None) if incumbent is None else (None, None)
    b = info.get("bound")
    return (None if b is None else b * P.unit), res


register_cross_check("milp", cross_check)  # CP-SAT's claims are checked by it (through the frame)


def _resolve(P: MilpModel, opts: MilpOptions, left: float, warm: bool, seed: int, infeasible: bool,
             optd: dict[str, Any], extra: dict[str, Any], notes: list[str]) -> tuple[float | None, Result | None, bool]:
    """The same model solved again by the same solver without presolve (a same-solver check): (the bound
    it proves in µs, ``inf`` when it confirms infeasibility, None when nothing; its schedule; interrupted).
    A solver that fails here (CBC has exited with signal 11 in this re-solve on instances where no
    placement fits) proves nothing: the claim rests on the other checks."""
    try:
        info2 = _solve(P, opts, left, warm, seed + 1, presolve=False)
    except SolverError as exc:
        notes.append(f"the re-solve without presolve failed ({str(exc)[:120]}): it proves nothing")
        return None, None, False
    interrupted = bool(info2.get("interrupted"))
    r2 = _read_solution(P, info2, optd, extra)
    got = None if info2.get("bound") is None or interrupted else info2["bound"] * P.unit
    if infeasible and P.prob.status == pulp.LpStatusInfeasible and not interrupted:
        got = math.inf
    return got, r2, interrupted


def _model(inst: Instance, big_m: float, floor: float, start: Result | None, budget: Budget
           ) -> tuple[MilpModel, float, bool]:
    """The MILP below ``big_m`` (µs) in its :func:`time_unit`, warm-started from ``start`` (a memory-feasible
    Result) when given: (model, unit, warm)."""
    unit = time_unit(big_m)
    P = build_milp(inst, big_m, floor, unit, budget=budget)
    if start is None:
        return P, unit, False
    vals = warm_values(P, start)
    for v in P.prob.variables():
        if v.name in vals:
            v.setInitialValue(vals[v.name])
    return P, unit, True


def _milp_search(inst: Instance, opts: MilpOptions, seed: int, base: claims.Bound,
                 hint: tuple[str, Result] | None, budget: Budget) -> Result:
    hres = hint[1] if hint and hint[1].memory_ok else None
    if inst.n > opts.max_ops:  # the model would need O(n^2) ordering binaries: do not build it
        why = (f"milp: {inst.n} ops > max_ops {opts.max_ops}; the ordering model was not built "
               f"(use cpsat or refine for large graphs)")
        if hint is None:
            raise SolverError(why)
        res = fallback(inst, "milp", hint, base, opts, why=why)
        return replace(res, extra={**res.extra, "skipped": why})
    if hres is not None:
        big_m = hres.makespan * (1 + 1e-6) + 1e-6
    else:  # everything one after the other with every transfer paid
        big_m = sum(max(r) for r in inst.dur) + sum(inst.max_transfer_time(k) for k in range(len(inst.esrc))) + 1.0
    own = [base]
    if hres is not None:  # energetic reasoning (cpsat.energetic_bound) on tick data, turned into real µs
        T = Ticks(inst, None, hres.makespan)
        sch = tick_schedule(inst, T, hres.placement, hres.order if hres.order is not None else hres.schedule.order)
        if sch is not None:
            eb = energetic_bound(inst, T, int(math.ceil(base.value / T.tick - 1e-9)), int(round(sch.makespan)))
            own.append(claims.Bound(T.real_bound(eb), "energetic"))
    mk_floor = max(b.value for b in own)
    if hres is not None:  # float noise: a bound computed elsewhere may exceed an optimal hint by an ulp
        mk_floor = min(mk_floor, hres.makespan)
    P, unit, warm = _model(inst, big_m, mk_floor, hres, budget)
    # the solver gets part of what is left; the rest re-solves without presolve to confirm its bound
    left = budget.left()
    if left < 0.05:
        raise OutOfTime("no time left for the solver")
    # CP-SAT (presolve off) confirms the bound where its ticks are exact or the graph is small (the other
    # formulation); else a re-solve without presolve does
    Tc = Ticks(inst, None, big_m)
    by_cpsat = Tc.exact or inst.n <= claims.CROSS_MAX_OPS
    solve_end = budget.share(0.8 if by_cpsat else 0.55)
    # a solver answering late may use the time of the check, which has little to confirm then
    stop_by = budget.child(reserve=max(0.3, 0.05 * left))
    if stop_by.deadline < solve_end.deadline:
        stop_by = solve_end
    info = _solve(P, opts, solve_end.seconds(0.05), warm, seed, stop_by=stop_by)
    optd = asdict(opts)
    extra: dict[str, Any] = {}
    cand: list[Result] = []
    claim: float | None = None
    interrupted = False
    notes: list[str] = []
    while True:  # again with a big-M from the solver's schedule while that is far below the last one
        extra = {k: v for k, v in info.items() if k != "bound"}
        extra.update(solver=opts.solver, big_m=big_m, time_unit_us=unit, hint_method=hint[0] if hint else None,
                     hint_makespan=hres.makespan if hres else None, n_order_binaries=len(P.y))
        interrupted = bool(info.get("interrupted"))
        cand += [r for r in [_read_solution(P, info, optd, extra)] if r is not None]
        infeasible = P.prob.status == pulp.LpStatusInfeasible
        got = None if info.get("bound") is None else info["bound"] * unit
        if infeasible and cand:
            notes.append(f"{opts.solver} said infeasible below {big_m:.9g}, where a simulated schedule lies: "
                         "not used")
            infeasible, got = False, None
        if got is not None:
            claim = got if claim is None else max(claim, got)  # each a claim of the solver on one model
        fits = [r for r in cand if r.memory_ok]
        best = min(fits, key=lambda r: r.makespan) if fits else None
        left = solve_end.left()
        if (interrupted or best is None or best.makespan * 10 > big_m or left < 0.1 or interrupt.requested()
                or claims.reaches(best.makespan, max(b.value for b in own))):
            break
        # the solver's schedule is far below big-M (a poor heuristic: M and the time unit were set by
        # times this answer never pays): the numbers were badly scaled for it; once more with M from it
        try:
            big_m = best.makespan * (1 + 1e-6) + 1e-12
            P, unit, warm = _model(inst, big_m, min(mk_floor, best.makespan), best, solve_end)
        except OutOfTime:
            break
        notes.append(f"solved again with big-M {big_m:.9g} from the solver's schedule (was {extra['big_m']:.9g})")
        info = _solve(P, opts, solve_end.seconds(0.05), warm, seed, stop_by=stop_by)
    fits = [r for r in cand if r.memory_ok]
    if fits and not Tc.exact:  # ticks fitted to the best schedule, not to big-M: a coarse tick proves less
        Tc = Ticks(inst, None, min(r.makespan for r in fits))
        by_cpsat = Tc.exact or inst.n <= claims.CROSS_MAX_OPS
    extra["solver_bound"] = claim
    certified: claims.Bound | None = None
    own_best = max(b.value for b in own)
    ex = None
    if not interrupted:  # small graph: brute force first (cheap there, the last word; also where the solver
        # proved nothing); the other checks only where it did not complete
        left = budget.child(reserve=0.02).left()
        ex = claims.exhaustive(inst, min(left, max(0.2, 0.5 * left)))
        if ex is not None and ex.optimum is not None:
            own.append(claims.Bound(ex.optimum, "brute force"))
            cand.append(make_result(inst, "milp", ex.placement, ex.order, status="feasible", options=optd,
                                    extra=dict(extra, returned="brute force")))
    if interrupted:
        notes.append("solver interrupted: its bound is not confirmed and not used")
    elif infeasible or (claim is not None and claim > own_best + claims.tol(own_best)):
        check = f"a re-solve without presolve (times in units of {unit:g} µs)"
        got: float | None = None
        if ex is not None:
            if ex.optimum is not None:
                check, got = "brute force", ex.optimum
            elif infeasible:
                got = math.inf
        checks = budget.child(reserve=0.02)
        left = checks.left()
        if ex is None and by_cpsat:
            check = "CP-SAT without presolve"
            got, r2 = _confirm_with_cpsat(inst, Tc, math.inf if infeasible else claim, checks, seed, optd, extra)
            if r2 is not None:
                cand.append(r2)
        elif ex is None and left >= 0.3:
            got, r2, interrupted = _resolve(P, opts, left, bool(cand) or warm, seed, infeasible, optd, extra, notes)
            if r2 is not None:
                cand.append(r2)
            if not claims.SAME_SOLVER_CONFIRMS and got is not None:  # the same solver again: never alone
                notes.append(f"{check} proved {got:.9g}, but no independent check ran: the claim is not used")
                got = None
        if infeasible and not cand:
            return claims.no_placement(inst, "milp", "milp: no placement keeps pins, colocation and memory",
                                       solver_says_infeasible=True, confirmed=got == math.inf, heuristic=hres,
                                       bound=max(own, key=lambda b: b.value), options=optd,
                                       extra=dict(extra, claim_notes=notes) if notes else extra)
        if infeasible:
            notes.append(f"{opts.solver} said infeasible; {check} found a schedule: the solver was wrong here")
        elif claim is not None:
            certified, cn = claims.confirm(claims.Bound(claim, f"milp ({opts.solver})"), [(check, got)])
            if certified is not None and got is not None:
                cn.append(f"{opts.solver}'s bound {certified.value:.9g} confirmed by {check}")
            notes += cn
    elif claim is not None:
        certified = claims.Bound(claim, f"milp ({opts.solver})")  # no stronger than dplace's own bounds
    if hres is not None:
        order = hres.order if hres.order is not None else hres.schedule.order
        cand.append(make_result(inst, "milp", hres.placement, order, status="feasible", options=optd,
                                claimed_makespan=hres.makespan, extra=dict(extra, returned="hint")))
    if not cand:
        res = no_solution(inst, "milp", "no_solution", f"milp: no solution ({info.get('solver_result')})",
                          options=optd, extra=extra, interrupted=interrupted)
        return claims.settle(res, own + [certified], notes=notes)
    best = min(cand, key=lambda r: (not r.memory_ok, r.makespan))
    return claims.settle(replace(best, interrupted=interrupted), own + [certified], notes=notes)
