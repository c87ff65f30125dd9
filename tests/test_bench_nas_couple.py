"""``benchmarks/bench_nas.py --couple`` and ``--slice-memory``: a forward piece and its backward piece bounded
apart and tied together, and slices that keep the whole graph's device memory."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dplace.instance.io import save_instance
from dplace.testing import cells

ROOT = Path(__file__).resolve().parents[1]
BENCH = str(ROOT / "benchmarks")  # bench_nas imports its sibling bench_seqcomm


@pytest.mark.solver
def test_a_tied_pair_is_no_faster_than_its_pieces_alone(benchmark_script, monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    path = tmp_path / "cells.json"
    save_instance(cells(), path)
    args = argparse.Namespace(couple=4, couple_min_ops=6, instance=str(path), comm="parallel", bound_s=3.0,
                              slice_s=5.0)
    rows = mod.couple(args)
    assert len(rows) == 2, rows  # both forward cells, each with its backward cell
    for r in rows:
        assert r["q"][0] > r["p"][1], r  # the backward piece comes later on the path
        assert r["bounds"] <= r["alone"] * (1 + 1e-9), r  # proven bounds below the pieces' answers
        assert r["pair_bound"] <= r["pair"] * (1 + 1e-9), r
        if r["alone_optimal"]:  # the tie only adds constraints: the pair is no faster than its pieces' optima
            assert r["alone"] <= r["pair"] * (1 + 1e-9), r
    assert any(r["alone_optimal"] for r in rows)
    assert "sum" in capsys.readouterr().out


def test_the_pair_instance_ties_the_pieces_and_runs_one_after_the_other(benchmark_script, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    from dplace.formulations.bounds_segments import segments

    inst = cells()
    segs = [s for s in segments(inst, 4)[1] if s.first is not None and s.last is not None and len(s.ops) > 6]
    p, q = segs[0], segs[-1]
    pair = mod._pair_instance(inst, p, q, 1.0)
    names = {op.id for op in pair.ops}
    assert f"{inst.ops[p.last].id}" in names and f"{inst.ops[q.first].id}" in names
    tied = [g for g in pair.groups if any(pair.ops[o].id.endswith("/grad") for o in g)
            and any(not pair.ops[o].id.endswith("/grad") for o in g)]
    assert tied  # a forward op and its gradient share a device
    chain = [(pair.ops[u].id, pair.ops[v].id) for u, v in zip(pair.esrc, pair.edst)]
    assert (inst.ops[p.last].id, inst.ops[q.first].id) in chain


def test_a_slice_keeps_the_whole_graphs_memory_on_request(benchmark_script, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    from dplace.formats.pipedream import from_pipedream

    whole = from_pipedream(str(ROOT / "instances" / "sources" / "pipedream-profiles" / "alexnet.graph.txt"),
                           devices=4, memory_fraction=0.4)
    kept = mod.forward_slice(whole, 0, 8, "whole")
    capped = mod.forward_slice(whole, 0, 8)
    assert [d.memory for d in kept.devices] == [d.memory for d in whole.devices]
    assert all(c.memory < w.memory for c, w in zip(capped.devices, whole.devices))
