"""TensorFlow runtime: zoo, extract, profile (Standard Evaluation), commfit, execute, CLI.

Small on purpose (CI has 2 cores): ResNet50 at 32x32, a 2-block Transformer of width 32, batch 2, a few
steps. Each xdist worker splits its CPU into 2 logical devices on first use; tests that need more skip.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import dplace
from dplace.errors import InvalidInstanceError
from dplace.testing import split_placement

tf = pytest.importorskip("tensorflow")

from dplace.runtime import commfit, execute, extract, profile, zoo  # noqa: E402
from dplace.instance.io import instance_to_dict

pytestmark = pytest.mark.tf

NDEV = 2
TRANSFORMER = dict(width=32, layers=2, seq_len=8, vocab=100)


def _need(n: int) -> None:
    have = zoo.ensure_logical_cpus(NDEV)
    if have < n:
        pytest.skip(f"needs {n} logical CPUs, this process has {have}")


@pytest.fixture(scope="module")
def resnet():
    _need(NDEV)
    step = zoo.build_step("resnet50", image_size=32)
    inst = profile.profile(step, 2, ["CPU:0", "CPU:1"], steps=2, warmup=1)
    return step, inst


@pytest.fixture(scope="module")
def transformer():
    _need(NDEV)
    step = zoo.build_step("transformer", **TRANSFORMER)
    inst = profile.profile(step, 2, ["CPU:0", "CPU:1"], steps=2, warmup=1)
    return step, inst


def _methods() -> list[str]:
    return [m for m in ("heft", "m_etf", "celeritas") if m in dplace.methods()]


# ------------------------------------------------------------------------------------ no TF at import
@pytest.mark.parametrize("mod", ["dplace", "dplace.runtime.cli"])
def test_import_does_not_load_tensorflow(mod):
    code = (f"import sys, {mod}, dplace, dplace.cli; dplace.methods(); dplace.cli.build_parser(); "
            "from dplace.runtime import zoo, extract, profile, commfit, execute; "
            "sys.exit(1 if 'tensorflow' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ------------------------------------------------------------------------------------ extract
def test_extract_transformer(transformer):
    step, inst = transformer
    graph = step.concrete(2).graph
    assert inst.n == len(graph.get_operations())
    assert all(op.extra["tf_node"] == op.id for op in inst.ops)
    assert inst.extra["tf"]["model"] == "transformer" and inst.extra["tf"]["batch"] == 2
    # edge bytes: the embedding output feeding the next op is batch * seq * width float32
    emb = next(op for op in graph.get_operations() if op.type == "GatherV2")
    e = next(i for i, ed in enumerate(inst.edges) if ed.src == emb.name)
    assert inst.ebytes[e] == 2 * 8 * 32 * 4
    # a variable's placeholder holds the variable's bytes; its readers and updates share its group
    var_ops = [o for o, op in enumerate(inst.ops) if "variable" in op.extra]
    assert len(var_ops) == len(step.concrete(2).captured_inputs) - 1  # minus the captured position constant
    kernel = next(o for o in var_ops if inst.ops[o].extra["variable"].endswith("ff0a/kernel"))
    assert inst.mem[kernel] == 32 * 128 * 4
    g = inst.group_of[kernel]
    assert g >= 0
    types = {inst.ops[o].type for o in inst.groups[g]}
    assert {"Placeholder", "ReadVariableOp"} <= types and any(t.startswith("Assign") for t in types)
    # the step's inputs are pinned to the first device
    assert inst.pinned[inst.op_index["x"]] == 0 and inst.pinned[inst.op_index["y"]] == 0
    assert sum(1 for op in inst.ops if op.time > 0) > inst.n // 3


def test_split_specs_from_shapes(transformer):
    """Oracle from the shapes of the Transformer (batch 2, seq 8, width 32, FF 128): the forward FF
    MatMul [16,32]x[32,128] splits its 16 rows on the batch (activations cut, weights whole) and its
    128 columns on the channel (weights cut); its weight gradient a^T·dy sums over the 16 rows."""
    step, inst = transformer
    fwd = inst.ops[inst.op_index["transformer_1/ff0a_1/Tensordot/MatMul"]].extra["split"]
    assert fwd["dims"] == {"batch": 16, "channel": 128}
    assert fwd["cut"]["batch"] == ["transformer_1/ff0a_1/Tensordot/Reshape"]
    assert fwd["cut"]["channel"] == ["transformer_1/ff0a_1/Cast/ReadVariableOp"] and "reduce" not in fwd
    dw = inst.ops[inst.op_index["gradient_tape/transformer_1/ff0a_1/Tensordot/MatMul/MatMul_1"]].extra["split"]
    assert dw["dims"] == {"batch": 16, "channel": 128} and dw["reduce"] == ["batch"] and len(dw["cut"]["batch"]) == 2
    assert not any("split" in op.extra for op in inst.ops if op.type in ("Placeholder", "ReadVariableOp", "Relu"))
    # the same specs on an instance extracted without them, by node name
    bare = inst.replace(ops=[dplace.instance.model.Op(op.id, op.time, op.memory, op.type, op.colocation, op.device,
                                             {k: v for k, v in op.extra.items() if k != "split"}) for op in inst.ops])
    assert instance_to_dict(extract.with_split_specs(bare, step, 2)) == instance_to_dict(inst)
    res = dplace.solve(inst, "os_dpos", max_dpos_runs=4)
    assert dplace.check(res.instance, res).ok


def test_standard_evaluation_step2_remeasures_under_the_sequential_placement(transformer):
    step, inst = transformer
    tight = inst.replace(devices=[dplace.Device(d.name, int(0.6 * sum(inst.mem)), 1.0) for d in inst.devices])
    out = profile.measure_placed(tight, step, 2, steps=1, warmup=1)
    s2 = out.extra["tf"]["profile"]["step2"]
    assert s2["devices_used"] == ["CPU:0", "CPU:1"] and s2["memory_ok"]  # the batch did not fit one device
    assert s2["ops_timed"] > inst.n // 3 and sum(1 for op in out.ops if op.time > 0) <= s2["ops_timed"]
    assert out.mem == tight.mem and out.ebytes == tight.ebytes  # only the times are re-measured


def test_loop_graph_is_rejected_and_unrolled_lstm_extracts():
    zoo.ensure_logical_cpus(NDEV)
    small = dict(width=8, layers=1, seq_len=4, vocab=50)
    with pytest.raises(InvalidInstanceError, match="loop"):
        extract.extract(zoo.build_step("lstm_loop", **small), 2)
    inst = extract.extract(zoo.build_step("lstm", **small), 2)
    assert inst.n > 50 and inst.groups


def test_unknown_model_and_option():
    with pytest.raises(InvalidInstanceError, match="unknown model"):
        zoo.build_step("alexnet")
    with pytest.raises(InvalidInstanceError, match="unknown option"):
        zoo.build_step("resnet50", depth=3)


# ------------------------------------------------------------------------------------ place + execute
@pytest.mark.parametrize("which", ["resnet", "transformer"])
def test_place_and_execute_honoured(which, request):
    step, inst = request.getfixturevalue(which)
    methods = _methods() if which == "transformer" else ["heft"]  # ResNet50 is 8.5k ops: one method
    assert "heft" in methods
    for m in methods:
        res = dplace.solve(inst, m, time_limit_s=20)
        assert res.placement is not None, (m, res.message)
        assert dplace.check(inst, res).ok, (m, dplace.check(inst, res).summary())
        rep = execute.execute(inst, res, step, 2, steps=2, warmup=1, loss_steps=2)
        assert rep.ops_moved == [], (m, rep.ops_moved[:5])
        assert rep.loss_ok, (m, rep.loss_ref, rep.loss_placed)
        assert rep.predicted_us == pytest.approx(dplace.simulate(inst, res.placement, res.order).makespan)
        assert rep.order_enforced == (res.order is not None) and rep.order_matched is not False
        assert rep.extra["result_makespan_us"] == pytest.approx(res.makespan)
        assert rep.step_us_mean > 0
        assert sum(rep.ops_per_device.values()) + rep.ops_not_run == inst.n


def test_execute_enforces_and_verifies_the_order(transformer):
    step, inst = transformer
    res = dplace.solve(inst, "dpos")  # a per-device order that differs from TF's FIFO one
    rep = execute.execute(inst, res, step, 2, steps=1, warmup=1, loss_steps=1)
    assert rep.order_enforced and rep.order_matched and rep.order_mismatches == []
    assert rep.ok and rep.predicted_us == pytest.approx(res.makespan)
    # captured tensors are function arguments, never run: a chain through one would be cut there
    fed = {t.op.name for t in step.concrete(2).graph.inputs}
    chains = execute._order_chains(inst, res.order, fed)
    assert not fed & {n for ch in chains for n in ch} and sum(map(len, chains)) > 0
    free = execute.execute(inst, res, step, 2, steps=1, warmup=1, loss_steps=1, enforce_order=False)
    assert not free.order_enforced and free.order_matched is None
    assert free.predicted_us == pytest.approx(dplace.simulate(inst, res.placement).makespan)
    # the check itself: measured starts that swap two ops of a device are a mismatch, named
    chains = [["a", "b", "c"], ["d"]]
    two = inst.replace(devices=inst.devices[:2])
    assert execute._order_check(two, chains, {"a": 1, "b": 2, "c": 3, "d": 0}) == (True, [])
    assert execute._order_check(two, chains, {"a": 1, "c": 2, "b": 3}) == (False, [("CPU:0", "b", "c")])


def test_split_placement_really_runs_on_both_devices(transformer):
    step, inst = transformer
    pl = split_placement(inst)  # first half of the topological order on CPU:0, the rest on CPU:1
    rep = execute.execute(inst, pl, step, 2, steps=1, warmup=1, loss_steps=1)
    assert rep.ops_moved == []
    assert rep.loss_ok
    # from the executed partition graphs, not from the request
    assert rep.ops_per_device.get("CPU:0", 0) > 50 and rep.ops_per_device.get("CPU:1", 0) > 50


def test_wrong_device_is_reported_not_hidden(transformer):
    step, inst = transformer
    bad = inst.replace(devices=[dplace.Device("CPU:0", 1 << 33), dplace.Device("CPU:7", 1 << 33)])
    with pytest.raises(InvalidInstanceError, match="'CPU:7' is not present"):
        execute.execute(bad, [0] * bad.n, step, 2, steps=1, warmup=1)


# ------------------------------------------------------------------------------------ regression
def test_linear_fit_and_error_table():
    small = [profile.Measurement(b, {"a": 10 + 5 * b, "b": 3.0}, {"a": 100 * b, "b": 8}) for b in (1, 2, 4)]
    pred = profile.predict(small, 8)
    assert pred.times["a"] == pytest.approx(50) and pred.memory["a"] == pytest.approx(800)
    real = profile.Measurement(8, {"a": 55.0, "b": 3.0}, {"a": 800, "b": 8})
    err = profile.regression_error(pred, real)
    assert err.mem_dev == pytest.approx(0) and err.time_dev == pytest.approx((5 / 55) / 2)


def test_regress_transformer(transformer):
    step, _ = transformer
    inst = profile.regress(step, 4, (1, 2), ["CPU:0"], steps=2, warmup=1)
    assert inst.extra["tf"]["batch"] == 4
    assert inst.extra["tf"]["profile"]["estimated_from_batches"] == [1, 2]
    exact = extract.extract(step, 4)
    # memory from static shapes is linear in the batch: the estimate matches the batch-4 graph
    same = sum(1 for a, b in zip(inst.ops, exact.ops) if a.memory == b.memory)
    assert same >= 0.95 * inst.n


# ------------------------------------------------------------------------------------ commfit
def test_fit_line_recovers_latency_and_bandwidth():
    samples = [(b, 7.0 + b / 2000.0) for b in commfit.SIZES]
    lat, bw, rms = commfit.fit_line(samples)
    assert lat == pytest.approx(7.0, abs=1e-6) and bw == pytest.approx(2000.0) and rms < 1e-6


def test_fit_links_on_logical_cpus(transformer):
    _, inst = transformer
    fits = commfit.fit_links(["CPU:0", "CPU:1"], sizes=(1024, 65536), reps=2)
    assert {(f.src, f.dst) for f in fits} == {("CPU:0", "CPU:1"), ("CPU:1", "CPU:0")}
    out = commfit.with_links(inst, fits)
    assert set(out.pairs) == {("CPU:0", "CPU:1"), ("CPU:1", "CPU:0")}
    assert all(lk.bandwidth > 0 and lk.latency >= 0 for lk in out.pairs.values())


# ------------------------------------------------------------------------------------ CLI
def test_cli_profile_solve_execute(tmp_path, capsys):
    _need(NDEV)
    from dplace.cli import main

    inst_p, res_p = tmp_path / "t.json", tmp_path / "r.json"
    args = ["--model", "transformer", "--batch", "2", "--width", "16", "--layers", "1", "--seq-len", "4"]
    assert main(["profile", *args, "--devices", "2", "--steps", "1", "--warmup", "1", "--quiet",
                 "--out", str(inst_p)]) == 0
    inst = dplace.load_instance(inst_p)
    assert [d.name for d in inst.devices] == ["CPU:0", "CPU:1"]
    assert main(["solve", str(inst_p), "--method", "heft", "--out", str(res_p)]) == 0
    capsys.readouterr()
    assert main(["execute", "--instance", str(inst_p), "--result", str(res_p), "--steps", "1", "--warmup", "1",
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ops_moved_count"] == 0 and rep["loss_ok"] and rep["ok"]
    assert rep["order_enforced"] and rep["order_matched"]  # heft's order, chained past captured constants
    # user mistakes: one line, exit 2
    assert main(["execute", "--instance", str(inst_p), "--result", str(res_p), "--model", "resnet50"]) == 2
    assert main(["profile", "--model", "nope", "--batch", "2", "--out", str(tmp_path / "x.json")]) == 2
    assert not (tmp_path / "x.json").exists()


# ------------------------------------------------------------------------------------ GPU path
@pytest.mark.gpu
def test_gpu_path():
    if not tf.config.list_physical_devices("GPU"):
        pytest.skip("no GPU")
    devices = zoo.resolve_devices("gpu")
    step = zoo.build_step("transformer", device=devices[0], **TRANSFORMER)
    inst = profile.profile(step, 2, devices, steps=2, warmup=1)
    res = dplace.solve(inst, "heft")
    rep = execute.execute(inst, res, step, 2, steps=2, warmup=1, loss_steps=2)
    assert rep.ops_moved == [] and rep.loss_ok


def test_cli_error_after_tensorflow_start_is_one_line(tmp_path):
    """A mistake found only by TensorFlow (a device name) is still one line: TF's C++ start-up lines
    (oneDNN, CPU features) are kept off stderr."""
    proc = subprocess.run([sys.executable, "-m", "dplace.cli", "profile", "--model", "lstm", "--batch", "2",
                           "--devices", "xyz", "--quiet", "--out", str(tmp_path / "p.json")],
                          capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "'xyz' is not a device name" in proc.stderr
    assert not (tmp_path / "p.json").exists()
