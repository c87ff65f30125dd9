"""Differential tests of the exact methods (issue #6): cpsat, milp (CBC and HiGHS) and brute force agree
on the optimum of tiny random instances in both comm modes; no heuristic is below it; the lower bound is
not above it; every exact answer's simulated makespan equals its claimed objective."""
import random

import pytest

import dplace
from dplace.formulations._brute import brute_force, task_graph
from dplace.testing import random_instance

pytestmark = pytest.mark.solver

EXACT = [("cpsat", {"progress": False, "workers": 2}), ("milp", {"solver": "cbc"}), ("milp", {"solver": "highs"})]


def _heuristics():
    return [m for m in dplace.methods() if dplace.method_info(m).kind in ("heuristic", "baseline")]


def _instance(seed: int, comm: str):
    rng = random.Random(1000 + seed)
    return random_instance(rng, n_ops=rng.randint(4, 7), n_devices=rng.randint(2, 3), comm=comm, integer=True)


def _agree(inst, *, heuristics: bool) -> float | None:
    try:
        opt = brute_force(inst)[0]
    except dplace.InfeasibleError:
        opt = None
    for name, opts in EXACT:
        res = dplace.solve(inst, name, time_limit_s=20, **opts)
        label = f"{name} {opts} on {inst}"
        if opt is None:
            assert res.status == "infeasible", label
            continue
        assert res.status == "optimal", label
        assert res.makespan == pytest.approx(opt, abs=1e-6), label
        assert res.claimed_makespan == pytest.approx(res.makespan, abs=1e-5), label
        assert res.lower_bound <= opt + 1e-6, label
        rep = dplace.check(res.instance, res)
        assert rep.ok, rep.summary()
    if opt is not None:
        assert dplace.lower_bound(inst) <= opt + 1e-9
        if heuristics:
            for h in _heuristics():
                r = dplace.solve(inst, h, time_limit_s=5)
                if r.makespan is not None and r.memory_ok and r.instance is inst:
                    assert r.makespan >= opt - 1e-6, f"heuristic {h} below the optimum on {inst}"
    return opt


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
@pytest.mark.parametrize("seed", range(5))
def test_exact_methods_agree_with_brute_force(seed, comm):
    _agree(_instance(seed, comm), heuristics=seed < 2)


@pytest.mark.slow
@pytest.mark.parametrize("comm", ["parallel", "sequential"])
@pytest.mark.parametrize("seed", range(5, 25))
def test_exact_methods_agree_many(seed, comm):
    _agree(_instance(seed, comm), heuristics=True)


@pytest.mark.parametrize("ccr", [0.1, 1.0, 10.0])
def test_task_graph_cpsat_and_milp_agree(ccr):
    """Classic task-graph benchmark (10 tasks, transfers only between processors): the optimum proven by
    CP-SAT is the one HiGHS proves."""
    inst = task_graph(10, 3, ccr, seed=7)
    a = dplace.solve(inst, "cpsat", time_limit_s=20, progress=False, workers=2)
    b = dplace.solve(inst, "milp", time_limit_s=20, solver="highs")
    assert a.status == "optimal"
    if b.status == "optimal":
        assert a.makespan == pytest.approx(b.makespan, abs=1e-6)
    else:  # HiGHS slower: its incumbent can only be worse, its bound only lower
        assert b.makespan >= a.makespan - 1e-6 and b.lower_bound <= a.makespan + 1e-6


def test_task_graph_generator():
    inst = task_graph(20, 4, 1.0, seed=3)
    assert inst.n == 20 and inst.m == 4 and inst.has_identical_devices
    comp = sum(op.time for op in inst.ops)
    comm = sum(e.bytes for e in inst.edges)
    assert 0.5 <= comm / comp <= 1.5
    assert all(float(e.bytes).is_integer() for e in inst.edges)
