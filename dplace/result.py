"""``Result`` (format ``dplace-result/1``) and ``make_result``, the one way methods return answers.

``make_result`` runs the placement (and order) through :func:`dplace.simulate`, so the makespan of a
Result is always the simulator's; a solver's own objective is stored as ``claimed_makespan``.
``gap = (makespan - lower_bound) / makespan`` with the best *proven* lower bound available.

A Result is frozen: whoever adds to it (the registry's timing and bound, :func:`dplace.verify.claims.settle`)
returns a new one with :func:`dataclasses.replace`. Its ``extra`` and ``options`` are read, not written.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import numpy as np

from .errors import InvalidInstanceError
from .instance.model import Instance
from .schedule.simulate import (Schedule, as_order, as_placement, order_arrays, placement_array, simulate,
                       simulate_arrays, use_kernel)

if TYPE_CHECKING:
    from .instance.transform import Transform

RESULT_FORMAT = "dplace-result/1"
STATUSES = ("optimal", "feasible", "heuristic", "infeasible", "no_solution")


@dataclass(frozen=True)
class Result:
    """One method's answer on one instance (JSON: ``dplace-result/1``, :meth:`to_dict`).

    ``placement[o]``: device index of op o; ``order[d]``: op indices in the order device d runs them
    (None: the simulator's own order); ``schedule``: the simulated :class:`~dplace.schedule.simulate.Schedule`,
    whose ``makespan`` is the one to trust; ``lower_bound``: a proven bound (µs) or None;
    ``claimed_makespan``: the method's own objective, a claim; ``status``: ``optimal`` (proven),
    ``feasible``, ``heuristic``, ``infeasible`` or ``no_solution`` (then ``message`` says why);
    ``gap = (makespan - lower_bound) / makespan``; ``transform``: None, or how ``instance`` (the graph
    the method solved) came from the one it was given (:mod:`dplace.instance.transform`). Build one with
    :func:`make_result`, change one with :func:`dataclasses.replace`."""

    instance: Instance
    method: str
    status: str
    placement: list[int] | None = None
    order: list[list[int]] | None = None
    schedule: Schedule | None = None
    lower_bound: float | None = None
    claimed_makespan: float | None = None
    solve_time_s: float = 0.0
    options: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    message: str | None = None  # why there is no solution, when there is none
    interrupted: bool = False  # the run was cut short (Ctrl-C / SIGINT): the answer is the best so far
    bound_source: str | None = None  # which proven relaxation gave ``lower_bound`` (e.g. "critical_path")
    transform: Transform | None = None  # set when ``instance`` is a rewrite of the instance given

    @property
    def base_instance(self) -> Instance:
        """The instance the method was given (``instance`` itself unless the method rewrote it)."""
        return self.instance if self.transform is None else self.transform.base

    @property
    def makespan(self) -> float | None:
        return None if self.schedule is None else self.schedule.makespan

    @property
    def memory_ok(self) -> bool | None:
        return None if self.schedule is None else self.schedule.memory_ok

    @property
    def gap(self) -> float | None:
        return compute_gap(self.makespan, self.lower_bound)

    def to_dict(self, per_op: bool = True) -> dict[str, Any]:
        """The ``dplace-result/1`` JSON object (with ``per_op=False`` the per-op entries ``placement``,
        ``order``, ``schedule`` and ``transfers`` hold placeholders, for :meth:`json_chunks`)."""
        inst = self.instance
        out: dict[str, Any] = {
            "format": RESULT_FORMAT, "instance": inst.name, "method": self.method, "status": self.status,
            "makespan": self.makespan, "lower_bound": self.lower_bound, "gap": self.gap,
        }
        if self.claimed_makespan is not None:
            out["claimed_makespan"] = self.claimed_makespan
        if self.placement is not None and self.schedule is not None:
            s = self.schedule
            dn = [d.name for d in inst.devices]
            if per_op:
                ids = inst.columns.ids  # op ids by index (no Op objects needed)
                pl_names = [dn[d] for d in self.placement]
                out["placement"] = dict(zip(ids, pl_names))
                order = self.order if self.order is not None else s.order
                out["order"] = {dn[d]: [ids[o] for o in ops] for d, ops in enumerate(order)}
            else:
                out["placement"], out["order"] = _PER_OP, _PER_OP
            out["order_given"] = self.order is not None
            if per_op:
                out["schedule"] = [{"op": o, "device": d, "start": st, "end": en}
                                   for o, d, st, en in zip(ids, pl_names, s.start, s.end)]
                out["transfers"] = [
                    {"op": ids[p], "src": dn[a], "dst": dn[b], "start": st, "end": en, "bytes": nb}
                    for (p, a, b, st, en, nb) in s.transfers
                ]
            else:
                out["schedule"], out["transfers"] = _PER_OP, _PER_OP
            out["memory"] = {dn[d]: s.memory[d] for d in range(inst.m)}
            out["memory_ok"] = s.memory_ok
        else:
            out["memory_ok"] = None
        out["solve_time_s"] = self.solve_time_s
        out["options"] = _jsonable(self.options)
        if self.extra:
            out["extra"] = _jsonable(self.extra)
        if self.message:
            out["message"] = self.message
        if self.bound_source:
            out["bound_source"] = self.bound_source
        if self.transform is not None:
            out["transform"] = _jsonable(self.transform.to_dict())
        out["interrupted"] = self.interrupted
        return out


    def json_chunks(self, extra: dict[str, Any] | None = None) -> Iterator[str | bytes]:
        """The text of ``json.dumps({**self.to_dict(), **extra}, indent=1) + "\\n"`` in pieces (str or UTF-8
        bytes): below ``COMPACT_FROM`` ops the same bytes, the per-op entries written row by row from the
        placement and schedule, without the per-op dicts and with the C encoder; from ``COMPACT_FROM`` ops
        each per-op entry (``placement``, ``order``, ``schedule``, ``transfers``) is one line, the bytes
        ``orjson.dumps`` writes for it (the same JSON value; numbers in shortest form)."""
        data = self.to_dict(per_op=False)
        data.update(extra or {})
        sep = "{\n "
        names: list[list[str]] = []
        inner: list[list[bytes]] = []  # the op ids as orjson writes them, once for every per-op entry
        compact = self.instance.n >= COMPACT_FROM and _orjson() is not None
        for k, v in data.items():
            yield sep + json.dumps(k) + ": "
            sep = ",\n "
            if v is _PER_OP and compact:
                inner = inner or [_orjson_inner(self.instance.columns.ids)]
                yield from self._per_op_compact(k, inner[0])
            elif v is _PER_OP:
                names = names or [_encoded(self.instance.columns.ids), _encoded([d.name for d in self.instance.devices])]
                yield from self._per_op_chunks(k, *names)
            else:
                yield json.dumps(v, indent=1).replace("\n", "\n ")
        yield "\n}\n"

    def _per_op_compact(self, key: str, ids: list[bytes]) -> Iterable[bytes]:
        """One per-op entry of :meth:`to_dict` as compact JSON, in pieces: joined, the bytes ``orjson.dumps``
        gives for it, made from columns (each column encoded by one orjson call, no dict per op; ``tests/test_result_json.py``
        compares with ``orjson.dumps`` of the entry). ``ids``: :func:`_orjson_inner` of the op ids."""
        s, inst, oj = self.schedule, self.instance, _orjson()
        dn = [oj.dumps(d.name) for d in inst.devices]
        if key == "placement":
            tail = [b'":' + x for x in dn]
            return _rows([b'"', ids, list(map(tail.__getitem__, _ints(self.placement)))], b"", b"{", b"}")
        if key == "order":
            order = self.order if self.order is not None else s.order
            lists = (b'"' + b'","'.join(map(ids.__getitem__, _ints(ops))) + b'"' if len(ops) else b""
                     for ops in order)
            return [b"{" + b",".join(dn[d] + b":[" + x + b"]" for d, x in enumerate(lists)) + b"}"]
        if key == "schedule":
            dev = [b'","device":' + x + b',"start":' for x in dn]
            return _rows([b'{"op":"', ids, list(map(dev.__getitem__, _ints(self.placement))), _Nums(s.start),
                          b',"end":', _Nums(s.end)], b"}", b"[", b"]")
        p, a, b, st, en, nb = s.transfer_columns()  # without a tuple per transfer
        pair = [b'","src":' + x + b',"dst":' + y + b',"start":' for x in dn for y in dn]
        ab = (np.asarray(a, dtype=np.int64) * len(dn) + np.asarray(b, dtype=np.int64)).tolist()
        return _rows([b'{"op":"', list(map(ids.__getitem__, p)), list(map(pair.__getitem__, ab)), _Nums(st),
                      b',"end":', _Nums(en), b',"bytes":', _Nums(nb)], b"}", b"[", b"]")

    def _per_op_chunks(self, key: str, ids: list[str], dn: list[str]) -> Iterator[str]:
        s = self.schedule
        if key == "placement":
            yield from _bracketed("{", map("  {}: {}".format, ids, map(dn.__getitem__, self.placement)), "}")
        elif key == "order":
            order = self.order if self.order is not None else s.order
            lists = ("  " + dn[d] + ": " + "".join(_bracketed("[", map("   {}".format, map(ids.__getitem__, ops)), "]", 2))
                     for d, ops in enumerate(order))
            yield from _bracketed("{", lists, "}")
        elif key == "schedule":
            row = '  {{\n   "op": {},\n   "device": {},\n   "start": {},\n   "end": {}\n  }}'.format
            yield from _bracketed("[", map(row, ids, map(dn.__getitem__, self.placement), _nums(s.start), _nums(s.end)), "]")
        else:
            row = ('  {{\n   "op": {},\n   "src": {},\n   "dst": {},\n   "start": {},\n   "end": {},\n'
                   '   "bytes": {}\n  }}').format
            cols = list(zip(*s.transfers)) or [()] * 6
            yield from _bracketed("[", map(row, map(ids.__getitem__, cols[0]), map(dn.__getitem__, cols[1]),
                                           map(dn.__getitem__, cols[2]), *(_nums(c) for c in cols[3:])), "]")


_PER_OP = object()  # to_dict(per_op=False): an entry json_chunks writes row by row
COMPACT_FROM = 20_000  # ops: from here json_chunks writes each per-op entry as one compact line (orjson)


def _orjson() -> Any:
    try:
        import orjson
    except ImportError:  # pragma: no cover - pinned
        return None
    return orjson


def _orjson_inner(names: list[str]) -> list[bytes]:
    """Each string as ``orjson.dumps`` writes it, less its quotes: one orjson call split at ``","`` where
    no string needed an escape (then none holds a quote), else one call per string."""
    oj = _orjson()
    raw = oj.dumps(list(names))
    if not names:
        return []
    if b"\\" not in raw:
        return raw[2:-2].split(b'","')
    return [oj.dumps(x)[1:-1] for x in names]


def _ints(xs: Any) -> Any:
    return xs.tolist() if isinstance(xs, np.ndarray) else xs


class _Nums:
    """A column of numbers for :func:`_rows`, each written as ``orjson.dumps`` writes it, encoded one
    block of rows at a time (one call per block; numbers hold no comma)."""

    __slots__ = ("xs",)

    def __init__(self, xs: Any) -> None:
        self.xs = _ints(xs)

    def __len__(self) -> int:
        return len(self.xs)

    def encoded(self, a: int, b: int) -> list[bytes]:
        return _orjson().dumps(self.xs[a:b])[1:-1].split(b",")


def _rows(pieces: list[Any], end: bytes, open_: bytes, close: bytes, rows: int = 65536,
          chunk: int = 8192) -> Iterator[bytes]:
    """``open_``, then the rows joined by commas, then ``close``, in blocks of ``rows`` rows (a few MB,
    written while the next is made, their memory reused by the next); row i is the ``pieces`` in turn (a
    bytes constant, a column: its item i, or :class:`_Nums`; the first piece a constant), then ``end``.
    Interleaved by list slices and joined ``chunk`` pieces at a time (one join of millions of pieces is 3x
    slower): no Python step per row."""
    n = len(next(x for x in pieces if not isinstance(x, bytes)))
    if n == 0:
        yield open_ + close
        return
    k = len(pieces)
    for a in range(0, n, rows):
        b = min(n, a + rows)
        parts: list[bytes] = [b""] * (k * (b - a))
        for j, x in enumerate(pieces):
            parts[j::k] = [x] * (b - a) if isinstance(x, bytes) else x.encoded(a, b) if isinstance(x, _Nums) else x[a:b]
        parts[0::k] = [end + b"," + pieces[0]] * (b - a)
        if a == 0:
            parts[0] = open_ + pieces[0]
        if b == n:
            parts.append(end + close)
        yield b"".join([b"".join(parts[i:i + chunk]) for i in range(0, len(parts), chunk)])


def _encoded(names: list[str]) -> list[str]:
    """Each string JSON-encoded as ``json.dumps`` does, in one call of the C encoder (inside an encoded
    string a quote is always escaped, so ``", "`` only separates items)."""
    if not names:
        return []
    return ['"' + x + '"' for x in json.dumps(list(names))[2:-2].split('", "')]


def _nums(xs: Any) -> Iterator[str]:
    """Each number as ``json.dumps`` writes it (finite floats: ``float.__repr__``)."""
    if set(map(type, xs)) <= {float} and all(map(math.isfinite, xs)):
        return map(float.__repr__, xs)
    return map(json.dumps, xs)


def _bracketed(open_: str, rows: Iterator[str], close: str, depth: int = 1, chunk: int = 20_000) -> Iterator[str]:
    """``open_``, the rows one per line joined by commas, ``close`` at ``depth`` (``json.dumps(indent=1)``'s
    layout; ``open_ + close`` when there are none), in pieces of ``chunk`` rows."""
    sep = open_ + "\n"
    any_rows = False
    for part in iter(lambda: list(islice(rows, chunk)), []):
        yield sep + ",\n".join(part)
        sep, any_rows = ",\n", True
    yield "\n" + " " * depth + close if any_rows else open_ + close


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if hasattr(obj, "__dataclass_fields__"):
        from dataclasses import asdict

        return _jsonable(asdict(obj))
    if isinstance(obj, Instance):
        return obj.name
    try:
        return float(obj)
    except (TypeError, ValueError):
        return str(obj)


def compute_gap(makespan: float | None, lower_bound: float | None) -> float | None:
    if makespan is None or lower_bound is None:
        return None
    if makespan <= 0:
        return 0.0
    return max(0.0, (makespan - lower_bound) / makespan)


def make_result(
    inst: Instance,
    method: str,
    placement: Any,
    order: Any = None,
    *,
    status: str = "heuristic",
    lower_bound: float | None = None,
    claimed_makespan: float | None = None,
    options: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> Result:
    """Simulate ``placement``/``order`` and wrap everything in a :class:`Result`."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    if use_kernel(inst):  # checked and simulated on arrays (placement and order may be int arrays)
        pa = placement_array(inst, placement)
        sched = simulate_arrays(inst, pa, order_arrays(inst, pa, order) if order is not None else None)
        pl, od = sched.placement, (sched.order if order is not None else None)
    else:
        pl = as_placement(inst, placement)
        od = as_order(inst, pl, order) if order is not None else None
        sched = simulate(inst, pl, od)
    return Result(
        instance=inst, method=method, status=status, placement=pl, order=od, schedule=sched,
        lower_bound=lower_bound, claimed_makespan=claimed_makespan, options=dict(options or {}),
        extra=dict(extra or {}),
    )


def no_solution(inst: Instance, method: str, status: str, message: str, **kw: Any) -> Result:
    return Result(instance=inst, method=method, status=status, message=message, **kw)


def result_from_dict(inst: Instance, data: Any) -> Result:
    """Rebuild a Result from its JSON for ``inst``, re-simulating placement and order.

    A result with a ``transform`` (a method solved a rewrite of the instance) is rebuilt on the rewrite
    of ``inst``, unless ``inst`` already is the rewritten instance (it has the result's instance name,
    not the transform's ``base_instance``)."""
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"result must be a JSON object, got {type(data).__name__}")
    if data.get("format") != RESULT_FORMAT:
        raise InvalidInstanceError(f"result: format must be {RESULT_FORMAT!r}, got {data.get('format')!r}")
    status = data.get("status")
    if status not in STATUSES:
        raise InvalidInstanceError(f"result: status must be one of {', '.join(STATUSES)}, got {status!r}")
    method = str(data.get("method", "?"))
    for key in ("makespan", "lower_bound", "claimed_makespan", "solve_time_s"):
        v = data.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise InvalidInstanceError(f"result: {key} must be a number or null, got {v!r}")
    for key in ("options", "extra"):
        if not isinstance(data.get(key) or {}, dict):
            raise InvalidInstanceError(f"result: {key} must be an object, got {data[key]!r}")
    transform, tf = None, data.get("transform")
    given_rewritten = isinstance(tf, dict) and tf.get("base_instance", inst.name) != inst.name == data.get("instance")
    if tf is not None and not given_rewritten:
        from .instance.transform import from_dict

        inst, transform = from_dict(inst, tf)
    bs = data.get("bound_source")
    kw: dict[str, Any] = dict(solve_time_s=float(data.get("solve_time_s") or 0.0), transform=transform,
                              interrupted=data.get("interrupted") is True,
                              bound_source=bs if isinstance(bs, str) else None)
    if data.get("placement") is None:
        return no_solution(inst, method, status, str(data.get("message", "")), **kw)
    pl = as_placement(inst, data["placement"])
    order = data.get("order") if data.get("order_given", True) else None
    res = make_result(
        inst, method, pl, order, status=status, lower_bound=data.get("lower_bound"),
        claimed_makespan=data.get("claimed_makespan"), options=data.get("options") or {},
        extra=data.get("extra") or {},
    )
    return replace(res, **kw)
