"""Baechi's memory-constrained placers m-TOPO, m-ETF and m-SCT (Jeon et al., SoCC'20, §2.2-§2.4)
with the §3 design options as switches (colocation co-adjust, co-placement, safe operator fusion,
forward-operator-based placement).

How the pieces fit (one timing model, one set of placement rules):

* ``build_units`` groups ops that must or should share a device: colocation groups (always: they
  are hard constraints here), backward ops with their forward op (``forward_of``, §3.2 (ii)/§3.3 (ii)),
  and an op whose output feeds exactly one op with that op (co-placement, §3.2 (i)). The paper's
  methods cap soft units only by memory (a unit must fit the smallest device, dplace's choice);
  the ``*_capped`` variants (dplace's) also at ``unit_cap`` x total/m of memory and of work.
* Forward-operator-based placement (§3.3 (ii), the paper's methods): when one device could hold the
  whole model, only the forward graph (:func:`forward_graph`) is placed and each backward op takes its
  forward op's device; otherwise every op is placed, each forward/backward pair forced into one unit.
* ``fuse`` merges directly connected ops of one unit into clusters, only in Baechi's safe cases
  (§3.3, Fig. 5 d/e): the source has out-degree <= 1 or the destination in-degree <= 1 in the current
  fused graph, so no cycle can appear. A cluster is scheduled as one meta-op (its ops back to back).
* ``_UnitRules`` is :class:`dplace.schedule.rules.Rules` lifted to units: pins, the unit's device once its first
  op is placed, and memory (the whole unit is reserved when its first op is placed: co-adjust, §3.1).
* The list schedulers ask :class:`dplace.schedule.state.ScheduleState` for every time (data ready, earliest
  start, commit); they keep no clock of their own. m-ETF and m-SCT keep, per device, a heap of
  clusters waiting for data (keyed by data-ready time) and a heap of clusters already available
  (keyed by priority), refreshed lazily, so a step costs O(m log n) instead of a rescan of all
  ready ops.

Compiled twins: :mod:`dplace.kernels.baechi` (units, fusion), :mod:`dplace.kernels.etf` (the m-ETF /
m-SCT list scheduler, parallel comm) and :mod:`dplace.kernels.etfseq` (sequential comm);
tests/kernels/test_etf_kernels.py compares them with this code.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from dplace import kernels
from dplace.budget import Budget
from dplace.instance.columns import forward_of_index
from dplace.errors import InvalidInstanceError, bad_option
from dplace.instance.graph import DisjointSets, components, queue_order
from dplace.instance.model import Instance, Op
from dplace.schedule.ranks import edge_costs, op_costs, upward_rank
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.schedule.simulate import seq_kernel_wanted
from dplace.schedule.state import ScheduleState

from .baechi_units import (  # noqa: F401 - the options and units, re-exported
    BaechiOptions, CappedOptions, CappedSctOptions, Clusters, ForwardGraph, SctOptions, _UnitRules, _caps,
    _forward_only, _forward_pairs, _singletons, build_units, forward_graph, fuse,
)

__all__ = ["BaechiOptions", "CappedOptions", "CappedSctOptions", "Clusters", "ForwardGraph", "SctOptions", "build_units",
           "forward_graph", "fuse", "m_etf", "m_etf_capped", "m_sct", "m_sct_capped", "m_topo", "m_topo_capped"]


def _prepare(inst: Instance, opts: BaechiOptions) -> tuple[list[int], Clusters, _UnitRules]:
    if kernels.use(inst.n, "etf"):  # the same units and clusters, compiled
        ku, ca = _prepare_arrays(inst, opts)
        units = ku.tolist()
        cl = Clusters(*ca.lists())
    else:
        units = build_units(inst, opts)
        cl = fuse(inst, units) if opts.fusion else _singletons(inst)
    return units, cl, _UnitRules(inst, units, cl, opts.colocation_coadjust)


# ------------------------------------------------------------------------- compiled (dplace.kernels)
def _prepare_arrays(inst: Instance, opts: BaechiOptions):
    """``build_units`` and ``fuse`` / ``_singletons`` on arrays: (unit root per op, ClusterArrays)."""
    from dplace.kernels import baechi as kb
    from dplace.kernels.levels import op_cost_mean

    a = kernels.inst_arrays(inst)
    n = inst.n
    work = op_cost_mean(a)
    mem_cap, work_cap, pairs_capped = _caps(inst, opts, int(a.mem.sum()), sum(work.tolist()))
    fwd = _forward_pairs(inst) if opts.forward_placement else []
    units = kb.units(a, work, np.array(fwd, dtype=np.int64).reshape(-1, 2), pairs_capped,
                     opts.coplacement, mem_cap, work_cap)
    label = kb.fuse(a, units) if opts.fusion else np.arange(n)
    return units, kb.cluster_arrays(a, label)


def _schedule_arrays(inst: Instance, units: np.ndarray, ca, reserve_whole: bool, fav_child: np.ndarray | None,
                     budget: Budget | None = None, stop_after: int | None = None
                     ) -> tuple[list[int], list[list[int]], float | None, int, dict]:
    """``_list_schedule`` compiled (parallel comm: :mod:`dplace.kernels.etf`; sequential:
    :mod:`dplace.kernels.etfseq`): placement, per-device order, makespan, fallbacks, extra.

    ``budget``: at its deadline a timer lowers the kernel's stop count (the kernel releases the GIL),
    so it ends after the cluster it is placing; the clusters left are placed by the compiled twin of
    :func:`_complete_by_deadline` (makespan None: the simulator's). ``stop_after``: place at most that
    many clusters by the method's rule (tests cut it where they want)."""
    import contextlib

    from dplace.kernels.etf import etf
    from dplace.kernels.levels import upward_rank as kupward_rank

    a = kernels.inst_arrays(inst)
    nc, starts = ca.n, ca.ops_ptr[:-1]
    root = np.zeros(inst.n, dtype=bool)  # unit ids numbered by increasing root, as _UnitRules does
    root[units] = True
    nu = int(root.sum())
    uid = (np.cumsum(root) - 1)[units]
    unit_mem = np.zeros(nu, dtype=np.int64)
    np.add.at(unit_mem, uid, a.mem)
    unit_pin = np.full(nu, -1, dtype=np.int64)
    pinned = a.pinned >= 0
    unit_pin[uid[pinned]] = a.pinned[pinned]
    first = ca.ops[starts]
    cmem = np.add.reduceat(a.mem[ca.ops], starts) if nc else np.zeros(0, dtype=np.int64)
    prio = -np.maximum.reduceat(kupward_rank(a)[ca.ops], starts) if nc else np.zeros(0)
    sct = fav_child is not None
    fav = np.asarray(fav_child if sct else np.full(nc, -1), dtype=np.int64)
    stop = np.full(1, nc if stop_after is None else min(nc, stop_after), dtype=np.int64)
    if budget is not None and budget.expired():
        stop[0] = 0
    if inst.comm == "sequential":  # the state's times (sends queued on their links), compiled
        from dplace.kernels.etfseq import etf_seq

        with budget.on_expiry(lambda: stop.fill(0)) if budget is not None else contextlib.nullcontext():
            pl_s, order, span, fallbacks, placed = etf_seq(
                inst, ca.ops_ptr, ca.ops, ca.succ_ptr, ca.succ, ca.pred_ptr, ca.pred, prio, uid[first], unit_mem,
                unit_pin, cmem, reserve_whole, fav, sct, stop)
        return pl_s, order, span, fallbacks, ({} if placed == nc else _cut_extra(placed, nc))
    with budget.on_expiry(lambda: stop.fill(0)) if budget is not None else contextlib.nullcontext():
        pl, _, end, seq, fallbacks, placed = etf(
            inst.m, ca.ops_ptr, ca.ops, ca.succ_ptr, ca.succ, ca.pred_ptr, ca.pred, prio, uid[first], unit_mem,
            unit_pin, cmem, a.capacity, reserve_whole, fav, sct, a.pred_ptr, a.pred_edge, a.esrc, a.ebytes, a.lat,
            a.bw, a.dur, stop)
    dev_of = pl[seq]
    order = [seq[dev_of == d].tolist() for d in range(inst.m)]
    if placed == nc:
        return pl.tolist(), order, float(end.max()) if inst.n else 0.0, int(fallbacks), {}
    return pl.tolist(), order, None, int(fallbacks), _cut_extra(int(placed), nc)


def _compiled(inst: Instance) -> bool:
    """Whether m-ETF / m-SCT run compiled: parallel comm from the ``etf`` kernel size, sequential comm where
    the compiled sequential state runs (:func:`dplace.schedule.simulate.seq_kernel_wanted`)."""
    return kernels.use(inst.n, "etf") if inst.comm == "parallel" else seq_kernel_wanted(inst)


def _extra(inst: Instance, units: list[int], cl: Clusters) -> dict:
    return {"units": len(set(units)), "clusters": cl.n, "ops": inst.n}


def _extra_arrays(inst: Instance, units: np.ndarray, ca) -> dict:
    return {"units": int(np.count_nonzero(units == np.arange(inst.n))), "clusters": ca.n, "ops": inst.n}


# ------------------------------------------------------------------------------------------ m-TOPO
@register("m_topo", options=BaechiOptions, paper="Baechi §2.2, §3 (SoCC'20)",
          summary="Baechi §2.2 m-TOPO: BFS topological order, fill devices up to total/m + largest op; §3 as in the paper.")
def m_topo(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
           **options) -> Result:
    """m-TOPO (Baechi §2.2): walk a BFS topological order, fill devices in id order up to
    Cap = sum(d_i)/m + max(d_i); each device runs its ops in that order. §3 options as the paper's
    (no unit cap; forward-only placement when one device holds the model). Ties: the BFS queues sources in
    the instance's topological order and children in edge order (dplace's choice)."""
    return _m_topo(inst, "m_topo", BaechiOptions(**options), options, Budget.resolve(None, time_limit_s))


def _m_topo(inst: Instance, method: str, opts: BaechiOptions, options: dict, budget: Budget) -> Result:
    fo = _forward_only(inst, opts, method, options, lambda g: _m_topo(g, method, opts, options, budget))
    if fo is not None:
        return fo
    units, cl, ur = _prepare(inst, opts)
    cap = sum(inst.mem) / inst.m + (max(inst.mem) if inst.n else 0)
    # BFS (M-TOPO) order over the cluster graph; with singleton clusters this is m_topo_order(inst)
    bfs = queue_order(cl.succ, [c for c in range(cl.n) if not cl.pred[c]], to_head=False)
    placement = [-1] * inst.n
    order: list[list[int]] = [[] for _ in range(inst.m)]
    cur = fallbacks = 0
    for c in bfs:
        d = ur.forced(c)
        if d >= 0 and not ur.fits(c, d):
            fallbacks += 1
        if d < 0:
            need = ur.need(c)
            while cur < inst.m - 1 and (ur.used[cur] + need > cap or not ur.fits(c, cur)):
                cur += 1
            if ur.fits(c, cur):
                d = cur
            else:
                cands = ur.candidates(c)
                d = cands[0] if cands else ur.fallback(c)
                fallbacks += not cands
        ur.assign(c, d)
        for o in cl.ops[c]:
            placement[o] = d
            order[d].append(o)
    return make_result(inst, method, placement, order, options=options,
                       extra={**_extra(inst, units, cl), "cap_bytes": cap, "fallbacks": fallbacks})


# ---------------------------------------------------------------------------- m-ETF / m-SCT engine
def _list_schedule(inst: Instance, cl: Clusters, ur: _UnitRules, fav_child: list[int] | None,
                   budget: Budget | None = None) -> tuple[list[int], list[list[int]], float | None, int, dict]:
    """Memory-constrained ETF over clusters (Baechi §2.3), or SCT's finite-device rule (§2.4) when
    ``fav_child`` is given.

    At each step the (cluster, device) pair with the earliest start max(device free, data ready) is
    scheduled; a device that cannot hold the cluster is dropped for it. Ties: for SCT, first the
    favorite child of a cluster on that cluster's device, then urgent clusters (data already on every
    device), then the rest; within a class, larger bottom level first, then topological position.
    Every time comes from ``ScheduleState``. Returns (placement, per-device order, makespan, the number
    of clusters placed best-effort because no device had room (then the Result's memory is flagged),
    extra). ``budget``: checked every ``_CHECK_EVERY`` clusters; once it has expired the clusters not
    yet scheduled are placed by :func:`_complete_by_deadline` (makespan None: the simulator's), and
    extra says how many the method placed.
    """
    m = inst.m
    if seq_kernel_wanted(inst):  # sequential comm on the compiled state (the same times: tests compare)
        from dplace.kernels.seqstate import ArraySeqState

        state = ArraySeqState(inst)
    else:
        state = ScheduleState(inst)
    nc = cl.n
    if budget is not None and budget.expired():  # before the ranks and the ready queues are built
        return _complete_by_deadline(inst, cl, ur, state, [False] * nc, [len(p) for p in cl.pred], 0, 0)
    sct = fav_child is not None
    b = upward_rank(inst, "mean", "mean")
    prio = [-max(b[o] for o in ops) for ops in cl.ops]  # bigger bottom level first
    need = [len(p) for p in cl.pred]
    done = [False] * nc
    drmax = [0.0] * nc
    fav_dev = [-1] * nc
    wait = [[] for _ in range(m)]  # (data ready on d, prio, c)
    avail = [[] for _ in range(m)]  # (class, prio, c): data ready no later than the device is free
    promote = [[] for _ in range(m)]  # SCT: (drmax, prio, c): available, becomes urgent when free >= drmax
    ready_seq: list[int] = []
    ready_ptr = 0
    first = [ops[0] for ops in cl.ops]

    def make_ready(c: int) -> None:
        o = first[c]
        dr = [state.data_ready(o, d) for d in range(m)]
        drmax[c] = max(dr)
        for d in range(m):
            if ur.allowed(c, d):
                heapq.heappush(wait[d], (dr[d], prio[c], c))
        ready_seq.append(c)

    def cls(c: int, d: int, t: float) -> int:
        if not sct:
            return 0
        if fav_dev[c] == d:
            return 0
        return 1 if drmax[c] <= t else 2

    def commit(c: int, d: int) -> None:
        for o in cl.ops[c]:
            state.commit(o, d)
        ur.assign(c, d)
        done[c] = True
        if sct and fav_child[c] >= 0:
            fav_dev[fav_child[c]] = d
        for s in cl.succ[c]:
            need[s] -= 1
            if need[s] == 0:
                make_ready(s)

    for c in range(nc):
        if need[c] == 0:
            make_ready(c)
    placed = fallbacks = 0
    while placed < nc:
        if placed % _CHECK_EVERY == 0 and budget is not None and budget.expired():
            return _complete_by_deadline(inst, cl, ur, state, done, need, placed, fallbacks)
        best = None
        for d in range(m):
            free = state.device_free(d)
            w, a = wait[d], avail[d]
            while w and w[0][0] <= free:
                _, pr, c = heapq.heappop(w)
                if not done[c] and ur.allowed(c, d):
                    k = cls(c, d, free)
                    heapq.heappush(a, (k, pr, c))
                    if k == 2:
                        heapq.heappush(promote[d], (drmax[c], pr, c))
            if sct:
                pq = promote[d]
                while pq and pq[0][0] <= free:
                    _, pr, c = heapq.heappop(pq)
                    if not done[c] and ur.allowed(c, d):
                        heapq.heappush(a, (1, pr, c))
            while a and not (not done[a[0][2]] and ur.allowed(a[0][2], d)):
                heapq.heappop(a)
            if a:
                k, pr, c = a[0]
                key = (free, k, pr, d)
                src = 0
            else:
                while w and not (not done[w[0][2]] and ur.allowed(w[0][2], d)):
                    heapq.heappop(w)
                if not w:
                    continue
                t, pr, c = w[0]
                key = (t, cls(c, d, t), pr, d)
                src = 1
            if best is None or key < best[0]:
                best = (key, c, d, src)
        if best is None:  # every ready cluster lacks a device with room: best effort, flagged
            while done[ready_seq[ready_ptr]]:
                ready_ptr += 1
            c = ready_seq[ready_ptr]
            commit(c, ur.fallback(c))
            placed += 1
            fallbacks += 1
            continue
        key, c, d, src = best
        heapq.heappop(avail[d] if src == 0 else wait[d])
        if inst.comm == "sequential":  # link contention may have delayed the data since it was keyed
            t = state.est(first[c], d)
            if t > key[0] + 1e-9 * max(1.0, abs(t)):
                heapq.heappush(wait[d], (state.data_ready(first[c], d), prio[c], c))
                continue
        commit(c, d)
        placed += 1
    return state.placement, state.order(), state.makespan, fallbacks, {}


_CHECK_EVERY = 32  # clusters between two looks at the budget in _list_schedule


def _complete_by_deadline(inst: Instance, cl: Clusters, ur: _UnitRules, state: ScheduleState, done: list[bool],
                          need: list[int], placed: int, fallbacks: int) -> tuple[list[int], list[list[int]], None, int, dict]:
    """The time limit came while :func:`_list_schedule` had scheduled ``placed`` clusters (a set closed
    under predecessors, ``state``): the others, in topological order after them, each on a device that
    keeps memory (its forced one; else the device of one of its predecessors, in order; else the one
    with most free memory; none: best effort, flagged), appended to that device's order. Not the
    paper's rule: the Result's extra says how far the method got. Compiled twin: ``_complete`` in
    :mod:`dplace.kernels.etf` (tests/kernels/test_etf_kernels.py cuts both after the same clusters)."""
    placement, order = list(state.placement), state.order()
    free = [inst.capacity[d] - ur.used[d] for d in range(inst.m)]
    queue = [c for c in range(cl.n) if not done[c] and need[c] == 0]
    for c in queue:  # grows as clusters become ready
        f = ur.forced(c)
        if f >= 0:
            cands = [f] if ur.fits(c, f) else []
        else:
            need_c = ur.need(c)
            cands = [d for d in range(inst.m) if free[d] >= need_c]
        if cands:
            d = next((x for x in (placement[cl.ops[p][-1]] for p in cl.pred[c]) if x in cands),
                     None) if cl.pred[c] else None
            if d is None:
                d = max(cands, key=lambda x: (free[x], -x))
        else:
            d = ur.fallback(c)
            fallbacks += 1
        ur.assign(c, d)
        free[d] = inst.capacity[d] - ur.used[d]
        for o in cl.ops[c]:
            placement[o] = d
            order[d].append(o)
        for x in cl.succ[c]:
            need[x] -= 1
            if need[x] == 0:
                queue.append(x)
    return placement, order, None, fallbacks, _cut_extra(placed, cl.n)


def _cut_extra(placed: int, clusters: int) -> dict:
    return {"time_limit": {"clusters_placed_by_method": placed, "clusters": clusters,
                           "rest": "placed at the time limit in topological order on a predecessor's device "
                                   "(else the one with most free memory), not by the method's rule"}}


@register("m_etf", options=BaechiOptions, paper="Baechi §2.3, §3 (SoCC'20)",
          summary="Baechi §2.3 m-ETF: earliest (op, device) start first, full devices dropped; §3 as in the paper.")
def m_etf(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
          **options) -> Result:
    """m-ETF (Baechi §2.3, ETF of Hwang et al. 1989 made memory-aware): a queue of (op, device) pairs
    by earliest schedulable time; a pair whose device cannot hold the op is dropped. §3 options as the
    paper's. Ties (the paper is silent): larger bottom level, then topological position, then device id."""
    return _m_etf(inst, "m_etf", BaechiOptions(**options), options, Budget.resolve(budget, time_limit_s))


def _m_etf(inst: Instance, method: str, opts: BaechiOptions, options: dict, budget: Budget) -> Result:
    fo = _forward_only(inst, opts, method, options, lambda g: _m_etf(g, method, opts, options, budget))
    if fo is not None:
        return fo
    if _compiled(inst):  # the compiled list scheduler (the same decisions: tests compare)
        units, ca = _prepare_arrays(inst, opts)
        pl, order, makespan, fallbacks, cut = _schedule_arrays(inst, units, ca, opts.colocation_coadjust, None,
                                                               budget)
        return make_result(inst, method, pl, order, options=options, claimed_makespan=makespan,
                           extra={**_extra_arrays(inst, units, ca), "fallbacks": fallbacks, **cut})
    units, cl, ur = _prepare(inst, opts)
    pl, order, makespan, fallbacks, cut = _list_schedule(inst, cl, ur, None, budget)
    return make_result(inst, method, pl, order, options=options, claimed_makespan=makespan,
                       extra={**_extra(inst, units, cl), "fallbacks": fallbacks, **cut})


def _cluster_lp_data(inst: Instance, cl: Clusters) -> tuple[list[float], list[tuple[int, int, float]]]:
    """SCT LP data on the cluster graph: k_c = mean work of the cluster, c_ab = the largest mean
    transfer time of an edge from a to b (parallel edges travel at once in the simulator)."""
    w = op_costs(inst, "mean")
    ce = edge_costs(inst, "mean")
    k = [sum(w[o] for o in ops) for ops in cl.ops]
    best: dict[tuple[int, int], float] = {}
    of = cl.of
    for e, (s, d) in enumerate(zip(inst.esrc, inst.edst)):
        a, b = of[s], of[d]
        if a != b and ce[e] >= best.get((a, b), -1.0):
            best[(a, b)] = ce[e]
    return k, [(a, b, c) for (a, b), c in sorted(best.items())]


# lp_window=None: one global LP (Baechi's) up to this many clusters, else windows of LP_WINDOW. Measured on
# the loaded 2-core VM (benchmarks/bench_baechi.py --lp 3000,12000), LP seconds, windowed GLOP / windowed
# HiGHS / global HiGHS: 881 clusters 0.70 / 0.31 / 0.30; 2,673: 2.27 / 1.05 / 2.91; 3,175: 1.09 / 1.93 /
# 2.25; 10,665: 7.54 / 4.50 / 23.17. The global LP is only faster on small LPs, and its placements were
# not better beyond them (700,793 vs 668,507 µs at 2,673 clusters), so it is the default up to 2,000.
# The interior point (m_sct's "ipm", load ~10): windows of 1,000 / global, 10,665 clusters 2.3 / 8.4 s;
# 31,977 clusters 3.5 / 98 s. The windows beyond 2,000 clusters are dplace's, for speed (the paper: one LP).
GLOBAL_LP_MAX = 2000
LP_WINDOW = 1000


@register("m_sct", options=SctOptions, paper="Baechi §2.4 eq. 2, §3 (SoCC'20)",
          summary="Baechi §2.4 m-SCT: favourite-child LP (eq. 2) by interior point, x < 0.1 rounded, memory-aware SCT list scheduling.")
def m_sct(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
          **options) -> Result:
    """m-SCT (Baechi §2.4; SCT of Hanen & Munier): solve the favorite-child LP relaxation (eq. 2) by an
    interior-point method without crossover (HiGHS ``ipm``), round x_ij < threshold to "favorite", then
    list-schedule like ETF preferring each favorite child on its parent's device and urgent ops; a full
    device is excluded. §3 options as the paper's. Ties (the paper is silent): see :func:`_list_schedule`;
    two children under the threshold (possible only above 0.5): the smaller x, then edge order."""
    return _m_sct(inst, "m_sct", SctOptions(**options), options, Budget.resolve(budget, time_limit_s))


def _m_sct(inst: Instance, method: str, opts: SctOptions, options: dict, budget: Budget) -> Result:
    """m-SCT under ``budget``, every phase checked: the preparation (units, clusters), the LP data, the LP
    (half of what is left; windows left at its end: greedy favourites), the list schedule (cut at the
    deadline: :func:`_complete_by_deadline`). A limit reached before the LP: no LP, said in
    ``extra["sct_lp_status"]``, and every cluster by the deadline rule (``extra["time_limit"]``)."""
    from dplace.heuristics.sct_lp import favorite_children, solve_sct_lp_windows

    fo = _forward_only(inst, opts, method, options, lambda g: _m_sct(g, method, opts, options, budget))
    if fo is not None:
        return fo
    compiled = _compiled(inst)
    if compiled:  # the compiled list scheduler, as m_etf's (the same decisions: tests compare)
        units_a, ca = _prepare_arrays(inst, opts)
        nc, ur = ca.n, None
    else:
        units, cl, ur = _prepare(inst, opts)
        nc = cl.n

    def result(fav: list[int], extra: dict) -> Result:
        if compiled:
            pl, order, makespan, fallbacks, cut = _schedule_arrays(inst, units_a, ca, opts.colocation_coadjust, fav,
                                                                   budget)
            sizes = _extra_arrays(inst, units_a, ca)
        else:
            pl, order, makespan, fallbacks, cut = _list_schedule(inst, cl, ur, fav, budget)
            sizes = _extra(inst, units, cl)
        return make_result(inst, method, pl, order, options=options, claimed_makespan=makespan,
                           extra={**sizes, "fallbacks": fallbacks, **cut, **extra})

    not_solved = {"sct_lp_status": "not solved: the time limit came before it"}
    if budget.expired():  # the limit came during the preparation: no LP; every cluster by the deadline rule
        return result([-1] * nc, not_solved)
    if compiled:
        cl = Clusters(*ca.lists())
    k, edges = _cluster_lp_data(inst, cl)
    if budget.expired():
        return result([-1] * nc, not_solved)
    window = int(opts.lp_window) if opts.lp_window is not None else (0 if cl.n <= GLOBAL_LP_MAX else LP_WINDOW)
    # the LP gets half of what is left, the list schedule the rest
    lp = solve_sct_lp_windows(k, edges, window=window, solver=opts.lp_solver, budget=budget.share(0.5))
    fav_child, _ = favorite_children(cl.n, edges, lp.x, opts.threshold)
    # the SCT relaxation's optimum (infinite devices): NOT a lower bound of this problem
    extra = {"sct_lp_objective": lp.objective, "sct_lp_status": lp.status, "sct_lp_time_s": lp.time_s,
             "sct_lp_windows": len(lp.window_objectives), "favorite_children": sum(1 for f in fav_child if f >= 0)}
    if len(lp.window_objectives) > 1:
        extra["sct_lp_window_objectives"] = lp.window_objectives
    return result(fav_child, extra)


# ------------------------------------------------------------------------------ dplace's variants
def _register_capped(paper_name: str, impl, options: type, paper: str, more: str = ""):
    """Register ``<paper_name>_capped``: ``impl`` with co-placement units capped at ``unit_cap`` x
    (total memory, total work) / m, forward/backward pairs as units of the whole graph (no forward-only
    placement; pairs capped too when memory is short) -- the project's settings before the paper
    methods got the paper's -- and ``more``."""
    name = f"{paper_name}_capped"

    def place(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
              **opts) -> Result:
        return impl(inst, name, options(**opts), opts, Budget.resolve(budget, time_limit_s))

    place.__name__ = place.__qualname__ = name
    place.__doc__ = f":func:`{paper_name}` with dplace's unit cap{more}: see :func:`_register_capped`."
    summary = f"{paper_name} with dplace's unit cap (soft units <= unit_cap x total/m memory and work), whole graph placed{more}."
    return register(name, options=options, paper=paper, variant_of=paper_name, summary=summary)(place)


m_topo_capped = _register_capped("m_topo", _m_topo, CappedOptions, "Baechi §2.2, §3")
m_etf_capped = _register_capped("m_etf", _m_etf, CappedOptions, "Baechi §2.3, §3")
m_sct_capped = _register_capped("m_sct", _m_sct, CappedSctOptions, "Baechi §2.4, §3", ", LP by dual simplex (HiGHS)")
