"""Upward ranks (HEFT's rank_u, FastT's rank) shared by the list schedulers. O(V + E)."""
from __future__ import annotations

from .graph import longest_from, ready_order
from .model import Instance


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
    """Per-edge transfer cost over ordered pairs of distinct devices: mean, max or zero."""
    if how == "zero" or inst.m < 2:
        return [0.0] * len(inst.esrc)
    pairs = [(a, b) for a in range(inst.m) for b in range(inst.m) if a != b]
    if how == "mean":
        lat = sum(inst.lat[a][b] for a, b in pairs) / len(pairs)
        inv = sum(1.0 / inst.bw[a][b] for a, b in pairs) / len(pairs)
        return [lat + nb * inv for nb in inst.ebytes]
    if how == "max":
        return [max(inst.lat[a][b] + nb / inst.bw[a][b] for a, b in pairs) for nb in inst.ebytes]
    raise ValueError(f"how must be mean, max or zero, got {how!r}")


def upward_rank(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> list[float]:
    """rank_u(o) = w_o + max over successors j of (c_oj + rank_u(j)) (Topcuoglu et al. 2002, eq. 7)."""
    return longest_from(inst, inst.topo, op_costs(inst, op_cost), edge_costs(inst, comm_cost))


def priority_order(inst: Instance, key) -> list[int]:
    """Topological order that always takes the ready op of smallest ``key(o)`` (Kahn's algorithm,
    :func:`dplace.graph.ready_order`).

    List schedulers use it so that decreasing rank stays a valid order when zero costs tie ranks;
    ``key`` must be distinct per op (add ``inst.topo_pos[o]`` to break ties). O((V + E) log V).
    """
    return ready_order(inst, key)
