"""The columnar instance form: a ``.npz`` (numpy arrays, no pickles) beside the ``dplace-instance/1`` JSON.

Same content as the JSON (``dplace convert instance`` turns one into the other): per-op arrays ``time``
(µs at speed 1; NaN where the op has per-device times, kept in the meta), ``memory``, ``type``/``pin``/
``colocation`` as codes into name lists (-1: none), per-edge ``src``/``dst`` (op indices) and ``bytes``;
op ids as one NUL-separated UTF-8 blob; everything else (devices, links, comm, names, per-device times,
unknown fields) in a JSON ``meta`` entry, unknown op/edge fields in ``op_extra``/``edge_extra`` JSON,
read only when ``inst.ops``/``inst.edges`` is asked for. Loading builds the instance's integer views
straight from the arrays (:meth:`dplace.instance.model.Instance.from_columns`).
"""
from __future__ import annotations

import io as _io
import json
import os
import zipfile
from typing import Any, Mapping

import numpy as np

from .columns import Columns, forward_of_index
from ..errors import InvalidInstanceError
from .files import write_atomic
from .model import Device, Instance, Link

FORMAT = "dplace-instance-npz/1"
_SEP = "\x00"


def _text(arr: Any) -> str:
    return arr.tobytes().decode("utf-8")


def _blob(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def _codes(values: Any, names: list[str] | None) -> tuple[np.ndarray, list[str]]:
    """Per-op codes (-1: None) and the name list, from names per op or (codes, names)."""
    if names is not None:
        return np.asarray(values, dtype=np.int32), list(names)
    table: dict[Any, int] = {}
    codes = np.fromiter((-1 if v is None else table.setdefault(v, len(table)) for v in values), dtype=np.int32,
                        count=len(values))
    return codes, [str(k) for k in table]


class _LazyJSON:
    """index -> unknown fields, parsed from JSON text when first asked for (``items``)."""

    def __init__(self, text: str) -> None:
        self._text = text

    def items(self):
        return ((int(k), v) for k, v in json.loads(self._text).items())

    def may_contain(self, word: str) -> bool:
        """False when no field can be named ``word`` (the text does not hold it): no parse needed."""
        return word in self._text


def instance_to_npz_bytes(inst: Instance) -> bytes:
    """The ``.npz`` form of ``inst``."""
    c = inst._cols
    ids = c.ids
    if any(_SEP in x for x in ids):
        raise InvalidInstanceError("npz: an op id contains a NUL character; keep this instance as JSON")
    if isinstance(c.time, np.ndarray):
        time, time_map = c.time, dict(c.time_map)
    else:
        time_map = {o: dict(t) for o, t in enumerate(c.time) if isinstance(t, Mapping)}
        time = np.array([np.nan if o in time_map else t for o, t in enumerate(c.time)], dtype=np.float64)
    mem = np.asarray(c.mem)
    if mem.dtype.kind not in "iu":
        mem = mem.astype(np.float64)
    types, type_names = _codes(c.type, c.type_names)
    pins, pin_names = _codes(c.pin, c.pin_names)
    colocs, coloc_names = _codes(c.coloc, c.coloc_names)
    meta = {
        "format": FORMAT, "name": inst.name,
        "devices": [{"name": d.name, "memory": d.memory, "speed": d.speed} for d in inst.devices],
        "links": {"latency": inst.link.latency, "bandwidth": inst.link.bandwidth,
                  "pairs": [{"src": a, "dst": b, "latency": lk.latency, "bandwidth": lk.bandwidth}
                            for (a, b), lk in inst.pairs.items()]},
        "comm": inst.comm, **({"transfer_cpu": inst.transfer_cpu} if inst.transfer_cpu else {}), "extra": inst.extra, "type_names": type_names, "pin_names": pin_names,
        "coloc_names": coloc_names, "time_map": {str(o): t for o, t in time_map.items()},
    }
    arrays = {
        "meta": _blob(json.dumps(meta)), "ids": _blob(_SEP.join(ids)), "time": time, "memory": mem,
        "type": types, "pin": pins, "colocation": colocs,
        "src": np.asarray(inst.esrc, dtype=np.int32 if inst.n < 2**31 else np.int64),
        "dst": np.asarray(inst.edst, dtype=np.int32 if inst.n < 2**31 else np.int64),
        "bytes": np.asarray(inst.ebytes, dtype=np.float64),
        "op_extra": _blob(json.dumps({str(o): x for o, x in c.op_extra.items()})),
        "forward_of": forward_of_index(inst).astype(np.int32 if inst.n < 2**31 else np.int64),
        "edge_extra": _blob(json.dumps({str(e): x for e, x in c.edge_extra.items()})),
    }
    buf = _io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def save_npz(inst: Instance, path: str | os.PathLike) -> None:
    """Write ``inst`` as ``.npz`` atomically."""
    write_atomic(path, instance_to_npz_bytes(inst))


def load_npz(path: str | os.PathLike) -> Instance:
    """Load and validate a ``.npz`` instance; errors are one line naming the file or field."""
    where = f"instance {str(path)!r}"
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise InvalidInstanceError(f"{where}: no such file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise InvalidInstanceError(f"{where}: not a readable .npz ({exc.__class__.__name__})") from None
    need = ("meta", "ids", "time", "memory", "type", "pin", "colocation", "src", "dst", "bytes")
    for k in need:
        if k not in arrays:
            raise InvalidInstanceError(f"{where}: missing array {k!r}")
    try:
        meta = json.loads(_text(arrays["meta"]))
    except (ValueError, UnicodeDecodeError):
        raise InvalidInstanceError(f"{where}: meta is not JSON") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        fmt = meta.get("format") if isinstance(meta, dict) else None
        raise InvalidInstanceError(f"{where}: format must be {FORMAT!r}, got {fmt!r}")
    text = _text(arrays["ids"])
    ids = text.split(_SEP) if text or len(arrays["time"]) else []
    n = len(ids)
    for k in ("time", "memory", "type", "pin", "colocation"):
        if arrays[k].ndim != 1 or len(arrays[k]) != n:
            raise InvalidInstanceError(f"{where}: array {k!r} must have one entry per op ({n}), "
                                       f"got shape {arrays[k].shape}")
    ne = len(arrays["src"])
    for k in ("src", "dst", "bytes"):
        if arrays[k].ndim != 1 or len(arrays[k]) != ne:
            raise InvalidInstanceError(f"{where}: array {k!r} must have one entry per edge ({ne}), "
                                       f"got shape {arrays[k].shape}")
        if k != "bytes" and arrays[k].dtype.kind not in "iu":
            raise InvalidInstanceError(f"{where}: array {k!r} must hold op indices, got {arrays[k].dtype}")
    try:
        devices = [Device(d["name"], d["memory"], d.get("speed", 1.0)) for d in meta["devices"]]
        lk = meta["links"]
        link = Link(lk["latency"], lk["bandwidth"])
        pairs = {(p["src"], p["dst"]): Link(p["latency"], p["bandwidth"]) for p in lk.get("pairs", [])}
        time_map = {int(o): t for o, t in meta.get("time_map", {}).items()}
        names = {k: list(meta[k]) for k in ("type_names", "pin_names", "coloc_names")}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidInstanceError(f"{where}: meta is incomplete ({exc.__class__.__name__}: {exc})") from None
    fwd = arrays.get("forward_of")  # absent from files written before it was stored
    if fwd is not None and (fwd.ndim != 1 or len(fwd) != n or fwd.dtype.kind not in "iu"
                            or (n and (fwd.min() < -1 or fwd.max() >= n))):
        raise InvalidInstanceError(f"{where}: array 'forward_of' must hold one op index -1..{n - 1} per op")
    for k, col in (("type_names", "type"), ("pin_names", "pin"), ("coloc_names", "colocation")):
        codes = arrays[col]
        if codes.dtype.kind not in "iu" or (n and (codes.min() < -1 or codes.max() >= len(names[k]))):
            raise InvalidInstanceError(f"{where}: array {col!r} must hold codes -1..{len(names[k]) - 1}")
    cols = Columns(
        ids=ids, time=arrays["time"], mem=arrays["memory"], type=arrays["type"], pin=arrays["pin"],
        coloc=arrays["colocation"], src=arrays["src"], dst=arrays["dst"], nbytes=arrays["bytes"],
        time_map=time_map, type_names=names["type_names"], pin_names=names["pin_names"],
        coloc_names=names["coloc_names"],
        op_extra=_LazyJSON(_text(arrays["op_extra"])) if "op_extra" in arrays else {},
        edge_extra=_LazyJSON(_text(arrays["edge_extra"])) if "edge_extra" in arrays else {},
        forward_of=None if fwd is None else fwd.astype(np.int64),
    )
    return Instance.from_columns(meta.get("name", "instance"), devices, cols, link=link, pairs=pairs,
                                 comm=meta.get("comm", "parallel"), extra=meta.get("extra") or {},
                                 transfer_cpu=meta.get("transfer_cpu", 0.0))


RESULT_FORMAT = "dplace-result-npz/1"


def result_to_npz_bytes(res: Any, extra: Mapping[str, Any] | None = None) -> bytes:
    """A Result as ``.npz``: what :meth:`dplace.result.Result.to_dict` holds, the per-op entries as arrays
    (``placement`` device index per op, ``order_ptr``/``order`` op indices per device, ``start``/``end``,
    ``transfers`` as six columns), the rest as JSON in ``meta``; :func:`result_dict_from_npz` gives the dict
    back (``dplace evaluate`` reads either form)."""
    data = res.to_dict(per_op=False)
    data.update(extra or {})
    arrays: dict[str, np.ndarray] = {}
    s = res.schedule
    if res.placement is not None and s is not None:
        order = res.order if res.order is not None else s.order
        arrays["placement"] = np.asarray(res.placement, dtype=np.int64)
        arrays["order_ptr"] = np.cumsum([0] + [len(x) for x in order]).astype(np.int64)
        arrays["order"] = np.asarray([o for ops in order for o in ops], dtype=np.int64)
        arrays["start"] = np.asarray(s.start, dtype=np.float64)
        arrays["end"] = np.asarray(s.end, dtype=np.float64)
        cols = list(zip(*s.transfers)) or [()] * 6
        for k, col, dt in zip(("t_op", "t_src", "t_dst", "t_start", "t_end", "t_bytes"), cols,
                              (np.int64, np.int64, np.int64, np.float64, np.float64, np.float64)):
            arrays[k] = np.asarray(col, dtype=dt)
        for k in ("placement", "order", "schedule", "transfers"):
            data.pop(k, None)
    meta = {"format": RESULT_FORMAT, "ids": res.instance.columns.ids if "placement" in arrays else [],
            "devices": [d.name for d in res.instance.devices], "result": data}
    arrays["meta"] = _blob(json.dumps(meta))
    buf = _io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def result_dict_from_npz(path: str | os.PathLike) -> dict[str, Any]:
    """The ``dplace-result/1`` dict of a result written by :func:`result_to_npz_bytes`; errors are one
    line naming the file."""
    where = f"result {str(path)!r}"
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(_text(arrays["meta"]))
        data, ids, dn = dict(meta["result"]), meta["ids"], meta["devices"]
        if meta.get("format") != RESULT_FORMAT:
            raise InvalidInstanceError(f"{where}: format must be {RESULT_FORMAT!r}, got {meta.get('format')!r}")
        if "placement" in arrays:
            pl = arrays["placement"].tolist()
            ptr, flat = arrays["order_ptr"].tolist(), arrays["order"].tolist()
            data["placement"] = {o: dn[d] for o, d in zip(ids, pl)}
            data["order"] = {dn[d]: [ids[o] for o in flat[ptr[d]:ptr[d + 1]]] for d in range(len(ptr) - 1)}
            data["schedule"] = [{"op": o, "device": dn[d], "start": st, "end": en}
                                for o, d, st, en in zip(ids, pl, arrays["start"].tolist(), arrays["end"].tolist())]
            cols = [arrays[k].tolist() for k in ("t_op", "t_src", "t_dst", "t_start", "t_end", "t_bytes")]
            data["transfers"] = [{"op": ids[p], "src": dn[a], "dst": dn[b], "start": st, "end": en, "bytes": nb}
                                 for p, a, b, st, en, nb in zip(*cols)]
    except FileNotFoundError:
        raise InvalidInstanceError(f"{where}: no such file") from None
    except InvalidInstanceError:
        raise
    except (OSError, ValueError, KeyError, IndexError, TypeError, zipfile.BadZipFile, EOFError) as exc:
        raise InvalidInstanceError(f"{where}: not a readable result .npz ({exc.__class__.__name__})") from None
    return data
