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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from dplace import kernels
from dplace.errors import InvalidInstanceError
from dplace.schedule.ranks import ccr  # the one CCR definition: mean transfer time / mean op time
from dplace.instance.graph import NotADag, digraph, topological_order
from dplace.instance.columns import Columns, RowTimes
from dplace.instance.model import Device, Edge, Instance, Op
from dplace.schedule.ranks import edge_costs
from dplace.schedule.simulate import as_order, as_placement

__all__ = ["Coarsening", "ccr", "coarsen", "coarsen_report", "fusion_breakpoints"]


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
        bps, _ = fusion_breakpoints(inst, seq, int(R), lim, work_limit=work_limit, pins_alone=pins_alone)
        bps = _split_heavy_arrays(inst, seq, bps, anchor_first)
        if max_nodes is not None and len(bps) - 1 > max_nodes:
            bps = _merge_to(inst, order, bps, max_nodes, anchor_first)
        return _build_arrays(inst, order, seq, bps, int(R), lim, anchor_first)
    bps, _ = fusion_breakpoints(inst, order, int(R), lim, work_limit=work_limit, pins_alone=pins_alone)
    bps = _split_heavy(inst, order, bps, anchor_first)
    if max_nodes is not None and len(bps) - 1 > max_nodes:
        bps = _merge_to(inst, order, bps, max_nodes, anchor_first)
    return _build(inst, order, bps, int(R), lim, anchor_first)


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
        link=inst.link, pairs=inst.pairs, comm=inst.comm,
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
    from dplace.kernels.levels import edge_cost_mean

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
    cut = sum(edge_cost_mean(a)[cut_e].tolist())
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
        link=inst.link, pairs=inst.pairs, comm=inst.comm,
        extra={"coarsened_from": inst.name, "R": R, "mem_limit": lim},
    )
    coarse._from_ops = kernels.size(inst)  # its orders and placement run compiled too (kernels.size)
    cz = Coarsening(inst, coarse, cluster_of.tolist(), Runs(order, bps), order, R, lim, oversize, cut, anchor.tolist(),
                    moved)
    cz._cluster_a = cluster_of  # expand's index array
    return cz


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
