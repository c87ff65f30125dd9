"""The @converter decorator: shared options on every format, one registry, the instance built once."""
import inspect
import json

import pytest

from dplace.errors import InvalidInstanceError
from dplace.formats import CONVERTERS, FORMATS, convert, from_dot, from_stg
from dplace.formats.common import Parsed, converter
from dplace.instance.model import Edge, Op

SHARED = ["devices", "memory", "memory_fraction", "latency", "bandwidth", "comm", "name"]


def test_formats_in_order_and_each_takes_the_shared_options_then_its_own():
    assert FORMATS == ("dnn-partitioning", "pipedream", "dot", "stg", "instance")
    own = {"dnn-partitioning": ["split_dims"], "pipedream": ["merge_backward"], "dot": [], "stg": ["edge_bytes"],
           "instance": []}
    for fmt, fn in CONVERTERS.items():
        params = list(inspect.signature(fn).parameters)
        assert params == ["path", *SHARED, *own[fmt]], fmt
    assert inspect.signature(from_dot).parameters["latency"].default == 0.0
    assert inspect.signature(CONVERTERS["pipedream"]).parameters["latency"].default == 10.0


def test_a_new_format_is_one_decorated_function(tmp_path, monkeypatch):
    monkeypatch.setitem(CONVERTERS, "_pairs", None)  # removed again after the test
    seen = {}

    @converter("_pairs", latency=1.0)
    def from_pairs(path, *, bandwidth: float = 1.0, scale: float = 1.0) -> Parsed:
        seen["bandwidth"] = bandwidth
        rows = json.loads(open(path).read())
        ops = [Op(str(i), t * scale, 10, None, None, None, {}) for i, t in enumerate(rows)]
        return Parsed(ops, [Edge(str(i), str(i + 1), 100.0) for i in range(len(rows) - 1)], source={"rows": len(rows)})

    f = tmp_path / "three.json"
    f.write_text("[1, 2, 3]")
    inst = convert("_pairs", f, devices=2, bandwidth=50.0, scale=2.0)
    assert seen == {"bandwidth": 50.0}  # a shared option the parser names reaches it
    assert (inst.name, inst.m, inst.link.latency, inst.link.bandwidth) == ("three", 2, 1.0, 50.0)
    assert [op.time for op in inst.ops] == [2.0, 4.0, 6.0]
    assert inst.extra["source"] == {"format": "_pairs", "file": "three.json", "rows": 3}
    # default memory: total / (0.7 x devices) raised to the largest op: 30 / 1.4 -> 22 bytes
    assert inst.capacity == [22, 22]
    assert list(inspect.signature(from_pairs).parameters)[-1] == "scale"


@pytest.mark.parametrize("opts, needle", [
    ({"devices": 0}, "devices must be an integer >= 1, got 0"),
    ({"comm": "serial"}, "comm must be one of"),
    ({"bandwidth": 0}, "bandwidth (bytes/µs)"),
])
def test_shared_options_are_checked_before_the_file_is_read(tmp_path, opts, needle):
    missing = tmp_path / "absent.stg"
    with pytest.raises(InvalidInstanceError) as exc:
        from_stg(missing, **opts)
    assert needle in str(exc.value)


def test_unknown_format_lists_the_valid_ones(tmp_path):
    with pytest.raises(InvalidInstanceError, match="format must be one of dnn-partitioning, pipedream, dot, stg"):
        convert("onnx", tmp_path / "x")
