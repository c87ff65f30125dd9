"""The contiguous DP and the contiguous lower bound against exhaustive searches; the CP-SAT models agree."""
from __future__ import annotations

import itertools
import random

import pytest
from pipeline_helpers import brute_contiguous, random_chain

from dplace import pipeline as pl
from dplace.errors import InfeasibleError
from dplace.pipeline import contiguous_cpsat, contiguous_dp, general_cpsat


def test_contiguous_dp_agrees_with_cpsat_and_general_is_never_worse():
    rng = random.Random(7)
    for _ in range(25):
        L, P = rng.randint(2, 6), rng.randint(1, 3)
        c = random_chain(rng, L, P, 5, lambda: rng.choice([None, rng.randint(5, 25)]))
        try:
            d = contiguous_dp(c)
        except InfeasibleError:
            with pytest.raises(InfeasibleError):
                contiguous_cpsat(c, time_limit_s=10)
            continue
        m = contiguous_cpsat(c, time_limit_s=10)
        assert d.ok and m.ok and m.status == "optimal"
        assert d.period == m.period == brute_contiguous(c, P, c.memory)
        g = general_cpsat(c, time_limit_s=10)
        assert g.ok and g.period <= d.period


def test_contiguous_dp_with_communication_layers():
    rng = random.Random(11)
    for _ in range(15):
        L, P = rng.randint(2, 5), rng.randint(2, 3)
        c = random_chain(rng, L, P, 5, lambda: rng.choice([None, rng.randint(6, 25)]),
                         lambda: rng.choice([0.5, 1.0, 2.0]))
        try:
            d = contiguous_dp(c)
        except InfeasibleError:
            assert brute_contiguous(c, P, c.memory) is None
            with pytest.raises(InfeasibleError):
                contiguous_cpsat(c, time_limit_s=10)
            continue
        assert d.ok, d.report.errors
        assert d.period == pytest.approx(brute_contiguous(c, P, c.memory))
        m = contiguous_cpsat(c, time_limit_s=10)
        assert m.ok and m.period == pytest.approx(d.period)
        g = general_cpsat(c, time_limit_s=10)
        assert g.ok and g.period <= d.period + 1e-9
        # the cut's link carries 2·a/β per batch
        links = [r for r in d.pattern.resources if r.startswith("link")]
        assert len(links) == len(d.stages) - 1


def test_contiguous_lower_bound_matches_brute_force_and_bounds_every_pattern():
    rng = random.Random(5)
    for _ in range(30):
        L, P = rng.randint(2, 6), rng.randint(1, 4)
        c = random_chain(rng, L, P, 4, lambda: rng.randint(4, 14), lambda: rng.choice([None, 1.0, 4.0]))
        # oracle: every partition into <= P stages whose stages fit with NCA 1; T >= stage loads, cut links
        want = None
        for r in range(min(P, L)):
            for cuts in itertools.combinations(range(1, L), r):
                b = [0, *cuts, L]
                if any(sum(c.w[x:y]) + sum(c.a[x:y]) > c.memory for x, y in zip(b, b[1:])):
                    continue
                t = max([sum(c.u[x:y]) for x, y in zip(b, b[1:])] + [pl.communication_time(c, y - 1) for y in cuts])
                want = t if want is None else min(want, t)
        got = pl.contiguous_lower_bound(c)
        assert got == (None if want is None else pytest.approx(want))
        if want is None:
            continue
        for k in (2, 3):
            sol = pl.contiguous_theorem4(c, k=k)
            assert sol.ok and sol.normalised_period >= got - 1e-9
