"""What the placement searches share (the group-move LNS :mod:`.lns`, the annealing :mod:`.anneal`, the
twin-part search :mod:`.twins`): colocation groups as movable :class:`Units`, and the list schedule of a
fixed placement (:func:`placement_order`, :func:`list_schedule`). It imports none of them.
"""
from __future__ import annotations

from typing import Sequence

from dplace.instance.model import Instance

__all__ = ["Units", "list_schedule", "placement_order"]


def placement_order(inst: Instance, placement: Sequence[int], insertion: bool = True) -> list[list[int]]:
    """Per-device order for a fixed placement: ready ops by decreasing remaining path length *under this
    placement* (each op's time on its device, transfers only on edges between devices), each at its
    earliest start (with ``insertion``, into an idle gap): list scheduling with the placement's own
    critical-path priority."""
    rank = [0.0] * inst.n
    for o in reversed(inst.topo):
        best = 0.0
        d = placement[o]
        for e in inst.succ[o]:
            v = inst.edst[e]
            r = rank[v] + (inst.transfer_time(e, d, placement[v]) if placement[v] != d else 0.0)
            if r > best:
                best = r
        rank[o] = inst.dur[o][d] + best
    return list_schedule(inst, placement, rank, insertion)


def list_schedule(inst: Instance, placement: Sequence[int], rank: Sequence[float],
                  insertion: bool = True) -> list[list[int]]:
    """Per-device order for a fixed placement: ready ops by decreasing ``rank`` (ties: topological
    position), each committed at its earliest start (``ScheduleState``; ``insertion``: idle gaps too)."""
    from dplace.schedule.ranks import priority_order
    from dplace.schedule.simulate import seq_kernel_wanted
    from dplace.schedule.state import ScheduleState

    tp = inst.topo_pos
    if seq_kernel_wanted(inst):  # sequential comm on the compiled state: the same order (tests compare)
        from dplace.kernels.seqstate import ArraySeqState

        st = ArraySeqState(inst)
    else:
        st = ScheduleState(inst)
    for o in priority_order(inst, lambda o: (-rank[o], tp[o])):
        st.commit(o, placement[o], insertion=insertion)
    return st.order()


class Units:
    """Colocation groups and ungrouped ops as movable units, with the devices each may use."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.of = [-1] * inst.n
        self.members: list[list[int]] = []
        for g in inst.groups:
            for o in g:
                self.of[o] = len(self.members)
            self.members.append(list(g))
        for o in range(inst.n):
            if self.of[o] < 0:
                self.of[o] = len(self.members)
                self.members.append([o])
        self.mem = [sum(inst.mem[o] for o in ms) for ms in self.members]
        self.allowed = []
        for ms in self.members:
            pins = {inst.pinned[o] for o in ms if inst.pinned[o] >= 0}
            self.allowed.append(sorted(pins) if pins else list(range(inst.m)))

    def chains(self, min_len: int = 2) -> list[list[int]]:
        """Branches as runs of units: the maximal chains (each unit the only successor of the one before,
        which is its only predecessor) of at least ``min_len`` units in the graph of units, each edge
        between two units taken from the one whose first op comes first in topological order to the
        other. A training graph's forward and backward op of a layer share a unit, and its backward
        edges run the other way: both give the same edge here, so a branch of a cell (NASNet-Mobile:
        81 chains of 8 layers) is one chain, forward and backward together."""
        inst = self.inst
        tp = inst.topo_pos
        first = [min(tp[o] for o in ms) for ms in self.members]
        nu = len(self.members)
        succ: list[set[int]] = [set() for _ in range(nu)]
        pred: list[set[int]] = [set() for _ in range(nu)]
        for s, d in zip(inst.esrc, inst.edst):
            a, b = self.of[s], self.of[d]
            if a != b:
                if first[a] > first[b]:
                    a, b = b, a
                succ[a].add(b)
                pred[b].add(a)
        nxt = {}
        for a in range(nu):
            if len(succ[a]) == 1:
                b = next(iter(succ[a]))
                if len(pred[b]) == 1:
                    nxt[a] = b
        heads = sorted(set(nxt) - set(nxt.values()), key=lambda a: first[a])
        out = []
        for a in heads:
            c = [a]
            while c[-1] in nxt:
                c.append(nxt[c[-1]])
            if len(c) >= min_len:
                out.append(c)
        return out
