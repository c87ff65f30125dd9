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

__all__ = ["enabled", "pays", "njit", "inst_arrays", "InstArrays"]


@lru_cache(maxsize=1)
def _numba_ok() -> bool:
    from importlib.util import find_spec  # not importing numba itself: that costs ~0.5 s and ~100 MB

    return find_spec("numba") is not None


def enabled() -> bool:
    """True when the compiled kernels are to be used (read at call time, so tests can switch)."""
    return os.environ.get("DPLACE_KERNEL", "numba").lower() != "python" and _numba_ok()


SMALL, LARGE = 2_000, 100_000  # ops


def pays(n: int) -> bool:
    """Whether a compiled kernel is worth using on ``n`` ops: enabled, and ``n`` >= ``LARGE``, or ``n`` >=
    ``SMALL`` with numba already imported in this process (then only the cached kernel is loaded, not
    numba itself: below ``LARGE`` importing numba would cost more than the kernel saves)."""
    import sys

    return n >= SMALL and enabled() and (n >= LARGE or "numba" in sys.modules)


def clear_stale_cache(folder: str, sources: list[str]) -> bool:
    """Remove numba's cached kernels (``*.nbi``, ``*.nbc``) in ``folder`` when the kernel sources changed
    since they were written (a stamp file holds the sources' hash); True when it removed them.

    numba checks only the source file of the cached function itself: a kernel in ``lists.py`` that calls
    one in ``state.py`` keeps running its old compiled code after ``state.py`` changes (seen here after
    an edit). Whole-package hashing costs ~1 ms once per process. Nothing happens where the folder is
    not writable (an installed read-only copy does not change)."""
    import hashlib

    h = hashlib.sha1()
    for src in sorted(sources):
        with open(src, "rb") as f:
            h.update(os.path.basename(src).encode() + b"\0" + f.read())
    stamp = os.path.join(folder, "dplace-kernels.stamp")
    try:
        with open(stamp) as f:
            if f.read().strip() == h.hexdigest():
                return False
    except OSError:
        pass
    try:
        os.makedirs(folder, exist_ok=True)
        for name in os.listdir(folder):
            if name.endswith((".nbi", ".nbc")):
                os.remove(os.path.join(folder, name))
        tmp = f"{stamp}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(h.hexdigest())
        os.replace(tmp, stamp)
    except OSError:
        return False
    return True


@lru_cache(maxsize=1)
def _fresh_cache() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    clear_stale_cache(os.path.join(here, "__pycache__"),
                      [os.path.join(here, n) for n in os.listdir(here) if n.endswith(".py")])


def njit(*args, **kwargs):
    """``numba.njit`` with the house defaults (cached on disk, no fastmath: results must equal the
    reference's bit for bit). The disk cache is cleared once when any kernel source changed
    (:func:`clear_stale_cache`)."""
    import numba

    _fresh_cache()

    kwargs.setdefault("cache", True)
    kwargs.setdefault("nogil", True)
    return numba.njit(*args, **kwargs)

