"""FastT split and data-parallel graphs on TensorFlow (dplace.runtime.split, dplace.runtime.replicas): a split
or replicated step computes the unplaced step's loss.

Tiny models only (2 cores): the test CNN (two 3x3 convolutions) and a 1-block Transformer of width 16.
"""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

import dplace

tf = pytest.importorskip("tensorflow")

from dplace.heuristics.fastt_graphs import split_dims, split_instance  # noqa: E402
from dplace.instance.io import save_instance, save_json  # noqa: E402
from dplace.instance.transform import apply  # noqa: E402
from dplace.runtime import execute, extract, replicas, split, zoo  # noqa: E402

pytestmark = pytest.mark.tf

MODELS = {"convnet": dict(width=5), "transformer": dict(width=16, layers=1, seq_len=4, vocab=50)}
BATCH = 3


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    if zoo.ensure_logical_cpus(2) < 2:
        pytest.skip("needs 2 logical CPUs")
    step = zoo.build_step(request.param, **MODELS[request.param])
    return step, extract.extract(step, BATCH, ["CPU:0", "CPU:1"])


@pytest.mark.parametrize("which", [0, -1])
def test_every_split_op_split_runs_the_unsplit_step(model, which):
    """Every op with a split spec split at once (its first or its last dim, in 3 uneven parts where the
    size allows: 3 = 1+1+1, width 5 = 2+2+1): the step runs, every node where placed, the instance's
    order kept, and the first two losses equal the unsplit step's."""
    step, inst = model
    splits = [[o.id, sorted(split_dims(o))[which], min(3, split_dims(o)[sorted(split_dims(o))[which]])]
              for o in inst.ops if split_dims(o)]
    assert len(splits) >= 6
    g = split_instance(inst, splits)
    types = {op.type for op in g.ops if "split_of" in op.extra}
    assert {"Split"} <= types and types & {"ConcatV2", "AddN"}
    res = dplace.solve(g, "heft")
    rep = execute.execute(g, res, step, BATCH, steps=1, warmup=1, rewrite=split.GraphRewrite(step, BATCH, g))
    assert rep.loss_ok and rep.loss_placed[0] != 0, (rep.loss_placed, rep.loss_ref)
    assert not rep.ops_moved and rep.order_matched
    assert set(rep.ops_per_device) == {"CPU:0", "CPU:1"}
    pieces = [op.id for op in g.ops if op.extra.get("split_part") is not None]
    assert rep.ops_not_run < len(pieces)  # the pieces ran (a node whose output nobody reads may be pruned)


def test_a_saved_split_result_runs_through_the_cli(model, tmp_path, capsys):
    """``dplace execute`` of a result on a split graph (its ``transform`` names the splits): rebuilt on the
    split graph, run with the rewrite, loss checked."""
    from dplace.cli import main

    step, inst = model
    big = max((o for o in inst.ops if split_dims(o)), key=lambda o: o.memory)
    g, tr = apply(inst, "fastt", {"splits": [[big.id, sorted(split_dims(big))[0], 2]]})
    res = replace(dplace.solve(g, "heft"), transform=tr)
    inst_p, res_p = tmp_path / "i.json", tmp_path / "r.json"
    save_instance(inst, inst_p)
    save_json(res_p, res.to_dict())
    assert main(["execute", "--instance", str(inst_p), "--result", str(res_p), "--steps", "1", "--warmup", "1",
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["loss_ok"] and rep["ops_moved_count"] == 0
    assert rep["extra"]["instance"] == g.name


def _replica_placement(g):
    """Replica r on CPU:r, everything else (shared state, the all-reduce sums, pinned inputs) on CPU:0."""
    return [0 if op.device is not None else op.extra.get("replica", 0) for op in g.ops]


def test_a_data_parallel_result_runs_the_single_device_step(model):
    """OS-DPOS's result on FastT's data-parallel graph (a replica per device at batch 3 = 2 + 1 rows, re-traced
    at its own batch, gradients averaged where they reach the variables) runs with every op where placed, its
    order kept, and the first two losses equal the single-device step's; so does the hand placement with
    replica r on CPU:r."""
    step, inst = model
    res = dplace.solve(inst, "os_dpos", max_dpos_runs=0)
    assert res.transform is not None and res.transform.params["data_parallel"]["replicas"] == 2
    rep = replicas.execute_result(inst, res, step, BATCH, steps=1, warmup=1)
    assert rep.loss_ok and not rep.ops_moved and rep.order_matched, (rep.loss_placed, rep.loss_ref, rep.ops_moved[:3])
    assert rep.extra["data_parallel"] == {"replicas": 2, "rows": [2, 1], "batch_norm_layers": 0}
    g = res.instance
    rewrite = replicas.rewrite_for(step, BATCH, g)
    rep = execute.execute(g, _replica_placement(g), step, BATCH, steps=1, warmup=1, rewrite=rewrite)
    assert rep.loss_ok and not rep.ops_moved, (rep.loss_placed, rep.loss_ref, rep.ops_moved[:3])
    assert rep.ops_per_device["CPU:1"] > 10 and rep.loss_placed[1] != rep.loss_placed[0]
    assert rewrite.sizes == [2, 1] and rewrite.dep  # the batch-size constants of replica 1 are its own


def test_splits_of_a_data_parallel_graph_run(model):
    """A split of replica 0's ops (2 rows: on the batch) on top of the data-parallel rewrite."""
    step, inst = model
    g0, _ = apply(inst, "fastt", {"data_parallel": {"replicas": 2, "inputs": ["x", "y"]}})
    ops = [o for o in g0.ops if o.extra.get("replica") == 0 and "batch" in split_dims(o)]
    assert ops
    g, tr = apply(inst, "fastt", {"data_parallel": {"replicas": 2, "inputs": ["x", "y"]},
                                  "splits": [[o.id, "batch", 2] for o in ops]})
    res = replace(dplace.solve(g, "heft"), transform=tr)
    rep = replicas.execute_result(inst, res, step, BATCH, steps=1, warmup=1)
    assert rep.loss_ok and not rep.ops_moved and rep.order_matched, (rep.loss_placed, rep.loss_ref, rep.ops_moved[:3])


def test_a_data_parallel_split_result_runs_on_local_workers(model, tmp_path, capsys):
    """``dplace execute --workers 2`` of a saved result on the data-parallel graph with a split of replica 0's
    ops: the rewrites run on the workers' session too (no op moved in their record, losses equal)."""
    from dplace.cli import main

    step, inst = model
    if step.name != "convnet":
        pytest.skip("the workers' path is the same for every model: run once (CI has 2 cores)")
    dp = {"replicas": 2, "inputs": ["x", "y"]}
    g0, _ = apply(inst, "fastt", {"data_parallel": dp})
    op = max((o for o in g0.ops if o.extra.get("replica") == 0 and "batch" in split_dims(o)), key=lambda o: o.memory)
    g, tr = apply(inst, "fastt", {"data_parallel": dp, "splits": [[op.id, "batch", 2]]})
    res = replace(dplace.solve(g, "heft"), transform=tr)
    inst_p, res_p = tmp_path / "i.json", tmp_path / "r.json"
    save_instance(inst, inst_p)
    save_json(res_p, res.to_dict())
    assert main(["execute", "--instance", str(inst_p), "--result", str(res_p), "--steps", "1", "--warmup", "1",
                 "--workers", "2", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["loss_ok"] and rep["ops_moved_count"] == 0 and rep["order_matched"]
    assert rep["extra"]["data_parallel"]["rows"] == [2, 1] and rep["extra"]["cluster"]["local"]


def test_split_shapes_are_measured_and_time_the_pieces(model):
    """``split_shapes`` runs every splittable op alone at each piece size OS-DPOS can ask for (on 2
    devices at batch 3: 1, 2, 3 rows; the replicas' 2 and 1 rows and their halves) and OS-DPOS's split
    graph then times its pieces from those measurements."""
    step, inst = model
    timed = inst.replace(ops=[replace(op, time=100.0) for op in inst.ops])
    m = split.split_shapes(timed, step, BATCH, steps=2, warmup=1)
    specs = {op.id: op.extra["split"] for op in m.ops if "split" in op.extra}
    assert specs and m.extra["tf"]["profile"]["split_shapes"]["ops"] == len(specs)
    for op_id, spec in specs.items():
        for dim, size in spec["dims"].items():
            want = split.piece_sizes(size, dim, 2, BATCH)
            assert sorted(map(int, spec["measured"][dim])) == want and size in want
            assert all(t > 0 for t in spec["measured"][dim].values()), (op_id, dim, spec["measured"][dim])
    assert split.piece_sizes(3, "batch", 2, 3) == [1, 2, 3]
    op = next(op for op in m.ops if "split" in op.extra)
    dim = sorted(split_dims(op))[0]
    g = split_instance(m, [[op.id, dim, 2]])
    table, size = op.extra["split"]["measured"][dim], split_dims(op)[dim]
    first = g.ops[g.op_index[f"{op.id}/{dim}0"]]
    assert first.extra["timed"] == "measured"
    assert first.time == pytest.approx(100.0 * table[str((size + 1) // 2)] / table[str(size)])
