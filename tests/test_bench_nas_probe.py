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
# both comm modes; times in whole ticks or not; 6, 12, 17, 37: the relaxation's transfers are not whole ticks
# of the model (its rounding slack lowers a verdict); 21: the first tick is too fine for the model (coarsened)
SEEDS = (3, 4, 6, 7, 8, 10, 11, 12, 13, 17, 19, 21, 23, 24, 25, 26, 27, 37)


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
        # and right at the optimum, where a verdict on times rounded up (the model's slack) would reach it
        near = mod.probe(inst, ex.optimum, ex.optimum + 4 * got["tick"], 5.0, 3)
        assert got["log"] and near["log"], seed
        refuted += got["refuted_us"] is not None
        found += got["found_us"] is not None
        for g in (got, near):
            if g["refuted_us"] is not None:
                assert g["refuted_us"] < ex.optimum - claims.tol(ex.optimum), (seed, g, ex.optimum)
            if g["found_us"] is not None:
                assert g["found_us"] >= ex.optimum - claims.tol(ex.optimum), (seed, g, ex.optimum)
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


@pytest.mark.solver
def test_a_verdict_on_rounded_up_transfers_is_lowered_by_their_slack(benchmark_script, monkeypatch):
    """a -> b -> c pinned to d0, d1, d0, each 1 µs, two tensors of 1 byte on a 3-byte/µs link (1/3 µs each; one
    other pair differs, so the relaxation keeps the links and the model rounds the transfers up): the optimum is
    3 2/3 µs, and the model's optimum one rounding step above it. A probe just above the optimum may hear
    INFEASIBLE; its verdict must stay below the optimum."""
    from dplace.instance.model import Device, Edge, Instance, Link, Op

    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    devs = [Device(f"d{i}", 100, 1.0) for i in range(3)]
    ops = [Op("a", 1.0, 1, device="d0"), Op("b", 1.0, 1, device="d1"), Op("c", 1.0, 1, device="d0")]
    inst = Instance("slack", devs, ops, [Edge("a", "b", 1.0), Edge("b", "c", 1.0)], link=Link(0.0, 3.0),
                    pairs={("d0", "d2"): Link(0.0, 1.0)})
    opt = 3.0 + 2.0 / 3.0
    assert _simulated(inst) == pytest.approx(opt)
    # ticks of 1e-6 µs (the probe's for times near 3.7 µs): the one horizon tried is the whole tick just above
    # the optimum (3,666,667), below the model's optimum (each transfer 333,334 ticks): CP-SAT says INFEASIBLE
    got = mod.probe(inst, opt, opt + 2e-6, 5.0, 1)
    assert got["tick"] == 1e-6 and [s for _, s, _ in got["log"]] == ["INFEASIBLE"], got
    assert got["refuted_us"] is not None and got["refuted_us"] < opt, got  # "none <= H" with H >= opt is false


def _simulated(inst):
    from dplace import simulate

    return simulate(inst, [0, 1, 0], [[0, 2], [1], []]).makespan
