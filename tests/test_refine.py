"""refine and portfolio (issue #6): never worse than the starting heuristic, valid on coarse+LNS paths."""
import pytest

import dplace
from dplace.formulations._brute import task_graph
from dplace.formulations.refine import critical_ops

pytestmark = pytest.mark.solver


def test_small_graph_is_solved_exactly():
    inst = task_graph(10, 3, 1.0, seed=2)
    res = dplace.solve(inst, "refine", time_limit_s=10, workers=2)
    assert res.status == "optimal"
    opt = dplace.solve(inst, "cpsat", time_limit_s=10, workers=2, progress=False)
    assert res.makespan == pytest.approx(opt.makespan)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_coarse_and_lns_never_worse_than_start(comm):
    inst = task_graph(40, 3, 2.0, seed=3, comm=comm)
    heft = dplace.solve(inst, "heft")
    res = dplace.solve(inst, "refine", time_limit_s=4, K=12, window=8, step_time_s=0.5, start="heft", workers=2)
    assert res.extra["start_method"] == "heft"
    assert res.extra["coarse_nodes"] <= 40
    assert res.makespan <= heft.makespan + 1e-9
    assert res.lower_bound <= res.makespan + 1e-9
    assert dplace.check(inst, res).ok


def test_portfolio_names_the_winner():
    inst = task_graph(30, 4, 1.0, seed=8)
    res = dplace.solve(inst, "portfolio", time_limit_s=3, K=10, step_time_s=0.5, workers=2)
    winner = res.extra["winner"]
    scores = res.extra["heuristics"]
    assert winner in scores and "heft" in scores
    best = min(v["makespan"] for v in scores.values() if "makespan" in v and v["memory_ok"])
    assert scores[winner]["makespan"] == pytest.approx(best)
    assert res.makespan <= best + 1e-9
    assert dplace.check(inst, res).ok


def test_critical_ops_is_a_chain_ending_last():
    inst = task_graph(15, 2, 1.0, seed=4)
    res = dplace.solve(inst, "heft")
    path = critical_ops(inst, res)
    sch = res.schedule
    assert sch.end[path[-1]] == pytest.approx(sch.makespan)
    for a, b in zip(path, path[1:]):
        assert sch.end[a] <= sch.start[b] + 1e-9
