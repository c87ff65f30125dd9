"""Compiled kernels (numba) for large graphs, beside the pure-Python reference code they must match.

The pure-Python code stays the reference: every kernel has a test that compares its output with the
reference's on the test graphs (identical placements, orders and times). One function decides where
they run, :func:`use` (by size and availability), with one setting, ``DPLACE_KERNEL`` (:func:`mode`):
``python`` runs the reference everywhere, ``numba`` the kernels at every size. The compiled graph
passes every method shares (longest paths, levels, mean op and edge costs) live in :mod:`.levels`, the
parallel-comm rule of when an op's inputs are on a device in :mod:`.ready`, the queues (the re-timing heap,
Kahn's first-in first-out queue) in :mod:`.heap`.

Compiled functions are cached on disk (``cache=True``): the first call in a fresh install compiles them
(seconds), later processes load them.
"""
from __future__ import annotations

import os
import sys
from functools import lru_cache

from .arrays import InstArrays, inst_arrays

__all__ = ["FROM", "enabled", "mode", "njit", "inst_arrays", "InstArrays", "set_mode", "size", "use"]


@lru_cache(maxsize=1)
def _numba_ok() -> bool:
    from importlib.util import find_spec  # not importing numba itself: that costs ~0.5 s and ~100 MB

    return find_spec("numba") is not None


# Re-timing steps per committed op or send before one full replay is cheaper: the sequential-comm
# state's cascade budget, read when a state is made or re-timed by ScheduleState and by its compiled
# twin alike (tests set it to 0 to force replays)
CASCADE_BUDGET = 4

# The list schedulers' link policy in sequential comm (ScheduleState.frozen, dplace.kernels.seqlinks.frozen):
# exact re-timing until the commits have moved LINK_MOVES x n committed ops, then frozen links (a new send no
# longer delays the sends behind it on its link) with LINK_REPLAYS exact replays spread over the commits and
# one after the last; LINK_MOVES < 0: always exact. Exact HEFT re-times 0.09 x n ops on NASNet-Mobile, 0.17 x n
# on InceptionV3, 26 x n on the 3k-op and 406 x n on the 36k-op Transformer (benchmarks/bench_cascades.py; ~n^1.8):
# there whole `dplace solve --method heft` takes 3.77 CPU s exact, 1.64 under the policy, makespan +0.2 %
# (benchmarks/bench_flags.py, bench_seqcomm.py; RESULTS.md)
LINK_MOVES = 16.0
LINK_REPLAYS = 32

# ---------------------------------------------------------------------------- the one kernel policy
# Below these sizes the pure-Python reference runs: importing numba and loading the cached kernels
# (0.3-0.8 s of CPU in a fresh process) costs more than the kernel saves; measured on the 36k-op
# Transformer (benchmarks/bench_heuristic_costs.py, bench_list_kernels.py).
FROM = {
    "list": 5_000,  # HEFT / DPOS list schedulers (kernels.lists): 1.0-1.6 µs per op x device vs 8-10
    "etf": 10_000,  # m-ETF / m-SCT and Baechi's units (kernels.etf, kernels.baechi): m_etf 3.0 -> 1.2 s
    "large": 100_000,  # Baechi / Celeritas / coarsening passes: mid-size graphs keep the reference's timing
    "graph": 100_000,  # simulate, bounds, levels: also from WARM_FROM once numba is imported anyway
    "anneal": 0,  # the annealing loop has no Python version: compiled whenever numba is there
    "seqlist": 2_000,  # list schedulers on the compiled sequential-comm state (kernels.seqstate): the reference
    # re-times a link's queue in Python (2.4 s for HEFT on 3k ops, minutes on 36k)
}
WARM_FROM = 2_000  # "graph" kernels from here when numba is already imported (only the cached kernel loads)


def mode() -> str:
    """The one setting: ``DPLACE_KERNEL`` = ``numba`` (compiled kernels at every size: tests compare them
    with the reference), ``python`` (never: the reference everywhere, to compare or debug), anything
    else or unset: ``auto`` (by size, :func:`use`). Read at call time, so tests switch with
    ``monkeypatch.setenv``."""
    m = os.environ.get("DPLACE_KERNEL", "auto").lower()
    return m if m in ("numba", "python") else "auto"


def set_mode(m: str) -> None:
    """Set :func:`mode` for this process and the processes it starts (``dplace warm``: ``numba``)."""
    if m not in ("numba", "python", "auto"):
        raise ValueError(f"kernel mode must be numba, python or auto, got {m!r}")
    os.environ["DPLACE_KERNEL"] = m


def use(n: int, kind: str = "graph") -> bool:
    """The one kernel policy: whether a compiled kernel of family ``kind`` (a key of :data:`FROM`) runs
    on a graph of ``n`` ops — numba installed, and :func:`mode` ``numba``, or ``auto`` with ``n`` at
    least ``FROM[kind]`` (``graph`` kernels also from :data:`WARM_FROM` when numba is already imported
    in this process). Call sites add only what the kernel cannot do (e.g. sequential comm)."""
    m = mode()
    if m == "python" or not _numba_ok():
        return False
    if m == "numba" or n >= FROM[kind]:
        return True
    return kind == "graph" and n >= WARM_FROM and "numba" in sys.modules


def enabled() -> bool:
    """True when compiled kernels may run at all (numba installed, ``DPLACE_KERNEL`` not ``python``)."""
    return mode() != "python" and _numba_ok()


def size(inst) -> int:
    """The op count that decides for ``inst``: a graph derived from a larger one (a coarse graph, marked
    ``_from_ops`` by :func:`dplace.heuristics.coarsen.coarsen`) counts as that one, so a 13k-node coarse
    graph of a 360k-op graph runs compiled where numba is already loaded."""
    return max(inst.n, getattr(inst, "_from_ops", 0))


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


LIGHT_LOAD_NUMBA = "0.68.1"  # the numba whose cache loading :func:`light_load` was read against (pyproject pins it)


@lru_cache(maxsize=1)
def _light_cache_class():
    """numba's ``FunctionCache`` with a lighter ``load_overload``, or None on another numba version.

    numba's own ``load_overload`` first calls ``target_context.refresh()``: it imports and installs every
    lowering and typing registry (``numba.cpython.unicode``, ``numba.np.linalg``, ``numba.typed``, ...),
    about 0.1 CPU s of the first kernel load in a fresh process, needed to *compile* but not to run
    machine code read back from the cache. Here a load only initialises numba's runtime (NRT: the
    compiled code allocates arrays through it) and reads the cached code. Nothing is lost: a cache miss
    goes on to numba's compiler, whose ``CompilerBase`` refreshes both contexts itself, and a lowering
    lookup that fails refreshes on its first call (``BaseContext.get_function``)."""
    import numba

    if numba.__version__ != LIGHT_LOAD_NUMBA:
        return None
    from numba.core.caching import FunctionCache
    from numba.core.runtime.nrt import rtsys

    class LightCache(FunctionCache):
        def load_overload(self, sig, target_context):
            rtsys.initialize(target_context)  # returns at once after the first call
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)

    return LightCache


def light_load(dispatcher):
    """``dispatcher`` (a cached numba dispatcher) made to load its cached code without numba's registry
    refresh (:func:`_light_cache_class`); unchanged where numba is not the pinned version."""
    cls = _light_cache_class()
    cache = getattr(dispatcher, "_cache", None)
    if cls is not None and type(cache) is cls.__base__:  # numba's own FunctionCache (cache=True)
        cache.__class__ = cls
    return dispatcher


def njit(*args, borrow: bool = False, **kwargs):
    """``numba.njit`` with the house defaults (cached on disk, no fastmath: results must equal the
    reference's bit for bit), loading cached code the light way (:func:`light_load`). The disk cache is
    cleared once when any kernel source changed (:func:`clear_stale_cache`).

    ``borrow=True``: the kernel borrows its array arguments, without numba's reference counts (numba's
    ``_nrt=False``). numba counts a reference to every array of every tuple argument when a function is
    entered and left, each an atomic add: for the sequential list schedulers' per-candidate calls, whose
    ``(I, S, L)`` tuples hold ~60 arrays, that was 25.8 % of a whole sequential ``dplace solve --method heft``
    on the 36k-op Transformer, 5.2 % after (``benchmarks/perf_refcounts.py``), and its loop 0.59 -> 0.22 CPU s
    (``benchmarks/bench_list_kernels.py``). Only for kernels that allocate nothing and return no array
    (numba refuses to compile the first; :data:`BORROWING` lists them for the test that checks the second);
    what they call keeps its own counts. ``_nrt`` is numba's internal flag: on a numba other than the pinned
    one (:data:`LIGHT_LOAD_NUMBA`) the kernel keeps its counts (slower, the same results)."""
    import numba

    _fresh_cache()

    if borrow and numba.__version__ == LIGHT_LOAD_NUMBA:
        kwargs["_nrt"] = False
    kwargs.setdefault("cache", True)
    kwargs.setdefault("nogil", True)
    made = numba.njit(*args, **kwargs)
    if args and callable(args[0]):
        return _borrowing(light_load(made), borrow)
    return lambda fn: _borrowing(light_load(made(fn)), borrow)


# the kernels made with ``njit(borrow=True)`` (tests/kernels/test_borrow.py checks what they return)
BORROWING: list = []


def _borrowing(dispatcher, borrow: bool):
    if borrow:
        BORROWING.append(dispatcher)
    return dispatcher

