"""Passes several bounds share, made once per Instance (an Instance is read-only once built) and kept on it."""
from __future__ import annotations

from typing import Any, Callable

from ..instance.graph import longest_path
from ..instance.model import Instance

__all__ = ["critical_path_ops", "memo", "smallest_times"]


def memo(inst: Instance, key: str, make: Callable[[], Any]) -> Any:
    """``make()`` once per Instance, kept under ``key`` (shared: callers never change what it returns)."""
    d = inst.__dict__
    if key not in d:
        d[key] = make()
    return d[key]


def smallest_times(inst: Instance) -> list[float]:
    """Each op's smallest time (``min(row) for row in inst.dur``, taken on the array: the same floats)."""
    return memo(inst, "_smallest_times", lambda: inst._dur_a.min(axis=1).tolist() if inst.n else [])


def critical_path_ops(inst: Instance) -> list[int]:
    """:func:`dplace.instance.graph.critical_path_ops` (the same path), made once."""
    return memo(inst, "_critical_path_ops", lambda: longest_path(inst, inst.topo, smallest_times(inst))[1])
