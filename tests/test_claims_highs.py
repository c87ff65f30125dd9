"""HiGHS's child Python (heuristics.highs_worker): started once and reused, killed when it overruns,
a new one after that; its failures are errors, never answers."""
import pytest

import dplace
from dplace.heuristics import highs_worker
from dplace.formulations._brute import task_graph
from dplace.interrupt import on_request

pytestmark = pytest.mark.solver


def _args(tmp_path):
    return {"out": str(tmp_path / "out.json"), "stop": str(tmp_path / "stop")}


def test_one_child_serves_every_solve():
    inst = task_graph(6, 2, 1.0, seed=1)
    a = dplace.solve(inst, "milp", solver="highs", time_limit_s=10)
    pid = highs_worker._shared.proc.pid
    b = dplace.solve(inst, "milp", solver="highs", time_limit_s=10)
    assert highs_worker._shared.proc.pid == pid and highs_worker._shared.alive()
    assert a.status == b.status == "optimal" and a.makespan == pytest.approx(b.makespan)
    assert a.extra["warm_start_used"] is not None


def test_a_child_that_overruns_is_killed_and_replaced(tmp_path, monkeypatch):
    hung = 'print("ready", flush=True)\nimport sys, time\nfor line in sys.stdin:\n    time.sleep(3600)\n'
    monkeypatch.setattr(highs_worker, "CHILD", hung)
    highs_worker.shutdown()
    out, interrupted = highs_worker.solve(_args(tmp_path), 0.2, on_request)
    assert out is None and not interrupted and highs_worker._shared is None  # no answer: killed, not kept
    monkeypatch.undo()
    inst = task_graph(6, 2, 1.0, seed=1)
    assert dplace.solve(inst, "milp", solver="highs", time_limit_s=10).status == "optimal"  # a new child


def test_a_failing_child_is_an_error(tmp_path, monkeypatch):
    broken = 'print("ready", flush=True)\nimport sys\nfor line in sys.stdin:\n    print("error ValueError(1)", flush=True)\n'
    monkeypatch.setattr(highs_worker, "CHILD", broken)
    highs_worker.shutdown()
    with pytest.raises(highs_worker.SolverFailed, match="ValueError"):
        highs_worker.solve(_args(tmp_path), 5.0, on_request)
    dead = 'import sys\nsys.stderr.write("no highspy here")\nsys.exit(3)\n'
    monkeypatch.setattr(highs_worker, "CHILD", dead)
    with pytest.raises(highs_worker.SolverFailed, match="no highspy"):
        highs_worker.solve(_args(tmp_path), 5.0, on_request)
    monkeypatch.undo()
    highs_worker.shutdown()
    assert highs_worker._shared is None
