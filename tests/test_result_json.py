"""A Result's JSON text written in pieces (``Result.json_chunks``, what ``dplace solve --out`` writes) is
byte for byte ``json.dumps(to_dict(), indent=1)``."""
import json
import random

import numpy as np

import dplace
from dplace.instance.model import Device, Edge, Instance, Op
from dplace.result import make_result
from dplace.testing import random_instance


def _same(res, extra=None):
    want = json.dumps({**res.to_dict(), **(extra or {})}, indent=1) + "\n"
    assert "".join(res.json_chunks(extra)) == want


def test_pieces_equal_the_dump_on_random_results():
    rng = random.Random(4)
    for _ in range(25):
        inst = random_instance(rng, n_ops=rng.randint(1, 12), comm=rng.choice(["parallel", "sequential"]))
        res = dplace.solve(inst, rng.choice(["heft", "m_etf", "dpos", "single"]))
        _same(res, {"check": "valid"})


def test_odd_names_and_array_schedules():
    ids = ['a", "b', "q\\", 'é"x', "plain", '\\", "', "tab\there"]
    ops = [Op(x, float(i % 3)) for i, x in enumerate(ids)]
    inst = Instance("w", [Device("d0", 100), Device('d"1', 100, 2.0)], ops,
                    [Edge(ids[0], ids[1], 3.0), Edge(ids[1], ids[4], 1.5)])
    _same(dplace.solve(inst, "heft"))
    res = make_result(inst, "x", np.array([0, 1, 1, 0, 0, 1]), [np.array([0, 3, 4]), np.array([1, 2, 5])])
    _same(res, {"check": "valid"})


def test_compact_per_op_entries_hold_the_same_value(monkeypatch):
    """From ``COMPACT_FROM`` ops the per-op entries are one orjson line each: the same JSON value."""
    import dplace.result as result_mod

    monkeypatch.setattr(result_mod, "COMPACT_FROM", 0)
    rng = random.Random(5)
    for _ in range(10):
        inst = random_instance(rng, n_ops=rng.randint(1, 12), comm=rng.choice(["parallel", "sequential"]))
        res = dplace.solve(inst, rng.choice(["heft", "m_etf", "dpos"]))
        text = b"".join(x if isinstance(x, bytes) else x.encode() for x in res.json_chunks({"check": "valid"}))
        assert json.loads(text) == {**res.to_dict(), "check": "valid"}
        assert text.count(b"\n") < 60  # one line per entry
    ids = ['a", "b', "q\\", 'é"x', "tab\there"]
    inst = Instance("w", [Device("d0", 100), Device('d"1', 100, 2.0)], [Op(x, 1e17 + i) for i, x in enumerate(ids)],
                    [Edge(ids[0], ids[1], 3.0)])
    res = dplace.solve(inst, "heft")
    text = b"".join(x if isinstance(x, bytes) else x.encode() for x in res.json_chunks())
    assert json.loads(text) == res.to_dict()


def test_compact_transfers_from_the_compiled_simulators_arrays(monkeypatch):
    """An array schedule's transfers are written from its columns, before any row tuple is built: the same
    JSON value as ``to_dict``."""
    import dplace.result as result_mod
    from dplace.schedule.simulate import ArraySchedule

    monkeypatch.setattr(result_mod, "COMPACT_FROM", 0)
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    rng = random.Random(8)
    for _ in range(6):
        inst = random_instance(rng, n_ops=rng.randint(2, 12), comm="parallel")
        res = dplace.solve(inst, "heft")
        assert isinstance(res.schedule, ArraySchedule)
        text = b"".join(x if isinstance(x, bytes) else x.encode() for x in res.json_chunks())
        assert "transfers" not in res.schedule.__dict__  # written from the arrays
        assert json.loads(text) == res.to_dict()


def _orjson_entry(res, key):
    """The per-op entry ``key`` of ``res.to_dict()`` as ``orjson.dumps`` writes it: the reference of the
    column-joined compact writer."""
    import orjson

    return orjson.dumps(res.to_dict()[key])


def test_compact_entries_are_the_bytes_orjson_writes_for_the_dicts():
    """Each compact per-op entry, joined from columns, is byte for byte ``orjson.dumps`` of the entry of
    ``to_dict``: random results, both comm modes, given orders and the simulator's, compiled and Python
    schedules, odd names (quotes, backslashes, control and non-ASCII characters), empty transfers."""
    from dplace.result import _Nums, _orjson_inner, _rows

    rng = random.Random(11)
    cases = []
    for i in range(30):
        inst = random_instance(rng, n_ops=rng.randint(1, 14), comm=rng.choice(["parallel", "sequential"]))
        cases.append(dplace.solve(inst, rng.choice(["heft", "m_etf", "dpos", "single", "m_topo"])))
    ids = ['a", "b', "q\\", 'é"x', "plain", '\\", "', "tab\there", "\x01", "\\", "\u2028", 'x","y', "z\n"]
    for names in (ids, ["a", "b,c", "é", "d:e", "{f}", "[g]", "h i", "j", "k", "l", "m"]):
        ops = [Op(x, float(i % 3) + 0.1 * i) for i, x in enumerate(names)]
        inst = Instance("w", [Device("d0", 100), Device('d"1', 100, 2.0), Device("é", 100)], ops,
                        [Edge(names[0], names[1], 3.0), Edge(names[1], names[4], 1.5), Edge(names[2], names[9], 7)])
        cases.append(dplace.solve(inst, "heft"))
        cases.append(make_result(inst, "x", np.array([0, 1, 1, 0, 0, 1, 2, 2, 0, 1, 2]),
                                 [np.array([0, 3, 4, 8]), np.array([1, 2, 5, 9]), np.array([6, 7, 10])]))
        cases.append(make_result(inst, "x", [0] * len(names)))  # no transfers
    cases = [res for res in cases if res.placement is not None]  # (no answer: no per-op entries)
    assert len(cases) >= 25
    for res in cases:
        inner = _orjson_inner(res.instance.columns.ids)
        for key in ("placement", "order", "schedule", "transfers"):
            assert b"".join(res._per_op_compact(key, inner)) == _orjson_entry(res, key), key
    pieces = [b"[", [b"a", b"b", b"c", b"d", b"e"], b",", _Nums([1, 2.5, 3, 4e20, 5])]  # in blocks of 2 rows
    assert list(_rows(pieces, b"]", b"<", b">", rows=2, chunk=3)) == [b"<[a,1],[b,2.5", b"],[c,3],[d,4e+20", b"],[e,5]>"]
    assert list(_rows(pieces, b"]", b"<", b">")) == [b"<[a,1],[b,2.5],[c,3],[d,4e+20],[e,5]>"]
    assert list(_rows([b"[", [], b",", _Nums([])], b"]", b"<", b">")) == [b"<>"]
