"""Passes several bounds share, made once per Instance (an Instance is read-only once built) and kept on it."""
from __future__ import annotations

from typing import Any, Callable

from ..instance.graph import longest_from, longest_path, longest_to
from ..instance.model import Instance
from ..kernels import bounds as kb

__all__ = ["critical_path_length", "critical_path_ops", "heads_tails", "memo", "smallest_times"]


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
    return _critical_path(inst)[1]


def critical_path_length(inst: Instance) -> float:
    """Longest path with every op on its fastest device and no transfers (µs)."""
    return _critical_path(inst)[0]


def _critical_path(inst: Instance) -> tuple[float, list[int]]:
    """(length, ops first to last) of the critical path, made once: on arrays where the kernels run
    (:func:`dplace.kernels.bounds.critical_path`, the same values and path), else by the reference."""
    def make():
        if kb.use_arrays(inst):
            return kb.critical_path(inst)
        return longest_path(inst, inst.topo, smallest_times(inst))

    return memo(inst, "_critical_path", make)


def heads_tails(inst: Instance):
    """(p, head, tail) as numpy arrays (shared: never change them): p = smallest time, head = longest path
    to o, tail = longest path after o (o excluded), both with smallest times and no transfers."""
    return memo(inst, "_heads_tails", lambda: _make_heads_tails(inst))


def _make_heads_tails(inst: Instance):
    import numpy as np

    if kb.use_arrays(inst):
        return kb.heads_tails(inst)
    pl = smallest_times(inst)
    head = longest_to(inst, inst.topo, pl)[0]
    tail = longest_from(inst, inst.topo, pl, own=False)
    p = np.array(pl, dtype=float)
    return p, np.array(head), np.array(tail)
