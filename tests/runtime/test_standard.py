"""Celeritas' Standard Evaluation with memory measured (dplace.runtime.standard), on one local worker.

Small for CI's 2 cores: the test CNN, small batches 1 and 2, large batch 4.
"""
from __future__ import annotations

import pytest

import dplace

tf = pytest.importorskip("tensorflow")

from dplace.runtime import cluster, extract, standard, zoo  # noqa: E402

pytestmark = pytest.mark.tf


def test_memory_regressed_from_measurements_and_remeasured_at_the_large_batch(tmp_path, capsys):
    from dplace.cli import main

    zoo.ensure_logical_cpus(1)
    try:
        cluster.free_ports(1)
    except OSError as exc:
        pytest.skip(f"cannot open a port on 127.0.0.1: {exc}")
    out = tmp_path / "c.json"
    assert main(["profile", "--model", "convnet", "--batch", "4", "--width", "4", "--image-size", "8",
                 "--regress-from", "1,2", "--measure-memory", "--measure-placed", "--steps", "1", "--warmup", "1",
                 "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Celeritas' score: median |estimate - measured| / measured" in text and "regressed from batches 1,2" in text
    inst = dplace.load_instance(out)
    prof = inst.extra["tf"]["profile"]
    assert prof["estimated_from_batches"] == [1, 2] and prof["memory"]["source"].startswith("measured")
    score = prof["step2_memory"]["score"]
    assert score["regression"]["n"] > 20 and score["regression"]["median_rel_error"] is not None
    assert score["static"]["measured_bytes"] == score["regression"]["measured_bytes"] > 0
    # the instance's memory is step 2's measurement: what ran allocated, the rest (variables) static bytes
    static = extract.extract(zoo.build_step("convnet", width=4, image_size=8), 4)
    var = next(op for op in inst.ops if "variable" in op.extra)
    assert var.memory == static.ops[static.op_index[var.id]].memory > 0
    assert inst.mem != static.mem


def test_measure_memory_needs_small_batches(tmp_path):
    from dplace.cli import main

    assert main(["profile", "--model", "convnet", "--batch", "4", "--measure-memory", "--out",
                 str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()
