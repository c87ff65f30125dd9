"""``benchmarks/bench_nas.py --probe``: CP-SAT's horizon probes, checked against brute force.

The probe's INFEASIBLE verdicts are CP-SAT's word (the benchmark says so and dplace never claims them);
here, on instances small enough for the brute force (:func:`dplace.verify.claims.exhaustive`), no verdict
lies at or above the optimum, every schedule a probe finds is no faster than the optimum, and the probes
do refute something and find something (a probe that never answers would pass the first two)."""
from __future__ import annotations

from pathlib import Path

import pytest

from dplace.plugins import get_method
from dplace.verify import claims
from dplace.verify.fuzz import fuzz_instance

BENCH = str(Path(__file__).resolve().parents[1] / "benchmarks")  # bench_nas imports its sibling bench_seqcomm
SEEDS = (3, 4, 7, 8, 10, 11, 13, 17, 19, 23, 24, 25, 26, 27)  # both comm modes; times in whole ticks or not


@pytest.mark.solver
def test_probes_never_refute_the_optimum_and_find_no_schedule_below_it(benchmark_script, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    refuted = found = 0
    for seed in SEEDS:
        inst = fuzz_instance(seed)
        ex = claims.exhaustive(inst, 30.0)
        assert ex is not None and ex.optimum is not None, seed
        ub = get_method("heft")(inst).makespan
        got = mod.probe(inst, 0.0, max(ub, ex.optimum) * 1.5 + 1e-3, 5.0, 12)
        assert got["log"], seed
        if got["refuted_us"] is not None:
            refuted += 1
            assert got["refuted_us"] < ex.optimum - claims.tol(ex.optimum), (seed, got, ex.optimum)
        if got["found_us"] is not None:
            found += 1
            assert got["found_us"] >= ex.optimum - claims.tol(ex.optimum), (seed, got, ex.optimum)
    assert refuted >= len(SEEDS) // 2 and found >= len(SEEDS) // 2, (refuted, found)


@pytest.mark.solver
def test_piece_probe_rows_lie_between_the_bound_and_the_answer(benchmark_script, monkeypatch, tmp_path, capsys):
    import argparse

    from dplace.formats import transformer_training
    from dplace.instance.io import save_instance

    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    path = tmp_path / "t.json"
    save_instance(transformer_training(120, 3), path)
    args = argparse.Namespace(piece_probe=6, instance=str(path), comm="parallel,sequential", bound_s=2.0, slice_s=1.0,
                              probe=1.0, probes=4)
    rows = mod.piece_probe(args)
    assert rows and {r["comm"] for r in rows} == {"parallel", "sequential"}
    for r in rows:
        assert r["bound"] <= r["answer"] * (1 + 1e-9), r
        if r["refuted"] is not None:
            assert r["bound"] <= r["refuted"] < r["answer"], r
    assert "sum" in capsys.readouterr().out
