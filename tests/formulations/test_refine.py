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
    assert "heft" in scores
    best = min(v["makespan"] for v in scores.values() if "makespan" in v and v["memory_ok"])
    if winner in scores:
        assert scores[winner]["makespan"] == pytest.approx(best)
    else:  # above K ops the segments' stitched schedule and the coarse answer are starts too
        starts = res.extra["starts"]
        assert winner in starts and starts[winner] == pytest.approx(min(starts.values()))
        assert starts[winner] <= best + 1e-9
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


BERT = __import__("pathlib").Path(__file__).resolve().parents[2] / "instances" / "bert12_training_4dev.json"


@pytest.mark.parametrize("method", ["refine", "portfolio"])
def test_a_spent_budget_skips_every_later_phase(method):
    """Every phase draws on the one limit: with it spent by the first heuristic, no other heuristic, no
    coarse solve and no neighbourhood step runs, and the answer is that heuristic's (BERT-12, 2k ops).
    Wall times against limits are measured by benchmarks/bench_limits.py, not asserted here."""
    inst = dplace.load_instance(BERT)
    res = dplace.solve(inst, method, time_limit_s=0.01, workers=2)
    assert res.extra["lns_steps"] == 0 and res.extra["lns_stopped"].startswith("time limit")
    assert res.extra["stage"] == "start" and "coarse_makespan" not in res.extra
    assert res.makespan == pytest.approx(res.extra["start_makespan"]) and dplace.check(inst, res).ok
    if method == "portfolio":
        answered = [k for k, v in res.extra["heuristics"].items() if "makespan" in v]
        assert answered == [res.extra["winner"]]
    assert not res.interrupted


def test_budget_skips_heuristics_once_their_share_is_spent():
    from dplace.formulations.refine import Budget, heuristic_names, run_heuristics

    inst = task_graph(30, 3, 1.0, seed=1)
    clock = Budget(10.0)
    scores, best = run_heuristics(inst, heuristic_names(), clock, 0.0, seed=0)  # no budget: the first answer only
    ran = [k for k, v in scores.items() if "makespan" in v]
    assert len(ran) == 1 and best[0] == ran[0]
    assert all("budget" in v["skipped"] for k, v in scores.items() if k not in ran and "skipped" in v)
