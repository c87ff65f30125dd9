"""dplace.formats converters: every format (fixtures made here, the real source files bundled in instances/sources), one-line errors,
the CLI, the bundled instances, and the hand-worked optima of instances/tiny by brute force."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

import dplace
from dplace.formats import (convert, from_dnn_partitioning, from_dot, from_pipedream, from_stg,
                            op_type_from_name)
from dplace.errors import InvalidInstanceError
from dplace.instance.io import instance_to_dict, load_instance

ROOT = Path(__file__).resolve().parents[2]
INSTANCES = ROOT / "instances"
SOURCES = INSTANCES / "sources"  # the real inputs the bundled instances came from (in the repository)
DNN = SOURCES / "dnn-partitioning" / "throughput-inputs"
PIPEDREAM = SOURCES / "pipedream-profiles"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _one_line_error(fn, *args, match: str | None = None, **kw) -> str:
    with pytest.raises(InvalidInstanceError) as ei:
        fn(*args, **kw)
    msg = str(ei.value)
    assert "\n" not in msg and msg
    if match:
        assert match in msg, msg
    return msg


# ---------------------------------------------------------------------------------------------- dnn-partitioning
DNN_FIXTURE = {
    "maxSizePerFPGA": 1000.0, "maxFPGAs": 3, "maxCPUs": 1,
    "nodes": [
        {"name": "w0", "id": 10, "supportedOnFpga": True, "cpuLatency": 0, "fpgaLatency": 0,
         "isBackwardNode": False, "colorClass": 1, "size": 100.0},
        {"name": "MatMul1", "id": 11, "supportedOnFpga": True, "cpuLatency": 2.0, "fpgaLatency": 0.5,
         "isBackwardNode": False, "colorClass": 1, "size": 50.0},
        {"name": "MatMul1_Grad/Gemm_3", "id": 12, "supportedOnFpga": 1, "cpuLatency": 3.0, "fpgaLatency": 0.25,
         "isBackwardNode": True, "size": 20.0},
        {"name": "Weird", "id": 13, "supportedOnFpga": False, "cpuLatency": 1.5, "fpgaLatency": 0.0,
         "isBackwardNode": 1, "size": 0},
    ],
    "edges": [{"sourceId": 10, "destId": 11, "cost": 99.0, "size": 1200.0},
              {"sourceId": 11, "destId": 12, "cost": 99.0, "size": 2400.0},
              {"sourceId": 12, "destId": 13, "cost": 99.0, "size": 0.0}],
}


def test_dnn_partitioning_fixture(tmp_path):
    p = _write(tmp_path, "g.json", json.dumps(DNN_FIXTURE))
    inst = from_dnn_partitioning(p)
    assert inst.m == 3 and inst.capacity == [1000] * 3  # maxFPGAs, maxSizePerFPGA
    assert [op.id for op in inst.ops] == ["w0", "MatMul1", "MatMul1_Grad/Gemm_3", "Weird"]
    assert inst.dur[1][0] == pytest.approx(500.0)  # ms -> µs
    assert inst.dur[3][0] == pytest.approx(1500.0)  # not supportedOnFpga: cpuLatency
    assert inst.ops[3].extra["supported_on_fpga"] is False
    assert inst.ops[2].extra["backward"] is True and inst.ops[3].extra["backward"] is True
    assert "backward" not in inst.ops[1].extra
    assert inst.ops[0].colocation == inst.ops[1].colocation == "c1" and inst.ops[2].colocation is None
    assert inst.mem == [100, 50, 20, 0]
    assert inst.ebytes == [1200.0, 2400.0, 0.0]
    # transfer time from bytes and the link model, never from `cost`
    assert inst.transfer_time(0, 0, 1) == pytest.approx(10.0 + 1200.0 / 12000.0)
    assert [op.type for op in inst.ops] == ["Variable", "MatMul", "Gemm", "Weird"]
    assert all("split" not in op.extra for op in inst.ops)
    inst2 = from_dnn_partitioning(p, devices=2, memory=500, latency=1, bandwidth=100, comm="sequential",
                                  name="x", split_dims={"batch": 8})
    assert inst2.m == 2 and inst2.capacity == [500, 500] and inst2.comm == "sequential" and inst2.name == "x"
    assert inst2.transfer_time(1, 0, 1) == pytest.approx(1 + 24)
    assert inst2.ops[1].extra["split"] == {"dims": {"batch": 8}} and inst2.ops[2].extra["split"]
    assert "split" not in inst2.ops[0].extra
    inst3 = from_dnn_partitioning(p, memory_fraction=0.9)
    assert inst3.capacity == [153] * 3  # ceil(0.9 * 170)


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d.pop("nodes"), "'nodes' must be a list"),
    (lambda d: d["nodes"][1].update(fpgaLatency=-1), "fpgaLatency"),
    (lambda d: d["nodes"][1].update(size="big"), "size must be a number"),
    (lambda d: d["nodes"][1].update(fpgaLatency=float("nan")), "fpgaLatency"),
    (lambda d: d["edges"][0].update(destId=99), "unknown node 99"),
    (lambda d: d["nodes"][1].update(id=10), "duplicate node id 10"),
    (lambda d: d["edges"].append({"sourceId": 12, "destId": 10, "size": 1}), "cycle"),
    (lambda d: d.update(maxFPGAs=0), "maxFPGAs"),
    (lambda d: d["nodes"][0].update(size=5000.0), "larger than every device"),
])
def test_dnn_partitioning_errors(tmp_path, mutate, match):
    data = json.loads(json.dumps(DNN_FIXTURE))
    mutate(data)
    p = _write(tmp_path, "bad.json", json.dumps(data))
    msg = _one_line_error(from_dnn_partitioning, p, match=match)
    assert str(p) in msg


def test_dnn_partitioning_not_json_and_missing(tmp_path):
    _one_line_error(from_dnn_partitioning, _write(tmp_path, "x.json", "{nope"), match="not JSON")
    _one_line_error(from_dnn_partitioning, tmp_path / "missing.json", match="no such file")
    _one_line_error(from_dnn_partitioning, _write(tmp_path, "y.json", "[1]"), match="top level")
    _one_line_error(from_dnn_partitioning, _write(tmp_path, "z.json", json.dumps(DNN_FIXTURE)), devices=0,
                    match="devices")


@pytest.mark.parametrize("fn", [from_dot, from_stg, from_pipedream])
@pytest.mark.parametrize("opts, match", [
    ({"latency": float("nan")}, "latency (µs) must be finite, got nan"),
    ({"bandwidth": 0}, "bandwidth (bytes/µs) must be > 0, got 0"),
    ({"memory": -5}, "memory (bytes per device) must be > 0, got -5"),
    ({"memory_fraction": "half"}, "memory_fraction must be a number, got 'half'"),
])
def test_bad_options_and_unreadable_inputs(tmp_path, fn, opts, match):
    _one_line_error(fn, _write(tmp_path, "g.txt", ""), match=match, **opts)
    assert "missing.txt" in _one_line_error(fn, tmp_path / "missing.txt", match="no such file")
    _one_line_error(fn, tmp_path, match="cannot read")  # a directory


def test_op_type_from_name():
    assert op_type_from_name("MatMul47") == "MatMul"
    assert op_type_from_name("MatMul47_Grad/Gemm_7") == "Gemm"
    assert op_type_from_name("Conv3_Grad/ConvGrad_2_gpu_0/res2_w_0_grad") == "ConvGrad"
    assert op_type_from_name("gpu_0/res4_2_branch2b_w_0") == "Variable"
    assert op_type_from_name("99") == "Variable"


@pytest.mark.parametrize("rel", ["OperatorGraphs/bert_l-3_training.json", "LayerGraphs/resnet50_training.json"])
def test_dnn_partitioning_real(rel):
    src = json.loads((DNN / rel).read_text())
    inst = from_dnn_partitioning(DNN / rel, devices=4, memory_fraction=0.35)
    assert inst.n == len(src["nodes"]) and len(inst.edges) == len(src["edges"])
    total_ms = sum(nd["fpgaLatency"] for nd in src["nodes"])
    assert sum(row[0] for row in inst.dur) == pytest.approx(1000 * total_ms, rel=1e-6)
    assert sum(1 for op in inst.ops if op.extra.get("backward")) == sum(1 for nd in src["nodes"] if nd["isBackwardNode"])
    assert max(inst.capacity) < sum(inst.mem)
    # backward nodes named after their forward node ("X_Grad/...", "Xgrad") are paired with it
    names = {nd["name"]: nd for nd in src["nodes"]}
    for op in inst.ops:
        f = op.extra.get("forward_of")
        if f is not None:
            assert op.extra.get("backward") and not names[f]["isBackwardNode"]
            assert op.id.startswith(f + "_Grad/") or op.id == f + "grad"
    assert any("forward_of" in op.extra for op in inst.ops)


def test_forward_name():
    from dplace.formats import forward_name

    assert forward_name("MatMul64_Grad/Transpose_0") == "MatMul64"
    assert forward_name("node77grad") == "node77"
    assert forward_name("SoftmaxCrossEntropy_loss") is None and forward_name("grad") is None


# ---------------------------------------------------------------------------------------------- PipeDream
PD_FIXTURE = (
    "node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, activation_size=1000.0, "
    "parameter_size=0.000\n"
    "node2 -- Conv2d(3, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False) -- "
    "forward_compute_time=1.500, backward_compute_time=3.000, activation_size=24000.0, parameter_size=400.000\n"
    "node3 -- ReLU(inplace) -- forward_compute_time=0.250, backward_compute_time=0.125, "
    "activation_size=[12000.0; 12000.0], parameter_size=0.000\n"
    "node4 -- Linear(in_features=64, out_features=10, bias=True) -- forward_compute_time=0.1, "
    "backward_compute_time=0.2, activation_size=40.0, parameter_size=2600.0\n"
    "\tnode1 -- node2\n\tnode2 -- node3\n\tnode3 -- node4"
)


def test_pipedream_fixture_split_ops(tmp_path):
    p = _write(tmp_path, "m.graph.txt", PD_FIXTURE)
    inst = from_pipedream(p, devices=2)
    assert inst.n == 8 and inst.m == 2
    ix = inst.op_index
    assert inst.dur[ix["node2"]][0] == pytest.approx(1500.0) and inst.dur[ix["node2/grad"]][0] == pytest.approx(3000.0)
    assert inst.ops[ix["node2"]].type == "Conv2D" and inst.ops[ix["node2/grad"]].type == "Conv2DGrad"
    assert inst.ops[ix["node2"]].extra["split"] == {"dims": {"channel": 64}}
    assert inst.ops[ix["node4"]].type == "MatMul"
    assert inst.ops[ix["node2/grad"]].extra["forward_of"] == "node2"
    assert inst.ops[ix["node2/grad"]].extra["backward"] is True
    assert inst.ops[ix["node2"]].colocation == inst.ops[ix["node2/grad"]].colocation
    assert inst.mem[ix["node2"]] == 24400 and inst.mem[ix["node2/grad"]] == 400
    assert inst.mem[ix["node3"]] == 24000  # a list of output sizes counts as their sum
    edges = {(inst.ops[inst.esrc[e]].id, inst.ops[inst.edst[e]].id): inst.ebytes[e] for e in range(len(inst.edges))}
    assert edges[("node2", "node3")] == 24000 and edges[("node3/grad", "node2/grad")] == 24000
    assert edges[("node2", "node2/grad")] == 24000
    # backward ops come after all forward ops
    assert inst.topo_pos[ix["node1/grad"]] > inst.topo_pos[ix["node4"]]
    total = sum(inst.mem)
    assert max(inst.capacity) < total


def test_pipedream_fixture_merged(tmp_path):
    p = _write(tmp_path, "m.graph.txt", PD_FIXTURE)
    inst = from_pipedream(p, merge_backward=True, devices=1, memory=10**9)
    assert inst.n == 4 and len(inst.edges) == 3
    assert inst.dur[inst.op_index["node2"]][0] == pytest.approx(4500.0)
    assert inst.ebytes[1] == 48000.0  # activation forward + its gradient back


@pytest.mark.parametrize("text, match", [
    ("garbage line\n", "line 1: not a node or edge line"),
    ("node1 -- X -- forward_compute_time=abc, backward_compute_time=0, activation_size=0, parameter_size=0\n",
     "forward_compute_time must be a number"),
    ("node1 -- X -- forward_compute_time=1, backward_compute_time=0, activation_size=0\n", "no parameter_size"),
    ("node1 -- X -- forward_compute_time=-1, backward_compute_time=0, activation_size=0, parameter_size=0\n",
     ">= 0"),
    ("node1 -- X -- forward_compute_time=1, backward_compute_time=0, activation_size=0, parameter_size=0\n"
     "\tnode1 -- node9\n", "unknown node 'node9'"),
    ("node1 -- X -- forward_compute_time=1, backward_compute_time=0, activation_size=0, parameter_size=0\n"
     "node1 -- X -- forward_compute_time=1, backward_compute_time=0, activation_size=0, parameter_size=0\n",
     "duplicate node"),
    ("", "no node lines"),
])
def test_pipedream_errors(tmp_path, text, match):
    p = _write(tmp_path, "bad.graph.txt", text)
    assert str(p) in _one_line_error(from_pipedream, p, match=match)


@pytest.mark.parametrize("model", ["resnet18", "gnmt"])
def test_pipedream_real(model):
    path = PIPEDREAM / f"{model}.graph.txt"
    nodes = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("\t")]
    inst = from_pipedream(path)
    assert inst.n == 2 * len(nodes) and inst.m == 4
    merged = from_pipedream(path, merge_backward=True)
    assert merged.n == len(nodes)
    assert sum(r[0] for r in merged.dur) == pytest.approx(sum(r[0] for r in inst.dur))


# ---------------------------------------------------------------------------------------------- DOT
DOT_FIXTURE = """
// a task graph
digraph "G1" {
  rankdir=LR;
  node [shape=box];
  a [Weight=3];
  b [label="B", Weight="2"];
  c [Weight=4, memory=10]
  /* chain with an edge weight */
  a -> b [Weight=5];
  b -> c -> d [Weight=1];
  d [Weight=1];
  # a comment line
}
"""


def test_dot_fixture(tmp_path):
    p = _write(tmp_path, "g.dot", DOT_FIXTURE)
    inst = from_dot(p, devices=2)
    assert inst.name == "G1" and inst.m == 2
    assert [op.id for op in inst.ops] == ["a", "b", "c", "d"]
    assert [row[0] for row in inst.dur] == [3.0, 2.0, 4.0, 1.0]
    assert inst.mem == [0, 0, 10, 0] and inst.ops[1].extra["label"] == "B"
    # with the default latency 0 a transfer takes exactly the edge Weight
    assert [inst.transfer_time(e, 0, 1) for e in range(3)] == pytest.approx([5.0, 1.0, 1.0])
    inst2 = from_dot(p, latency=10.0, bandwidth=6000.0)
    assert inst2.transfer_time(0, 0, 1) == pytest.approx(15.0)
    compact = from_dot(_write(tmp_path, "c.dot", 'digraph{node[Weight=2];1;"x y"[Weight=1e+1];1->"x y"[Weight=0.5]}'))
    assert [op.id for op in compact.ops] == ["1", "x y"] and [r[0] for r in compact.dur] == [2.0, 10.0]
    assert compact.transfer_time(0, 0, 1) == pytest.approx(0.5)


@pytest.mark.parametrize("text, match", [
    ("digraph { a [Weight=1]; a -> b; }", "node 'b': missing Weight"),
    ("graph { a [Weight=1]; }", "undirected"),
    ("digraph { a [Weight=1] ", "missing closing"),
    ("digraph { a [Weight=x]; }", "Weight must be a number"),
    ("digraph { a [Weight=1]; b [Weight=1]; a -> b; b -> a; }", "cycle"),
    ("digraph { subgraph s { a [Weight=1]; } }", "subgraphs"),
    ("digraph { a [Weight=1]; a -> ; }", "has no target"),
    ("hello", "expected 'digraph'"),
    ("digraph { a [Weight=1] @ }", "unexpected text"),
])
def test_dot_errors(tmp_path, text, match):
    p = _write(tmp_path, "bad.dot", text)
    assert str(p) in _one_line_error(from_dot, p, match=match)


# ---------------------------------------------------------------------------------------------- STG
STG_FIXTURE = """3
0 0 0
1 5 1 0
2 7 1 0
3 2 2 1 2
4 0 1 3
#
# Standard Task Graph Set-like trailer
# Critical path: 14
"""


def test_stg_fixture(tmp_path):
    p = _write(tmp_path, "rand0000.stg", STG_FIXTURE)
    inst = from_stg(p, devices=2)
    assert inst.n == 5 and inst.m == 2
    assert [op.id for op in inst.ops] == ["t0", "t1", "t2", "t3", "t4"]
    assert inst.ops[0].extra.get("dummy") and inst.ops[4].extra.get("dummy")
    assert [row[0] for row in inst.dur] == [0.0, 5.0, 7.0, 2.0, 0.0]
    assert len(inst.edges) == 5 and all(b == 0 for b in inst.ebytes)
    assert dplace.critical_path_length(inst) == pytest.approx(9.0)
    inst2 = from_stg(p, edge_bytes=1200.0, latency=1.0)
    assert inst2.transfer_time(0, 0, 1) == pytest.approx(1.1)
    # a file without the dummy tasks
    q = _write(tmp_path, "nodummy.stg", "2\n1 4 0\n2 3 1 1\n")
    assert from_stg(q).n == 2


@pytest.mark.parametrize("text, match", [
    ("", "no task count line"),
    ("x\n", "first line must be the task count"),
    ("2\n0 0 0\n1 3 2 0\n", "npred is 2 but 1"),
    ("1\n0 0 0\n1 3 1 7\n2 0 1 1\n", "unknown predecessor 7"),
    ("1\n0 0 0\n0 3 0\n2 0 1 0\n", "duplicate task id 0"),
    ("3\n0 0 0\n1 3 1 0\n", "task count is 3 but 2"),
    ("1\n0 0 0\n1 -3 1 0\n2 0 1 1\n", "cost"),
    ("1\n0 0 0\n1 3 1 0\n2 0 1 1 oops\n", "expected 'id cost npred"),
])
def test_stg_errors(tmp_path, text, match):
    p = _write(tmp_path, "bad.stg", text)
    assert str(p) in _one_line_error(from_stg, p, match=match)


def test_convert_dispatch_and_bad_options(tmp_path):
    p = _write(tmp_path, "g.stg", STG_FIXTURE)
    assert convert("stg", p).n == 5
    _one_line_error(convert, "xml", p, match="format must be one of")
    _one_line_error(from_stg, p, latency=-1, match="latency")
    _one_line_error(from_stg, p, bandwidth=0, match="bandwidth")
    _one_line_error(from_stg, p, comm="serial", match="comm")
    _one_line_error(from_stg, p, memory=-5, match="memory")


# ---------------------------------------------------------------------------------------------- CLI
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dplace.cli", *map(str, args)], capture_output=True, text=True)


def test_cli_convert(tmp_path):
    dot = _write(tmp_path, "g.dot", DOT_FIXTURE)
    out = tmp_path / "out.json"
    r = _cli("convert", "dot", dot, "--out", out, "--devices", "3", "--memory", "1000", "--latency", "2",
             "--bandwidth", "100", "--comm", "sequential")
    assert r.returncode == 0, r.stderr
    inst = load_instance(out)
    assert inst.m == 3 and inst.capacity == [1000] * 3 and inst.comm == "sequential" and inst.link.latency == 2
    bad = _write(tmp_path, "bad.dot", "digraph { a -> b; }")
    r = _cli("convert", "dot", bad, "--out", tmp_path / "never.json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "missing Weight" in r.stderr
    assert not (tmp_path / "never.json").exists()
    r = _cli("convert", "stg", dot, "--merge-backward", "--out", tmp_path / "never.json")
    assert r.returncode == 2 and "pipedream" in r.stderr
    r = _cli("convert", "pipedream", _write(tmp_path, "m.graph.txt", PD_FIXTURE), "--merge-backward", "--compact",
             "--out", out)
    assert r.returncode == 0, r.stderr
    assert load_instance(out).n == 4


# ---------------------------------------------------------------------------------------------- bundled instances
BUNDLED = ["bert12_training_4dev", "resnet50_training_4dev", "inceptionv3_training_4dev"]


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_real_instances(name):
    inst = load_instance(INSTANCES / f"{name}.json")
    total = sum(inst.mem)
    assert inst.m == 4 and inst.link.latency == 10.0 and inst.link.bandwidth == 12000.0
    assert all(c == -(-35 * total // 100) or abs(c - 0.35 * total) <= 1 for c in inst.capacity)
    assert max(inst.capacity) < total  # one device cannot hold the graph
    assert any(op.extra.get("backward") for op in inst.ops) and inst.groups
    res = dplace.solve(inst, "heft")
    assert res.memory_ok and dplace.check(inst, res).ok


def test_bundled_match_their_command():
    """The bundled files are what instances/README.md's command produces (the converter did not drift)."""
    src = {"bert12_training_4dev": "OperatorGraphs/bert_L-12_training.json",
           "resnet50_training_4dev": "OperatorGraphs/resnet50_training.json",
           "inceptionv3_training_4dev": "LayerGraphs/inceptionv3_training.json"}
    for name, rel in src.items():
        fresh = from_dnn_partitioning(DNN / rel, devices=4, memory_fraction=0.35, latency=10, bandwidth=12000,
                                      name=name)
        assert instance_to_dict(fresh) == instance_to_dict(load_instance(INSTANCES / f"{name}.json")), name


TINY_OPTIMA = {"chain": 11.0, "diamond": 9.0, "fork_join": 9.0, "colocation": 10.0, "sequential_comm": 8.0}


def _brute_force(inst) -> float:
    """Minimum simulated makespan over all valid placements and all per-device orders."""
    best = float("inf")
    for pl in itertools.product(range(inst.m), repeat=inst.n):
        if any(inst.pinned[o] >= 0 and pl[o] != inst.pinned[o] for o in range(inst.n)):
            continue
        if any(len({pl[o] for o in g}) > 1 for g in inst.groups):
            continue
        used = [0] * inst.m
        for o in range(inst.n):
            used[pl[o]] += inst.mem[o]
        if any(used[d] > inst.capacity[d] for d in range(inst.m)):
            continue
        per_dev = [[o for o in range(inst.n) if pl[o] == d] for d in range(inst.m)]
        for order in itertools.product(*(itertools.permutations(ops) for ops in per_dev)):
            try:
                s = dplace.simulate(inst, list(pl), [list(x) for x in order])
            except InvalidInstanceError:  # the order contradicts precedence
                continue
            best = min(best, s.makespan)
    return best


@pytest.mark.parametrize("name", sorted(TINY_OPTIMA))
def test_tiny_optima_by_brute_force(name):
    inst = load_instance(INSTANCES / "tiny" / f"{name}.json")
    assert inst.n <= 6 and inst.m == 2
    assert _brute_force(inst) == pytest.approx(TINY_OPTIMA[name])
    assert dplace.lower_bound(inst) <= TINY_OPTIMA[name] + 1e-9
    res = dplace.solve(inst, "heft")
    assert dplace.check(inst, res).ok and res.makespan >= TINY_OPTIMA[name] - 1e-9


def test_tiny_readme_lists_the_optima():
    text = (INSTANCES / "tiny" / "README.md").read_text()
    for name, value in TINY_OPTIMA.items():
        assert f"`{name}.json` |" in text and f"| {int(value)}" in text


def test_tiny_sequential_vs_parallel():
    inst = load_instance(INSTANCES / "tiny" / "sequential_comm.json")
    assert _brute_force(inst.replace(comm="parallel")) == pytest.approx(6.0)
