"""The exact methods never claim more than brute force allows (benchmarks/check_exact_claims.py on a few
seeds, including the one where CP-SAT with start windows was wrong)."""

import pytest

import dplace

pytestmark = pytest.mark.solver


def test_no_wrong_optimal_or_bound_claims(capsys, benchmark_script):
    assert benchmark_script("check_exact_claims").main(["--seeds", "1030:1042", "--methods", "cpsat,milp", "--time-limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "cpsat" in out and "milp" in out


def _judged(seed, method, **opts):
    """The claims with dplace.verify.claims' brute force off (it is this same oracle: circular) and the other
    formulation's check on."""
    from dplace.verify import claims
    from dplace.verify.oracle import brute_force, judge
    from dplace.verify.fuzz import fuzz_instance

    inst = fuzz_instance(seed)
    saved = claims.EXHAUSTIVE_MAX_OPS, claims.CROSS_MAX_OPS
    claims.EXHAUSTIVE_MAX_OPS, claims.CROSS_MAX_OPS = 0, claims.CROSS_ON
    try:
        res = dplace.solve(inst, method, time_limit_s=10, seed=seed, **opts)
    finally:
        claims.EXHAUSTIVE_MAX_OPS, claims.CROSS_MAX_OPS = saved
    orc = brute_force(inst, time_limit_s=60)
    return res, judge(res, orc), orc.feasible


@pytest.mark.parametrize("seed,method,opts", [
    # CP-SAT OPTIMAL 22.8666 with and without presolve, optimum 21.946; the MILP's check refutes it
    (61, "cpsat", {"progress": False}),
    (1143, "cpsat", {"progress": False}),  # CP-SAT OPTIMAL 14000060; optimum 14000045 (device NoOverlap search)
    (1863, "milp", {"solver": "cbc"}),  # no placement fits memory; CBC failed to run here once
    (1088, "milp", {"solver": "highs"}),  # times ~1e10 µs: HiGHS "optimal" 1.1e11, optimum 1.0e11
    (1176, "milp", {"solver": "cbc"}),  # CBC "infeasible" on a feasible instance (transfers 1e11 µs)
    (1106, "milp", {"solver": "highs", "hint": "none"}),  # HiGHS "infeasible" with no heuristic start
    (1584, "milp", {"solver": "cbc"}),  # times ~1e-2 µs: CBC "optimal" 1.03e-6 relative above the optimum
])
def test_issue_examples_claim_no_more_than_brute_force(seed, method, opts):
    """Wrong claims found by fuzzing against dplace.verify.oracle: optimal, bound and infeasible now hold
    without brute force inside dplace.verify.claims."""
    res, defects, feasible = _judged(seed, method, **opts)
    assert defects == [], (defects, res.extra.get("claim_notes"))
    assert (res.status != "infeasible" and res.placement is not None) == feasible


@pytest.mark.parametrize("seed", [
    10725,  # 6 independent ops (a partition): CBC stuck at the work bound without the device-load row
    10468,  # transfer coefficients of 5e10 beside a big-M of 30: CBC "infeasible", optima above the optimum
    12275,  # the best heuristic 1e13 times the optimum: big-M and time unit from it hid the times
    11234,  # ticks fitted to that big-M: CP-SAT could not confirm CBC's optimum
    13298,  # every op placed and ordered: CBC solves an LP and prints no "Result" line
    44809,  # op times 5e-10 x big-M beside transfers of 1e10 µs: CBC's preprocessing lost its optimum
    48525,  # op times 1e-9 x big-M: CBC called the hint (3e5 times the optimum) optimal at the root
])
def test_cbc_proves_the_optimum_where_it_did_not(seed):
    """Fuzz seeds where milp with CBC (the other formulation confirming, no brute force) answered only
    "feasible"; its claims now reach the oracle's optimum."""
    res, defects, feasible = _judged(seed, "milp", solver="cbc")
    assert defects == [] and feasible, (defects, res.extra.get("claim_notes"))
    assert res.status == "optimal", (res.extra.get("solver_result"), res.extra.get("claim_notes"))


def test_time_limit_before_the_search_returns_the_labelled_heuristic():
    from dplace.formulations._brute import task_graph

    inst = task_graph(400, 4, 1.0, seed=3, comm="sequential")
    res = dplace.solve(inst, "cpsat", time_limit_s=0.05, progress=False)
    assert res.status == "heuristic" and res.extra["returned"] == "hint" and "time limit" in res.message
    assert dplace.check(inst, res).ok and not res.interrupted


@pytest.mark.parametrize("seed,method,opts", [
    (40330, "milp", {"solver": "highs"}),  # every op pinned or colocated: the MILP is an LP
    (40330, "cpsat", {"progress": False}),  # CP-SAT's optimum is confirmed by that LP (HiGHS)
    (41257, "milp", {"solver": "highs"}),  # HiGHS's presolve: "infeasible"; the warm start kept as Optimal
])
def test_highs_proves_the_optimum_where_it_did_not(seed, method, opts):
    """HiGHS reports a MIP dual bound of 0 for a model without integer columns (its LP optimum is the
    bound), and of -inf where its presolve called the model infeasible yet the warm start "Optimal" (solved
    again without presolve): both were "feasible" with the optimum in hand (CP-SAT's claim too, confirmed
    by the LP)."""
    res, defects, feasible = _judged(seed, method, **opts)
    assert defects == [] and feasible, (defects, res.extra.get("claim_notes"))
    assert res.status == "optimal", (res.extra.get("solver_result"), res.extra.get("claim_notes"))
