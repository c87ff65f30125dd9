"""dplace.instance.io: the instance JSON format round-trips, and files are written whole or not at all."""
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplace.errors import InvalidInstanceError
from dplace.instance.io import (_SLOW, _bulk_columns, fast_loads, instance_from_dict, instance_to_dict, load_instance, save_instance,
                       write_atomic_many)
from dplace.instance.model import Instance
from dplace.testing import contract_instances, instances


@settings(max_examples=40, deadline=None)
@given(instances())
def test_instance_json_round_trip(inst):
    again = instance_from_dict(json.loads(json.dumps(instance_to_dict(inst))))
    assert instance_to_dict(again) == instance_to_dict(inst)
    assert (again.dur, again.mem, again.capacity, again.pinned, again.groups) == \
        (inst.dur, inst.mem, inst.capacity, inst.pinned, inst.groups)


def test_save_and_load_give_an_equal_instance(tmp_path):
    for inst in contract_instances():
        p = tmp_path / f"{inst.name}.json"
        save_instance(inst, p)
        assert instance_to_dict(load_instance(p)) == instance_to_dict(inst)


def test_a_failing_output_leaves_no_file_behind(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(InvalidInstanceError, match="is a directory"):
        write_atomic_many([(tmp_path / "a.json", "{}"), (tmp_path / "dir.json", "{}")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json"]


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(InvalidInstanceError, match=r"instance '.*nope.json': no such file"):
        load_instance(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InvalidInstanceError, match=r"instance '.*bad.json': not JSON"):
        load_instance(bad)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=False, allow_infinity=False) | st.integers(-2**63, 2**64 - 1), max_size=20))
def test_fast_loads_reads_what_json_reads(values):
    text = json.dumps({"v": values, "s": "é\\u00e9\n"}).encode()
    fast = fast_loads(text)
    if fast is _SLOW:  # only with a run of 19 digits (an integer from 1e18, or a float's 17+ digits), which json reads
        assert re.search(rb"[0-9]{19}", text)
        return
    again = json.loads(text)
    assert fast == again and [type(x) for x in fast["v"]] == [type(x) for x in again["v"]]


@pytest.mark.parametrize("text", [b"[NaN]", b"[1e400]", b'["\\ud800"]', b"{", b"[" + b"9" * 19 + b"]",
                                  b'{"a": 18446744073709551616}', b"\xef\xbb\xbf{}"])
def test_fast_loads_leaves_to_json_what_orjson_reads_otherwise(text):
    assert fast_loads(text) is _SLOW


@settings(max_examples=40, deadline=None)
@given(instances())
def test_columns_at_once_equal_the_per_op_loop(inst):
    data = json.loads(json.dumps(instance_to_dict(inst)))
    fast = instance_from_dict(data)
    data["ops"].append(7)  # not an object: no bulk columns; the loop names it
    with pytest.raises(InvalidInstanceError, match=r"ops\[\d+\] must be an object"):
        instance_from_dict(data)
    data["ops"].pop()
    assert _bulk_columns(data["ops"], data.get("edges", [])) is not None or any(
        isinstance(od["time"], dict) or not isinstance(od["id"], str) for od in data["ops"])
    slow = Instance(fast.name, fast.devices, fast.ops, fast.edges, link=fast.link, pairs=fast.pairs, comm=fast.comm,
                    extra=fast.extra)
    assert instance_to_dict(fast) == instance_to_dict(slow) == instance_to_dict(inst)
    assert (fast.dur, fast.mem, fast.pinned, fast.groups, fast.esrc, fast.ebytes) == \
        (slow.dur, slow.mem, slow.pinned, slow.groups, slow.esrc, slow.ebytes)


def test_a_file_s_unknown_fields_are_collected_on_first_use(tmp_path):
    """load_instance keeps the parsed ops/edges and collects their unknown fields when first asked: the
    same Op/Edge extras, forward_of index and .npz as the copying path."""
    from dplace.instance.columns import forward_of_index
    from dplace.instance.npz import instance_to_npz_bytes

    data = {"format": "dplace-instance/1", "name": "x", "devices": [{"name": "d0", "memory": 100}],
            "ops": [{"id": "a", "time": 1, "split": {"dims": {"batch": 2}}}, {"id": "b", "time": 2},
                    {"id": "c", "time": 3, "forward_of": "a"}],
            "edges": [{"src": "a", "dst": "b", "bytes": 4, "tag": [1]}, {"src": "b", "dst": "c"}]}
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data))
    lazy, copied = load_instance(path), instance_from_dict(json.loads(json.dumps(data)))
    assert [op.extra for op in lazy.ops] == [op.extra for op in copied.ops] == \
        [{"split": {"dims": {"batch": 2}}}, {}, {"forward_of": "a"}]
    assert [ed.extra for ed in lazy.edges] == [{"tag": [1]}, {}]
    assert forward_of_index(lazy).tolist() == forward_of_index(copied).tolist() == [-1, -1, 0]
    assert instance_to_dict(lazy) == instance_to_dict(copied) == json.loads(json.dumps(instance_to_dict(copied)))
    assert instance_to_npz_bytes(lazy) == instance_to_npz_bytes(copied)


def test_raw_extras_of_some_ops_equal_the_collected_ones():
    """RawExtras.of reads only the rows asked for (before the extras are collected) and gives what
    ``items`` collects; Columns.extras_of on a plain mapping the same."""
    from dplace.instance.columns import RawExtras

    rows = [{"id": "a", "time": 1}, {"id": "b", "time": 2, "split_of": "a"}, {"id": "c", "note": 1, "time": 3}]
    raw = RawExtras(rows, {"id", "time"})
    assert raw.of([0, 1]) == {1: {"split_of": "a"}}
    assert raw.of([2]) == {2: {"note": 1}}
    assert dict(raw.items()) == {1: {"split_of": "a"}, 2: {"note": 1}}
    assert raw.of([0, 1, 2]) == dict(raw.items())  # after collection: from the collected fields


def test_raw_extras_field_is_what_items_holds_for_that_field():
    """RawExtras.field (what forward_of_index reads) gives, before and after the extras are collected,
    the (index, value) pairs ``items`` holds for that one field; a known field has none."""
    from dplace.instance.columns import RawExtras

    rows = [{"id": "a", "time": 1, "forward_of": "b"}, {"id": "b", "note": 2}, {"id": "c", "forward_of": None},
            {"id": "d", "split": 1, "forward_of": "a"}]
    raw = RawExtras(rows, {"id", "time"})
    want = [(i, ex["forward_of"]) for i, ex in RawExtras(list(rows), {"id", "time"}).items() if "forward_of" in ex]
    assert want == [(0, "b"), (2, None), (3, "a")]
    assert raw.field("forward_of") == want and raw.field("id") == [] and raw.field("other") == []
    list(raw.items())
    assert raw.field("forward_of") == want and raw.field("note") == [(1, 2)]


@pytest.mark.parametrize("src", [5, 5.0, "zz", "", None, [1], {"a": 1}, True, "5"])
def test_a_file_s_edge_endpoints_read_as_the_checked_loop_reads_them(tmp_path, src):
    """From a file (``own``) an edge's ``src``/``dst`` are checked by the lookup among the op ids only; any
    value the lookup refuses sends the load to the per-op loop: the same instance (an op named by a number)
    or the same one-line error as ``instance_from_dict`` of a copy, which checks every field first."""
    data = {"format": "dplace-instance/1", "name": "e", "devices": [{"name": "d0", "memory": 100}],
            "ops": [{"id": "5", "time": 1.0}, {"id": "b", "time": 2.0, "extra": [1]}, {"id": "c", "time": 1.5}],
            "edges": [{"src": "b", "dst": "c", "bytes": 1.0}, {"src": src, "dst": "c", "bytes": 2.0}]}
    path = tmp_path / "e.json"
    path.write_text(json.dumps(data))

    def outcome(load):
        try:
            return instance_to_dict(load())
        except InvalidInstanceError as exc:
            return str(exc)

    copied = outcome(lambda: instance_from_dict(json.loads(json.dumps(data))))
    assert outcome(lambda: load_instance(path)) == copied
    assert isinstance(copied, dict if type(src) is int or src == "5" else str), copied


def test_pieces_are_written_in_order_by_a_thread_and_errors_of_either_side_propagate():
    """``write_atomic_many`` writes an iterable's pieces by a thread of its own (``_write_pieces``): in order,
    text and bytes alike; a failing write is raised in the caller, as is an error of the pieces' maker;
    no writer thread is left behind."""
    import io
    import threading

    from dplace.instance.files import _write_pieces

    buf = io.BytesIO()
    _write_pieces(buf, (str(i) if i % 2 else str(i).encode() for i in range(5000)))
    assert buf.getvalue() == "".join(map(str, range(5000))).encode()

    class Full:
        def __init__(self):
            self.calls = 0

        def write(self, piece):
            self.calls += 1
            raise OSError(28, "No space left on device")

    full = Full()
    with pytest.raises(OSError, match="No space"):
        _write_pieces(full, iter([b"a"] * 1000))
    assert full.calls == 1  # the writes stop at the first error

    def maker():
        yield b"a"
        raise ValueError("maker failed")

    with pytest.raises(ValueError, match="maker failed"):
        _write_pieces(io.BytesIO(), maker())
    assert not [t for t in threading.enumerate() if t.name == "dplace-write"]
