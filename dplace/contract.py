"""The contract every registered method keeps, as named checks (scikit-learn's estimator checks are the model).

Each ``check_*(method)`` runs ``method`` through :func:`dplace.solve` on every contract graph
(:func:`dplace.testing.contract_instances`: chain, diamond, fork, join, colocation, pins, tight memory,
heterogeneous times; both comm modes) and asserts one rule, naming the graph that breaks it.
:data:`CHECKS` lists them; :func:`parametrize_with_checks` fans them out over methods as pytest ids
``method-check_name``; :func:`check_method` runs them all. The answers are computed once per method and
shared by the checks (a Result is frozen, so sharing is safe); only the determinism check solves again.
"""
from __future__ import annotations

import json
from functools import lru_cache
from typing import Callable

from .verify import claims
from .verify.check import check
from .instance.model import Instance
from .registry import method_info, solve
from .result import STATUSES, Result, result_from_dict
from .schedule.simulate import simulate
from .testing import contract_instances

TIME_LIMIT_S = 5.0


@lru_cache(maxsize=None)
def _graphs() -> tuple[Instance, ...]:
    return tuple(contract_instances())


def _solve(method: str, inst: Instance) -> Result:
    return solve(inst, method, time_limit_s=TIME_LIMIT_S, seed=0)


@lru_cache(maxsize=None)
def answers(method: str) -> tuple[tuple[Instance, Result], ...]:
    """(graph, ``method``'s Result) for every contract graph, computed once."""
    return tuple((g, _solve(method, g)) for g in _graphs())


def _placed(method: str):
    for g, res in answers(method):
        if res.placement is not None:
            yield g, res


def check_names_itself_and_a_status(method: str) -> None:
    """The Result names the method and one of the statuses; without a placement it says why."""
    for g, res in answers(method):
        assert res.method == method, g.name
        assert res.status in STATUSES, (g.name, res.status)
        if res.status in ("infeasible", "no_solution"):
            assert res.placement is None and res.message, g.name


def check_places_every_op(method: str) -> None:
    """A placed answer puts every op of the instance it solved on a device of that instance."""
    for g, res in _placed(method):
        assert len(res.placement) == res.instance.n, g.name
        assert all(0 <= d < res.instance.m for d in res.placement), g.name


def check_schedule_is_valid(method: str) -> None:
    """The independent checker accepts the schedule."""
    for g, res in _placed(method):
        rep = check(res.instance, res)
        assert rep.ok, (g.name, rep.summary())


def check_keeps_colocation_and_pins(method: str) -> None:
    for g, res in _placed(method):
        ri = res.instance
        for members in ri.groups:
            assert len({res.placement[o] for o in members}) == 1, g.name
        for o in range(ri.n):
            assert ri.pinned[o] < 0 or res.placement[o] == ri.pinned[o], (g.name, ri.ops[o].id)


def check_memory_kept_or_flagged(method: str) -> None:
    """``memory_ok`` says what the checker finds: memory kept, or its violation flagged."""
    for g, res in _placed(method):
        assert res.memory_ok == check(res.instance, res).memory_ok, g.name


def check_makespan_is_the_simulators(method: str) -> None:
    for g, res in _placed(method):
        assert abs(simulate(res.instance, res.placement, res.order).makespan - res.makespan) <= \
            claims.tol(res.makespan), g.name


def check_not_below_its_bound(method: str) -> None:
    """Every answer carries a proven lower bound, and no valid answer lies below it."""
    for g, res in _placed(method):
        assert res.lower_bound is not None, g.name
        assert not (res.memory_ok and claims.refutes(res.makespan, res.lower_bound)), \
            (g.name, res.makespan, res.lower_bound)


def check_deterministic_for_a_seed(method: str) -> None:
    """The same seed gives the same answer; exact methods, whose time limit may run out on a busy
    machine, the same optimum whenever both runs prove one."""
    exact = method_info(method).kind == "exact"
    for g, res in answers(method):
        again = _solve(method, g)
        if exact:
            if res.status == again.status == "optimal":
                assert abs(again.makespan - res.makespan) <= claims.tol(res.makespan), g.name
            continue
        assert (again.status, again.placement) == (res.status, res.placement), g.name
        assert (again.makespan is None) == (res.makespan is None), g.name
        if res.makespan is not None:
            assert abs(again.makespan - res.makespan) <= claims.tol(res.makespan), g.name


def check_json_round_trip(method: str) -> None:
    """``to_dict`` -> JSON -> ``result_from_dict`` on the instance given gives the same answer."""
    for g, res in answers(method):
        back = result_from_dict(g, json.loads(json.dumps(res.to_dict())))
        assert (back.status, back.placement, back.instance.name) == (res.status, res.placement, res.instance.name), g.name
        assert back.makespan == res.makespan, g.name


def check_transform_is_explicit(method: str) -> None:
    """An answer is on the instance given, or says how the instance it solved came from it."""
    for g, res in answers(method):
        assert res.base_instance is g, g.name
        if res.transform is None:
            assert res.instance is g, g.name
        else:
            assert len(res.transform.origin) == res.instance.n, g.name
            assert all(-1 <= o < g.n for o in res.transform.origin), g.name


CHECKS: tuple[Callable[[str], None], ...] = (
    check_names_itself_and_a_status, check_places_every_op, check_schedule_is_valid,
    check_keeps_colocation_and_pins, check_memory_kept_or_flagged, check_makespan_is_the_simulators,
    check_not_below_its_bound, check_deterministic_for_a_seed, check_json_round_trip,
    check_transform_is_explicit,
)


def check_method(method: str) -> None:
    """Run every check on ``method`` (a new heuristic's first test)."""
    for chk in CHECKS:
        chk(method)


def parametrize_with_checks(methods: list[str]):
    """``@pytest.mark.parametrize("method, check", ...)`` over every (method, check), ids ``method-check``;
    one xdist group per method, so that one worker computes a method's answers (``--dist loadgroup``)."""
    import pytest

    return pytest.mark.parametrize("method, check", [
        pytest.param(m, c, id=f"{m}-{c.__name__}", marks=pytest.mark.xdist_group(m)) for m in methods for c in CHECKS])
