"""Theorem-4 patterns searched over k, and the scope of every claim."""
from __future__ import annotations

import json

import pytest

from dplace import pipeline as pl
from dplace.pipeline import contiguous_dp, make_chain, validate_pattern


@pytest.mark.parametrize("k", [2, 3])
def test_theorem4_search_finds_the_papers_pattern_and_scopes_the_1_periodic_optimum(k):
    # §5.2: the unrolled no-idle pattern has period 2(k+1), T/k = 2(1 + 1/k) (8/3 for k = 3), NCA_1 = k;
    # every j-periodic pattern has T/j >= 2(1 + 1/j), so 1-periodic ones need 4
    c = pl.theorem4_chain(k)
    one = contiguous_dp(c)
    assert one.period == 4 and one.status == "optimal" and one.optimal_over == pl.ONE_PERIODIC_CONTIGUOUS
    assert one.lower_bound == 2 and one.lower_bound_over == pl.K_PERIODIC_CONTIGUOUS  # every layer costs 2
    best = pl.solve_pipeline(c, max_k=4)
    rep = validate_pattern(best.pattern, c.memory)
    assert rep.ok and best.k == k and best.period == 2 * (k + 1)
    assert best.normalised_period == pytest.approx(2 * (1 + 1 / k)) and rep.nca[0] == k
    assert best.status == "feasible" and best.optimal_over is None  # not proven: no bound reached
    for row in best.extra["k_search"]:  # no j-periodic pattern with j < k beats the paper's bound
        assert not row["valid"] or row["normalised_period"] >= 2 * (1 + 1 / row["k"]) - 1e-9
    assert best.extra["one_periodic"] == dict(method="contiguous_dp", period=4, status="optimal",
                                              optimal_over=pl.ONE_PERIODIC_CONTIGUOUS)
    assert pl.solve_pipeline(c, k=1).period == 4  # 1: no search


def test_k_option_builds_theorem4_and_flags_a_worse_period():
    c = pl.theorem4_chain(2)  # 1-periodic optimum 4; unrolling that memory-feasible pattern gave 3·4/2 = 6
    two = pl.solve_pipeline(c, k=2)
    assert validate_pattern(two.pattern, c.memory).ok and two.period == 6 and two.normalised_period == 3
    assert "worse_than_1_periodic" not in two.extra and two.status == "feasible"
    three = pl.solve_pipeline(c, k=3)  # 3 groups at most: k = 3 drops nothing that counts, T/k = 4·4/3
    assert three.normalised_period == pytest.approx(16 / 3) and three.status == "feasible"
    assert "above the 1-periodic 4" in three.extra["worse_than_1_periodic"]


@pytest.mark.parametrize("costs, P, expect", [([1, 2, 1], 2, pl.K_PERIODIC_CONTIGUOUS),  # 3 > general bound 2
                                             ([1, 1], 2, pl.K_PERIODIC_GENERAL)])
def test_unlimited_memory_optimum_is_proven_over_k_periodic(costs, P, expect):
    sol = pl.solve_pipeline(make_chain(costs, processors=P))
    assert sol.k == 1 and sol.status == "optimal" and sol.optimal_over == expect and "k_search" not in sol.extra


def test_solution_json_and_k_option():
    c = pl.theorem4_chain(2)
    sol = pl.solve_pipeline(c.replace(memory=None), k=2)
    assert sol.k == 2 and sol.ok
    d = json.loads(json.dumps(sol.to_dict()))
    assert d["k"] == 2 and d["valid"] and set(d["nca"]) == {ly.id for ly in c.layers}
