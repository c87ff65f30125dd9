"""Rewritten instances (dplace.instance.transform): explicit, rebuilt from JSON, and refused when left unsaid."""
import json

import pytest

import dplace
from dplace import registry
from dplace.errors import InvalidInstanceError, SolverError
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.result import make_result, result_from_dict
from dplace.instance.transform import apply, from_dict
from dplace.instance.io import instance_to_dict


def _hand():
    split = {"dims": {"batch": 3}}
    ops = [Op("a", 10.0, 1), Op("H", 90.0, 6, type="MatMul", extra={"split": split}), Op("b", 10.0, 1)]
    return Instance("hand", [Device(f"g{i}", 1000) for i in range(3)], ops,
                    [Edge("a", "H", 0.0), Edge("H", "b", 0.0)], link=Link(5.0, 1000.0))


def test_split_rewrite_maps_every_piece_back_to_its_op():
    base = _hand()
    g, tf = apply(base, "fastt", {"splits": [["H", "batch", 3]], "split_copy_bytes_per_us": 100.0})
    assert tf.base is base and tf.kind == "fastt" and len(tf.origin) == g.n
    for o, op in enumerate(g.ops):
        want = op.id if op.id in base.op_index else "H"  # pieces H/batch<i> and the copy nodes come from H
        assert base.ops[tf.origin[o]].id == want


def test_a_saved_rewritten_result_comes_back_on_the_rewrite():
    base = _hand()
    res = dplace.solve(base, "os_dpos")
    assert res.transform is not None and res.base_instance is base and res.instance.name == "hand+split"
    data = json.loads(json.dumps(res.to_dict()))
    again = result_from_dict(base, data)
    assert instance_to_dict(again.instance) == instance_to_dict(res.instance) and again.makespan == res.makespan
    assert again.transform.to_dict() == res.transform.to_dict()


def test_transform_errors_name_the_field():
    base = _hand()
    with pytest.raises(InvalidInstanceError, match="transform.kind must be one of fastt, got 'zoom'"):
        apply(base, "zoom", {})
    with pytest.raises(InvalidInstanceError, match="transform.base_instance is 'other'"):
        from_dict(base, {"kind": "fastt", "base_instance": "other", "params": {"splits": []}})


def test_a_result_on_another_instance_without_a_transform_is_refused(monkeypatch):
    base, other = _hand(), _hand()

    def liar(inst, *, time_limit_s=None, seed=0):
        return make_result(other, "liar", [0, 0, 0])

    monkeypatch.setitem(registry._METHODS, "liar", registry.MethodInfo("liar", liar, None, "", "heuristic"))
    with pytest.raises(SolverError, match="without a transform"):
        dplace.solve(base, "liar")
