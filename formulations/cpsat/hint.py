"""Hints for the CP-SAT model: the best heuristic's placement and order as a complete assignment.

:func:`hinted_model`: the best registered heuristic's (:mod:`..heuristic_start`) placement and order, relabelled for the symmetry
breaking, timed by :func:`dplace.simulate` on the tick data (:func:`~.ticks.tick_schedule`); its makespan
is the horizon, and :func:`complete_hint` gives a value to every variable (tested by fixing the model to
it). If CP-SAT finds nothing better the heuristic answer is kept.
"""
from __future__ import annotations

from typing import Sequence

from ortools.sat.python import cp_model as cp

from dplace.budget import Budget
from dplace.errors import SolverError
from dplace.instance.model import Instance

from ..frame import check_time
from .model import CpModelVars, build_model, will_break_symmetry
from .search import run_search
from .windows import time_windows
from .ticks import Ticks, horizon_ticks, tick_schedule

__all__ = ["complete_hint", "hinted_model", "memory_fits", "relabel_symmetric"]


def relabel_symmetric(inst: Instance, placement: Sequence[int], order: Sequence[Sequence[int]]):
    """Rename identical devices so they are used in order of their first op in ``inst.topo``."""
    new_of: dict[int, int] = {}
    for o in inst.topo:
        d = placement[o]
        if d not in new_of:
            new_of[d] = len(new_of)
    for d in range(inst.m):
        if d not in new_of:
            new_of[d] = len(new_of)
    pl = [new_of[d] for d in placement]
    od: list[list[int]] = [[] for _ in range(inst.m)]
    for d, ops in enumerate(order):
        od[new_of[d]] = list(ops)
    return pl, od


def complete_hint(V: CpModelVars, placement: Sequence[int], order: Sequence[Sequence[int]],
                  time_limit_s: float = 10.0) -> list[int] | None:
    """Values of every variable of ``V.model`` for the schedule of ``placement``/``order`` (the earliest
    one in ticks), found by solving a clone of the model with placement and order fixed; None if the
    schedule does not fit the model (memory). The variables are those of ``V.model`` (same indices)."""
    H = build_model(V.inst, V.T, hint_only=True, budget=V.budget, **V.build_args)
    md = H.model
    if len(md.proto.variables) != len(V.model.proto.variables):  # pragma: no cover — a build is deterministic
        raise SolverError("complete_hint: the hint model does not match the model")
    for (o, d), x in V.x.items():
        if x is True:
            if placement[o] != d:
                return None
            continue
        md.add(md.get_bool_var_from_proto_index(x.index) == int(placement[o] == d))
    for ops in order:
        for a, b in zip(ops, ops[1:]):
            md.add(md.get_int_var_from_proto_index(V.e[a].index) <= md.get_int_var_from_proto_index(V.s[b].index))
    pos = {}
    for ops in order:
        for i, o in enumerate(ops):
            pos[o] = i
    for (a, c), b in V.order_lits.items():
        if placement[a] == placement[c]:
            md.add(md.get_bool_var_from_proto_index(b.index) == int(pos[a] < pos[c]))
    sched = tick_schedule(V.inst, V.T, placement, order)
    if sched is not None:  # the earliest tick schedule, from the simulator: fix starts and transfers
        for o in range(V.inst.n):
            md.add(md.get_int_var_from_proto_index(V.s[o].index) == int(round(sched.start[o])))
        for (p, a, b, st, en, _) in sched.transfers:
            if (p, a, b) in V.tr:
                ts, te = V.tr[p, a, b]
                md.add(md.get_int_var_from_proto_index(ts.index) == int(round(st)))
                md.add(md.get_int_var_from_proto_index(te.index) == int(round(en)))
    # With placement and orders fixed every constraint left is a precedence, so taking each variable's
    # smallest value (booleans first, then starts in topological order, then the rest) gives the earliest
    # schedule at once: a fixed search without presolve, stopped at its first solution.
    md.clear_objective()
    nv = len(md.proto.variables)
    is_bool = [list(md.proto.variables[i].domain) == [0, 1] for i in range(nv)]
    starts = {V.s[o].index for o in range(V.inst.n)}
    get = md.get_int_var_from_proto_index
    md.add_decision_strategy([get(i) for i in range(nv) if is_bool[i]], cp.CHOOSE_FIRST, cp.SELECT_MIN_VALUE)
    md.add_decision_strategy([get(V.s[o].index) for o in V.inst.topo], cp.CHOOSE_FIRST, cp.SELECT_MIN_VALUE)
    md.add_decision_strategy([get(i) for i in range(nv) if not is_bool[i] and i not in starts], cp.CHOOSE_FIRST,
                             cp.SELECT_MIN_VALUE)
    sv = cp.CpSolver()
    prm = sv.parameters
    prm.num_workers = 1
    check_time(V.budget)
    hint_budget = V.budget.child(time_limit_s) if V.budget is not None else Budget(time_limit_s)
    prm.max_time_in_seconds = hint_budget.seconds(0.01)
    prm.search_branching = cp.FIXED_SEARCH
    prm.cp_model_presolve = False
    prm.stop_after_first_solution = True
    got = run_search(sv, md, budget=hint_budget)
    if got.status not in (cp.OPTIMAL, cp.FEASIBLE):
        return None
    return [got.answer.value(get(i)) for i in range(nv)]


def hinted_model(inst: Instance, T: Ticks, start: tuple[Sequence[int], Sequence[Sequence[int]]] | None, *,
                 lb_ticks: int = 0, symmetry: bool = False, fixed: dict[int, int] | None = None,
                 prec: Sequence[tuple[int, int]] = (), reach: list[int] | None = None,
                 hint_time_s: float = 10.0, windows: bool = False,
                 budget: Budget | None = None) -> tuple[CpModelVars, list[int] | None]:
    """The model with a complete hint from ``start`` = (placement, order), if it fits the model.

    With a hint, the horizon is the hint's makespan in ticks (simulated on the tick data) and, with
    ``windows=True``, every start gets a time window (:func:`time_windows`); without a hint, or if it
    does not fit (memory), the horizon is the trivial serial one. Windows are off by default: with them
    CP-SAT answered INFEASIBLE (and, without presolve, a wrong OPTIMAL) on a 7-op instance whose optimum
    satisfies every constraint of the windowed model (kept in tests/formulations/test_cpsat.py); they are used only
    where no optimality or bound is claimed (refine's neighbourhoods). That was CP-SAT's probing, off since
    (``search.PROBING_LEVEL``): with it off that model is solved right, but windows stay off until a measurement
    says they help."""
    sym = will_break_symmetry(inst, symmetry, fixed)
    pl = od = None
    if start is not None:
        pl, od = start
        if sym:
            pl, od = relabel_symmetric(inst, pl, od)
    sched = tick_schedule(inst, T, pl, od) if pl is not None else None
    if sched is not None and memory_fits(inst, pl):
        U = int(round(sched.makespan))
        V = build_model(inst, T, horizon=U, lb_ticks=lb_ticks, symmetry=symmetry, fixed=fixed, prec=prec,
                        reach=reach, windows=time_windows(inst, T, U, fixed, prec) if windows else None,
                        budget=budget)
        vals = complete_hint(V, pl, od, time_limit_s=hint_time_s)
        if vals is not None:
            _add_hint(V, vals)
            return V, vals
    V = build_model(inst, T, horizon=horizon_ticks(inst, T), lb_ticks=lb_ticks, symmetry=symmetry, fixed=fixed,
                    prec=prec, reach=reach, budget=budget)
    vals = complete_hint(V, pl, od, time_limit_s=hint_time_s) if pl is not None else None
    if vals is not None:
        V.model.add(V.mk <= vals[V.mk.index])  # horizon from the hint
        _add_hint(V, vals)
    return V, vals


def _add_hint(V: CpModelVars, vals: Sequence[int]) -> None:
    get = V.model.get_int_var_from_proto_index
    for i, val in enumerate(vals):
        V.model.add_hint(get(i), val)


def memory_fits(inst: Instance, placement: Sequence[int]) -> bool:
    used = [0] * inst.m
    for o, d in enumerate(placement):
        used[d] += inst.mem[o]
    return all(used[d] <= inst.capacity[d] for d in range(inst.m))
