"""Ranges of the critical path re-solved by CP-SAT inside a whole answer (formulations/ranges.py) and their stage
in ``portfolio`` (``large.RANGE_LNS``)."""
from __future__ import annotations

import time

import pytest

import dplace
from dplace.budget import Budget
from dplace.formulations import large
from dplace.formulations.bounds_segments import _path_windows
from dplace.formulations.ranges import range_lns, ranges
from dplace.testing import assert_valid_result, cells


def test_a_range_holds_the_ops_confined_between_its_cuts_and_their_colocation_mates():
    inst = cells(k=4)
    path, rs = ranges(inst, max_ops=30, window=4)
    assert rs and all(a < b for a, b, _ in rs)
    assert [a for a, _, _ in rs] == sorted(a for a, _, _ in rs)
    A, D = _path_windows(inst, path)
    on = set(path)
    for a, b, ops in rs:
        got = set(ops)
        confined = {o for o in range(inst.n) if o not in on and A[o] >= a and D[o] <= b} | set(path[a + 1:b])
        assert confined <= got
        for o in ops:  # closed under colocation: a freed op is never pinned by a fixed twin
            g = inst.group_of[o]
            assert g < 0 or set(inst.groups[g]) <= got
        assert got - confined <= {x for o in confined if inst.group_of[o] >= 0 for x in inst.groups[inst.group_of[o]]}
    small = ranges(inst, max_ops=1, window=4)[1]
    assert len(small) >= len(rs)  # a range never grows past max_ops beyond its first piece


@pytest.mark.solver
@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_range_steps_improve_a_poor_answer_and_never_worsen_it(comm):
    inst = cells(k=3, comm=comm)
    start = dplace.solve(inst, "m_topo")
    order = [list(x) for x in start.schedule.order]
    t0 = time.perf_counter()
    pl, od, sch, st = range_lns(inst, start.placement, order, budget=Budget(6.0), step_s=1.0, max_ops=40)
    assert time.perf_counter() - t0 < 6.0 + 1.5
    again = dplace.simulate(inst, pl, od)
    assert sch.makespan == pytest.approx(again.makespan) and again.memory_ok  # the simulator's own time
    assert st.start_makespan == pytest.approx(start.makespan)
    assert sch.makespan <= start.makespan * (1 + 1e-12)
    assert st.steps >= 1 and st.ranges == len(ranges(inst, 40)[1])
    assert st.kept >= 1 and sch.makespan < start.makespan  # m_topo's stages leave the branches serial
    assert st.makespan == pytest.approx(sch.makespan) and len(st.gains) == st.kept


@pytest.mark.solver
def test_portfolio_runs_the_range_stage_when_it_is_on(monkeypatch):
    inst = cells(k=6, branches=4)  # 138 ops: portfolio's large-graph stage
    monkeypatch.setattr(large, "RANGE_LNS", 0.4)
    monkeypatch.setattr(large, "RANGE_STEP_S", 1.0)
    res = dplace.solve(inst, "portfolio", time_limit_s=8)
    assert_valid_result(res)
    got = res.extra["ranges"]
    assert got["steps"] >= 1 and got["makespan"] <= got["start_makespan"] * (1 + 1e-12)
    assert res.makespan <= got["makespan"] * (1 + 1e-12)
    monkeypatch.setattr(large, "RANGE_LNS", 0.0)
    assert "ranges" not in dplace.solve(inst, "portfolio", time_limit_s=3).extra


@pytest.mark.solver
def test_an_optimal_answer_is_kept_as_it_is():
    inst = cells(k=1, branches=2)
    opt = dplace.solve(inst, "cpsat", time_limit_s=20)
    assert opt.status == "optimal"
    order = [list(x) for x in opt.schedule.order]
    pl, od, sch, st = range_lns(inst, opt.placement, order, budget=Budget(3.0), step_s=0.5, max_ops=40)
    assert st.steps >= 1 and st.kept == 0  # nothing below an optimum: no step's answer is taken
    assert pl == list(opt.placement) and od == order and sch.makespan == pytest.approx(opt.makespan)
