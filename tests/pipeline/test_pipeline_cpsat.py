"""The CP-SAT allocation models: general allocations, the load relaxation's bound, the position-NCA model."""
from __future__ import annotations

import pytest
from pipeline_helpers import brute_general

from dplace import pipeline as pl
from dplace.errors import InfeasibleError
from dplace.pipeline import contiguous_cpsat, contiguous_dp, general_cpsat, make_chain


def test_lemma2_only_general_fits():
    c = make_chain([1, 2, 1], weights=[1, 2, 1], processors=2, memory=2)
    with pytest.raises(InfeasibleError):
        contiguous_dp(c)
    with pytest.raises(InfeasibleError):
        contiguous_cpsat(c)
    g = general_cpsat(c)
    assert g.ok and max(g.memory_used) <= 2


def test_load_bound_above_the_arithmetic_floor_is_confirmed():
    # three layers of cost 3 on 2 processors: one processor holds two, so T/k >= 6 for every k-periodic
    # pattern, above max(3, 9/2); CP-SAT's bound 6 counts only after a search without presolve finds no T <= 5
    g = general_cpsat(make_chain([3, 3, 3], processors=2))
    assert g.period == 6 and g.status == "optimal" and g.optimal_over == pl.K_PERIODIC_GENERAL
    assert g.lower_bound == 6 and "claim_notes" not in g.extra


GENERAL_CASES = [([3, 2, 3], [0, 0, 0], [2, 3, 1], 4, 5), ([3, 4, 4], [0, 0, 1], [2, 2, 2], 7, 7),
                 ([3, 2, 3], [2, 0, 0], [1, 1, 1], 6, 5),
                 pytest.param([3, 3, 4], [1, 1, 2], [3, 3, 3], 8, 10, marks=pytest.mark.slow),
                 pytest.param([3, 4, 4], [1, 0, 1], [3, 3, 2], 9, 8, marks=pytest.mark.slow)]


@pytest.mark.parametrize("costs, w, a, M, expected", GENERAL_CASES)
def test_general_position_model_matches_exhaustive_search(costs, w, a, M, expected):
    c = make_chain([((x + 1) // 2, x // 2) for x in costs], weights=w, activations=a, processors=2, memory=M)
    assert brute_general(c, 2) == expected
    g = general_cpsat(c, time_limit_s=10, hint=False)
    # optimal among 1-periodic integer-grid patterns only: not claimed as a proven optimum overall
    assert g.ok and (g.status == "optimal" or g.extra["position_model_optimal"]) and g.period == expected
    assert g.status != "optimal" or g.period <= g.extra["bound"] + 1e-9
