"""Proven lower bounds on the makespan, and the early memory-feasibility check.

Every bound here is the optimum (or a bound of the optimum) of a documented relaxation, so it is at most
the makespan of every schedule that keeps pins, colocation and memory:

* ``critical_path``: longest path, each op on its fastest device, no transfers;
* ``work``: total work over total capacity; ``longest_op``; ``pinned``: the load pinned to one device;
* ``energetic``: energetic reasoning over intervals (:func:`energetic_bound`), vectorised, any size;
* ``memory_path``: the critical path plus the transfers that memory and colocation force on it
  (:func:`memory_path_bound`); ``memory_cuts``: the same, the path cut into runs that each fit on a
  device, cheapest cuts found by a dynamic programme (:func:`dplace.bounds.memory.memory_cuts_bound`);
* ``anchored_work``: work that cannot run early (late) away from the one source's (sink's) device, what
  spreading work costs in transfers (:func:`anchored_work_bound`; it bites on the segments below, each
  of which has one first and one last op); ``anchored_split``: with one source or sink, either they
  share a device that runs every op whose trip away and back does not fit, or a transfer joins them
  (:func:`anchored_split_bound`; on a branchy segment it is the optimum);
* ``pinned_links``: the sends that pins force across a link (:func:`pinned_links_bound`); ``forced_links``:
  the sends that pins, colocation or memory force (two units that cannot share a device), each on its
  path, and in sequential comm the link time that those sharing few links need
  (:func:`dplace.bounds.links.forced_links_bound`; parallel comm: the single sends only);
* ``fan_in`` (sequential comm only): a join's inputs either run on its device or queue on the links into
  it, so the time before it starts is at least the least W that both can absorb
  (:func:`dplace.bounds.fanin.fan_in_bound`); the segment bound applies it to each segment, where it pays;
* ``segments``: segments of the critical path, each bounded by CP-SAT and the cheap bounds above
  (:mod:`dplace.formulations.bounds_segments`, behind an option: it runs CP-SAT); ``segments_memory``: that plus the
  transfers memory forces on one-op segments (:mod:`dplace.bounds.memory`); both bound two pieces that
  colocation ties crosswise (a forward stem and its backward stem) together
  (:func:`dplace.bounds.mirror.mirror_split_bound`, its pairs in the part's ``mirrored``); ``twin_stems``: on graphs of
  two parts tied op by op that begin with chains, the chains solved exactly together, each followed by a
  proven bound of its part's rest (:mod:`dplace.formulations.bounds_twins`).

:func:`lower_bound` is the max of the cheap ones (printed by default); :func:`bound_portfolio` runs all of
them, with the time each took, for ``dplace info --bounds``. Within :func:`quick_bounds` (a time limit too
short for them all) it is the max of the ``QUICK_PARTS`` only: a weaker bound, still proven.

Compiled twin of the cheap bounds: :mod:`dplace.kernels.bounds` (tests/kernels/test_kernels_bounds.py).

**Comm modes.** Every parallel-comm bound is a sequential-comm bound. Proof: take any sequential-comm
schedule S and give its placement and per-device orders to the parallel model (the simulator's other
mode). There a send starts when its producer ends; in S it starts then or later (when its link is free),
and every other rule (devices, durations, memory) is the same. By induction over S's starts, each op of
the parallel schedule starts no later than in S, so its makespan is at most S's, and at least the
parallel optimum, which every parallel-comm bound is at most. Here every part is computed by rules the
two modes share, the sequential-only terms (``pinned_links``' and ``forced_links``' link queues,
``fan_in``) only raising a part, and the solver bounds relax sequential comm to parallel (segments' step 1,
twin stems' steps 2-3): so each part of a sequential instance is at least the same part of its parallel
copy, and no separate max over the parallel copy is needed (tests/test_bounds_comm.py: both modes' brute-force
optima, every cheap part on random instances and the bundled graphs, the segment bound).
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..budget import Budget
from ..errors import InfeasibleError
from .anchored import anchored_split_bound, anchored_work_bound
from .fanin import fan_in_bound
from .links import forced_links_bound
from .memory import memory_cuts_bound
from .shared import critical_path_length, critical_path_ops, heads_tails, smallest_times
from ..kernels import bounds as kb
from ..instance.model import Instance


def work_bound(inst: Instance) -> float:
    """Total work over total capacity to do work.

    With scalar op times (time / speed on each device), a device's busy time is its work over its
    speed, so makespan >= total work / sum of speeds. With per-device times every op needs at least
    its smallest time on some device, so makespan >= sum of smallest times / device count.
    """
    cols = inst.columns  # the ops' times as given, without building Op objects
    times = cols.time.tolist() if hasattr(cols.time, "tolist") else cols.time  # an array (.npz) or a list
    if not cols.time_map and not any(issubclass(t, dict) for t in set(map(type, times))):  # no op's time a dict
        total = sum(map(float, times))
        return total / sum(dev.speed for dev in inst.devices)
    return sum(smallest_times(inst)) / inst.m


def pinned_bound(inst: Instance) -> float:
    """Each device must run the ops pinned to it one after another."""
    if kb.use_arrays(inst):
        return kb.pinned_bound(inst)  # the same value, without the per-op lists
    load = [0.0] * inst.m
    for o, d in enumerate(inst.pinned):
        if d >= 0:
            load[d] += inst.dur[o][d]
    return max(load) if load else 0.0


def pinned_links_bound(inst: Instance) -> float:
    """Transfers every placement makes: an edge (u, v) whose ends are pinned (own pin or their group's)
    to devices d1 != d2 needs u's tensor sent on link (d1, d2), at least ``bytes`` of the edge (one send
    per (u, d2) carrying the largest tensor; ``latency + bytes / bandwidth``). u ends no earlier than
    r_u = head(u) + p(u), and after the send arrives a consumer still needs q_u = min over those
    consumers v of p(v) + tail(v) (p: smallest time, head / tail: longest paths with smallest times, no
    transfers). Each send alone gives r_u + c_u + q_u (both comm modes). In sequential comm a link carries
    one send at a time, so for every set of its forced sends, min r + sum of c + min q is a bound: taken
    over the sets {sends whose r is at least a threshold} (sorted by r), the single-machine head-body-
    tail bound. 0 where nothing is forced apart."""
    import numpy as np

    if inst.m < 2 or not inst.n or not inst.n_edges:
        return 0.0
    pin = inst._pinned_a
    es, ed = inst._esrc_a, inst._edst_a
    du, dv = pin[es], pin[ed]
    forced = np.flatnonzero((du >= 0) & (dv >= 0) & (du != dv))
    if not len(forced):
        return 0.0
    p, head, tail = heads_tails(inst)
    sends: dict[tuple[int, int], list[float]] = {}  # (u, d2) -> [bytes, q]
    for e, b in zip(forced.tolist(), inst._ebytes_a[forced].tolist()):
        u, v = int(es[e]), int(ed[e])
        key = (u, int(dv[e]))
        q = float(p[v] + tail[v])
        got = sends.get(key)
        if got is None:
            sends[key] = [b, q]
        else:
            got[0] = max(got[0], b)
            got[1] = min(got[1], q)
    links: dict[tuple[int, int], list[tuple[float, float, float]]] = {}
    best = 0.0
    for (u, d2), (b, q) in sends.items():
        d1 = int(pin[u])
        c = inst.lat[d1][d2] + b / inst.bw[d1][d2]
        r = float(head[u] + p[u])
        best = max(best, r + c + q)
        links.setdefault((d1, d2), []).append((r, c, q))
    if inst.comm == "sequential":
        for items in links.values():
            items.sort()
            total, qmin = 0.0, float("inf")
            for r, c, q in reversed(items):  # the sends with r at least this one's
                total += c
                qmin = min(qmin, q)
                best = max(best, r + total + qmin)
    return best


def _largest(k, j: int):
    """The ``j`` largest values of each column of ``k`` (j x columns, largest first; ties repeat): j passes
    of argmax over the rows of its transpose (j is m - 1, a few; np.partition along the columns of
    36k-op k took 10x as long)."""
    import numpy as np

    kt = np.ascontiguousarray(k.T)
    rows = np.arange(kt.shape[0])
    top = np.empty((j, kt.shape[0]))
    for x in range(j):
        i = kt.argmax(axis=1)
        top[x] = kt[rows, i]
        kt[rows, i] = -np.inf
    return top


def energetic_bound(inst: Instance, start: float = 0.0, grid: int | None = None) -> float:
    """Energetic reasoning (Lopez & Erschler 1992; Baptiste, Le Pape & Nuijten, "Constraint-Based
    Scheduling", ch. 3) on the relaxation "m machines, each op takes its smallest time p_o, no transfers,
    no memory": op o runs inside [head_o, L - tail_o]. For an interval [a, L - c] of width w = L - a - c,
    op o must spend at least k_o(w) = min(p_o, w, head_o + p_o - a, tail_o + p_o - c)^+ inside it, and the
    m devices give at most m w. With k_o = min(p_o, head_o + p_o - a, tail_o + p_o - c)^+ (independent of
    L), sum_o min(w, k_o) = min_j (j w + T_j), T_j = the sum of all but the j largest k_o, so the interval
    is overloaded exactly for 0 < w < w* = min_{j < m} T_j / (m - j) (when more than m ops have k_o > 0).
    Every schedule's makespan L lies outside every such open interval (a + c, a + c + w*) and is at least
    the critical path and ``start``: the smallest such L is returned. ``a`` ranges over ``grid`` quantiles of the heads and
    ``c`` over quantiles of the tails (all of them for small graphs): any choice keeps it a bound.
    Vectorised with numpy: O(n · grid²); by default grid = 48, fewer above ~9,000 ops (n · grid² <= 2e7)."""
    import numpy as np

    n, m = inst.n, inst.m
    if n <= m:
        return max(float(start), critical_path_length(inst))
    if grid is None:
        grid = max(8, min(48, int((2e7 / n) ** 0.5)))
    p, head, tail = heads_tails(inst)
    start = max(float(start), float((head + p + tail).max()))

    def points(x):
        u = np.unique(x)
        if len(u) > grid:
            u = np.unique(np.quantile(x, np.linspace(0.0, 1.0, grid), method="lower"))
        return u

    As, Cs = points(head), points(tail)
    hp, tp = head + p, tail + p
    lo_list, hi_list = [], []
    buf = np.empty((n, len(Cs)))  # k of every a in one buffer (a fresh 6 MB array each time: page faults)
    for a in As:
        left = np.minimum(p, hp - a)
        rows = left > 0
        if rows.sum() <= m:
            continue
        lft, tpr = left[rows], tp[rows]
        k = buf[:len(lft)]  # ops x c: min(lft, tpr - c), then at least 0
        np.subtract(tpr[:, None], Cs[None, :], out=k)
        np.minimum(lft[:, None], k, out=k)
        np.maximum(k, 0.0, out=k)
        cnt = (k > 0).sum(axis=0)
        cols = cnt > m
        if not cols.any():
            continue
        k = k[:, cols]  # a copy laid out as numpy's indexing makes it: the sums below depend on the layout
        total = k.sum(axis=0)
        top = _largest(k, m - 1)
        # T_j = total - (sum of the j largest), j = 0..m-1
        wstar = total / m
        run = np.zeros_like(total)
        for j in range(1, m):
            run = run + top[j - 1]
            wstar = np.minimum(wstar, (total - run) / (m - j))
        base = a + Cs[cols]
        lo_list.append(base)
        hi_list.append(base + wstar)
    L = float(start)
    if not lo_list:
        return L
    lo = np.concatenate(lo_list)
    hi = np.concatenate(hi_list)
    idx = np.argsort(lo, kind="stable")
    lo, hi = lo[idx], hi[idx]
    for x, y in zip(lo.tolist(), hi.tolist()):  # sweep: push L past every interval that contains it
        if x >= L:
            break
        if y > L:
            L = y
    return L if L == start else L * (1.0 - 1e-12)  # float sums: stay a hair below


def memory_path_bound(inst: Instance) -> float:
    """The critical path plus the transfers that memory and colocation force on it.

    Relaxation: only the ops of one critical path P (fastest devices) count, each with its smallest time;
    P's ops, and the colocation groups they belong to (a group goes where its members go), must fit in
    memory, so they need at least k devices, the smallest k with the k largest capacities summing to
    their memory. Walking along P the device then changes at least k - 1 times, each change on an edge
    (u, v) of P whose ends may be apart (not in one colocation group, not pinned to one device) and
    costing at least that edge's cheapest transfer. So makespan >= len(P) + the k - 1 cheapest such
    transfers. Where the kernels run, :func:`dplace.kernels.bounds.memory_path_bound` (the same value)."""
    if kb.use_arrays(inst):
        return kb.memory_path_bound(inst, devices_needed, critical=(critical_path_length(inst), critical_path_ops(inst)))
    path = critical_path_ops(inst)
    if len(path) < 2 or inst.m < 2:
        return critical_path_length(inst)
    base = sum(min(inst.dur[o]) for o in path)
    groups = {inst.group_of[o] for o in path if inst.group_of[o] >= 0}
    items = [inst.mem[o] for o in path if inst.group_of[o] < 0]
    items += [sum(inst.mem[o] for o in inst.groups[g]) for g in groups]
    k = devices_needed(items, inst.capacity)
    if k <= 1:
        return base
    costs = []
    for u, v in zip(path, path[1:]):
        if inst.group_of[u] >= 0 and inst.group_of[u] == inst.group_of[v]:
            continue
        if inst.pinned[u] >= 0 and inst.pinned[u] == inst.pinned[v]:
            continue
        e = next(e for e in inst.succ[u] if inst.edst[e] == v)
        au, av = inst.allowed_devices(u), inst.allowed_devices(v)
        c = min((inst.transfer_time(e, a, b) for a in au for b in av if a != b), default=None)
        if c is not None:
            costs.append(c)
    costs.sort()
    return base + sum(costs[: k - 1])


def devices_needed(items: list[int], capacity: list[int]) -> int:
    """A lower bound on how many devices hold ``items`` (bytes; each item whole on one device).

    Volume: the fewest devices whose capacities (largest first) add up to the total. Large items: two
    items above half the largest capacity never share a device. With equal capacities C, also
    (Martello & Toth's L2 with alpha = C/2): each large item uses a device of its own and the small ones
    fill what the large ones leave, so k >= #large + ceil((small total - room beside the large) / C)."""
    import math

    caps = sorted(capacity, reverse=True)
    total = sum(items)
    k, acc = 0, 0
    while k < len(caps) and acc < total:
        acc += caps[k]
        k += 1
    big = [x for x in items if 2 * x > caps[0]]
    k = max(k, len(big))
    if len(set(caps)) == 1 and caps[0] > 0:
        c = caps[0]
        small = total - sum(big)
        room = sum(c - x for x in big)
        k = max(k, len(big) + max(0, math.ceil((small - room) / c)))
    return k


QUICK_PARTS = ("critical_path", "work", "longest_op", "pinned")  # one pass over ops and edges each
BOUND_US = 7.0  # CPU µs per op + edge of the parts beyond QUICK_PARTS (36k-op transformer: ~0.5 s CPU)
_QUICK: ContextVar[bool] = ContextVar("dplace_quick_bounds", default=False)


def bound_cost_s(inst: Instance) -> float:
    """Estimated CPU seconds of the parts of :func:`lower_bound_parts` beyond ``QUICK_PARTS`` (0 once
    computed for ``inst``)."""
    return 0.0 if "_lower_bound_parts" in inst.__dict__ else 1e-6 * BOUND_US * (inst.n + len(inst.esrc))


@contextmanager
def quick_bounds(on: bool = True) -> Iterator[None]:
    """Within: :func:`lower_bound_parts` of an Instance whose full set is not computed yet gives only the
    ``QUICK_PARTS`` (for a time limit too short for the rest; ``dplace.solve`` decides)."""
    token = _QUICK.set(on)
    try:
        yield
    finally:
        _QUICK.reset(token)


def scale_parts(inst: Instance) -> dict[str, float]:
    """The cheap bounds that stay linear-time on arrays (:mod:`dplace.kernels.bounds`), by name: what
    :func:`lower_bound_parts` returns from ``kernels.bounds.SCALE_FROM`` ops on."""
    return {
        "critical_path": kb.critical_path(inst)[0],
        "work": kb.work_bound(inst),
        "longest_op": kb.longest_op(inst),
        "pinned": kb.pinned_bound(inst),
        "memory_path": kb.memory_path_bound(inst, devices_needed),
        "energetic": energetic_bound(inst),
        "pinned_links": pinned_links_bound(inst),
        "forced_links": forced_links_bound(inst),
        "fan_in": fan_in_bound(inst),
    }


def lower_bound_parts(inst: Instance) -> dict[str, float]:
    """The cheap bounds, by name (all proven; :func:`lower_bound` is their max). Computed once per
    Instance (an Instance is read-only once built) and kept on it; within :func:`quick_bounds` only the
    ``QUICK_PARTS``, unless all are known already. Waits for their computation where
    :func:`start_lower_bound` began it."""
    job = inst.__dict__.get("_lower_bound_job")
    if job is not None and job is not threading.current_thread():
        job.join()
        inst.__dict__.pop("_lower_bound_job", None)
        if job.error is not None:  # pragma: no cover - the cheap bounds raise nothing past the memory check
            raise job.error
    cached = inst.__dict__.get("_lower_bound_parts")
    if cached is None and _QUICK.get():
        quick = inst.__dict__.get("_quick_bound_parts")
        if quick is None:
            quick = inst.__dict__["_quick_bound_parts"] = {
                "critical_path": critical_path_length(inst), "work": work_bound(inst),
                "longest_op": max(smallest_times(inst), default=0.0), "pinned": pinned_bound(inst)}
        return dict(quick)
    if cached is None and kb.use_arrays(inst, kb.SCALE_FROM):
        cached = inst.__dict__["_lower_bound_parts"] = scale_parts(inst)
    if cached is None:
        cached = {
            "critical_path": critical_path_length(inst),
            "work": work_bound(inst),
            "longest_op": max(smallest_times(inst), default=0.0),
            "pinned": pinned_bound(inst),
            "memory_path": memory_path_bound(inst),
            "memory_cuts": memory_cuts_bound(inst),
            "energetic": energetic_bound(inst),
            "anchored_work": anchored_work_bound(inst),
            "anchored_split": anchored_split_bound(inst),
            "pinned_links": pinned_links_bound(inst),
            "forced_links": forced_links_bound(inst),
            "fan_in": fan_in_bound(inst),
        }
        inst.__dict__["_lower_bound_parts"] = cached
    return dict(cached)


class _BoundJob(threading.Thread):
    """:func:`lower_bound_parts` of one instance, on a thread of its own."""

    def __init__(self, inst: Instance) -> None:
        super().__init__(name="dplace-lower-bound", daemon=True)
        self.inst, self.error = inst, None

    def run(self) -> None:
        try:
            lower_bound_parts(self.inst)
        except BaseException as exc:  # pragma: no cover - handed to the thread that waits for it
            self.error = exc
        finally:
            self.inst = None


def start_lower_bound(inst: Instance) -> bool:
    """Begin :func:`lower_bound_parts` of ``inst`` on a second thread, beside what the caller runs next (a
    method), where it is large enough for the compiled bounds (:data:`dplace.kernels.bounds.SCALE_FROM`
    ops), which release the GIL; the first call of :func:`lower_bound_parts` (any thread) waits for it.
    The same bounds, the same values: only when they are computed changes. Not within
    :func:`quick_bounds`, nor when they are known or begun already. True when it began them. Check
    memory first (:func:`check_memory_feasible`): the bounds assume it."""
    d = inst.__dict__
    if "_lower_bound_parts" in d or "_lower_bound_job" in d or _QUICK.get() or not kb.use_arrays(inst, kb.SCALE_FROM):
        return False
    from ..kernels.arrays import inst_arrays

    inst_arrays(inst)  # what both threads read: built once, here, before they start
    job = d["_lower_bound_job"] = _BoundJob(inst)
    job.start()
    return True


def best_part(parts: dict[str, float]) -> tuple[str, float]:
    """(name, value) of the largest bound (the first such name on ties)."""
    name = max(parts, key=lambda k: parts[k])
    return name, parts[name]


def lower_bound_with_source(inst: Instance) -> tuple[float, str]:
    """:func:`lower_bound` and the name of the relaxation that gives it."""
    check_memory_feasible(inst)
    name, value = best_part(lower_bound_parts(inst))
    return value, name


def lower_bound(inst: Instance) -> float:
    """Max of the cheap proven bounds (:func:`lower_bound_parts`): a lower bound on every schedule's
    makespan. Raises :class:`InfeasibleError` first when the ops cannot fit in the devices' memory."""
    return lower_bound_with_source(inst)[0]


@dataclass(frozen=True)
class BoundPart:
    name: str
    value: float  # µs, proven lower bound
    time_s: float  # wall time it took
    detail: dict[str, Any] | None = None


def bound_portfolio(inst: Instance, *, segments: bool = True, time_limit_s: float = 30.0,
                    workers: int = 1) -> list[BoundPart]:
    """Every bound with its time: the cheap ones and (``segments=True``) the segment decomposition
    within ``time_limit_s``, then on graphs of two tied parts that begin with chains the twin-stem bound
    within ``time_limit_s`` more. The best is ``max(parts, key=value)``."""
    check_memory_feasible(inst)
    out = []
    for name, fn in (("critical_path", critical_path_length), ("work", work_bound),
                     ("longest_op", lambda i: max((min(r) for r in i.dur), default=0.0)), ("pinned", pinned_bound),
                     ("memory_path", memory_path_bound), ("memory_cuts", memory_cuts_bound),
                     ("energetic", lambda i: energetic_bound(i, grid=48)),
                     ("anchored_work", anchored_work_bound), ("anchored_split", anchored_split_bound),
                     ("pinned_links", pinned_links_bound), ("forced_links", forced_links_bound),
                     ("fan_in", fan_in_bound)):
        t0 = time.perf_counter()
        v = fn(inst)
        out.append(BoundPart(name, v, time.perf_counter() - t0))
    if segments and inst.n:
        for portfolio, _ in _solver_bounds():
            out += portfolio(inst, time_limit_s=time_limit_s, workers=workers)
    return out


def strong_bound(inst: Instance, *, time_limit_s: float, should_stop=None) -> BoundPart:
    """The best of the cheap bounds and the bounds that need a solver (the segment and twin-stem bounds of
    :mod:`dplace.formulations.bounds_segments`/``bounds_twins``, their CP-SAT solves within ``time_limit_s``):
    what ``compare`` sets beside the methods' own bounds. The part's name is the source of the largest."""
    t0 = time.perf_counter()
    budget = Budget(time_limit_s)
    value, name = lower_bound_with_source(inst)
    if inst.n > 2:
        for _, strengthen in _solver_bounds():
            value, name = strengthen(inst, value, name, budget=budget, should_stop=should_stop)
    return BoundPart(name, value, time.perf_counter() - t0)


# Bounds that need a solver live with the exact methods (formulations/) and register here, so the core never
# imports them: ``portfolio(inst, *, time_limit_s, workers) -> list[BoundPart]`` (for :func:`bound_portfolio`)
# and ``strengthen(inst, value, name, *, budget, should_stop) -> (value, name)`` (for :func:`strong_bound`).
_SOLVER_BOUNDS: dict[str, tuple[Callable[..., list[BoundPart]], Callable[..., tuple[float, str]]]] = {}


def register_solver_bound(name: str, *, portfolio: Callable[..., list[BoundPart]],
                          strengthen: Callable[..., tuple[float, str]]) -> None:
    """Register a bound that needs a solver (called by its module in ``formulations/`` when imported)."""
    _SOLVER_BOUNDS[name] = (portfolio, strengthen)


def _solver_bounds() -> list[tuple[Callable[..., list[BoundPart]], Callable[..., tuple[float, str]]]]:
    from ..plugins import load_methods

    load_methods()  # imports formulations/, whose bound modules register themselves
    return list(_SOLVER_BOUNDS.values())


def check_memory_feasible(inst: Instance) -> None:
    """Fail early when no placement can respect memory (necessary conditions only). Checked once per
    Instance (read-only once built): a pass is kept on it."""
    if "_memory_checked" in inst.__dict__:
        return None
    _check_memory_feasible(inst)
    inst.__dict__["_memory_checked"] = True
    return None


def _check_memory_feasible(inst: Instance) -> None:
    if kb.use_arrays(inst):
        return kb.check_memory_feasible(inst)
    largest = max(inst.capacity)
    for o in range(inst.n):
        if inst.mem[o] > largest:
            raise InfeasibleError(f"op {inst.ops[o].id!r}: memory {inst.mem[o]} exceeds the largest device ({largest})")
    for g, members in enumerate(inst.groups):
        total = sum(inst.mem[o] for o in members)
        if total > largest:
            raise InfeasibleError(
                f"colocation {inst.group_names[g]!r}: memory {total} exceeds the largest device ({largest})"
            )
    total = sum(inst.mem)
    cap = sum(inst.capacity)
    if total > cap:
        raise InfeasibleError(f"ops need {total} bytes in all, devices hold {cap}")
    pinned = [0] * inst.m
    for o, d in enumerate(inst.pinned):
        if d >= 0:
            pinned[d] += inst.mem[o]
    for d in range(inst.m):
        if pinned[d] > inst.capacity[d]:
            raise InfeasibleError(
                f"device {inst.devices[d].name!r}: pinned ops need {pinned[d]} bytes, it holds {inst.capacity[d]}"
            )
