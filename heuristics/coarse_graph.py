"""The coarse graph of Optimal Operation Fusion (Celeritas §5.1.3) and its map back to the original ops.

:func:`dplace.heuristics.coarsen.coarsen` finds the breakpoints (the dynamic program); :func:`build_coarse`
turns them into clusters (heavy clusters cut, at most ``max_nodes`` merged) and the coarse
:class:`Instance`; :class:`Coarsening` holds both graphs and expands a coarse placement or order. The
rules (anchors of colocation groups, memory counted at the anchor, pins) are in the module docstring of
:mod:`dplace.heuristics.coarsen`. The numpy builders at the end are the same steps on arrays (from
``kernels.use(n, "large")``); tests/kernels/test_etf_kernels.py compares the two.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from dplace import kernels
from dplace.errors import InvalidInstanceError
from dplace.instance.graph import NotADag, digraph, topological_order
from dplace.instance.columns import Columns, RowTimes
from dplace.instance.model import Device, Edge, Instance, Op
from dplace.schedule.ranks import edge_costs
from dplace.schedule.simulate import as_order, as_placement

__all__ = ["Coarsening", "Runs", "build_coarse"]


class Runs(Sequence):
    """``runs[k] == order[bps[k]:bps[k + 1]]``, each list built when asked for (a large graph's clusters
    as lists cost more than finding them); equal to the list of those lists."""

    def __init__(self, order: list[int], bps: list[int]) -> None:
        self.order, self.bps = order, bps

    def __len__(self) -> int:
        return len(self.bps) - 1

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        if k < 0:
            k += len(self)
        if not 0 <= k < len(self):
            raise IndexError(k)
        return self.order[self.bps[k]:self.bps[k + 1]]

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return repr(list(self))


@dataclass
class Coarsening:
    """A coarse graph and its mapping to the original ops.

    ``coarse``: the coarse :class:`Instance` (cluster k is op ``"c{k}"``; time per device = summed
    times of its members on that device, memory = summed memory of its ungrouped members plus the
    whole memory of the colocation groups anchored in it, pinned when a member is pinned, edges with
    summed bytes; same devices, links and comm mode; no colocation values). ``cluster_of[o]``: cluster of original op o. ``members[k]``:
    original ops of cluster k, in the fusion order. ``order``: the topological order that was cut.
    ``mem_limit``: M in bytes. ``oversize``: clusters that are a single op larger than M.
    ``cut_cost``: summed mean transfer time of the edges between clusters (the DP's S(n)).
    ``anchor[g]``: the cluster whose device colocation group g goes to; ``moved_ops``: ops whose
    cluster is not their group's anchor (they follow the anchor in ``expand``).
    """

    instance: Instance
    coarse: Instance
    cluster_of: list[int]
    members: Sequence[list[int]]
    order: list[int]
    R: int
    mem_limit: int
    oversize: list[int] = field(default_factory=list)
    cut_cost: float = 0.0
    anchor: list[int] = field(default_factory=list)
    moved_ops: int = 0

    @property
    def n_clusters(self) -> int:
        return len(self.members)

    @property
    def breakpoints(self) -> list[int]:
        """[0, b_1, ..., n]: cluster k is ``order[b_k:b_{k+1}]``."""
        if isinstance(self.members, Runs):
            return self.members.bps
        out = [0]
        for ms in self.members:
            out.append(out[-1] + len(ms))
        return out

    def expand(self, coarse_placement: Any, *, array: bool = False) -> list[int]:
        """Placement of the original ops from a placement of the coarse ops (list or {id: name});
        ``array``: as a numpy array on large graphs (what :func:`dplace.result.make_result` takes)."""
        pl = as_placement(self.coarse, coarse_placement)
        if kernels.use(self.instance.n, "large"):  # the same with numpy
            a = kernels.inst_arrays(self.instance)
            cl = self.__dict__.get("_cluster_a")
            out = np.asarray(pl, dtype=np.int64)[np.asarray(self.cluster_of, dtype=np.int64) if cl is None else cl]
            if self.anchor:
                gid = np.repeat(np.arange(len(self.anchor)), np.diff(a.group_ptr))
                out[a.group_members] = np.asarray(pl, dtype=np.int64)[np.asarray(self.anchor, dtype=np.int64)][gid]
            return out if array else out.tolist()
        out = [pl[k] for k in self.cluster_of]
        for g, members in enumerate(self.instance.groups):
            d = pl[self.anchor[g]]
            for o in members:
                out[o] = d
        return out

    def expand_order(self, coarse_order: Any, coarse_placement: Any | None = None) -> list[list[int]]:
        """Per-device order of the original ops from a per-device order of the clusters.

        ``coarse_order`` is per device (list of lists of cluster indices, or {device: [ids]}). The
        clusters are merged into one sequence that keeps the coarse edges and every device's list;
        each device then runs its original ops (moved colocated ops included) in that sequence, and
        inside a cluster in fusion order. Valid for :func:`dplace.simulate` (no deadlock) whenever the
        coarse order is valid for the coarse graph; raises InvalidInstanceError otherwise.
        """
        if coarse_placement is None:
            pl = [-1] * self.coarse.n
            lists = coarse_order.values() if isinstance(coarse_order, dict) else coarse_order
            keys = list(coarse_order.keys()) if isinstance(coarse_order, dict) else range(len(coarse_order))
            for dkey, ks in zip(keys, lists):
                d = self.coarse.device_index[dkey] if isinstance(dkey, str) else dkey
                for k in ks:
                    k = self.coarse.op_index[k] if isinstance(k, str) else k
                    pl[k] = d
        else:
            pl = as_placement(self.coarse, coarse_placement)
        od = as_order(self.coarse, pl, coarse_order)
        full = self.expand(pl)
        # one global sequence of clusters that respects the coarse edges and every device's list; each
        # device's original ops sorted by (cluster's place in it, fusion order) are then subsequences
        # of one topological order of the original graph, so the simulator cannot deadlock on them
        cg = self.coarse
        seq = digraph(cg.n, zip(cg.esrc, cg.edst))
        for ks in od:
            seq.add_edges_from(zip(ks, ks[1:]))
        try:
            rank = [0] * cg.n
            for i, k in enumerate(topological_order(seq)):
                rank[k] = i
        except NotADag:
            raise InvalidInstanceError("expand_order: the coarse order contradicts the coarse graph's precedence") from None
        at = [0] * self.instance.n
        for j, o in enumerate(self.order):
            at[o] = j
        out: list[list[int]] = [[] for _ in range(self.instance.m)]
        for o in sorted(range(self.instance.n), key=lambda o: (rank[self.cluster_of[o]], at[o])):
            out[full[o]].append(o)
        return out


def build_coarse(inst: Instance, order: list[int], bps: list[int], R: int, lim: int, *,
                 max_nodes: int | None = None, first: bool = False, seq: np.ndarray | None = None) -> Coarsening:
    """The coarse graph of the fusion breakpoints ``bps`` over ``order``: clusters too heavy for a device
    cut into single ops, then adjacent clusters merged down to ``max_nodes``, then built. ``first``: a
    group's anchor is its member earliest in ``order``. ``seq``: ``order`` as an int64 array, to build
    with numpy and the compiled cluster sums (the same result)."""
    if seq is not None:
        bps = _split_heavy_arrays(inst, seq, bps, first)
    else:
        bps = _split_heavy(inst, order, bps, first)
    if max_nodes is not None and len(bps) - 1 > max_nodes:
        bps = _merge_to(inst, order, bps, max_nodes, first)
    if seq is not None:
        return _build_arrays(inst, order, seq, bps, R, lim, first)
    return _build(inst, order, bps, R, lim, first)



def _merge_to(inst: Instance, order: Sequence[int], bps: list[int], K: int, first: bool = False) -> list[int]:
    """Merge adjacent clusters, heaviest connection first, until at most K remain (or none can)."""
    c = edge_costs(inst, "mean")
    cap = min(inst.capacity)
    while len(bps) - 1 > K:
        nseg = len(bps) - 1
        seg_of = [0] * inst.n
        pins = []
        for k in range(nseg):
            pk = -1
            for o in order[bps[k]:bps[k + 1]]:
                seg_of[o] = k
                if inst.pinned[o] >= 0:
                    pk = inst.pinned[o]
            pins.append(pk)
        # memory with each group counted at its anchor: additive when clusters merge (the merged
        # cluster holds the group's largest -- or first -- member, so it becomes the anchor)
        cmem = _cluster_memory(inst, nseg, seg_of, _anchors(inst, order, seg_of, first))
        keys = list(zip(cmem, pins))
        w = [0.0] * (nseg - 1)
        for e in range(len(inst.esrc)):
            ku, kv = seg_of[inst.esrc[e]], seg_of[inst.edst[e]]
            if kv == ku + 1:
                w[ku] += c[e] + 1e-12  # any edge counts a little, even a free one
        cand = sorted(range(nseg - 1), key=lambda k: (-w[k], k))
        drop: set[int] = set()  # indices i of breakpoints bps[i] to remove
        used: set[int] = set()
        excess = nseg - K
        for k in cand:
            if len(drop) >= excess:
                break
            if k in used or k + 1 in used:
                continue
            (m1, p1), (m2, p2) = keys[k], keys[k + 1]
            if m1 + m2 > cap or (p1 >= 0 and p2 >= 0 and p1 != p2):
                continue
            used.update((k, k + 1))
            drop.add(k + 1)
        if not drop:
            break
        bps = [b for i, b in enumerate(bps) if i not in drop]
    return bps


def _anchors(inst: Instance, order: Sequence[int], cluster_of: list[int], first: bool = False) -> list[int]:
    """Per colocation group: the cluster of its largest member (by memory, then earliest in ``order``);
    ``first``: of its member earliest in ``order`` (Celeritas §6.1)."""
    at = [0] * inst.n
    for i, o in enumerate(order):
        at[o] = i
    if first:
        return [cluster_of[min(ms, key=lambda o: at[o])] for ms in inst.groups]
    return [cluster_of[min(ms, key=lambda o: (-inst.mem[o], at[o]))] for ms in inst.groups]


def _cluster_memory(inst: Instance, nk: int, cluster_of: list[int], anchor: list[int]) -> list[int]:
    """Bytes per cluster, with each colocation group's whole memory counted at its anchor."""
    mk = [0] * nk
    for o in range(inst.n):
        if inst.group_of[o] < 0:
            mk[cluster_of[o]] += inst.mem[o]
    for g, ms in enumerate(inst.groups):
        mk[anchor[g]] += sum(inst.mem[o] for o in ms)
    return mk


def _split_heavy(inst: Instance, order: Sequence[int], bps: list[int], first: bool = False) -> list[int]:
    """Cut into single ops every cluster of several ops that anchored groups make too big for a device.

    Repeats until none is left (a cut can move an anchor); single ops always fit (the Instance checked
    that every op and group fits the largest device).
    """
    small = min(inst.capacity)
    while True:
        nk = len(bps) - 1
        cluster_of = [0] * inst.n
        for k in range(nk):
            for o in order[bps[k]:bps[k + 1]]:
                cluster_of[o] = k
        cmem = _cluster_memory(inst, nk, cluster_of, _anchors(inst, order, cluster_of, first))
        heavy = {k for k in range(nk) if bps[k + 1] - bps[k] > 1 and cmem[k] > small}
        if not heavy:
            return bps
        new = [0]
        for k in range(nk):
            if k in heavy:
                new.extend(range(bps[k] + 1, bps[k + 1] + 1))
            else:
                new.append(bps[k + 1])
        bps = new


def _build(inst: Instance, order: list[int], bps: list[int], R: int, lim: int, first: bool = False) -> Coarsening:
    n, m = inst.n, inst.m
    nk = len(bps) - 1
    cluster_of = [0] * n
    members: list[list[int]] = []
    for k in range(nk):
        ms = order[bps[k]:bps[k + 1]]
        members.append(ms)
        for o in ms:
            cluster_of[o] = k
    anchor = _anchors(inst, order, cluster_of, first)
    cmem = _cluster_memory(inst, nk, cluster_of, anchor)
    dur = inst.dur
    dnames = [dv.name for dv in inst.devices]
    ops: list[Op] = []
    oversize: list[int] = []
    for k, ms in enumerate(members):
        t = [0.0] * m
        p = -1
        for o in ms:
            row = dur[o]
            for d in range(m):
                t[d] += row[d]
            if inst.pinned[o] >= 0:
                p = inst.pinned[o]
        if len(ms) == 1 and inst.mem[ms[0]] > lim:
            oversize.append(k)
        ops.append(Op(
            f"c{k}", {dnames[d]: t[d] for d in range(m)}, cmem[k], device=dnames[p] if p >= 0 else None,
            extra={"size": len(ms), "first": inst.columns.ids[ms[0]]},
        ))
    moved = sum(1 for g, ms in enumerate(inst.groups) for o in ms if cluster_of[o] != anchor[g])
    nbytes: dict[tuple[int, int], float] = {}
    c = edge_costs(inst, "mean")
    cut = 0.0
    for e in range(len(inst.esrc)):
        ku, kv = cluster_of[inst.esrc[e]], cluster_of[inst.edst[e]]
        if ku != kv:
            assert ku < kv, "coarse graph must be acyclic: clusters are contiguous runs of a topological order"
            nbytes[(ku, kv)] = nbytes.get((ku, kv), 0.0) + inst.ebytes[e]
            cut += c[e]
    edges = [Edge(f"c{a}", f"c{b}", nb) for (a, b), nb in sorted(nbytes.items())]
    coarse = Instance(
        f"{inst.name}/coarse", [Device(dv.name, dv.memory, dv.speed) for dv in inst.devices], ops, edges,
        link=inst.link, pairs=inst.pairs, comm=inst.comm, transfer_cpu=inst.transfer_cpu,
        extra={"coarsened_from": inst.name, "R": R, "mem_limit": lim},
    )
    return Coarsening(inst, coarse, cluster_of, members, order, R, lim, oversize, cut, anchor, moved)


# ------------------------------------------------------------------- the same on arrays (kernels on)
def _labels(n: int, order: np.ndarray, bps: Sequence[int]) -> np.ndarray:
    cluster_of = np.empty(n, dtype=np.int64)
    cluster_of[order] = np.repeat(np.arange(len(bps) - 1), np.diff(np.asarray(bps, dtype=np.int64)))
    return cluster_of


def _anchors_arrays(a, order: np.ndarray, cluster_of: np.ndarray, first: bool = False) -> np.ndarray:
    """:func:`_anchors` with numpy: per group the cluster of its largest member, earliest in ``order``
    (``first``: of its member earliest in ``order``)."""
    if len(a.group_ptr) <= 1:
        return np.zeros(0, dtype=np.int64)
    at = np.empty(a.n, dtype=np.int64)
    at[order] = np.arange(len(order))
    ms = a.group_members
    gid = np.repeat(np.arange(len(a.group_ptr) - 1), np.diff(a.group_ptr))
    keys = (at[ms], gid) if first else (at[ms], -a.mem[ms], gid)
    best = ms[np.lexsort(keys)][a.group_ptr[:-1]]
    return cluster_of[best]


def _cluster_memory_arrays(a, nk: int, cluster_of: np.ndarray, anchor: np.ndarray) -> np.ndarray:
    """:func:`_cluster_memory` with numpy (integer sums: the order does not matter)."""
    mk = np.zeros(nk, dtype=np.int64)
    free = a.group_of < 0
    np.add.at(mk, cluster_of[free], a.mem[free])
    if len(anchor):
        np.add.at(mk, anchor, np.add.reduceat(a.mem[a.group_members], a.group_ptr[:-1]))
    return mk


def _split_heavy_arrays(inst: Instance, order: Sequence[int], bps: list[int], first: bool = False) -> list[int]:
    """:func:`_split_heavy` with numpy."""
    a = kernels.inst_arrays(inst)
    order = np.asarray(order, dtype=np.int64)
    small = min(inst.capacity)
    while True:
        b = np.asarray(bps, dtype=np.int64)
        nk = len(b) - 1
        cluster_of = _labels(inst.n, order, b)
        cmem = _cluster_memory_arrays(a, nk, cluster_of, _anchors_arrays(a, order, cluster_of, first))
        heavy = ((b[1:] - b[:-1]) > 1) & (cmem > small)
        if not heavy.any():
            return bps
        new = [0]
        for k in range(nk):
            if heavy[k]:
                new.extend(range(bps[k] + 1, bps[k + 1] + 1))
            else:
                new.append(bps[k + 1])
        bps = new


class _ClusterFields(Mapping):
    """A coarse graph's op fields (cluster k -> ``{"size": ops in it, "first": id of its first op}``),
    each dict built when asked for."""

    def __init__(self, bps: np.ndarray, order: np.ndarray, ids: list[str]) -> None:
        self.bps, self.order, self.ids = bps, order, ids

    def __getitem__(self, k: int) -> dict[str, Any]:
        if not (isinstance(k, int) and 0 <= k < len(self)):
            raise KeyError(k)
        return {"size": int(self.bps[k + 1] - self.bps[k]), "first": self.ids[int(self.order[self.bps[k]])]}

    def __iter__(self):
        return iter(range(len(self)))

    def __len__(self) -> int:
        return len(self.bps) - 1

    def may_contain(self, word: str) -> bool:
        return word in ("size", "first")


def _build_arrays(inst: Instance, order: list[int], o_arr: np.ndarray, bps: list[int], R: int, lim: int,
                  first: bool = False) -> Coarsening:
    """:func:`_build` with numpy and the compiled cluster sums: the same coarse instance (``o_arr``:
    ``order`` as an int64 array)."""
    from dplace.kernels import celeritas as kc
    from dplace.kernels import levels

    a = kernels.inst_arrays(inst)
    b = np.asarray(bps, dtype=np.int64)
    nk = len(b) - 1
    cluster_of = _labels(inst.n, o_arr, b)
    anchor = _anchors_arrays(a, o_arr, cluster_of, first)
    cmem = _cluster_memory_arrays(a, nk, cluster_of, anchor)
    t = kc.cluster_time(a, o_arr, b)
    last = np.full(nk, -1, dtype=np.int64)  # each cluster's last pinned member (its pin)
    pinned_at = np.flatnonzero(a.pinned[o_arr] >= 0)
    np.maximum.at(last, cluster_of[o_arr[pinned_at]], pinned_at)
    pin = np.where(last >= 0, a.pinned[o_arr[np.maximum(last, 0)]], -1)
    mem = a.mem
    oversize = np.flatnonzero((b[1:] - b[:-1] == 1) & (mem[o_arr[b[:-1]]] > lim)).tolist()
    if len(anchor):
        gid = np.repeat(np.arange(len(anchor)), np.diff(a.group_ptr))
        moved = int((cluster_of[a.group_members] != anchor[gid]).sum())
    else:
        moved = 0
    ku, kv = cluster_of[a.esrc], cluster_of[a.edst]
    cut_e = ku != kv
    assert (ku[cut_e] < kv[cut_e]).all(), "coarse graph must be acyclic: clusters are contiguous runs of a topological order"
    keys, inv = np.unique(ku[cut_e] * nk + kv[cut_e], return_inverse=True)
    nbytes = np.zeros(len(keys))
    np.add.at(nbytes, inv.reshape(-1), a.ebytes[cut_e])  # in edge order, as the reference's dict
    cut = sum(levels.edge_costs(a, "mean")[cut_e].tolist())
    # the reference's Op/Edge objects as columns: per-device times, pins as device codes, no type or
    # colocation, extra {size, first}
    dnames = [dv.name for dv in inst.devices]
    cols = Columns(
        ids=[f"c{k}" for k in range(nk)], time=np.full(nk, np.nan), mem=cmem,
        type=np.full(nk, -1, dtype=np.int32), pin=pin, coloc=np.full(nk, -1, dtype=np.int32),
        src=keys // nk, dst=keys % nk, nbytes=nbytes, time_map=RowTimes(t, dnames), type_names=[],
        pin_names=dnames, coloc_names=[],
        op_extra=_ClusterFields(b, o_arr, inst.columns.ids),
    )
    coarse = Instance.from_columns(
        f"{inst.name}/coarse", [Device(dv.name, dv.memory, dv.speed) for dv in inst.devices], cols,
        link=inst.link, pairs=inst.pairs, comm=inst.comm, transfer_cpu=inst.transfer_cpu,
        extra={"coarsened_from": inst.name, "R": R, "mem_limit": lim},
    )
    coarse._from_ops = kernels.size(inst)  # its orders and placement run compiled too (kernels.size)
    cz = Coarsening(inst, coarse, cluster_of.tolist(), Runs(order, bps), order, R, lim, oversize, cut, anchor.tolist(),
                    moved)
    cz._cluster_a = cluster_of  # expand's index array
    return cz
