"""``benchmarks/bench_seqgap.py``: its row on a small Transformer, checked against what is proven.

Every sequential schedule is no faster than the parallel model's schedule of its placement and order
(:mod:`dplace.bounds`), so CP-SAT's proven parallel bound is below every sequential figure of the row, and
each mode's answers are above that mode's proven bound."""
from __future__ import annotations

import argparse

import pytest


@pytest.mark.solver
def test_row_on_a_small_transformer_respects_the_proven_bounds(benchmark_script):
    mod = benchmark_script("bench_seqgap")
    r = mod.row(60, argparse.Namespace(cpsat_s=2.0, portfolio_s=1.0, anneal_s=0.3))
    ans_par, lb_par, _ = r["cpsat par"]
    ans_seq, lb_seq, _ = r["cpsat seq"]
    assert r["ops"] > 0
    assert lb_par <= ans_par * (1 + 1e-9) and lb_par <= r["pf par"] * (1 + 1e-9)
    assert lb_seq <= ans_seq * (1 + 1e-9) and lb_seq <= r["pf seq"] * (1 + 1e-9)
    for key in ("pf seq", "par pl in seq", "anneal"):  # sequential schedules: above the parallel bound
        assert r[key] >= lb_par * (1 - 1e-9)
    assert r["anneal"] > 0 and r["par pl in seq"] > 0
