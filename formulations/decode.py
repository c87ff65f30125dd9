"""Reading an exact model's answer back as the per-device order the simulator runs (shared by CP-SAT and the MILP).

A model's start times do not say everything about its order: ops that take no time may share an instant on one
device, and in sequential comm the order in which their producers' tensors leave on a link is the device's
order (the simulator's FIFO rule). The model fixes it through its pairwise choices (CP-SAT's ``b[p, q]``, the
MILP's ``y[p, q]``). :func:`choice_order` turns start times plus those choices into one order: a topological
order of the graph's edges and the choices (a pairwise comparator sort is not one: with choices among ties
it is not transitive, and the sort then keeps an order the model did not choose — composed fuzz seed
1002930, where every exact method proved 6.5 and returned the heuristic's 7.0).
"""
from __future__ import annotations

from typing import Hashable, Iterable, Sequence

from dplace.instance.model import Instance

__all__ = ["choice_order", "choice_sequence"]


def choice_order(inst: Instance, placement: Sequence[int], key: Sequence[Hashable],
                 before: Iterable[tuple[int, int]]) -> list[list[int]] | None:
    """Per-device order of ``placement``: networkx's lexicographical topological order of the graph's edges plus ``before``
    (pairs (a, b): a runs before b; pairs on two devices are ignored), the smallest ``key[o]`` first
    (e.g. (start, end, topological position) in the model's answer). None when the pairs and the graph
    form a cycle: no device order runs what the model chose."""
    seq = choice_sequence(inst, placement, key, before)
    if seq is None:
        return None
    order: list[list[int]] = [[] for _ in range(inst.m)]
    for o in seq:
        order[placement[o]].append(o)
    return order


def choice_sequence(inst: Instance, placement: Sequence[int], key: Sequence[Hashable],
                    before: Iterable[tuple[int, int]]) -> list[int] | None:
    """All ops in the one order :func:`choice_order` takes them (a topological order of the graph and the
    pairs on one device, by ``key``), or None on a cycle."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(range(inst.n))  # insertion order = op index: ties of equal keys go by index
    g.add_edges_from((int(u), int(v)) for u, v in zip(inst.esrc, inst.edst) if u != v)
    g.add_edges_from((a, b) for a, b in before if placement[a] == placement[b] and a != b)
    try:
        return list(nx.lexicographical_topological_sort(g, key=lambda o: key[o]))
    except nx.NetworkXUnfeasible:  # the pairs and the graph form a cycle
        return None
