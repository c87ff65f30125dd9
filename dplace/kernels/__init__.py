"""Compiled kernels (numba) for large graphs, beside the pure-Python reference code they must match.

The pure-Python code stays the reference: every kernel has a test that compares its output with the
reference's on the test graphs (identical placements, orders and times). ``enabled()`` says whether the
kernels are used: numba importable and ``DPLACE_KERNEL`` not set to ``python`` (``DPLACE_KERNEL=python``
runs the reference everywhere, e.g. to compare or to debug).

Compiled functions are cached on disk (``cache=True``): the first call in a fresh install compiles them
(seconds), later processes load them.
"""
from __future__ import annotations

import os
from functools import lru_cache

from .arrays import InstArrays, inst_arrays

__all__ = ["enabled", "njit", "inst_arrays", "InstArrays"]


@lru_cache(maxsize=1)
def _numba_ok() -> bool:
    try:
        import numba  # noqa: F401
    except Exception:  # pragma: no cover - numba is a pinned dependency
        return False
    return True


def enabled() -> bool:
    """True when the compiled kernels are to be used (read at call time, so tests can switch)."""
    return os.environ.get("DPLACE_KERNEL", "numba").lower() != "python" and _numba_ok()


def njit(*args, **kwargs):
    """``numba.njit`` with the house defaults (cached on disk, no fastmath: results must equal the
    reference's bit for bit)."""
    import numba

    kwargs.setdefault("cache", True)
    kwargs.setdefault("nogil", True)
    return numba.njit(*args, **kwargs)

