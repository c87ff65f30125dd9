"""An instance's ops and edges as columns: what :class:`dplace.instance.model.Instance` validates in bulk (numpy)
and indexes, whether they came as ``Op``/``Edge`` objects (JSON) or as arrays (``.npz``, no per-op
Python objects until ``inst.ops`` is asked for).

Bulk validation only says "all good"; on any doubt it defers to the per-op checks of
:mod:`dplace.instance.model`, which raise the one-line error naming the field and value.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from .records import Edge, Op


FREEZE_FROM = 100_000  # ops: from this size what was built is moved out of the collector's passes


@contextmanager
def gc_paused(freeze: bool = False):
    """Pause the cyclic garbage collector while many objects that stay alive are built (an instance's
    index lists, a parsed JSON file): on large graphs its passes over them cost more than the building.
    With ``freeze`` the objects alive then are left out of later passes (``gc.freeze``; refcounting
    still frees them, but cycles among them are never collected: only for large instances)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if freeze:
            gc.freeze()
        if was:
            gc.enable()


@dataclass
class Columns:
    """Ops and edges by column. ``time``: per op a number (µs at speed 1) or, for ops with per-device
    times, NaN in an array plus ``time_map[o]`` (the raw mapping); ``pin``/``coloc``: per op a name or
    None (lists), or int codes into ``pin_names``/``coloc_names`` with -1 for none (arrays); ``src``/``dst``:
    op names (lists) or op indices (arrays); ``op_extra``/``edge_extra``: index -> unknown fields."""

    ids: list[str]
    time: Any
    mem: Any
    type: Any
    pin: Any
    coloc: Any
    src: Any
    dst: Any
    nbytes: Any
    time_map: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    type_names: list[str] | None = None
    pin_names: list[str] | None = None
    coloc_names: list[str] | None = None
    op_extra: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    edge_extra: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    # per op the index of the op its ``forward_of`` field names (-1: none): read from a ``.npz`` that
    # stores it beside op_extra; None: not stored (:func:`forward_of_index` reads op_extra)
    forward_of: np.ndarray | None = None

    @classmethod
    def of_objects(cls, ops: Sequence[Any], edges: Sequence[Any]) -> "Columns":
        return cls(
            ids=[op.id for op in ops], time=[op.time for op in ops], mem=[op.memory for op in ops],
            type=[op.type for op in ops], pin=[op.device for op in ops], coloc=[op.colocation for op in ops],
            src=[ed.src for ed in edges], dst=[ed.dst for ed in edges], nbytes=[ed.bytes for ed in edges],
            op_extra={o: op.extra for o, op in enumerate(ops) if op.extra},
            edge_extra={e: ed.extra for e, ed in enumerate(edges) if ed.extra},
        )

    def make_ops(self) -> tuple:
        """The ``Op`` objects (built on first use for instances loaded from arrays)."""
        tm = self.time.tolist() if isinstance(self.time, np.ndarray) else self.time
        mem = self.mem.tolist() if isinstance(self.mem, np.ndarray) else self.mem
        types = self._names(self.type, self.type_names)
        colocs = self._names(self.coloc, self.coloc_names)
        pins = self._names(self.pin, self.pin_names)
        extra, tmap = dict(self.op_extra.items()), self.time_map
        return tuple(_frozen(Op, id=oid, time=tmap.get(o, tm[o]), memory=mem[o], type=types[o],
                             colocation=colocs[o], device=pins[o], extra=dict(extra.get(o, ())))
                     for o, oid in enumerate(self.ids))

    def types(self) -> list[Any]:
        """Per op its ``type`` (None: none), without building the ``Op`` objects."""
        return self._names(self.type, self.type_names)

    def extras_of(self, ops: Sequence[int]) -> dict[int, Mapping[str, Any]]:
        """The unknown fields of ``ops`` (index -> mapping; ops without any are left out), reading only
        those ops' rows while a file's extras are not collected yet (:class:`RawExtras`)."""
        x = self.op_extra
        if isinstance(x, RawExtras):
            return x.of(ops)
        found = x if isinstance(x, dict) else dict(x.items())
        return {o: found[o] for o in ops if o in found}

    def pin_codes(self, devices: list[str]) -> list[int]:
        """Per op the index in ``devices`` of the device it names as pinned (-1: none), as given."""
        where = {x: d for d, x in enumerate(devices)}
        return [-1 if x is None else where[x] for x in self._names(self.pin, self.pin_names)]

    @staticmethod
    def _names(col: Any, names: list[str] | None) -> list[Any]:
        if names is None:
            return list(col)
        table = list(names) + [None]  # code -1: none
        return [table[c] for c in col.tolist()]

    def make_edges(self) -> tuple:
        if isinstance(self.src, np.ndarray):
            ids = self.ids
            src = [ids[u] for u in self.src.tolist()]
            dst = [ids[v] for v in self.dst.tolist()]
        else:
            src, dst = self.src, self.dst
        nb = self.nbytes.tolist() if isinstance(self.nbytes, np.ndarray) else self.nbytes
        extra = dict(self.edge_extra.items())
        return tuple(_frozen(Edge, src=s, dst=d, bytes=b, extra=dict(extra.get(e, ())))
                     for e, (s, d, b) in enumerate(zip(src, dst, nb)))


def forward_of_index(inst: Any) -> np.ndarray:
    """Per op of ``inst`` the index of the other op its optional ``forward_of`` field names (-1: no
    field, or naming no other op): the stored column when there is one, else from the ops' unknown
    fields (JSON text of a ``.npz`` is parsed only if it holds the word). Shared: never change it (the
    instance keeps it once made)."""
    cols = inst.columns
    if cols.forward_of is not None:
        return cols.forward_of
    kept = inst.__dict__.get("_forward_of_index")
    if kept is None:
        kept = inst.__dict__["_forward_of_index"] = _forward_of_from_extras(inst, cols)
    return kept


def _forward_of_from_extras(inst: Any, cols: Columns) -> np.ndarray:
    out = np.full(inst.n, -1, dtype=np.int64)
    extras = cols.op_extra
    if not getattr(extras, "may_contain", lambda word: True)("forward_of"):
        return out
    index = inst.op_index
    field = getattr(extras, "field", None)  # one field of a file's rows, without collecting all the others
    pairs = field("forward_of") if field is not None else ((o, ex.get("forward_of") if ex else None)
                                                           for o, ex in extras.items())
    for o, f in pairs:
        if f is None:
            continue
        fi = index.get(str(f))
        if fi is not None and fi != o:
            out[o] = fi
    return out


class RawExtras:
    """index -> unknown fields (those not in ``known``) of the JSON objects ``rows`` (ops or edges read
    from a file, owned by the instance), collected when first asked for (``items``): most methods never
    read them, and collecting them is a third of building a large instance's columns. ``rows`` may be a
    function that gives them, called once when they are first needed (``text``: the JSON text they are
    parsed from, which :meth:`may_contain` searches instead; ``fields``: for some keys the (index, value) pairs
    :meth:`field` gives, read without parsing the rows)."""

    def __init__(self, rows: list | Callable[[], list], known: set, text: Any = None,
                 fields: dict[str, list[tuple[int, Any]]] | None = None) -> None:
        self._load = rows if callable(rows) else None
        self._rows_list: list = [] if callable(rows) else rows
        self._known, self._text = known, text
        self._fields = fields or {}  # what :meth:`field` gives for these keys, known before any parse
        self._found: list[tuple[int, dict[str, Any]]] | None = None

    @property
    def _rows(self) -> list:
        if self._load is not None:
            self._rows_list, self._load = self._load(), None
        return self._rows_list

    @_rows.setter
    def _rows(self, rows: list) -> None:
        self._rows_list, self._load, self._text = rows, None, None

    def items(self) -> Iterator[tuple[int, dict[str, Any]]]:
        if self._found is None:  # once; the rows are then no longer needed
            known = self._known
            self._found = [(i, {k: v for k, v in r.items() if k not in known})
                           for i, r in enumerate(self._rows) if not r.keys() <= known]
            self._rows = []
        return iter(self._found)

    def field(self, key: str) -> list[tuple[int, Any]]:
        """(index, value) of the rows that hold the unknown field ``key``, in row order: what ``items``
        gives for that one field, without collecting the others (a 36k-op file's ``forward_of``: 4 ms
        against 0.1 s for every op's unknown fields)."""
        if key in self._known:
            return []
        if key in self._fields:
            return list(self._fields[key])
        if self._found is not None:
            return [(i, ex[key]) for i, ex in self._found if key in ex]
        return [(i, r[key]) for i, r in enumerate(self._rows) if key in r]

    def of(self, ops: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The unknown fields of ``ops`` alone (ops without any left out), the rest not collected."""
        if self._found is not None:
            found = dict(self._found)
            return {o: found[o] for o in ops if o in found}
        known, rows = self._known, self._rows
        return {o: {k: v for k, v in rows[o].items() if k not in known} for o in ops if not rows[o].keys() <= known}

    def may_contain(self, word: str) -> bool:
        """False only when no row can hold the field ``word`` (ASCII): rows still to be parsed from a
        text that has neither the word nor an escape (a key may spell a letter as ``\\u0066``)."""
        if word in self._fields:
            return bool(self._fields[word])
        text = self._text
        if text is None or self._load is None:
            return True
        raw = memoryview(text).tobytes() if not isinstance(text, bytes) else text
        return word.encode() in raw or b"\\" in raw


class RowTimes(Mapping):
    """``time_map`` for a graph whose every op has per-device times held as one (n, m) array (a coarse
    graph built by a method): op index -> ``{device name: µs}``, built on access;
    :class:`dplace.instance.model.Instance` checks and takes the array in bulk."""

    def __init__(self, times: np.ndarray, devices: Sequence[str]) -> None:
        self.times = np.asarray(times, dtype=np.float64)
        self.devices = list(devices)

    def __getitem__(self, o: int) -> dict[str, float]:
        if not (isinstance(o, int) and 0 <= o < len(self.times)):
            raise KeyError(o)
        return dict(zip(self.devices, self.times[o].tolist()))

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.times)))

    def __len__(self) -> int:
        return len(self.times)


def _frozen(cls: type, **fields: Any) -> Any:
    """An instance of the frozen dataclass ``cls`` with every field given, without its ``__init__``
    (which sets each field through ``object.__setattr__``: the bulk of building a million ops)."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


def bulk_numbers(vals: Any, hi: float) -> np.ndarray | None:
    """``vals`` as a float64 array when each is an int or float (not a bool), finite, >= 0 and <= ``hi``
    (integers exactly); None when any is not (the per-value checks then name it)."""
    if isinstance(vals, np.ndarray):
        if vals.dtype.kind not in "iuf" or (vals.dtype.kind in "iu" and vals.size and vals.max() > int(hi)):
            return None
        a = vals.astype(np.float64, copy=False)
    else:
        kinds = set(map(type, vals))
        if not kinds <= {int, float}:
            return None
        try:
            a = np.array(vals, dtype=np.float64)
        except (OverflowError, ValueError):
            return None
        if int in kinds and a.size and a.max() >= hi and any(v > hi for v in vals if type(v) is int):
            return None  # an integer above the limit that rounds to it
    if a.size and not (np.isfinite(a).all() and (a >= 0).all() and (a <= hi).all()):
        return None
    return a


def csr_arrays(keys: np.ndarray, n: int, values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ptr, flat) for keys 0..n-1: key k's positions in ``keys`` (or ``values`` at those positions), in
    increasing order of position, are ``flat[ptr[k]:ptr[k + 1]]`` (int64 arrays)."""
    order = np.argsort(keys, kind="stable")
    flat = order if values is None else np.asarray(values)[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys, minlength=n), out=ptr[1:])
    return ptr, flat.astype(np.int64, copy=False)


def csr_lists(ptr: np.ndarray, flat: np.ndarray) -> list[list[int]]:
    """The lists ``flat[ptr[k]:ptr[k + 1]]`` for every k, as Python lists."""
    items = flat.tolist()
    bounds = ptr.tolist()
    return [items[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def ordered_forward(src: np.ndarray, dst: np.ndarray) -> bool:
    """True when every edge goes from a lower to a higher op index: then the ops in index order are the
    topological order Kahn's algorithm (smallest index first) gives."""
    return not len(src) or bool((src < dst).all())


def is_kahn_order(order: Any, src: np.ndarray, dst: np.ndarray, n: int) -> bool:
    """True when ``order`` is exactly the order Kahn's algorithm gives on ops ``0..n-1`` and edges ``src[e] ->
    dst[e]`` taking the ready op of smallest index first (:func:`dplace.instance.graph.ready_order`), checked
    in O((n + E) log n) by arrays. ``order`` is that order if and only if it holds each op once, every edge
    goes forward in it, and each op v is larger than every op placed while v was ready: from the step after
    its last predecessor, r(v), up to its own position p(v). (Only if: the walk always takes the smallest
    ready op, and v is ready then. If: at each step i the ready ops are those v with r(v) <= i <= p(v), and
    order[i] is smaller than each of the others, so the walk takes it.) The largest op over each span is
    read from a sparse table of maxima over power-of-two windows."""
    order = np.asarray(order)
    if order.shape != (n,) or order.dtype.kind not in "iu" or (n and (order.min() < 0 or order.max() >= n)):
        return False
    order = order.astype(np.int64)
    pos = np.full(n, -1, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64)
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    if not ((pos >= 0).all() and (pos[src] < pos[dst]).all()):
        return False
    r = np.zeros(n, dtype=np.int64)  # per op: the step at which it became ready
    np.maximum.at(r, dst, pos[src] + 1)
    a, b = r, pos  # the span [a, b) of each op; empty when a == b
    span = b - a
    some = span > 0
    a, b, span, ops = a[some], b[some], span[some], np.flatnonzero(some)
    if not len(ops):
        return True
    level = np.frexp(span)[1].astype(np.int64) - 1  # floor(log2(span)), exactly
    table = [order]
    while (1 << len(table)) <= int(span.max()):
        prev, w = table[-1], 1 << (len(table) - 1)
        table.append(np.maximum(prev[:-w], prev[w:]))
    top = np.empty(len(ops), dtype=np.int64)
    for k in np.unique(level).tolist():
        sel = level == k
        t = table[k]
        top[sel] = np.maximum(t[a[sel]], t[b[sel] - (1 << k)])
    return bool((top < ops).all())
