"""Upward ranks (HEFT's rank_u, FastT's rank) shared by the list schedulers, O(V + E); op and edge costs; the
instance's CCR (mean transfer time over mean op time, the one definition generators and coarsening use).

Compiled twin: :mod:`dplace.kernels.levels` (costs, upward ranks; tests/kernels/test_kernels.py,
test_list_kernels.py).
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..instance.graph import link_means, longest_from, ready_order
from ..instance.model import Instance


def op_costs(inst: Instance, how: str = "mean") -> list[float]:
    """Per-op computation cost: the mean, max or min of its time over devices."""
    if how == "mean":
        return [sum(row) / inst.m for row in inst.dur]
    if how == "max":
        return [max(row) for row in inst.dur]
    if how == "min":
        return [min(row) for row in inst.dur]
    raise ValueError(f"how must be mean, max or min, got {how!r}")


def edge_costs(inst: Instance, how: str = "mean") -> list[float]:
    """Per-edge transfer cost over ordered pairs of distinct devices: mean, max or zero
    (:func:`dplace.kernels.levels.edge_costs` on arrays, the same floats)."""
    if how == "zero" or inst.m < 2:
        return [0.0] * len(inst.esrc)
    if how == "mean":
        lat, inv = link_means(inst.lat, inst.bw, inst.m)
        return [lat + nb * inv for nb in inst.ebytes]
    if how == "max":
        pairs = [(a, b) for a in range(inst.m) for b in range(inst.m) if a != b]
        return [max(inst.lat[a][b] + nb / inst.bw[a][b] for a, b in pairs) for nb in inst.ebytes]
    raise ValueError(f"how must be mean, max or zero, got {how!r}")


def upward_rank(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> list[float]:
    """rank_u(o) = w_o + max over successors j of (c_oj + rank_u(j)) (Topcuoglu et al. 2002, eq. 7)."""
    return longest_from(inst, inst.topo, op_costs(inst, op_cost), edge_costs(inst, comm_cost))


def upward_rank_array(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> np.ndarray:
    """:func:`upward_rank` on arrays, compiled (:func:`dplace.kernels.levels.upward_rank`): the same floats."""
    from ..kernels.levels import upward_rank as upward_rank_arrays

    return upward_rank_arrays(kernels.inst_arrays(inst), op_cost, comm_cost)


def priority_order(inst: Instance, key) -> list[int]:
    """Topological order that always takes the ready op of smallest ``key(o)`` (Kahn's algorithm,
    :func:`dplace.instance.graph.ready_order`).

    List schedulers use it so that decreasing rank stays a valid order when zero costs tie ranks;
    ``key`` must be distinct per op (add ``inst.topo_pos[o]`` to break ties). O((V + E) log V).
    """
    return ready_order(inst, key)


def ccr(inst: Instance) -> float:
    """The instance's CCR (the communication-to-computation ratio): mean transfer time over mean op time."""
    if inst.n == 0 or not inst.n_edges:
        return 0.0
    lk = inst.link
    if kernels.use(inst.n):  # the same sums on arrays (no per-op lists)
        from dplace.kernels.levels import op_cost_mean

        a = kernels.inst_arrays(inst)
        mean_t = sum(op_cost_mean(a).tolist()) / inst.n
        mean_c = sum((lk.latency + a.ebytes / lk.bandwidth).tolist()) / inst.n_edges
    else:
        mean_t = sum(sum(row) / len(row) for row in inst.dur) / inst.n
        mean_c = sum(lk.latency + b / lk.bandwidth for b in inst.ebytes) / len(inst.ebytes)
    return mean_c / mean_t if mean_t > 0 else math.inf
