"""One registry for every placement method.

A method is a function ``place(instance, *, time_limit_s=None, seed=0, **options) -> Result``
registered with ``@register("name", options=OptionsDataclass, summary="...")``. ``solve`` validates
the options against the dataclass (unknown names are an error listing the valid ones), times the
call, adds the project's proven lower bound and turns :class:`InfeasibleError` into an
``infeasible`` Result.
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import os
import typing
from dataclasses import dataclass, replace
from typing import Any, Callable

from .budget import Budget
from .bounds import bound_cost_s, check_memory_feasible, lower_bound_with_source, quick_bounds, start_lower_bound
from .errors import InfeasibleError, InvalidInstanceError, OptionError, SolverError, bad_option, show_value
from .instance.model import Instance
from .plugins import (  # noqa: F401 - the table of methods (dplace.plugins), re-exported
    _METHODS, MethodInfo, get_method, load_methods, method_info, methods, paper_variants, register,
)
from .result import Result, no_solution

_TYPE_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
_WORDS_BOOL = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _coerce(value: Any, typ: Any, option: str) -> Any:
    """``value`` as option ``option`` of declared type ``typ``: a string (from the CLI or a suite file)
    is converted, anything else must already have the type; otherwise an :class:`OptionError`."""
    optional = type(None) in typing.get_args(typ)
    if optional:
        rest = [a for a in typing.get_args(typ) if a is not type(None)]
        typ = rest[0] if len(rest) == 1 else Any
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            return None
    if typ not in _TYPE_WORDS:
        return value
    must = _TYPE_WORDS[typ] + (" or none" if optional else "")
    if isinstance(value, str) and typ is not str:
        try:
            if typ is bool:
                return _WORDS_BOOL[value.lower()]
            return int(value) if typ is int else float(value)
        except (KeyError, ValueError):
            raise bad_option(option, must, value) from None
    if typ is bool:
        ok = isinstance(value, bool)
    elif typ is str:
        ok = isinstance(value, str)
    else:
        ok = isinstance(value, numbers.Integral if typ is int else numbers.Real) and not isinstance(value, bool)
    if not ok:
        raise bad_option(option, must, value)
    return value


def validate_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Check option names and types against the method's options dataclass (strings from the CLI are
    converted), then its own range checks; every mistake is an :class:`OptionError` naming the method."""
    info = method_info(name)
    if not options:
        return {}
    if info.options is None:
        raise OptionError(f"method {name!r}: takes no options, got {', '.join(sorted(options))}")
    fields = {f.name for f in dataclasses.fields(info.options)}
    hints = typing.get_type_hints(info.options)
    out = {}
    try:
        for k, v in options.items():
            if k not in fields:
                raise OptionError(f"unknown option {k!r}; valid: {', '.join(sorted(fields))}")
            out[k] = _coerce(v, hints.get(k, Any), k)
        info.options(**out)  # the dataclass's own range checks
    except OptionError as exc:
        raise OptionError(f"method {name!r}: {exc}") from None
    return out


def check_time_limit(time_limit_s: float | None, where: str = "time_limit_s") -> None:
    """A time limit is None (no limit) or a finite number > 0 of seconds; anything else is an
    :class:`InvalidInstanceError` naming ``where`` and the value."""
    if time_limit_s is None:
        return
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)):
        raise InvalidInstanceError(f"{where} must be a number of seconds, got {time_limit_s!r}")
    if not (time_limit_s > 0 and math.isfinite(time_limit_s)):
        raise InvalidInstanceError(f"{where} must be a finite number of seconds > 0 (leave it out for no limit), "
                                   f"got {time_limit_s!r}")


def solve(inst: Instance, method: str, *, time_limit_s: float | None = None, seed: int = 0,
          budget: Budget | None = None, **options: Any) -> Result:
    """Run ``method`` on ``inst`` and return its simulated, bounded :class:`Result`.

    The one :class:`~dplace.budget.Budget` of the call is made here from ``time_limit_s`` (or given as
    ``budget``, e.g. a share of a caller's) and handed to the method; ``solve_time_s`` is measured on
    its clock, from the start of this call."""
    if not isinstance(inst, Instance):
        hint = " (load the file first: dplace.load_instance(path))" if isinstance(inst, (str, os.PathLike)) else ""
        raise InvalidInstanceError(f"solve: instance must be a dplace.Instance, got {type(inst).__name__} "
                                   f"{show_value(inst)}{hint}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidInstanceError(f"seed must be an integer, got {seed!r}")
    info = method_info(method)
    opts = validate_options(method, options)
    check_time_limit(time_limit_s)
    if budget is not None and not isinstance(budget, Budget):
        raise InvalidInstanceError(f"budget must be a dplace.Budget, got {type(budget).__name__}")
    budget = Budget.resolve(budget, time_limit_s)
    # a limit too short for every cheap bound: the quickest ones only (weaker, still proven), here and
    # in the method
    with quick_bounds(bound_cost_s(inst) > 0.1 * budget.left()):
        return _solve(inst, method, info, opts, budget, seed)


def takes_budget(func: Callable[..., Any]) -> bool:
    """Whether ``func`` accepts ``budget=`` (every method of dplace does; one registered elsewhere may
    take ``time_limit_s`` only)."""
    try:
        return "budget" in inspect.signature(func).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        return False


def call_method(func: Callable[..., Result], inst: Instance, budget: Budget, seed: int = 0, **opts: Any) -> Result:
    """``func(inst, ...)`` under ``budget``: handed the budget itself where it takes one, and the seconds
    left as ``time_limit_s`` (None without a limit) for what reads only that."""
    kw: dict[str, Any] = {"time_limit_s": max(0.01, budget.left()) if budget.limited else None, "seed": seed}
    if takes_budget(func):
        kw["budget"] = budget
    return func(inst, **kw, **opts)


def _solve(inst: Instance, method: str, info: MethodInfo, opts: dict[str, Any], budget: Budget,
           seed: int) -> Result:
    try:
        check_memory_feasible(inst)
        if not start_lower_bound(inst):  # large graphs: the bound is computed beside the method
            lower_bound_with_source(inst)
    except InfeasibleError as exc:
        if not info.best_effort:
            return no_solution(inst, method, "infeasible", str(exc), lower_bound=None, options=opts,
                               solve_time_s=budget.elapsed())
        # the paper's best effort for models larger than the devices: a placement that breaks memory,
        # reported as infeasible (memory_ok false), never as a schedule that runs
        res = call_method(info.func, inst, budget, seed, **opts)
        return replace(res, status="infeasible", message=f"{exc}; best-effort placement (memory exceeded)",
                       method=method, solve_time_s=budget.elapsed(), options=res.options or opts)
    try:  # the bound above counted against the budget too
        res = call_method(info.func, inst, budget, seed, **opts)
    except InfeasibleError as exc:  # the method's word: "infeasible" only where no heuristic keeps memory
        from .verify.claims import method_infeasible

        lb, src = lower_bound_with_source(inst)
        return method_infeasible(inst, method, str(exc), lower_bound=lb, bound_source=src, options=opts,
                                 solve_time_s=budget.elapsed())
    lb, src = lower_bound_with_source(inst)
    if res.base_instance is not inst:
        raise SolverError(f"method {method!r} answered on instance {res.instance.name!r}, not on {inst.name!r}, "
                          "without a transform saying how one came from the other")
    if res.transform is not None:  # a bound of the rewritten graph, not of ``inst``
        lb, src = lower_bound_with_source(res.instance)
    if res.lower_bound is not None and res.lower_bound >= lb:
        lb, src = res.lower_bound, res.bound_source
    return replace(res, method=method, solve_time_s=budget.elapsed(), lower_bound=lb, bound_source=src,
                   options=res.options or opts)
