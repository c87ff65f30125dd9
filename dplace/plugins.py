"""The table of methods: ``@register`` adds a method, :func:`load_methods` imports the method packages
(by name) so their ``@register`` lines run, and :func:`method_info` / :func:`get_method` look one up.

A leaf of the core (it imports no room): the rooms that need a method or a plug-in by name (the instance's
rewrites, the solver bounds, the claims' HEFT refutation) ask here, and :mod:`dplace.registry`, which
runs a method (options, budget, bound, claims), re-exports all of it.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from .errors import InvalidInstanceError

if TYPE_CHECKING:
    from .result import Result

__all__ = ["MethodInfo", "get_method", "load_methods", "method_info", "methods", "paper_variants", "register"]


@dataclass(frozen=True)
class MethodInfo:
    name: str
    func: Callable[..., Result]
    options: type | None
    summary: str
    kind: str  # "heuristic" | "exact" | "baseline"
    max_ops: int | None = None  # larger instances are left out of default comparisons
    best_effort: bool = False  # places instances whose memory cannot fit (status stays "infeasible")
    paper: str = ""  # the paper and sections the method follows ("" for none)
    variant_of: str | None = None  # a dplace variant of this paper method (what differs: the summary)


_METHODS: dict[str, MethodInfo] = {}


def register(name: str, *, options: type | None = None, summary: str = "", kind: str = "heuristic",
             max_ops: int | None = None, best_effort: bool = False, paper: str = "", variant_of: str | None = None):
    """Decorator: register ``func`` as method ``name``. ``max_ops``: the largest instance the method is
    meant for (``dplace compare`` leaves it out above that unless asked by name). ``best_effort``: the
    method still places an instance proven not to fit in memory (:func:`solve` then returns its
    placement with status ``infeasible``). ``paper``: the paper and sections it follows; a method named
    after a paper runs the paper's algorithm with the paper's settings. ``variant_of``: the paper method
    this one departs from (dplace's improvement, under its own name; the summary says what differs)."""

    def deco(func: Callable[..., Result]) -> Callable[..., Result]:
        if name in _METHODS and _METHODS[name].func is not func:
            raise ValueError(f"method {name!r} registered twice")
        doc = summary or (func.__doc__ or "").strip().splitlines()[0] if (summary or func.__doc__) else ""
        _METHODS[name] = MethodInfo(name, func, options, doc, kind, max_ops, best_effort, paper, variant_of)
        return func

    return deco


_PACKAGES = ("dplace.heuristics", "dplace.formulations")
_LOADED_PACKAGES: set[str] = set()


def load_methods(packages: tuple[str, ...] = _PACKAGES) -> None:
    """Import every module of the method packages (default: all) so their ``@register`` lines run."""
    for pkg_name in packages:
        if pkg_name in _LOADED_PACKAGES:
            continue
        from . import interrupt

        # a Ctrl-C now only sets the flag (the solve that follows answers at once): KeyboardInterrupt in the
        # middle of a native library's import (OR-Tools, pandas) leaves it half-initialised in the process
        with interrupt.polling():
            pkg = importlib.import_module(pkg_name)
            for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
                if not mod.name.startswith("_"):
                    importlib.import_module(f"{pkg_name}.{mod.name}")
        _LOADED_PACKAGES.add(pkg_name)  # only once all imported (a Ctrl-C during the imports loads again)


def methods() -> list[str]:
    """Names of all registered methods, sorted."""
    load_methods()
    return sorted(_METHODS)


def method_info(name: str) -> MethodInfo:
    """The registry entry of method ``name`` (function, options dataclass, summary, kind, ``max_ops``);
    an unknown name is an :class:`InvalidInstanceError` listing the valid ones. A heuristic's name is
    looked up after importing the heuristics only (the exact methods load OR-Tools and PuLP: 0.5 s of
    CPU a fresh process need not pay for a heuristic)."""
    load_methods(_PACKAGES[:1])
    if not isinstance(name, str):
        raise InvalidInstanceError(f"method must be a method name (a string), got {type(name).__name__}")
    if name not in _METHODS:
        load_methods()
    if name not in _METHODS:
        raise InvalidInstanceError(f"method: unknown method {name!r}; valid: {', '.join(sorted(_METHODS))}")
    return _METHODS[name]


def paper_variants() -> dict[str, str]:
    """{paper method: its dplace variant} for every registered ``variant_of`` (the last one registered
    when a paper method has several)."""
    load_methods()
    return {info.variant_of: name for name, info in sorted(_METHODS.items()) if info.variant_of}


def get_method(name: str) -> Callable[..., Result]:
    """The ``place(instance, *, time_limit_s=None, seed=0, **options) -> Result`` function of method
    ``name``, called directly: no option checks, timing or added bound (:func:`solve` adds those)."""
    return method_info(name).func
