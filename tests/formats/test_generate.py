"""dplace.formats.generate: determinism, CCR targeting, acyclicity, forward_of consistency, memory forcing a split."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplace
from dplace.errors import InvalidInstanceError
from dplace.formats.generate import ccr, layered_dag, transformer_training
from dplace.instance.io import instance_from_dict, instance_to_dict, load_instance


def _same(a, b) -> bool:
    return json.dumps(instance_to_dict(a), sort_keys=True) == json.dumps(instance_to_dict(b), sort_keys=True)


@pytest.mark.parametrize("target", [0.1, 0.5, 1.0, 3.0, 10.0])
@pytest.mark.parametrize("n", [12, 200])
def test_layered_ccr_hits_target(n, target):
    inst = layered_dag(n, 4, ccr=target, seed=3)
    assert inst.n == n
    assert ccr(inst) == pytest.approx(target, rel=0.02)


def test_layered_determinism_and_seed():
    a, b = layered_dag(80, 3, ccr=2.0, seed=7), layered_dag(80, 3, ccr=2.0, seed=7)
    assert _same(a, b)
    assert not _same(a, layered_dag(80, 3, ccr=2.0, seed=8))


def test_layered_structure_and_memory():
    inst = layered_dag(60, 4, layers=6, seed=1)
    assert len(inst.topo) == inst.n  # acyclic (Instance validates it)
    # only first-level ops are sources: every other op has a predecessor
    sources = [o for o in range(inst.n) if not inst.pred[o]]
    assert sources == list(range(len(sources))) and 1 <= len(sources) < 60
    assert all(isinstance(t, float) and t == int(t) for t in (op.time for op in inst.ops))  # integer times
    total = sum(inst.mem)
    assert all(c < total for c in inst.capacity)  # one device cannot hold everything
    assert sum(inst.capacity) >= total
    assert dplace.solve(inst, "single").status == "no_solution"  # single fails; the instance is feasible
    res = dplace.solve(inst, "heft")
    assert res.memory_ok and dplace.check(inst, res).ok


def test_layered_memory_fraction_and_comm():
    inst = layered_dag(30, 2, memory_fraction=1.0, comm="sequential", seed=2)
    assert inst.comm == "sequential"
    assert inst.capacity[0] == sum(inst.mem)


@pytest.mark.parametrize("kwargs", [dict(n_ops=0, n_devices=2), dict(n_ops=5, n_devices=0),
                                    dict(n_ops=5, n_devices=2, ccr=0.0), dict(n_ops=5, n_devices=2, ccr=-1.0),
                                    dict(n_ops=5, n_devices=2, layers=9)])
def test_layered_bad_arguments(kwargs):
    with pytest.raises(InvalidInstanceError) as ei:
        layered_dag(**kwargs)
    assert "\n" not in str(ei.value)


def test_transformer_structure():
    inst = transformer_training(600, 4, seed=1)
    assert abs(inst.n - 600) <= 0.1 * 600
    ids = inst.op_index
    fwd_of = {op.id: op.extra["forward_of"] for op in inst.ops if "forward_of" in op.extra}
    assert fwd_of
    # forward_of names an existing forward op, mirrored once, and comes after it
    assert len(set(fwd_of.values())) == len(fwd_of)
    for g, f in fwd_of.items():
        assert f in ids and "forward_of" not in inst.ops[ids[f]].extra
        assert inst.topo_pos[ids[f]] < inst.topo_pos[ids[g]]
        assert inst.ops[ids[g]].type == inst.ops[ids[f]].type + "Grad"
    # every forward compute op (not variables or updates) has its backward twin
    compute = {op.id for op in inst.ops if op.type not in ("VariableV2", "ApplyAdam") and "forward_of" not in op.extra}
    assert compute == set(fwd_of.values())
    # reversed edges: forward u -> v (compute) implies grad(v) -> grad(u)
    edges = {(inst.ops[inst.esrc[e]].id, inst.ops[inst.edst[e]].id) for e in range(len(inst.edges))}
    for u, v in edges:
        if u in compute and v in compute:
            assert (f"grad/{v}", f"grad/{u}") in edges
    # weight updates colocated with their weights
    types = {op.type for op in inst.ops}
    assert {"MatMul", "BatchMatMul", "Softmax", "LayerNorm", "Gelu", "SoftmaxCrossEntropy", "ApplyAdam"} <= types
    for op in inst.ops:
        if op.type == "ApplyAdam":
            w = op.id[len("update/"):]
            assert op.colocation == inst.ops[ids[w]].colocation == f"var:{w}"
    # split on MatMul-like ops
    for op in inst.ops:
        if op.type in ("MatMul", "BatchMatMul"):
            dims = op.extra["split"]["dims"]
            assert dims["batch"] > 0 and dims["channel"] > 0


def test_transformer_memory_forces_split_and_heft_is_valid():
    inst = transformer_training(300, 4, seed=0)
    total = sum(inst.mem)
    assert max(inst.capacity) < total <= sum(inst.capacity)
    assert dplace.solve(inst, "single").status == "no_solution"  # single fails; the instance is feasible
    res = dplace.solve(inst, "heft")
    assert res.memory_ok
    assert dplace.check(inst, res).ok
    assert res.makespan >= dplace.lower_bound(inst)


def test_transformer_determinism_and_roundtrip():
    a, b = transformer_training(400, 2, seed=5), transformer_training(400, 2, seed=5)
    assert _same(a, b)
    assert not _same(a, transformer_training(400, 2, seed=6))
    assert _same(a, instance_from_dict(json.loads(json.dumps(instance_to_dict(a)))))


# sha256 of to_json() from the generator as it was before it built columns (Op/Edge objects, one
# rng.uniform per op as it was created): the columns builder must give the same instances
_TRANSFORMER_JSON_SHA256 = {
    (60, 1, 0): "045f1d596c020a0848ad10d1c555bd607e3c69ccaafdfd1f89807566243be87a",
    (500, 2, 3): "99c244ad2b8a07d7e8b57d7489ee4137bc053fa276a9357146032e8f21160109",
    (5000, 4, 1): "d307c68a3f43935bf426bb5815f51b18adc267231010c824a5635f7fb7dd77a7",
}


@pytest.mark.parametrize("n,m,seed", sorted(_TRANSFORMER_JSON_SHA256))
def test_transformer_output_unchanged_for_a_seed(n, m, seed):
    import hashlib

    inst = transformer_training(n, m, seed=seed)
    assert hashlib.sha256(json.dumps(instance_to_dict(inst)).encode()).hexdigest() == _TRANSFORMER_JSON_SHA256[n, m, seed]


def test_transformer_smallest_and_options():
    inst = transformer_training(1, 2, memory_per_device=10**12, comm="sequential", name="t")
    assert inst.n == 60 and inst.name == "t" and inst.comm == "sequential" and inst.capacity == [10**12] * 2
    assert transformer_training(2000, 4, layers=4).extra["generator"]["layers"] == 4


@pytest.mark.slow
def test_transformer_36k_has_the_asked_size():
    # how fast it builds is measured in benchmarks/bench_simulate.py and bench_scale.py, not asserted here
    inst = transformer_training(36000, 4)
    assert abs(inst.n - 36000) < 360


def test_cli_generate(tmp_path):
    out = tmp_path / "g.json"
    for args in (["layered", "--ops", "20", "--devices", "2", "--ccr", "2", "--seed", "1"],
                 ["transformer", "--ops", "100", "--devices", "2", "--compact"]):
        r = subprocess.run([sys.executable, "-m", "dplace.cli", "generate", *args, "--out", str(out)],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        load_instance(out)
    r = subprocess.run([sys.executable, "-m", "dplace.cli", "generate", "layered", "--ops", "5", "--ccr", "0",
                        "--out", str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "ccr" in r.stderr
    assert not (tmp_path / "bad.json").exists()
    r = subprocess.run([sys.executable, "-m", "dplace.cli", "generate", "transformer", "--ops", "5", "--ccr", "2",
                        "--out", str(tmp_path / "bad.json")], capture_output=True, text=True)
    assert r.returncode == 2 and "layered only" in r.stderr


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 40), m=st.integers(1, 4), target=st.floats(0.05, 20.0), seed=st.integers(0, 10**6))
def test_layered_property(n, m, target, seed):
    inst = layered_dag(n, m, ccr=target, seed=seed)
    assert inst.n == n and inst.m == m and len(inst.topo) == n and inst.edges
    assert ccr(inst) == pytest.approx(target, rel=0.02)
    assert sum(inst.capacity) >= sum(inst.mem) and max(inst.capacity) >= max(inst.mem)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(1, 2500), m=st.integers(1, 8), seed=st.integers(0, 10**6))
def test_transformer_property(n, m, seed):
    inst = transformer_training(n, m, seed=seed)
    assert len(inst.topo) == inst.n
    ids = inst.op_index
    for op in inst.ops:
        f = op.extra.get("forward_of")
        if f is not None:
            assert inst.topo_pos[ids[f]] < inst.topo_pos[ids[op.id]]
    if m >= 2:
        assert max(inst.capacity) < sum(inst.mem)
    assert sum(inst.capacity) >= sum(inst.mem)
