"""What every converter shares: the options of the instance it makes, checks of numbers read from a file,
the memory per device, and :func:`converter`, the decorator that adds those options to a format's parser
and registers it in :data:`CONVERTERS`.

A format's module defines one function ``from_<format>(path, *, <its own options>) -> Parsed`` decorated
with ``@converter("<format>")`` (and imported by ``dplace/formats/__init__.py``); the decorated function
takes the shared options too
(``devices``, ``memory``, ``memory_fraction``, ``latency``, ``bandwidth``, ``comm``, ``name``) and
returns the validated :class:`~dplace.instance.model.Instance`.
"""
from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import InvalidInstanceError
from ..instance.model import COMM_MODES, Device, Edge, Instance, Link, Op, check_number
from .generate import default_memory

MS_TO_US = 1000.0

# format name -> converter, in the order the format modules are imported (dplace/formats/__init__.py)
CONVERTERS: dict[str, Callable[..., Instance]] = {}


@dataclass
class Parsed:
    """What a format's parser read: ops and edges, and what the file says about the instance.

    ``devices``: the file's device count (None: 4). ``default_memory``: bytes per device the file states,
    as a function of the total op memory, kept as stated (None: :func:`default_memory` raised to the
    largest op or colocation group, so a synthetic default always gives a valid instance).
    ``source``: fields added after ``format`` and ``file`` in ``extra["source"]``."""

    ops: list[Op]
    edges: list[Edge]
    name: str | None = None
    devices: int | None = None
    default_memory: Callable[[int], float] | None = None
    source: dict[str, Any] = field(default_factory=dict)


def bad(path: Any, msg: str) -> InvalidInstanceError:
    """The one-line error of a converter: file, then field and value."""
    return InvalidInstanceError(f"{path}: {msg}")


def num(path: Any, value: Any, where: str) -> float:
    """``value`` as a finite float >= 0, else an error naming file, field and value."""
    try:
        return check_number(value, where)
    except InvalidInstanceError as exc:
        raise bad(path, str(exc)) from None


def parse_float(path: Any, text: str, where: str) -> float:
    """``text`` read from a file as a finite float >= 0."""
    try:
        v = float(text)
    except ValueError:
        raise bad(path, f"{where} must be a number, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise bad(path, f"{where} must be a finite number >= 0, got {text!r}")
    return v


def _check_options(devices: Any, memory: Any, memory_fraction: Any, latency: Any, bandwidth: Any,
                   comm: Any) -> None:
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise InvalidInstanceError(f"devices must be an integer >= 1, got {devices!r}")
    if memory is not None:
        check_number(memory, "memory (bytes per device)", positive=True)
    if memory_fraction is not None:
        check_number(memory_fraction, "memory_fraction", positive=True)
    check_number(latency, "latency (µs)")
    check_number(bandwidth, "bandwidth (bytes/µs)", positive=True)
    if comm not in COMM_MODES:
        raise InvalidInstanceError(f"comm must be one of {', '.join(COMM_MODES)}, got {comm!r}")


def _capacity(ops: list[Op], memory: float | None, memory_fraction: float | None,
              default: Callable[[int], float], *, raise_to_largest: bool = True) -> int:
    """Bytes per device: ``memory``, else ``memory_fraction`` × total, else the format's default raised
    to the largest op or colocation group when ``raise_to_largest``."""
    total = sum(op.memory for op in ops)
    if memory is not None:
        return int(memory)
    if memory_fraction is not None:
        return int(math.ceil(memory_fraction * total))
    if not raise_to_largest:
        return int(math.ceil(default(total)))
    groups: dict[str, int] = {}
    for op in ops:
        if op.colocation is not None:
            groups[op.colocation] = groups.get(op.colocation, 0) + int(op.memory)
    largest = max([int(op.memory) for op in ops] + list(groups.values()) + [0])
    return max(int(math.ceil(default(total))), largest)


def _instance(path: str | Path, fmt: str, g: Parsed, *, devices: int | None, memory: float | None,
              memory_fraction: float | None, latency: float, bandwidth: float, comm: str,
              name: str | None) -> Instance:
    n_devices = devices if devices is not None else (g.devices if g.devices is not None else 4)
    if g.default_memory is not None:
        cap = _capacity(g.ops, memory, memory_fraction, g.default_memory, raise_to_largest=False)
    else:
        cap = _capacity(g.ops, memory, memory_fraction, lambda total: default_memory(total, n_devices))
    source = {"format": fmt, "file": Path(path).name, **g.source}
    try:
        return Instance(name or g.name or Path(path).stem, [Device(f"gpu{d}", cap, 1.0) for d in range(n_devices)],
                        g.ops, g.edges, link=Link(float(latency), float(bandwidth)), comm=comm,
                        extra={"source": source})
    except InvalidInstanceError as exc:
        raise bad(path, str(exc)) from None


def converter(fmt: str, *, latency: float = 10.0) -> Callable[[Callable[..., Parsed]], Callable[..., Instance]]:
    """Register ``parse(path, *, **format_options) -> Parsed`` as the converter of ``fmt``.

    The converter takes the shared options (``latency`` defaults to the format's), checks them before
    the file is read, and builds the instance: ``devices`` (default: the file's, else 4), memory per
    device (``memory`` bytes, else ``memory_fraction`` × total op memory, else the format's default),
    a link of ``latency`` µs and ``bandwidth`` bytes/µs, ``comm``, ``name`` (default: the file's, else the
    file name's stem). A shared option that ``parse`` names among its parameters is passed to it as
    given (``devices`` is None when left to the file)."""

    def deco(parse: Callable[..., Parsed]) -> Callable[..., Instance]:
        @functools.wraps(parse)
        def convert_file(path: str | Path, *, devices: int | None = None, memory: float | None = None,
                         memory_fraction: float | None = None, latency: float = latency,
                         bandwidth: float = 12000.0, comm: str = "parallel", name: str | None = None,
                         **options: Any) -> Instance:
            _check_options(devices, memory, memory_fraction, latency, bandwidth, comm)
            given = {"devices": devices, "memory": memory, "memory_fraction": memory_fraction, "latency": latency,
                     "bandwidth": bandwidth, "comm": comm, "name": name}
            g = parse(path, **{k: given[k] for k in wants}, **options)
            return _instance(path, fmt, g, devices=devices, memory=memory, memory_fraction=memory_fraction,
                             latency=latency, bandwidth=bandwidth, comm=comm, name=name)

        shared = [p for p in inspect.signature(convert_file, follow_wrapped=False).parameters.values()
                  if p.kind is not p.VAR_KEYWORD]
        names = {p.name for p in shared}
        wants = [n for n in inspect.signature(parse).parameters if n in names and n != "path"]
        own = [p for n, p in inspect.signature(parse).parameters.items() if n not in names]
        convert_file.__signature__ = inspect.Signature(shared + own, return_annotation=Instance)  # type: ignore[attr-defined]
        CONVERTERS[fmt] = convert_file
        return convert_file

    return deco


def convert(fmt: str, path: str | Path, **options: Any) -> Instance:
    """Dispatch to the converter of ``fmt`` (one of the keys of :data:`CONVERTERS`)."""
    if fmt not in CONVERTERS:
        raise InvalidInstanceError(f"format must be one of {', '.join(CONVERTERS)}, got {fmt!r}")
    return CONVERTERS[fmt](path, **options)


def write_instance(inst: Instance, path: str | Path, *, compact: bool = False) -> None:
    """Write ``inst`` atomically (minified JSON with ``compact``; the columnar form to a ``.npz`` path)."""
    import json

    from ..instance.io import instance_to_dict, save_instance, write_atomic

    if compact and not str(path).endswith(".npz"):
        write_atomic(path, json.dumps(instance_to_dict(inst), separators=(",", ":")) + "\n")
    else:
        save_instance(inst, path)
