"""JSON I/O: the ``dplace-instance/1`` schema, loading with one-line errors, atomic writes.

Instances are read and written here, in JSON or in the columnar form of :mod:`dplace.instance.npz`; imports go
io -> npz -> model -> columns -> records, and io and npz write through :mod:`dplace.instance.files`.

Converters from other formats and the generators live in :mod:`dplace.formats`.
"""
from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from .columns import Columns, RawExtras
from ..errors import InvalidInstanceError
from .files import write_atomic, write_atomic_many  # noqa: F401 (re-exported: outputs are written through io)
from .model import COMM_MODES, FORMAT, Device, Edge, Instance, Link, Op

_OP_KEYS = {"id", "time", "memory", "type", "colocation", "device"}
_EDGE_KEYS = {"src", "dst", "bytes"}
_TOP_KEYS = {"format", "name", "devices", "links", "comm", "transfer_cpu", "ops", "edges"}


def _req(obj: Any, key: str, where: str) -> Any:
    if not isinstance(obj, dict):
        raise InvalidInstanceError(f"{where} must be an object, got {type(obj).__name__}")
    if key not in obj:
        raise InvalidInstanceError(f"{where}: missing field {key!r}")
    return obj[key]


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInstanceError(f"{where} must be a non-empty string, got {value!r}")
    return value


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise InvalidInstanceError(f"{where} must be a list, got {type(value).__name__}")
    return value


def _link(obj: Any, where: str) -> Link:
    if not isinstance(obj, dict):
        raise InvalidInstanceError(f"{where} must be an object, got {obj!r}")
    return Link(float(_numlike(_req(obj, "latency", where), f"{where}: latency")),
                float(_numlike(_req(obj, "bandwidth", where), f"{where}: bandwidth")))


def _numlike(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidInstanceError(f"{where} must be a number, got {v!r}")
    return v


def instance_from_dict(data: Any, own: bool = False) -> Instance:
    """Build and validate an :class:`Instance` from the parsed ``dplace-instance/1`` JSON object (``own``:
    ``data`` is the instance's alone, e.g. just read from a file, and is kept rather than copied)."""
    head = _header(data)
    raw_ops = _list(_req(data, "ops", "instance"), "ops")
    raw_edges = _list(data.get("edges", []), "edges")
    cols = _bulk_columns(raw_ops, raw_edges, own)
    if cols is not None:  # every op and edge plain: columns at once, Op/Edge objects on first use
        try:
            return Instance.from_columns(cols=cols, **head)
        except (InvalidInstanceError, TypeError):  # the loop below reads the file again and says what is wrong
            pass  # (or, where an edge names an op by a number, builds the instance)
    return Instance(ops=_ops_one_by_one(raw_ops), edges=_edges_one_by_one(raw_edges), **head)


def _header(data: Any) -> dict[str, Any]:
    """The arguments of :class:`Instance` other than the ops and edges, from the top level of a
    ``dplace-instance/1`` object (checked here; the rest by the instance)."""
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"instance must be a JSON object, got {type(data).__name__}")
    fmt = data.get("format")
    if fmt != FORMAT:
        raise InvalidInstanceError(f"format must be {FORMAT!r}, got {fmt!r}")
    name = str(data.get("name", "instance"))
    devices = []
    for i, dv in enumerate(_list(_req(data, "devices", "instance"), "devices")):
        where = f"devices[{i}]"
        dname = _str(_req(dv, "name", where), f"{where}: name")
        mem = _numlike(_req(dv, "memory", f"device {dname!r}"), f"device {dname!r}: memory")
        if isinstance(mem, float) and (math.isnan(mem) or math.isinf(mem)):
            raise InvalidInstanceError(f"device {dname!r}: memory must be finite, got {mem!r}")
        speed = _numlike(dv.get("speed", 1.0), f"device {dname!r}: speed")
        devices.append(Device(dname, mem, speed))
    links = data.get("links", {})
    if not isinstance(links, dict):
        raise InvalidInstanceError(f"links must be an object, got {links!r}")
    link = Link(
        _numlike(links.get("latency", 10.0), "links: latency"),
        _numlike(links.get("bandwidth", 12000.0), "links: bandwidth"),
    )
    pairs = {}
    for i, p in enumerate(_list(links.get("pairs", []), "links.pairs")):
        where = f"links.pairs[{i}]"
        a = _str(_req(p, "src", where), f"{where}: src")
        b = _str(_req(p, "dst", where), f"{where}: dst")
        pairs[(a, b)] = Link(
            _numlike(p.get("latency", link.latency), f"{where}: latency"),
            _numlike(p.get("bandwidth", link.bandwidth), f"{where}: bandwidth"),
        )
    comm = data.get("comm", "parallel")
    if comm not in COMM_MODES:
        raise InvalidInstanceError(f"comm must be one of {', '.join(COMM_MODES)}, got {comm!r}")
    transfer_cpu = _numlike(data.get("transfer_cpu", 0.0), "transfer_cpu")
    top_extra = {k: v for k, v in data.items() if k not in _TOP_KEYS}
    return dict(name=name, devices=devices, link=link, pairs=pairs, comm=comm, extra=top_extra,
                transfer_cpu=transfer_cpu)


def _ops_one_by_one(raw_ops: list) -> list[Op]:
    ops = []
    for i, od in enumerate(raw_ops):
        where = f"ops[{i}]"
        oid = _req(od, "id", where)
        if isinstance(oid, (int, float)) and not isinstance(oid, bool):
            oid = str(oid)
        oid = _str(oid, f"{where}: id")
        t = _req(od, "time", f"op {oid!r}")
        if isinstance(t, dict):
            t = {str(k): _numlike(v, f"op {oid!r}: time[{k!r}]") for k, v in t.items()}
        else:
            _numlike(t, f"op {oid!r}: time")
        memv = _numlike(od.get("memory", 0), f"op {oid!r}: memory")
        coloc = od.get("colocation")
        dev = od.get("device")
        if coloc is not None and not isinstance(coloc, (str, int)):
            raise InvalidInstanceError(f"op {oid!r}: colocation must be a string, got {coloc!r}")
        if dev is not None and not isinstance(dev, str):
            raise InvalidInstanceError(f"op {oid!r}: device must be a string, got {dev!r}")
        extra = {k: v for k, v in od.items() if k not in _OP_KEYS}
        ops.append(Op(oid, t, memv, od.get("type"), None if coloc is None else str(coloc), dev, extra))
    return ops


def _edges_one_by_one(raw_edges: list) -> list[Edge]:
    edges = []
    for i, ed in enumerate(raw_edges):
        where = f"edges[{i}]"
        src = _req(ed, "src", where)
        dst = _req(ed, "dst", where)
        src = str(src) if isinstance(src, (int, float)) and not isinstance(src, bool) else _str(src, f"{where}: src")
        dst = str(dst) if isinstance(dst, (int, float)) and not isinstance(dst, bool) else _str(dst, f"{where}: dst")
        nbytes = _numlike(ed.get("bytes", 0), f"edge {src!r}->{dst!r}: bytes")
        extra = {k: v for k, v in ed.items() if k not in _EDGE_KEYS}
        edges.append(Edge(src, dst, nbytes, extra))
    return edges


def _bulk_columns(raw_ops: list, raw_edges: list, own: bool = False) -> Columns | None:
    """The ops' and edges' columns when every op and edge is plain — an object whose ``id``/``src``/``dst``
    are non-empty strings, ``time``, ``memory`` and ``bytes`` numbers (not bools, ``time`` not per
    device), ``colocation`` and ``device`` strings or absent — equal to what the per-op loop of
    :func:`instance_from_dict` builds; None otherwise (the loop then checks each and names what is wrong).
    For a file's objects (``own``) ``src``/``dst`` are left to the lookup among the ids, whose failure also
    sends the caller to the loop. A list comprehension per field instead of a call per field: 8x faster on large graphs. ``own``: the
    objects belong to the instance (read from a file): their unknown fields are collected on first use."""
    if not (all(type(x) is dict for x in raw_ops) and all(type(x) is dict for x in raw_edges)):
        return None
    ids = [od.get("id") for od in raw_ops]
    time = [od.get("time") for od in raw_ops]
    mem = [od.get("memory", 0) for od in raw_ops]
    coloc = [od.get("colocation") for od in raw_ops]
    pin = [od.get("device") for od in raw_ops]
    src = [ed.get("src") for ed in raw_edges]
    dst = [ed.get("dst") for ed in raw_edges]
    nbytes = [ed.get("bytes", 0) for ed in raw_edges]
    num, text, opt = {int, float}, {str}, {str, type(None)}
    if not (set(map(type, ids)) <= text and set(map(type, time)) <= num and set(map(type, mem)) <= num
            and set(map(type, nbytes)) <= num and set(map(type, coloc)) <= opt and set(map(type, pin)) <= opt
            and all(ids)):
        return None
    # ``src``/``dst`` of a file (``own``) are checked by looking them up among the ids (non-empty strings):
    # a JSON value equal to a string is that string; anything else fails there and the caller falls back
    if not own and not (set(map(type, src)) <= text and set(map(type, dst)) <= text and all(src) and all(dst)):
        return None
    if own:
        op_extra: Any = RawExtras(raw_ops, _OP_KEYS)
        edge_extra: Any = RawExtras(raw_edges, _EDGE_KEYS)
    else:
        op_extra = {o: {k: v for k, v in od.items() if k not in _OP_KEYS}
                    for o, od in enumerate(raw_ops) if not od.keys() <= _OP_KEYS}
        edge_extra = {e: {k: v for k, v in ed.items() if k not in _EDGE_KEYS}
                      for e, ed in enumerate(raw_edges) if not ed.keys() <= _EDGE_KEYS}
    return Columns(ids=ids, time=time, mem=mem, type=[od.get("type") for od in raw_ops], pin=pin, coloc=coloc,
                   src=src, dst=dst, nbytes=nbytes, op_extra=op_extra, edge_extra=edge_extra)


def instance_to_dict(inst: Instance) -> dict[str, Any]:
    """The ``dplace-instance/1`` JSON object of ``inst`` (round-trips through :func:`instance_from_dict`)."""
    out: dict[str, Any] = {"format": FORMAT, "name": inst.name}
    out["devices"] = [{"name": d.name, "memory": d.memory, "speed": d.speed} for d in inst.devices]
    links: dict[str, Any] = {"latency": inst.link.latency, "bandwidth": inst.link.bandwidth}
    if inst.pairs:
        links["pairs"] = [
            {"src": a, "dst": b, "latency": lk.latency, "bandwidth": lk.bandwidth}
            for (a, b), lk in inst.pairs.items()
        ]
    out["links"] = links
    out["comm"] = inst.comm
    if inst.transfer_cpu:  # written only when in use: instances without it stay byte-identical
        out["transfer_cpu"] = inst.transfer_cpu
    ops = []
    for op in inst.ops:
        od: dict[str, Any] = {"id": op.id, "time": dict(op.time) if isinstance(op.time, dict) else op.time,
                              "memory": op.memory}
        if op.type is not None:
            od["type"] = op.type
        if op.colocation is not None:
            od["colocation"] = op.colocation
        if op.device is not None:
            od["device"] = op.device
        od.update(op.extra)
        ops.append(od)
    out["ops"] = ops
    out["edges"] = [dict({"src": e.src, "dst": e.dst, "bytes": e.bytes}, **e.extra) for e in inst.edges]
    out.update(inst.extra)
    return out


def read_text(path: str | os.PathLike, what: str = "file") -> str:
    """The text of ``path``; a missing or unreadable file is a one-line error naming it."""
    p = Path(path)
    try:
        return p.read_text()
    except FileNotFoundError:
        raise InvalidInstanceError(f"{what} {str(p)!r}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInstanceError(f"{what} {str(p)!r}: cannot read ({exc.__class__.__name__})") from None


def read_json(path: str | os.PathLike, what: str = "file") -> Any:
    """The JSON value in ``path``; unreadable or malformed files are a one-line error naming it.

    Read by orjson (:func:`fast_loads`) where it gives the value :func:`json.loads` gives; otherwise (an
    error, a long integer, no orjson) the text is read and parsed as before, so the errors are the same."""
    return _json_of(path, _read_bytes(path, what), what)


def _read_bytes(path: str | os.PathLike, what: str) -> bytes | None:
    """The bytes of ``path``; None where it cannot be read (:func:`read_text` then names the error)."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InvalidInstanceError(f"{what} {str(path)!r}: no such file") from None
    except OSError:
        return None


def _json_of(path: str | os.PathLike, data: bytes | None, what: str) -> Any:
    """:func:`read_json` of the file ``path`` whose bytes are ``data`` (None: unreadable)."""
    value = fast_loads(data) if data is not None else _SLOW
    if value is not _SLOW:
        return value
    del data
    return parse_json(read_text(path, what), f"{what} {str(path)!r}")


def _loads_part(raw: Any) -> Any:
    """``json.loads`` of a part of a file whose whole text was checked (UTF-8, JSON syntax)."""
    raw = bytes(raw)
    value = fast_loads(raw)
    return parse_json(raw, "instance") if value is _SLOW else value


def _typed_instance(data: bytes) -> Instance | None:
    """The instance in the JSON text ``data`` read by the typed decoder (:mod:`dplace.instance.typed`), or
    None wherever the reading as before could differ (the file is then read that way: the same instance or
    the same one-line error)."""
    try:  # no check for runs of 19 digits, as fast_loads makes for orjson: msgspec reads them as json does
        from .typed import typed_columns
    except ImportError:  # pragma: no cover - pinned
        return None
    got = typed_columns(data, _loads_part, _OP_KEYS, _EDGE_KEYS)
    if got is None:
        return None
    top, cols = got
    data = {}
    for k, raw in top.items():
        value = fast_loads(bytes(raw))
        if value is _SLOW:
            return None
        data[k] = value
    try:
        return Instance.from_columns(cols=cols, **_header(data))
    except (InvalidInstanceError, TypeError):
        return None


_SLOW = object()  # fast_loads: json.loads decides
_DIGITS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))  # digits -> "0", the rest -> " "
_LONG = b"0" * 19  # a run of 19 digits: an integer orjson may read as a float (from 2**64), json exactly


def fast_loads(data: bytes) -> Any:
    """``json.loads(data)`` by orjson (4-5x faster on large files), or ``_SLOW`` where the two could differ
    and ``json.loads`` must decide: orjson is not installed, it finds an error (malformed JSON, NaN or
    Infinity literals, lone surrogates, deep nesting: the error message is json's), or the text has a run
    of 19 or more digits (orjson reads integers from 2**64 as floats; json keeps them exact, up to
    4,300 digits). orjson parses floats correctly rounded, as json does (tests compare)."""
    try:
        import orjson
    except ImportError:  # pragma: no cover - pinned
        return _SLOW
    if data.translate(_DIGITS).find(_LONG) >= 0:
        return _SLOW
    try:
        return orjson.loads(data)
    except (orjson.JSONDecodeError, RecursionError):
        return _SLOW


def parse_json(text: str | bytes, where: str) -> Any:
    """``json.loads(text)``; malformed JSON, nesting deeper than Python's recursion limit and integers
    of more digits than Python converts are one-line errors starting with ``where``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInstanceError(f"{where}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except RecursionError:
        raise InvalidInstanceError(f"{where}: JSON nested too deeply to read (more than about {sys.getrecursionlimit()} levels)") \
            from None
    except ValueError as exc:  # e.g. an integer of more than sys.get_int_max_str_digits() digits
        raise InvalidInstanceError(f"{where}: JSON value out of range ({str(exc).splitlines()[0][:120]})") from None


def load_instance(path: str | os.PathLike) -> Instance:
    """Load and validate a ``dplace-instance/1`` file (JSON, or its columnar ``.npz`` form); errors name the
    field and value."""
    if str(path).endswith(".npz"):
        from .npz import load_npz

        return load_npz(path)
    from .columns import gc_paused

    with gc_paused():
        data = _read_bytes(path, "instance")
        inst = _typed_instance(data) if data is not None else None
        if inst is not None:
            return inst
        return instance_from_dict(_json_of(path, data, "instance"), own=True)


def check_outputs(outputs: dict[str, str | os.PathLike], inputs: dict[str, str | os.PathLike]) -> None:
    """Refuse, before any work, an output path that is one of the inputs (it would be overwritten) or
    that two outputs share. Keys name them in the one-line error (``--out``, ``instance``)."""
    def same(a: str | os.PathLike, b: str | os.PathLike) -> bool:
        try:
            return os.path.samefile(a, b)
        except OSError:
            return Path(a).resolve() == Path(b).resolve()

    seen: dict[str, str | os.PathLike] = {}
    for flag, path in outputs.items():
        for name, src in inputs.items():
            if src is not None and same(path, src):
                raise InvalidInstanceError(f"{flag} {str(path)!r}: is the input {name} file; choose another output file")
        for other, opath in seen.items():
            if same(path, opath):
                raise InvalidInstanceError(f"{flag} {str(path)!r}: is also given to {other}; choose another output file")
        seen[flag] = path


def save_json(path: str | os.PathLike, obj: Any, indent: int | None = 1) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (parent directories are created)."""
    write_atomic(path, json.dumps(obj, indent=indent) + "\n")


def save_instance(inst: Instance, path: str | os.PathLike) -> None:
    """Write ``inst`` as a ``dplace-instance/1`` file (its columnar form to a ``.npz`` path, else JSON),
    atomically (parent directories are created); :func:`load_instance` reads it back to an equal instance."""
    if str(path).endswith(".npz"):
        from .npz import save_npz

        save_npz(inst, path)
    else:
        save_json(path, instance_to_dict(inst))
