"""Transformed instances: a method may solve an explicit rewrite of the instance it was given.

OS-DPOS (FastT §5.2) splits ops and schedules the split graph. Its :class:`~dplace.result.Result`
then has ``instance`` = the graph it solved (simulator, checker and report all work on that one) and
``transform`` = a :class:`Transform` saying how that graph came from the given one: the rewrite's name,
its JSON parameters (enough to rebuild the graph from the given instance, as ``dplace evaluate`` does),
the given instance (``base``) and the map back (``origin[o]``: the op of ``base`` that op o of the
rewritten graph comes from, -1 for an op the rewrite added). A bound proven on a rewritten graph is not
a bound of the given instance: comparisons leave it out.

A method module registers its rewrite with ``@rewrite("name")`` (a function ``(base, params) ->
(instance, origin)``); the core reaches it through :func:`apply` and never imports the method.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import InvalidInstanceError, show_value
from .model import Instance

Rewrite = Callable[[Instance, Mapping[str, Any]], "tuple[Instance, list[int]]"]
_REWRITES: dict[str, Rewrite] = {}


@dataclass(frozen=True)
class Transform:
    """How the instance a method solved came from the one it was given (see the module docstring)."""

    kind: str  # the registered rewrite, e.g. "split"
    params: Mapping[str, Any]  # JSON parameters: ``apply(base, kind, params)`` rebuilds the instance
    base: Instance  # the instance the method was given
    origin: tuple[int, ...]  # origin[o]: op of ``base`` that op o of the rewritten instance comes from (-1: added)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "base_instance": self.base.name, "params": dict(self.params)}


def rewrite(kind: str) -> Callable[[Rewrite], Rewrite]:
    """Decorator: register ``func(base, params) -> (instance, origin)`` as the rewrite ``kind``."""

    def deco(func: Rewrite) -> Rewrite:
        if _REWRITES.get(kind, func) is not func:
            raise ValueError(f"rewrite {kind!r} registered twice")
        _REWRITES[kind] = func
        return func

    return deco


def apply(base: Instance, kind: str, params: Mapping[str, Any]) -> tuple[Instance, Transform]:
    """The rewritten instance and its :class:`Transform`; an unknown ``kind`` or bad ``params`` is an
    :class:`InvalidInstanceError`."""
    from ..plugins import load_methods

    load_methods()  # rewrites live in the method modules
    if kind not in _REWRITES:
        raise InvalidInstanceError(f"transform.kind must be one of {', '.join(sorted(_REWRITES))}, "
                                   f"got {show_value(kind)}")
    if not isinstance(params, Mapping):
        raise InvalidInstanceError(f"transform.params must be an object, got {show_value(params)}")
    inst, origin = _REWRITES[kind](base, params)
    return inst, Transform(kind, dict(params), base, tuple(origin))


def from_dict(base: Instance, data: Any) -> tuple[Instance, Transform]:
    """Rebuild a rewritten instance from the ``transform`` field of a saved result."""
    if not isinstance(data, Mapping):
        raise InvalidInstanceError(f"transform must be an object, got {show_value(data)}")
    if data.get("base_instance", base.name) != base.name:
        raise InvalidInstanceError(f"transform.base_instance is {show_value(data.get('base_instance'))}, "
                                   f"but the instance given is {base.name!r}")
    return apply(base, data.get("kind"), data.get("params", {}))
