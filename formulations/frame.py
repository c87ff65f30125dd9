"""What every exact method shares: the guarded run (dplace's bound, the best heuristic as hint and
fallback, then the search), the labelled fallback, running out of time while building a model, the other
formulation's cross check, and small helpers. CP-SAT (:mod:`.cpsat`) and the MILP (:mod:`.milp`) both run
inside :func:`run_guarded` and import this module; it imports neither (the MILP registers its cross check
here: :func:`register_cross_check`), so imports between the exact methods go one way (milp -> cpsat -> frame).
"""
from __future__ import annotations

import contextlib
from dataclasses import asdict, replace
from typing import Any, Callable, Iterator

from dplace import interrupt
from dplace.budget import Budget
from dplace.errors import SolverError
from dplace.instance.model import Instance
from dplace.result import Result, no_solution
from dplace.verify import claims

from .heuristic_start import Interrupted, best_heuristic

__all__ = ["OutOfTime", "check_time", "cleanup_s", "cross_check", "fallback", "homogeneous_links", "options_dict",
           "register_cross_check", "run_guarded", "stop_building_on_interrupt"]


class OutOfTime(SolverError):
    """The time budget ran out before the search could start (raised while building a model)."""


_stop_on_interrupt = False


@contextlib.contextmanager
def stop_building_on_interrupt() -> Iterator[None]:
    """Inside: model building raises KeyboardInterrupt at its next check after a Ctrl-C (for code whose
    caller turns that into its best answer so far, e.g. :func:`run_guarded`)."""
    global _stop_on_interrupt
    old, _stop_on_interrupt = _stop_on_interrupt, True
    try:
        yield
    finally:
        _stop_on_interrupt = old


def check_time(budget: Budget | None) -> None:
    """Raise :class:`OutOfTime` once ``budget`` expired; KeyboardInterrupt after a Ctrl-C inside
    :func:`stop_building_on_interrupt`."""
    if _stop_on_interrupt and interrupt.requested():
        raise KeyboardInterrupt
    if budget is not None and budget.expired():
        raise OutOfTime("the time limit was reached while building the model")


def homogeneous_links(inst: Instance) -> bool:
    m = inst.m
    vals = {(inst.lat[a][b], inst.bw[a][b]) for a in range(m) for b in range(m) if a != b}
    return len(vals) <= 1


def possible_sends(inst: Instance, allowed: list, budget: Budget | None = None
                   ) -> Iterator[tuple[int, int, int, list[int]]]:
    """Sequential comm's possible transfers, as both exact models lay them out: (producer p, its device d1,
    another device d2, p's out-edges whose consumer may run on d2), producers in index order, only where that
    list is not empty. ``allowed[o]``: the devices op o may run on. The budget is looked at every 256 producers."""
    for p in range(inst.n):
        if budget is not None and p % 256 == 0:
            check_time(budget)
        if not inst.succ[p]:
            continue
        for d1 in allowed[p]:
            for d2 in range(inst.m):
                if d2 == d1:
                    continue
                cons = [k for k in inst.succ[p] if d2 in allowed[inst.edst[k]]]
                if cons:
                    yield p, d1, d2, cons


def cleanup_s(inst: Instance) -> float:
    """Time kept for reading the answer back and simulating it (grows with the graph)."""
    return 0.01 + 2e-5 * (inst.n + len(inst.esrc))


def options_dict(opts: Any) -> dict[str, Any]:
    return asdict(opts)


CrossCheck = Callable[..., tuple[float | None, Result | None]]
_cross_checks: dict[str, CrossCheck] = {}


def register_cross_check(name: str, check: CrossCheck) -> None:
    """Register the other formulation's word on a CP-SAT claim (called by :mod:`.milp` when imported):
    ``check(inst, incumbent, floor, *, seed, budget) -> (bound µs | inf | None, Result | None)``."""
    _cross_checks[name] = check


def cross_check(inst: Instance, incumbent: Result | None, floor: float, *, seed: int = 0,
                budget: Budget) -> tuple[float | None, Result | None]:
    """The registered cross check (:func:`dplace.formulations.milp.cross_check`: the MILP with HiGHS) on a
    CP-SAT claim: (the bound it proves in µs, ``inf`` when no placement fits, None when it proves nothing;
    a Result when it found a schedule). The method packages are loaded first (by name, through the table
    of methods), so the MILP has registered itself."""
    from dplace.plugins import load_methods

    load_methods(("dplace.formulations",))
    if "milp" not in _cross_checks:  # pragma: no cover - formulations/milp is part of the package
        raise SolverError("no cross check is registered (formulations/milp did not load)")
    return _cross_checks["milp"](inst, incumbent, floor, seed=seed, budget=budget)


def run_guarded(inst: Instance, method: str, opts: Any, budget: Budget, seed: int, search: Any,
                model_cost_s: float | None = None) -> Result:
    """The frame of an exact method: dplace's own bound, the best heuristic (as hint and fallback,
    within a fifth of the budget), then ``search(base, hint, budget)``.

    The model is not built at all when it cannot pay off: above ``opts.max_ops`` ops (when the options
    have one), or when its estimated CPU cost ``model_cost_s`` exceeds 60 % of the limit; then the
    heuristics get the whole budget and the best one's answer comes back labelled (:func:`fallback`,
    ``extra["skipped"]`` says why). When the budget runs out before the solver starts
    (:class:`OutOfTime`), or on Ctrl-C, the best answer so far comes back labelled (``interrupted`` on
    Ctrl-C). The answer is never empty while a heuristic gives one."""
    limit = budget.left()
    base = claims.base_bound(inst)
    max_ops = getattr(opts, "max_ops", None)
    skip = None
    if max_ops is not None and inst.n > max_ops:  # e.g. the MILP's O(n^2) ordering binaries
        skip = (f"{method}: {inst.n} ops > max_ops {max_ops}; the model was not built (use cpsat or refine for "
                "large graphs)")
    elif model_cost_s is not None and model_cost_s > 0.6 * limit:
        skip = (f"the time limit leaves {limit:.2f} s, too short for the model of {inst.n} ops x {inst.m} devices "
                f"(about {model_cost_s:.1f} s CPU to build); it was not built")
    hint: tuple[str, Result] | None = None
    try:
        if skip is not None:  # the heuristics are the answer: they get the budget, less the clean-up
            hint = best_heuristic(inst, "best" if opts.hint == "none" else opts.hint, seed=seed,
                                  time_limit_s=max(0.2, 0.1 * limit), budget=budget.child(reserve=cleanup_s(inst)))
            stop = interrupt.requested()
            return fallback(inst, method, hint, base, opts, why=skip + ("; interrupted (Ctrl-C)" if stop else ""),
                            skipped=True, interrupted=stop)
        if opts.hint != "none":
            hint = best_heuristic(inst, opts.hint, time_limit_s=max(0.2, 0.05 * limit), seed=seed,
                                  budget=budget.share(0.2))
        if interrupt.requested():  # Ctrl-C while the heuristics ran (the first one was let finish)
            return fallback(inst, method, hint, base, opts, interrupted=True, why="interrupted (Ctrl-C) before the search")
        with interrupt.polling():  # Ctrl-C from here: model building stops at its next check, a search
            return search(base, hint, budget)  # with its incumbent, clean-up is not cut off
    except Interrupted as exc:
        return fallback(inst, method, exc.best or hint, base, opts, interrupted=True,
                        why="interrupted (Ctrl-C) before the search")
    except KeyboardInterrupt:
        return fallback(inst, method, hint, base, opts, interrupted=True, why="interrupted (Ctrl-C)")
    except OutOfTime:
        return fallback(inst, method, hint, base, opts, why=f"the time limit ({limit:g} s) ran out before the search")


def fallback(inst: Instance, method: str, hint: tuple[str, Result] | None, base: claims.Bound, opts: Any, *,
             why: str, interrupted: bool = False, skipped: bool = False) -> Result:
    """The heuristic answer, labelled (status ``heuristic``, ``extra["returned"] = "hint"``, ``stopped``:
    why; ``skipped`` too when the model was not built on purpose), when the exact search did not run;
    re-raises KeyboardInterrupt when there is nothing to return. The heuristic's simulated schedule is
    reused (no second simulation)."""
    if hint is None:
        if interrupted:
            raise KeyboardInterrupt
        res = no_solution(inst, method, "no_solution", f"{method}: {why}; no heuristic answer", options=options_dict(opts))
        return claims.settle(res, [base])
    nm, h = hint
    order = h.order if h.order is not None else [list(x) for x in h.schedule.order]
    extra = {"returned": "hint", "hint_method": nm, "stopped": why, **({"skipped": why} if skipped else {})}
    res = replace(h, method=method, status="heuristic", order=order, options=options_dict(opts), extra=extra,
                  claimed_makespan=None, lower_bound=None, bound_source=None,
                  message=f"{method}: {why}; returned heuristic {nm!r}'s answer", interrupted=interrupted)
    return claims.settle(res, [base])
