"""dplace.instance.typed: a file read by the typed decoder (msgspec) gives the instance the parsed-JSON path
gives, or the load falls back to that path: the same instance or the same one-line error on every input."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dplace.errors import InvalidInstanceError
from dplace.instance.io import _json_of, _typed_instance, instance_from_dict, instance_to_dict, load_instance
from dplace.testing import contract_instances, instances

FIELDS = ("ids", "time", "mem", "type", "pin", "coloc", "src", "dst", "nbytes")


def _as_before(path):
    """The instance (or the error) of the path taken before the typed decoder: parse, then build."""
    try:
        return instance_from_dict(_json_of(path, path.read_bytes(), "instance"), own=True)
    except InvalidInstanceError as exc:
        return str(exc)


def _outcome(load):
    try:
        return load()
    except InvalidInstanceError as exc:
        return str(exc)


def _same(a, b):
    """Two instances with equal columns (values and their Python types), extras and everything written."""
    ca, cb = a.columns, b.columns
    for f in FIELDS:
        x, y = getattr(ca, f), getattr(cb, f)
        assert list(x) == list(y) and list(map(type, x)) == list(map(type, y)), f
    assert list(ca.op_extra.items()) == list(cb.op_extra.items())
    assert list(ca.edge_extra.items()) == list(cb.edge_extra.items())
    assert (a.name, a.devices, a.link, a.pairs, a.comm, a.extra, a.transfer_cpu) == \
        (b.name, b.devices, b.link, b.pairs, b.comm, b.extra, b.transfer_cpu)
    assert instance_to_dict(a) == instance_to_dict(b)
    assert json.dumps(instance_to_dict(a)) == json.dumps(instance_to_dict(b))
    assert (a.dur, a.mem, a.pinned, a.groups, a.esrc, a.edst, a.ebytes, a.topo) == \
        (b.dur, b.mem, b.pinned, b.groups, b.esrc, b.edst, b.ebytes, b.topo)


def _check_file(path, typed: bool | None = None):
    data = path.read_bytes()
    fast = _typed_instance(data)
    if typed is not None:
        assert (fast is not None) == typed
    before = _as_before(path)
    loaded = _outcome(lambda: load_instance(path))
    if isinstance(before, str):
        assert fast is None and loaded == before
        return loaded
    _same(loaded, before)
    if fast is not None:
        _same(fast, before)
    return loaded


@settings(max_examples=60, deadline=None)
@given(instances(), st.booleans())
def test_the_typed_decoder_gives_the_instance_parsed_json_gives(tmp_path_factory, inst, indent):
    path = tmp_path_factory.mktemp("t") / "i.json"
    path.write_text(json.dumps(instance_to_dict(inst), indent=1 if indent else None))
    _check_file(path)


def test_the_bundled_kinds_of_instance_read_typed(tmp_path):
    """The contract graphs (pins, colocation, both comm modes) and a generated Transformer (unknown
    ``split`` fields, a ``generator`` top field) take the typed path, and equal the parsed-JSON path."""
    from dplace.formats.generate import transformer_training

    for k, inst in enumerate(list(contract_instances()) + [transformer_training(600, 4, seed=3)]):
        path = tmp_path / f"{k}.json"
        path.write_text(json.dumps(instance_to_dict(inst)))
        per_device = any(isinstance(op.time, dict) for op in inst.ops)
        _check_file(path, typed=not per_device)


_DIGITS = st.text("0123456789", min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e12).map(repr) | st.integers(0, 2**53).map(str)
                | st.tuples(_DIGITS, _DIGITS, st.integers(-30, 12)).map(lambda x: f"{int(x[0])}.{x[1]}e{x[2]}")
                | _DIGITS.map(lambda x: str(int(x))), min_size=3, max_size=3))
def test_numbers_read_typed_are_json_s(tmp_path_factory, nums):
    """Times, memory and bytes, long runs of digits too: the same int or float (correctly rounded) as
    json reads (msgspec 0.22 agreed with json on 1M random numbers: long mantissas, halfway cases)."""
    t, m, b = nums
    path = tmp_path_factory.mktemp("n") / "n.json"
    path.write_text('{"format": "dplace-instance/1", "devices": [{"name": "d", "memory": 9007199254740992}], '
                    f'"ops": [{{"id": "a", "time": {t}, "memory": {m}}}, {{"id": "b", "time": 1.5}}], '
                    f'"edges": [{{"src": "a", "dst": "b", "bytes": {b}}}]}}')
    _check_file(path)


_BASE = ('{"format": "dplace-instance/1", "name": "x", "devices": [{"name": "d0", "memory": 1000}], "ops": ['
         '{"id": "a", "time": 1, "memory": 2, @OP@}, {"id": "b", "time": 2.5, "type": "MatMul"}], '
         '"edges": [{"src": "a", "dst": "b", "bytes": 3, @EDGE@}] @TOP@}')


def _text(op='"note": 1', edge='"tag": [1]', top=', "generator": {"seed": 7}'):
    return _BASE.replace("@OP@", op).replace("@EDGE@", edge).replace("@TOP@", top)


@pytest.mark.parametrize("text,typed", [
    (_text(), True),
    (_text(op='"split": {"dims": {"batch": 32}}, "forward_of": "b"'), True),
    (_text(op='"x": 1e400'), True),  # an unknown field json reads as inf: parsed when asked, as json does
    (_text(op='"i\\u0064": "a"'), True),  # an escaped known key, and a duplicate: the last wins
    (_text(op='"time": 7'), True),  # a duplicate key
    (_text(op='"type": null, "colocation": null, "device": null'), True),
    (_text(op='"colocation": "g", "device": "d0"'), True),
    (_text(op='"x": NaN'), False),  # json reads NaN; the typed decoder refuses: the path as before
    (_text(op='"x": "\\ud800"'), False),  # a lone surrogate
    (_text(op='"x": "\xe9"'), True),  # UTF-8 text in a skipped field
    (_text(op='"type": 5'), False),
    (_text(op='"forward_of": "b"'), True),
    (_text(op='"forward_of": null'), True),
    (_text(op='"forward_of": 5'), False),  # read by methods: typed as a string, else the path as before
    (_text(op='"colocation": 3'), False),  # the loop reads it as "3"
    (_text(op='"device": "nope"'), False),  # an error, named by the instance's checks
    (_text(op='"memory": true'), False),
    (_text(op='"memory": null'), False),
    (_text(op='"memory": -1'), False),
    (_text(op='"memory": 12345678901234567890'), False),  # too large: named by the instance's checks
    (_text(op='"memory": 1' + "0" * 5000), False),  # more digits than json converts: its error
    (_text(op='"time": 1.0000000000000000001'), True),
    (_text(op='"time": 0.30000000000000001665334536938'), True),  # long runs of digits: msgspec reads json's
    (_text(op='"x": 123456789012345678901234567890'), True),  # in an unknown field: parsed by json when asked
    (_text(op='"time": {"d0": 3}'), False),  # per-device times: the path as before
    (_text(op='"time": 1e400'), False),
    (_text(op='"x": ' + "[" * 900 + "]" * 900), None),  # deep: either path, the same outcome
    (_text(op='"x": ' + "[" * 3000 + "]" * 3000), False),
    (_text(edge='"src": "a"'), True),
    (_text(edge='"dst": "zz"'), False),  # unknown op: the instance's checks name it
    (_text(edge='"dst": 5'), False),
    (_text(edge='"bytes": "3"'), False),
    (_text(top=', "edges": null'), False),
    (_text(top=', "ops": []'), False),  # the last "ops" wins: an error, named
    (_text(top=', "comm": "nope"'), False),
    (_text(top=', "format": "other"'), False),
    (_text(top=', "x": NaN'), False),
    (_text(top=', "x": 1e400'), False),  # orjson refuses the top field: the path as before (json: inf)
    (_text().replace('"id": "a"', '"id": ""'), False),
    (_text().replace('"id": "a"', '"id": 7'), False),
    (_text().replace('"ops"', '"opz"'), False),
    (_text() + " x", False),
    ("\ufeff" + _text(), False),
    ("[1, 2]", False),
    ("", False),
])
def test_every_input_gives_what_the_path_before_gives(tmp_path, text, typed):
    path = tmp_path / "x.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    _check_file(path)
    if typed is not None:
        assert (_typed_instance(path.read_bytes()) is not None) == typed


def test_text_that_is_not_utf8_is_refused_as_before(tmp_path):
    path = tmp_path / "x.json"
    path.write_bytes(_text(op='"x": "\xff"').encode("latin-1"))
    assert _typed_instance(path.read_bytes()) is None
    with pytest.raises(InvalidInstanceError, match="cannot read"):
        load_instance(path)


def test_unknown_fields_are_parsed_only_when_asked(tmp_path):
    """The typed path keeps the ops' and edges' text and parses it when their unknown fields are first
    read; ``may_contain`` answers from the text before that."""
    from dplace.instance.columns import forward_of_index

    path = tmp_path / "x.json"
    path.write_text(_text(op='"split": {"dims": {"batch": 32}}'))
    inst = load_instance(path)
    extras = inst.columns.op_extra
    assert extras._load is not None
    assert not extras.may_contain("forward_of") and extras.may_contain("split")
    assert forward_of_index(inst).tolist() == [-1, -1] and extras._load is not None  # no parse needed
    assert [op.extra for op in inst.ops] == [{"split": {"dims": {"batch": 32}}}, {}]
    assert extras._load is None and [ed.extra for ed in inst.edges] == [{"tag": [1]}]
    path.write_text(_text(op='"forw\\u0061rd_of": "b"'))  # forward_of (an escaped key) is read typed: no parse
    inst = load_instance(path)
    extras = inst.columns.op_extra
    assert extras.may_contain("forward_of") and forward_of_index(inst).tolist() == [1, -1]
    assert extras._load is not None and extras.may_contain("split")  # a backslash in the text: it may
    assert [op.extra for op in inst.ops] == [{"forward_of": "b"}, {}] and extras.field("forward_of") == [(0, "b")]
