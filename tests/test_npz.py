"""The columnar .npz instance form: same instance as the JSON (round trips both ways, CLI included),
one-line errors for bad files, and the bulk-built indexes equal to what the definitions give."""
from __future__ import annotations

import heapq
import json
import random

import numpy as np
import pytest

from dplace import Device, Edge, Instance, Link, Op, simulate
from dplace.cli import main
from dplace.errors import InvalidInstanceError
from dplace.formats import transformer_training
from dplace.instance.io import instance_to_dict, load_instance, save_instance
from dplace.instance.npz import load_npz, save_npz
from dplace.testing import random_instance

VIEWS = ("dur", "mem", "esrc", "edst", "ebytes", "succ", "pred", "topo", "topo_pos", "pinned", "group_of",
         "groups", "group_names", "capacity", "lat", "bw", "op_index", "device_index", "n", "m", "comm")


def _same(a: Instance, b: Instance) -> None:
    for k in VIEWS:
        assert getattr(a, k) == getattr(b, k), k
    assert instance_to_dict(a) == instance_to_dict(b)


def _odd_instance() -> Instance:
    """Per-device times, pins, colocation, unknown fields, a per-pair link, sequential comm."""
    devs = [Device("a", 100, 1.0), Device("b", 80, 2.0)]
    ops = [Op("x", 3, 5, "MatMul", "g", None, {"split": {"dims": {"batch": 4}}}),
           Op("y", {"a": 2.5, "b": 7}, 6, None, "g", "b"),
           Op("z", 0, 0, "Add", None, None), Op("w\u00e9", 1.5, 2)]
    edges = [Edge("x", "z", 10, {"note": 1}), Edge("y", "z", 0.5), Edge("z", "w\u00e9", 3)]
    return Instance("odd", devs, ops, edges, link=Link(2, 100), pairs={("a", "b"): Link(1, 50)},
                    comm="sequential", extra={"source": "test"})


@pytest.mark.parametrize("seed", range(40))
def test_round_trip_random(tmp_path, seed):
    inst = random_instance(random.Random(seed))
    save_npz(inst, tmp_path / "i.npz")
    back = load_npz(tmp_path / "i.npz")
    _same(inst, back)
    assert back.ops == inst.ops and back.edges == inst.edges


def test_save_instance_writes_the_columnar_form_to_an_npz_path(tmp_path):
    """As load_instance reads either form by the name, save_instance writes either."""
    inst = random_instance(random.Random(7))
    save_instance(inst, tmp_path / "i.npz")
    save_instance(inst, tmp_path / "i.json")
    assert (tmp_path / "i.npz").read_bytes()[:2] == b"PK" and (tmp_path / "i.json").read_bytes()[:1] == b"{"
    _same(inst, load_instance(tmp_path / "i.npz"))
    _same(inst, load_instance(tmp_path / "i.json"))


def test_round_trip_odd_fields_and_cli(tmp_path):
    inst = _odd_instance()
    save_instance(inst, tmp_path / "a.json")
    assert main(["convert", "instance", str(tmp_path / "a.json"), "--out", str(tmp_path / "a.npz")]) == 0
    assert main(["convert", "instance", str(tmp_path / "a.npz"), "--out", str(tmp_path / "b.json")]) == 0
    back = load_instance(tmp_path / "a.npz")  # load_instance reads either form
    _same(inst, back)
    assert back.ops[0].extra == {"split": {"dims": {"batch": 4}}} and back.edges[0].extra == {"note": 1}
    assert json.loads((tmp_path / "b.json").read_text()) == instance_to_dict(inst)
    pl = [0, 1, 1, 0]
    assert simulate(back, pl).end == simulate(inst, pl).end


def test_generated_transformer_round_trip(tmp_path):
    inst = transformer_training(2000, 4, seed=1)
    save_npz(inst, tmp_path / "t.npz")
    _same(inst, load_npz(tmp_path / "t.npz"))


def test_topological_order_is_kahn_smallest_index_first():
    """Ops listed against the edges' direction (the bulk shortcut does not apply): the order is the
    definition's, written here with a heap."""
    rng = random.Random(3)
    n = 60
    ops = [Op(f"o{i}", 1) for i in range(n)]
    edges = [Edge(f"o{j}", f"o{i}", 1) for j in range(n) for i in range(j) if rng.random() < 0.1]
    inst = Instance("rev", [Device("a", 10)], ops, edges)
    indeg = [0] * n
    out: dict[int, list[int]] = {i: [] for i in range(n)}
    for e in edges:
        u, v = int(e.src[1:]), int(e.dst[1:])
        indeg[v] += 1
        out[u].append(v)
    heap = [o for o in range(n) if indeg[o] == 0]
    order = []
    while heap:
        u = heapq.heappop(heap)
        order.append(u)
        for v in out[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, v)
    assert inst.topo == order


def _npz_with(tmp_path, **changes):
    save_npz(_odd_instance(), tmp_path / "ok.npz")
    with np.load(tmp_path / "ok.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays.update(changes)
    for k, v in list(arrays.items()):
        if v is None:
            del arrays[k]
    np.savez(tmp_path / "bad.npz", **arrays)
    return tmp_path / "bad.npz"


@pytest.mark.parametrize("changes,match", [
    ({"time": np.array([3.0, np.nan, -1.0, 1.5])}, "op 'z': time must be >= 0, got -1.0"),
    ({"memory": np.array([5, 6, 0])}, "array 'memory' must have one entry per op (4)"),
    ({"src": np.array([0, 1, 9], dtype=np.int32)}, "edge"),
    ({"dst": np.array([2, 1, 3], dtype=np.int32)}, "self-loop"),
    ({"colocation": np.array([0, 0, 5, -1], dtype=np.int32)}, "array 'colocation' must hold codes"),
    ({"bytes": None}, "missing array 'bytes'"),
    ({"meta": np.frombuffer(b"{", dtype=np.uint8)}, "meta is not JSON"),
])
def test_bad_npz_is_one_line_error(tmp_path, capsys, changes, match):
    path = _npz_with(tmp_path, **changes)
    with pytest.raises(InvalidInstanceError) as ei:
        load_npz(path)
    assert match in str(ei.value) and "\n" not in str(ei.value)
    assert main(["info", str(path)]) == 2
    assert match in capsys.readouterr().err


def test_not_an_npz(tmp_path):
    p = tmp_path / "x.npz"
    p.write_text("hello")
    with pytest.raises(InvalidInstanceError, match="not a readable .npz"):
        load_npz(p)
    with pytest.raises(InvalidInstanceError, match="no such file"):
        load_npz(tmp_path / "missing.npz")


@pytest.mark.parametrize("method", ["heft", "single"])
def test_result_as_npz_holds_what_the_json_holds(tmp_path, method):
    from dplace.instance.npz import result_dict_from_npz

    inst = _odd_instance().replace(comm="parallel")
    save_instance(inst, tmp_path / "i.json")
    for out in ("r.json", "r.npz"):
        assert main(["solve", str(tmp_path / "i.json"), "--method", method, "--out", str(tmp_path / out)]) == 0
        assert main(["evaluate", str(tmp_path / "i.json"), str(tmp_path / out)]) == 0
    want = json.loads((tmp_path / "r.json").read_text())
    got = result_dict_from_npz(tmp_path / "r.npz")
    strip = lambda d: {k: v for k, v in d.items() if k not in ("solve_time_s", "extra")}  # noqa: E731
    assert strip(got) == strip(want)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InvalidInstanceError, match=r"result '.*bad.npz': not a readable result .npz"):
        result_dict_from_npz(tmp_path / "bad.npz")
