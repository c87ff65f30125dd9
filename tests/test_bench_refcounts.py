"""``benchmarks/perf_refcounts.py`` (its arguments; perf itself is not run here) and
``benchmarks/bench_list_kernels.py``'s ``heft_links@W`` rows (one of heft_links' schedules)."""
from __future__ import annotations

from dplace.formats.generate import transformer_training
from dplace.heuristics.heft import heft_schedule


def test_perf_refcounts_wants_a_command(benchmark_script, capsys):
    mod = benchmark_script("perf_refcounts")
    assert mod.main([]) == 2
    assert mod.main(["--help"]) == 0
    assert "NRT_incref" in capsys.readouterr().out


def test_a_heft_links_row_is_that_weights_schedule(benchmark_script):
    mod = benchmark_script("bench_list_kernels")
    inst = transformer_training(120, 3, comm="sequential", seed=2)
    for w in (2.0, 50.0):
        got = mod._place(inst, f"heft_links@{w:g}")
        ref = heft_schedule(inst, True, link_aware=True, lookahead=w)
        assert (got.placement, got.order(), got.makespan) == (ref.placement, ref.order(), ref.makespan)
    assert mod._place(inst, "heft").makespan == heft_schedule(inst).makespan
