"""The paper's results on its own chains (Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021): §5.2, §6."""
from __future__ import annotations

import pytest
from pipeline_helpers import delay_patterns, from_tau, singletons

from dplace import pipeline as pl
from dplace.pipeline import (contiguous_cpsat, contiguous_dp, general_cpsat, k_periodic, make_chain, one_f_one_b_star,
                             validate_pattern)


def test_121_contiguous_3_general_2():
    c = make_chain([1, 2, 1], processors=2)
    assert contiguous_dp(c).period == 3
    assert contiguous_cpsat(c).period == 3
    g = general_cpsat(c)
    assert g.period == 2 and g.ok and g.allocation[0] == g.allocation[2] != g.allocation[1]


@pytest.mark.parametrize("k", [2, 3])
def test_theorem5_ratio(k):
    # costs scaled by 2k+1 (ε = 1): general k(2k+1); contiguous (2k-1)(2k+1) + 1 = (2k-1+ε)(2k+1)
    c = pl.theorem5_chain(k)
    cont, gen = contiguous_dp(c), general_cpsat(c, time_limit_s=20)
    assert gen.status == "optimal" and gen.ok and cont.ok
    s = 2 * k + 1
    assert gen.period == k * s and cont.period == (2 * k - 1) * s + 1
    ratio = cont.period / gen.period
    assert ratio > 2 - 1 / k and ratio == pytest.approx(2 - 1 / k + 1 / (k * s))  # → 2 - 1/k as ε → 0


@pytest.mark.parametrize("k", [3, 4])
def test_theorem6_ratio(k):
    c = pl.theorem6_chain(k)
    cont, gen = contiguous_dp(c), general_cpsat(c, time_limit_s=20)
    assert cont.ok and gen.ok and gen.status == "optimal"
    assert gen.period == k and cont.period == k * (k - 1)
    assert cont.period / gen.period >= k - 1


@pytest.mark.parametrize("k", [2, 3])
def test_theorem4_k_periodic_beats_every_1_periodic(k):
    c = pl.theorem4_chain(k)
    one = one_f_one_b_star(c, singletons(c), 2.0)  # 1F1B: no idle time, NCA_1 = k + 1
    assert validate_pattern(one.pattern).nca[0] == k + 1
    assert not validate_pattern(one.pattern, c.memory).ok
    kp = k_periodic(one.pattern, k)
    rep = validate_pattern(kp, c.memory)
    assert rep.ok, rep.errors
    assert kp.k == k and rep.normalised_period == pytest.approx(2 * (1 + 1 / k))
    assert rep.nca[0] == k and pl.nca_from_shifts(kp) == rep.nca
    # every 1-periodic pattern with period < 2(1 + 1/k) is rejected (two layers on one processor
    # would load it with 4 > T, so one layer per processor); times on the half-integer grid
    grids = [(2.0, 1.0), (2.0, 0.5), (2.5, 0.5)]
    checked = 0
    for T, step in grids:
        assert T < 2 * (1 + 1 / k)
        for ok, tau in delay_patterns(c, T, step):
            if ok or k == 2:  # k = 2: send every pattern to the validator; k = 3: the plausible ones
                assert not validate_pattern(from_tau(c, tau, T), c.memory).ok
                checked += 1
    assert checked > 0
