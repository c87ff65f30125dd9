"""Optimal Operation Fusion: cut a topological order into clusters and build the coarse graph.

Source: Celeritas (Xu et al.), §5.1.3 and Alg. 1 — Kernighan's sequence-partitioning dynamic program
over the CPD-TOPO order, eqs. (4)-(6), with exploration range ``R`` and cluster memory limit ``M``.

The step is reusable on its own (the exact solvers solve the coarse graph and map back)::

    c = coarsen(inst)                       # CPD-TOPO order, R=200, M=0.25 of device memory
    res = some_method(c.coarse)             # any method on the coarse Instance
    placement = c.expand(res.placement)     # a device for every original op
    order = c.expand_order(res.order)       # optional: per-device order of the original ops

The dynamic program. Let v_0..v_{n-1} be the order and a breakpoint j start a new cluster at v_j.
``cost(i, j)`` (eq. 4) is the communication from the cluster [v_i, v_j) to ops at or after v_j;
``S(j) = min_i S(i) + cost(i, j)`` (eq. 6) over ``j - R <= i < j`` with the memory of [v_i, v_j) at
most ``M``; since every edge goes forward in a topological order, ``S(n)`` is exactly the summed
communication cost of the edges between clusters. ``cost`` is kept incrementally (eq. 5): moving the
end from j-1 to j adds v_{j-1}'s out-edges and removes those of its in-edges that start inside the
cluster, so the whole DP costs O(R·V + R·E) in the worst case; the per-j window is one numpy vector.
Edge costs are the mean transfer times of :func:`dplace.schedule.ranks.edge_costs` (same as CPD-TOPO's).

Acyclicity (Lemma 2). Every cluster is a contiguous run of a topological order, so every edge between
clusters goes from a lower to a higher cluster index: the cluster indices are a topological order of
the coarse graph. ``coarsen`` asserts this for every coarse edge.

Colocation and pins. Pins are kept exactly: the DP only allows clusters whose pinned ops share one
device, and such a cluster is pinned to it in the coarse Instance. A colocation group is never split
across *devices*, but it is not kept inside one cluster: merging a group's clusters could create a
cycle (Theorem 1) and, in a training graph, a variable and its update op sit at both ends of the step,
so merging would swallow the graph; and allowing only one group per cluster cuts a training graph into
thousands of tiny clusters (measured: 12,006 instead of 197 clusters on the 36k-op Transformer). So a
group is *moved*: its **anchor** is the cluster holding its largest member (by memory, then earliest
in the order; with ``anchor_first``, as Celeritas §6.1 says, its member earliest in the order);
``expand`` puts every member of the group on the anchor's device, and the coarse Instance counts the group's whole memory in the anchor cluster (and none of it elsewhere), so per-
device memory of the expanded placement equals that of the coarse placement. Times and edges stay
with the cluster an op is in, so the coarse *timing* is approximate for moved ops (usually small
update/read ops) — the simulator of the original graph has the last word. A cluster of several ops whose memory with
anchored groups exceeds the smallest device is cut into single ops. The coarse Instance has no
colocation values; ``moved_ops`` counts ops whose cluster is not their group's anchor.

``max_nodes`` (at most K clusters): after the DP, adjacent clusters (still contiguous, so still
acyclic) are merged in passes, heaviest connecting communication first, as long as the merged cluster
keeps the pin rule and fits the smallest device (the limit M is relaxed for these merges).
If no merge is possible any more, more than K clusters remain; ``len(c.members)`` says how many.

The coarse graph, its builders and :class:`Coarsening` (the map back) are in
:mod:`dplace.heuristics.coarse_graph`; this module is the dynamic program.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from dplace import kernels
from dplace.errors import InvalidInstanceError
from dplace.schedule.ranks import ccr  # the one CCR definition: mean transfer time / mean op time
from dplace.instance.model import Instance
from dplace.schedule.ranks import edge_costs

from .coarse_graph import Coarsening, Runs, build_coarse  # noqa: F401 - Coarsening, Runs re-exported

__all__ = ["Coarsening", "ccr", "coarsen", "coarsen_report", "fusion_breakpoints"]


def _resolve_limit(inst: Instance, M: float | None, mem_limit: int | None) -> int:
    if mem_limit is not None:
        if mem_limit < 0:
            raise InvalidInstanceError(f"coarsen: mem_limit must be >= 0, got {mem_limit!r}")
        lim = int(mem_limit)
    else:
        frac = 0.25 if M is None else float(M)
        if not (frac > 0) or math.isinf(frac):
            raise InvalidInstanceError(f"coarsen: M must be a fraction > 0 of device memory, got {M!r}")
        lim = int(frac * min(inst.capacity))
    # a cluster of several ops must fit every device (so pinned clusters fit their device too)
    return min(lim, min(inst.capacity))


def fusion_breakpoints(inst: Instance, order: Sequence[int], R: int, mem_limit: int, *,
                       work_limit: float | None = None, pins_alone: bool = False) -> tuple[list[int], float]:
    """Kernighan's DP (eqs. 4-6) over ``order``: breakpoints [0, b_1, ..., n] and the cut cost S(n).

    Clusters [b_k, b_{k+1}) hold at most ``R`` ops, at most ``mem_limit`` bytes and, when given, at
    most ``work_limit`` µs of mean op time (a single op over a limit is a cluster of its own). Pins:
    the ops of a cluster are pinned to at most one device; with ``pins_alone`` a cluster holds either
    only ops pinned to one device or only unpinned ops (so a small pinned op cannot pin a large
    cluster). Ties go to the earliest start (larger clusters). Cost of an edge: its mean transfer time
    (:func:`dplace.schedule.ranks.edge_costs`).
    """
    n = len(order)
    if R < 1:
        raise InvalidInstanceError(f"coarsen: R must be >= 1, got {R!r}")
    if n == 0:
        return [0], 0.0
    if kernels.use(inst.n, "large"):  # the same DP compiled
        from dplace.kernels import celeritas as kc
        from dplace.kernels.levels import edge_cost_mean, op_cost_mean

        a = kernels.inst_arrays(inst)
        return kc.fusion_breakpoints(a, order, edge_cost_mean(a), R, mem_limit, work_limit, pins_alone,
                                     op_cost_mean(a))
    c = edge_costs(inst, "mean")
    pos = [0] * inst.n
    for i, o in enumerate(order):
        pos[o] = i
    esrc, succ, pred, mem = inst.esrc, inst.succ, inst.pred, inst.mem
    key = inst.pinned  # a cluster may hold ops pinned to at most one device
    C = np.zeros(n + 1)  # C[i] = cost(i, j) for the current j, valid for i in [j-R, j)
    S = np.full(n + 1, np.inf)
    S[0] = 0.0
    parent = [0] * (n + 1)
    prefix = [0] * (n + 1)
    for i, o in enumerate(order):
        prefix[i + 1] = prefix[i] + mem[o]
    wprefix = [0.0] * (n + 1)
    if work_limit is not None:
        for i, o in enumerate(order):
            wprefix[i + 1] = wprefix[i] + sum(inst.dur[o]) / inst.m
    i_mem = i_work = 0
    last_k, last_k_pos, bound_k = -1, -1, 0
    run_start = 0  # pins_alone: first position of the current run of equal pins
    for j in range(1, n + 1):
        q = j - 1
        o = order[q]
        lo_r = j - R if j > R else 0
        # eq. (5): cost(i, j) = cost(i, j-1) + out(v_q) - in-edges of v_q starting at or after v_i
        out = 0.0
        for e in succ[o]:
            out += c[e]
        C[q] = 0.0
        if out:
            C[lo_r:j] += out
        for e in pred[o]:
            pp = pos[esrc[e]]
            if pp >= lo_r and c[e]:
                C[lo_r:pp + 1] -= c[e]
        # constraints on where the cluster ending at v_q may start
        while prefix[j] - prefix[i_mem] > mem_limit:
            i_mem += 1
        if work_limit is not None:
            while wprefix[j] - wprefix[i_work] > work_limit * (1 + 1e-12):
                i_work += 1
        kk = key[o]
        if pins_alone:
            if q > 0 and kk != key[order[q - 1]]:
                run_start = q
            bound_k = run_start
        elif kk >= 0:
            if kk != last_k:
                if last_k_pos >= 0:
                    bound_k = last_k_pos + 1
                last_k = kk
            last_k_pos = q
        lo = max(lo_r, i_mem, i_work, bound_k)
        if lo > q:
            lo = q
        if lo == q:
            S[j] = S[q] + C[q]
            parent[j] = q
        else:
            window = S[lo:j] + C[lo:j]
            k = int(np.argmin(window))
            S[j] = window[k]
            parent[j] = lo + k
    bps = [n]
    while bps[-1] > 0:
        bps.append(parent[bps[-1]])
    bps.reverse()
    return bps, float(S[n])


def coarsen(inst: Instance, order: Sequence[int] | None = None, R: int = 200, M: float | None = None,
            max_nodes: int | None = None, *, mem_limit: int | None = None, work_limit: float | None = None,
            pins_alone: bool = False, anchor_first: bool = False) -> Coarsening:
    """Optimal Operation Fusion of ``inst`` (Celeritas Alg. 1) and the coarse graph.

    ``order``: a topological order of op indices (default: CPD-TOPO). ``R``: exploration range (most
    ops per cluster). ``M``: cluster memory limit as a fraction of the smallest device's memory
    (default 0.25); ``mem_limit`` gives it in bytes instead. ``work_limit``: most µs of mean op time
    per cluster (None: no limit, the paper's). ``pins_alone``: pinned ops never share a cluster with
    unpinned ones. ``max_nodes``: ask for at most K clusters (merge pass, see the module docstring).
    ``anchor_first``: a colocation group's anchor is the cluster of its member earliest in ``order``
    (Celeritas §6.1: the group follows its first placed node) instead of its largest member's.
    """
    if order is None:
        from dplace.heuristics.orders import cpd_topo_order

        order = cpd_topo_order(inst)
    order = list(order)
    if len(order) != inst.n:
        raise InvalidInstanceError(f"coarsen: order must list all {inst.n} ops, got {len(order)}")
    big = kernels.use(inst.n, "large")  # arrays and kernels: the order made an array once
    seq = np.asarray(order) if big else order
    if not _order_ok(inst, seq):  # the reference's walk names the first offence
        pos = [-1] * inst.n
        for i, o in enumerate(order):
            if not (0 <= o < inst.n) or pos[o] >= 0:
                raise InvalidInstanceError(f"coarsen: order lists op {o!r} twice or out of range")
            pos[o] = i
        for e in range(len(inst.esrc)):
            if pos[inst.esrc[e]] >= pos[inst.edst[e]]:
                ids = inst.columns.ids
                raise InvalidInstanceError(
                    f"coarsen: order is not topological: edge {ids[inst.esrc[e]]!r}->{ids[inst.edst[e]]!r}")
    if max_nodes is not None and max_nodes < 1:
        raise InvalidInstanceError(f"coarsen: max_nodes must be >= 1, got {max_nodes!r}")
    lim = _resolve_limit(inst, M, mem_limit)
    if work_limit is not None and not work_limit > 0:
        raise InvalidInstanceError(f"coarsen: work_limit must be > 0 µs, got {work_limit!r}")
    if big:  # the same clusters and coarse instance, with numpy
        seq = seq.astype(np.int64, copy=False)
    bps, _ = fusion_breakpoints(inst, seq if big else order, int(R), lim, work_limit=work_limit,
                                pins_alone=pins_alone)
    return build_coarse(inst, order, bps, int(R), lim, max_nodes=max_nodes, first=anchor_first,
                        seq=seq if big else None)


def _order_ok(inst: Instance, order: list[int]) -> bool:
    """Every op once and every edge forward in ``order`` (numpy; the caller explains a False)."""
    o = np.asarray(order)
    if o.dtype.kind not in "iu" or (len(o) and (o.min() < 0 or o.max() >= inst.n)):
        return False
    pos = np.full(inst.n, -1, dtype=np.int64)
    pos[o] = np.arange(len(o))
    if (pos < 0).any():
        return False
    return bool((pos[inst._esrc_a] < pos[inst._edst_a]).all())


def coarsen_report(inst: Instance, R: int = 200, M: float = 0.25, pins_alone: bool = True) -> dict[str, Any]:
    """Nodes, edges and CCR before and after fusion: the paper's Table 2.

    CCR is :func:`dplace.formats.generate.ccr` (the generator's definition): mean over edges of the default
    link's latency + bytes/bandwidth, over the mean op time. Eq. (1) of the paper divides sums instead;
    the two differ by the factor |E|/|V|. ``pins_alone``: as celeritas fuses (see :func:`coarsen`).
    """
    import time

    t0 = time.perf_counter()
    cz = coarsen(inst, R=R, M=M, pins_alone=pins_alone)
    dt = time.perf_counter() - t0
    return {
        "R": R, "M": M, "mem_limit_bytes": cz.mem_limit,
        "nodes_before": inst.n, "edges_before": len(inst.esrc), "ccr_before": ccr(inst),
        "nodes_after": cz.coarse.n, "edges_after": len(cz.coarse.esrc), "ccr_after": ccr(cz.coarse),
        "oversize_ops": len(cz.oversize), "moved_colocated_ops": cz.moved_ops, "cut_cost_us": cz.cut_cost,
        "time_s": round(dt, 4),
    }
