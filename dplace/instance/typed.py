"""An instance file's ops and edges decoded straight into columns (msgspec, typed): no dict per op or edge.

:func:`typed_columns` reads the plain files (every op's ``id``/``type``/``colocation``/``device`` strings,
``time``/``memory`` numbers, every edge's ``src``/``dst`` strings and ``bytes`` number) at about twice
orjson's speed with a third of its Python objects. It answers None wherever it is unsure, and the caller
then reads the file as before (orjson or json, the per-op checks, the one-line errors): a field of another
type, a text that is not UTF-8, a JSON error of any kind. Unknown fields of ops and edges are skipped by the
typed decoder (it still checks their syntax) and parsed, as before, when first asked for (:class:`RawExtras`
with a loader); ``forward_of``, which methods read, is decoded too (a string) and answers ``RawExtras.field``
without that parse.
"""
from __future__ import annotations

from operator import attrgetter
from typing import Any, Callable, Optional, Union

import msgspec

from .columns import Columns, RawExtras


class _Op(msgspec.Struct):
    id: str
    time: Union[int, float]
    memory: Union[int, float] = 0
    type: Optional[str] = None
    colocation: Optional[str] = None
    device: Optional[str] = None
    forward_of: Optional[str] = msgspec.UNSET  # an unknown field that methods read (RawExtras.field)


class _Edge(msgspec.Struct):
    src: str
    dst: str
    bytes: Union[int, float] = 0


_TOP = msgspec.json.Decoder(dict[str, msgspec.Raw])
_OPS = msgspec.json.Decoder(list[_Op])
_EDGES = msgspec.json.Decoder(list[_Edge])


def typed_columns(data: bytes, loads: Callable[[Any], Any], op_keys: set, edge_keys: set
                  ) -> tuple[dict[str, Any], Columns] | None:
    """(the top level's other fields, each as its raw JSON text; the ops' and edges' columns) of the JSON
    text ``data``, equal to what ``_bulk_columns`` of :mod:`dplace.instance.io` builds from the parsed
    file; None where unsure. ``loads`` parses a list of ops or edges (raw JSON text) when their unknown
    fields (those not in ``op_keys``/``edge_keys``) are first asked for."""
    if not data.isascii():
        try:
            data.decode("utf-8")  # the typed decoder does not check the bytes of the fields it skips
        except UnicodeDecodeError:
            return None
    try:
        top = _TOP.decode(data)
        ops_raw = top.pop("ops")
        edges_raw = top.pop("edges", None)
        ops = _OPS.decode(ops_raw)
        edges = _EDGES.decode(edges_raw) if edges_raw is not None else []
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, KeyError):
        return None
    ids = list(map(attrgetter("id"), ops))
    if not all(ids):
        return None
    cols = Columns(ids=ids, time=list(map(attrgetter("time"), ops)), mem=list(map(attrgetter("memory"), ops)),
                   type=list(map(attrgetter("type"), ops)), pin=list(map(attrgetter("device"), ops)),
                   coloc=list(map(attrgetter("colocation"), ops)),
                   src=list(map(attrgetter("src"), edges)), dst=list(map(attrgetter("dst"), edges)),
                   nbytes=list(map(attrgetter("bytes"), edges)),
                   op_extra=RawExtras(_later(loads, ops_raw), op_keys, text=ops_raw,
                                      fields={"forward_of": _present(map(attrgetter("forward_of"), ops))}),
                   edge_extra=RawExtras(_later(loads, edges_raw), edge_keys, text=edges_raw)
                   if edges_raw is not None else {})
    return top, cols


def _present(values: Any) -> list[tuple[int, Any]]:
    """(index, value) of the rows where the field is present."""
    unset = msgspec.UNSET
    return [(i, v) for i, v in enumerate(values) if v is not unset]


def _later(loads: Callable[[Any], Any], raw: Any) -> Callable[[], list]:
    return lambda: loads(raw)
