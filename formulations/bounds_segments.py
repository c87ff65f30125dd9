"""Segment decomposition: a lower bound from exactly solved pieces of the critical path.

The relaxation, step by step (every step only removes constraints, so the bound is proven):

1. ``comm="sequential"`` is relaxed to ``"parallel"``: in a sequential schedule every input still arrives
   no earlier than its producer's end plus the edge's own transfer time, so the schedule is feasible for
   the parallel model with the same placement, and the parallel model's earliest schedule for that
   placement and order is no later (pure delays: a longest path, monotone in every start).
2. Ops are dropped: take the critical path P = (c_0, …, c_{L-1}) (fastest devices, no transfers) and keep
   only the ops whose *window* on P is short. For op o let A(o) be the last path index that is an
   ancestor of o (or o itself) and D(o) the first path index that is a descendant (or o itself); the path
   ops c_j with A(o) < j < D(o) are the ones o may run beside. o is kept when D(o) - A(o) - 1 <= ``window``.
   Restricting a feasible schedule to the kept ops is feasible (memory only goes down, colocation and
   pins are kept among the kept ops, edges between kept ops keep their transfer delays).
3. Cut: c_j is a *cut* when no kept op may run beside it (no kept o with A(o) < j < D(o)). Every kept op
   is then an ancestor or a descendant of every cut, so in any schedule the kept ops between cuts c_a and
   c_b run inside [start(c_a), start(c_b)]. Segment (a, b) = c_a, the kept ops between, and c_b with
   time 0 (standing for "the moment c_b starts", its inputs' transfers still paid). The first segment
   starts at time 0 and ends with the first cut (time 0); the last starts at the last cut and holds all
   kept descendants. The schedule restricted to a segment and shifted by start(c_a) is a schedule of the
   segment's sub-instance, so makespan = sum of the segments' spans >= sum of their optima.
4. Each segment's optimum is replaced by a *proven lower bound* of it: CP-SAT's best bound (or optimum)
   on the segment with durations and transfer times rounded *down* to whole ticks (a relaxation with
   integer data, so CP-SAT's tick bound is a bound of it with no rounding slack), and the cheap bounds of
   that sub-instance (critical path, work, energetic, anchored work, anchored split: a segment has one
   first op, the cut that starts it, and one last op, the cut that ends it, so spreading its work over
   the devices costs the transfers :func:`dplace.bounds.anchored_work_bound` counts, and running a branch
   away from the cuts' device costs a transfer there and back, :func:`dplace.bounds.anchored_split_bound`),
   whichever is larger. Where HEFT's schedule of the segment reaches that bound it is the segment's
   optimum, and CP-SAT is not run. Where CP-SAT does not prove a segment of at most ``SEARCH_MAX_OPS`` ops,
   :func:`dplace.bounds.anchored_search.anchored_search_bound` (proof there; the segment's one first and one
   last op are its anchors) raises the bound towards the makespan of the schedule found for it
   (:func:`_searched_lb`: the segment's data are whole ticks, so its optimum is too, and the bound is
   rounded up to a whole tick).
5. In sequential comm step 1 loses the link queues, so each segment's bound is also at least its
   ``fan_in`` bound (:func:`dplace.bounds.fanin.fan_in_bound`, taken on the segment's sub-instance with
   ``sequential=True``): the whole schedule restricted to the segment keeps every property that bound uses
   (each of the segment's sends lies inside the segment's window, after its producer and before its
   consumer, one at a time on its link, one per producer and destination device; durations and transfer
   times only shrink by rounding down), and the zero-byte edges standing for paths through dropped ops
   carry no tensor, so they are left out of its joins (``real_edges``).

6. Mirrored pieces. Where colocation ties a piece's first op to another piece's last op and its last op to
   the other's first (a forward stem and its backward stem: every op of one tied to an op of the other),
   the two are bounded together (:func:`dplace.bounds.mirror.mirror_split_bound`, proof there): the two
   anchored splits share their devices, and an op forced onto one forces its twin there too. Its value
   bounds the sum of the two spans, each at least its own bound, so replacing the two bounds by it in the
   sum keeps a lower bound as long as every piece above each one (a wider piece it refines) counts the
   sum of its narrower pieces (that sum at least its own bound; a wider piece that kept its own bound would
   not pass the gain on), and no paired piece refines another (``_mirror_gain``). On NASNet-Mobile the
   stems: 15,878 + 25,512 µs apart, 47,769 together (the best schedule found for them chained: 50,028).
7. (Optional, ``seq_pieces``.) In sequential comm a segment is also solved in sequential comm
   (:func:`_sequential_lb`): the sub-instance of steps 2-4 without the zero-byte edges that stand for
   paths through dropped ops (each would be a send that occupies a link and keeps its place in the link's
   order, which no real schedule pays: a fictitious send is not a relaxation; dropped, they only remove
   precedences), in ``comm="sequential"``, solved by the CP-SAT model of :mod:`dplace.formulations.cpsat`
   (a send per producer and destination device, as long as its largest tensor there, after its producer,
   one at a time per directed link, in the order the producers run on the source device). The whole
   schedule restricted to the segment's ops and shifted by start(c_a) is a feasible schedule of that
   model: its ops keep their devices, device orders and times (step 3: inside [start(c_a), start(c_b)]);
   each send the sub-instance needs (a member producer with a member consumer on another device) is a
   send of the whole schedule, which carries at least the same tensors (so it is at least as long), starts
   after its producer, before that consumer, and keeps its place among the kept sends of its link (a subset
   of the link's sends, in the same producer order); the sends of dropped producers or to dropped
   consumers are removed (a link only gets freer). Rounding every duration and transfer time down to
   ticks keeps the same device and link orders feasible and the longest path through them no longer, so
   the segment's span in ticks is at least that model's optimum, at least CP-SAT's proven bound. The
   larger of this and steps 4-5's bound is the segment's bound. Run only where steps 2-4 proved the
   parallel piece's optimum (on pieces CP-SAT cannot prove in parallel comm the sequential model, larger,
   proved no more: NASNet-Mobile's, benchmarks/RESULTS.md, "Branchy (NAS-style) graphs"), and skipped where
   that optimum's schedule, simulated in sequential comm on the sequential sub-instance, is no longer than
   the bound already proven (nothing to gain).

The sum of the segments' bounds is a lower bound on every schedule of the instance. When memory forces
the path to change device (its ops with their colocation groups do not fit on one device), the changes
that must fall on edges of one-op segments add their cheapest transfers (:mod:`dplace.bounds.memory`;
``SegmentBound.best``, source ``segments_memory``). Edges between kept
ops that ran through dropped ops are lost (a further relaxation); with identical links between every
device pair they are put back as zero-byte edges (any path from u to v through dropped ops pays at least
one latency when u and v are on different devices, which is what a zero-byte edge costs there).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from dplace import progress
from dplace.bounds.fanin import fan_in_bound
from dplace.bounds.shared import memo
from dplace.budget import Budget
from dplace.instance.graph import critical_path_ops, longest_path
from dplace.instance.model import Device, Edge, Instance, Link, Op

__all__ = ["SegmentBound", "critical_path_ops", "segment_bound", "segments"]


def _path_windows(inst: Instance, path: list[int]) -> tuple[list[int], list[int]]:
    """A(o): last path index that is an ancestor of o or o (-1 if none); D(o): first path index that is
    a descendant of o or o (len(path) if none)."""
    L = len(path)
    idx = {c: j for j, c in enumerate(path)}
    A = [-1] * inst.n
    D = [L] * inst.n
    for o in inst.topo:
        if o in idx:
            A[o] = idx[o]
        a = A[o]
        for e in inst.succ[o]:
            v = inst.edst[e]
            if a > A[v]:
                A[v] = a
    for o in reversed(inst.topo):
        if o in idx:
            D[o] = idx[o]
        d = D[o]
        for e in inst.pred[o]:
            u = inst.esrc[e]
            if d < D[u]:
                D[u] = d
    return A, D


@dataclass
class Segment:
    first: int | None  # the cut op that starts the segment (None: the first segment)
    last: int | None  # the cut op whose start ends it, taken with time 0 (None: the last segment)
    ops: list[int]  # the kept ops strictly between (op indices of the instance)
    a: int = -1  # path index of ``first`` (-1: none)
    b: int = 0  # path index of ``last`` (len(path): none)


def segments(inst: Instance, window: int) -> tuple[list[int], list[Segment]]:
    """(critical path, segments) of the decomposition with the given window (module docstring)."""
    path = critical_path_ops(inst)
    L = len(path)
    A, D = _path_windows(inst, path)
    on_path = set(path)
    kept = [o for o in range(inst.n) if o not in on_path and D[o] - A[o] - 1 <= window]
    blocked = [0] * (L + 1)  # difference array: +1 on (A, D) exclusive
    for o in kept:
        lo, hi = A[o] + 1, D[o]
        if lo < hi:
            blocked[lo] += 1
            blocked[hi] -= 1
    cuts = []
    run = 0
    for j in range(L):
        run += blocked[j]
        if run == 0:
            cuts.append(j)
    # segment k lies between cuts[k-1] and cuts[k]: kept op o belongs to the segment with
    # cuts[k-1] <= A(o) and D(o) <= cuts[k]
    import bisect

    bounds_ = [-1] + cuts + [L]
    segs = [Segment(None if k == 0 else path[cuts[k - 1]], path[cuts[k]] if k < len(cuts) else None, [],
                    bounds_[k], bounds_[k + 1]) for k in range(len(cuts) + 1)]
    cut_set = {path[j] for j in cuts}
    for o in kept + [c for c in path if c not in cut_set]:
        k = bisect.bisect_left(cuts, D[o])  # first cut index >= D(o)
        segs[k].ops.append(o)
    return path, segs


def _homogeneous_links(inst: Instance) -> bool:
    vals = {(inst.lat[a][b], inst.bw[a][b]) for a in range(inst.m) for b in range(inst.m) if a != b}
    return len(vals) <= 1


def _members(inst: Instance, seg: Segment) -> list[int]:
    """The instance's op indices of a segment's sub-instance, in the sub-instance's op order."""
    mid = sorted(seg.ops, key=lambda o: inst.topo_pos[o])
    return ([seg.first] if seg.first is not None else []) + mid + ([seg.last] if seg.last is not None else [])


def _op_fields(inst: Instance) -> tuple[list[str], list[str | None], list[str | None]]:
    """Per op its id, colocation and own pinned device (as ``inst.ops`` has them), read from the columns
    without building every ``Op`` (0.25 s at 36k ops, before the first segment could be cut short)."""
    def make():
        names = [d.name for d in inst.devices]
        coloc = [inst.group_names[g] if g >= 0 else None for g in inst.group_of]
        pin = [names[d] if d >= 0 else None for d in inst.columns.pin_codes(names)]
        return inst.columns.ids, coloc, pin

    return memo(inst, "_segment_op_fields", make)


def _sub_instance(inst: Instance, seg: Segment, tick: float, reach_extra: bool) -> Instance:
    """The segment as an instance with integer data in ticks, every time rounded down (a relaxation).

    Transfers: one link of latency 0 and bandwidth 1 where an edge's bytes are its transfer time in ticks
    (rounded down) when every device pair has the same link; otherwise the instance's links with bytes
    and latencies scaled (still rounded down)."""
    members = _members(inst, seg)
    pos = {o: i for i, o in enumerate(members)}
    names = [d.name for d in inst.devices]
    ops = []
    ids, coloc, pin = _op_fields(inst)
    for o in members:
        t = {names[d]: (0.0 if o == seg.last else math.floor(inst.dur[o][d] / tick + 1e-9)) for d in range(inst.m)}
        ops.append(Op(ids[o], t, inst.mem[o], colocation=coloc[o], device=pin[o]))
    homog = _homogeneous_links(inst)
    edges = []
    seen = set()
    for o in members:
        for e in inst.succ[o]:
            v = inst.edst[e]
            if v in pos:
                seen.add((o, v))
                b = math.floor(inst.transfer_time(e, 0, 1) / tick + 1e-9) if homog and inst.m > 1 else 0.0
                edges.append(Edge(ids[o], ids[v], float(b) if homog else inst.ebytes[e] / tick))
    n_real = len(edges)  # the edges that carry tensors; those added below stand for precedence only
    if reach_extra and homog:
        # precedences through dropped ops, as zero-byte edges (paid: one latency between devices, floored)
        lat = math.floor(inst.lat[0][1] / tick + 1e-9) if inst.m > 1 else 0
        anc = _reach_within(inst, members, pos)
        for v, srcs in anc.items():
            for u in srcs:
                if (u, v) not in seen:
                    edges.append(Edge(ids[u], ids[v], float(lat)))
    devices = [Device(d.name, d.memory, 1.0) for d in inst.devices]
    if homog:
        link, pairs = Link(0.0, 1.0), {}
    else:  # scaled links: latency / tick rounded down, bandwidth in bytes per tick scaled so bytes/bw stays
        link = Link(math.floor(inst.link.latency / tick + 1e-9), inst.link.bandwidth)
        pairs = {k: Link(math.floor(lk.latency / tick + 1e-9), lk.bandwidth) for k, lk in inst.pairs.items()}
    sub = Instance(f"{inst.name}-seg", devices, ops, edges, link=link, pairs=pairs, comm="parallel")
    memo(sub, "_real_edges", lambda: n_real)  # read by the sequential-comm bounds (fan_in_bound)
    return sub


def _reach_within(inst: Instance, members: list[int], pos: dict[int, int]) -> dict[int, set[int]]:
    """For each member v, the members u that reach v only through non-members (direct edges excluded
    later); searched backwards from v through non-members, bounded to the segment's span."""
    lo = min(inst.topo_pos[o] for o in members)
    out: dict[int, set[int]] = {}
    for v in members:
        found: set[int] = set()
        stack = [inst.esrc[e] for e in inst.pred[v] if inst.esrc[e] not in pos]
        seen = set(stack)
        while stack:
            w = stack.pop()
            for e in inst.pred[w]:
                u = inst.esrc[e]
                if inst.topo_pos[u] < lo or u in seen:
                    continue
                seen.add(u)
                if u in pos:
                    found.add(u)
                else:
                    stack.append(u)
        if found:
            out[v] = found
    return out


def _shape_key(sub: Instance) -> tuple:
    """Everything the segment's optimum depends on, without names (equal keys: equal optima)."""
    gid = {g: i for i, g in enumerate(sub.group_names)}
    ops = tuple((tuple(sub.dur[o]), sub.mem[o], gid.get(sub.ops[o].colocation, -1), sub.pinned[o]) for o in range(sub.n))
    edges = tuple(sorted(zip(sub.esrc, sub.edst, sub.ebytes)))
    links = (sub.link, tuple(sorted(sub.pairs.items())), tuple(sub.capacity))
    return ops, edges, links


@dataclass
class SegmentBound:
    value: float  # µs, proven lower bound on every schedule's makespan
    window: int
    tick: float
    n_segments: int
    kept_ops: int
    largest_segment: int
    proven_optimal: int  # segments whose bound equals their optimum (CP-SAT proved it)
    time_s: float
    pieces: list[dict[str, Any]] = field(default_factory=list)
    memory_cuts: float = 0.0  # µs the device changes memory forces on the path add (bounds_memory)
    mirrored: int = 0  # pairs of mirrored pieces bounded together (step 6; their gain is in ``value``)

    @property
    def best(self) -> tuple[float, str]:
        """(value, source): the segment bound, plus the forced cuts' cost when memory forces any
        (source ``segments_memory``, :func:`dplace.bounds.memory.segment_cut_costs`)."""
        if self.memory_cuts > 0:
            return self.value + self.memory_cuts, "segments_memory"
        return self.value, "segments"


def _one_device(sub: Instance) -> Any:
    """(placement, starts) with every op of a tiny sub-instance on one device, in topological order
    (None when no device may hold them all)."""
    devs = [d for d in range(sub.m) if all(d in sub.allowed_devices(o) for o in range(sub.n))
            and sum(sub.mem) <= sub.capacity[d]]
    if not devs:
        return None
    d = min(devs, key=lambda x: (sum(sub.dur[o][x] for o in range(sub.n)), x))
    starts, t = [0.0] * sub.n, 0.0
    for o in sub.topo:
        starts[o] = t
        t += sub.dur[o][d]
    return [d] * sub.n, starts


def _mirror_gain(inst: Instance, pieces: list[dict[str, Any]], parents: list[int | None],
                 nodes: list[tuple[Segment | None, float, float | None]], tick: float, budget: Budget,
                 should_stop=None) -> tuple[float, int]:
    """(µs to add to the segment bound, pairs used): step 6 of the module docstring. Pieces P and Q are
    paired when colocation ties P's first op to Q's last and P's last to Q's first
    (:func:`dplace.bounds.mirror.mirror_split_bound` bounds their spans' sum); a piece qualifies when
    every piece it refines adds up its narrower pieces (their sum at least its own bound), and no paired
    piece refines another; pairs are taken from the widest pieces down."""
    from dplace.bounds.mirror import mirror_split_bound

    def chain(i):  # the pieces i refines, nearest first
        out = []
        while parents[i] is not None:
            i = parents[i]
            out.append(i)
        return out

    g = inst.group_of
    cand: dict[tuple[int, int], list[int]] = {}
    order = []
    for i, (seg, own, inner) in enumerate(nodes):
        if seg is None or seg.first is None or seg.last is None or g[seg.first] < 0 or g[seg.last] < 0:
            continue
        if not seg.ops or any(nodes[j][2] is None or nodes[j][2] < nodes[j][1] for j in chain(i)):
            continue
        cand.setdefault((g[seg.first], g[seg.last]), []).append(i)
        order.append(i)
    order.sort(key=lambda i: len(chain(i)))
    paired: set[int] = set()
    gain, n_pairs = 0.0, 0
    for i in order:
        if budget.expired() or (should_stop is not None and should_stop()):
            break
        if i in paired or paired.intersection(chain(i)):
            continue
        seg = nodes[i][0]
        for j in cand.get((g[seg.last], g[seg.first]), []):
            if j == i or j in paired or paired.intersection(chain(j)) or i in chain(j) or j in chain(i):
                continue
            a = _sub_instance(inst, seg, tick, reach_extra=True)
            b = _sub_instance(inst, nodes[j][0], tick, reach_extra=True)
            la, lb = pieces[i]["bound_us"] / tick, pieces[j]["bound_us"] / tick
            both = mirror_split_bound(a, b, la, lb, stop=lambda: budget.expired() or (
                should_stop is not None and should_stop()))
            if both > la + lb:
                gain += (both - la - lb) * tick
                n_pairs += 1
                paired.update((i, j))
                pieces[i]["mirror"], pieces[j]["mirror"] = j, i
            break
    return gain, n_pairs


def _widest(pieces: list[dict[str, Any]], parents: list[int | None]) -> list[tuple[int, int, float, bool]]:
    """The widest level's pieces as (a, b, bound in µs, whether a piece paired by the mirror step is it or
    inside it), for :func:`dplace.bounds.memory.segment_cut_costs`."""
    def root(i: int) -> int:
        while parents[i] is not None:
            i = parents[i]
        return i

    paired = {root(i) for i, p in enumerate(pieces) if "mirror" in p}
    return [(p["a"], p["b"], p["bound_us"], i in paired) for i, p in enumerate(pieces) if parents[i] is None]


def _segment_lb(sub: Instance, budget: Budget | None, workers: int,
                cheap: float | None = None) -> tuple[float, bool, Any]:
    """Proven lower bound (µs) of the sub-instance's optimum, whether it is its optimum, and the best
    schedule found for it as (placement, starts in µs): HEFT's where it reaches the cheap bounds (then
    optimal), else CP-SAT's; None when it was not solved (``budget`` None or spent). CP-SAT reports under its own label (:func:`dplace.progress.nested`).
    ``cheap``: the cheap bounds' value for this sub-instance, when already computed (what this returns
    with ``budget`` None)."""
    from dplace.bounds import (anchored_split_bound, anchored_work_bound, critical_path_length, energetic_bound,
                               work_bound)

    if cheap is not None:
        cp_len = cheap
    else:
        cp_len = max(critical_path_length(sub), work_bound(sub))
        if sub.n > 2:
            cp_len = max(cp_len, energetic_bound(sub, grid=48), anchored_work_bound(sub), anchored_split_bound(sub))
    if sub.n <= 2:  # one op and the cut after it: both on the first op's fastest device is optimal
        return cp_len, False, _one_device(sub)
    if budget is None or budget.expired():
        return cp_len, False, None
    from dplace.errors import DplaceError  # noqa: PLC0415
    from dplace.plugins import get_method  # noqa: PLC0415

    try:
        heft = get_method("heft")(sub)
    except DplaceError:  # e.g. no placement HEFT finds keeps memory: CP-SAT decides
        heft = None
    if heft is not None and heft.memory_ok and heft.makespan <= cp_len:  # the cheap bounds prove HEFT optimal
        return cp_len, True, (list(heft.placement), list(heft.schedule.start))
    from .cpsat import cpsat  # noqa: PLC0415 — formulations imports dplace.bounds

    with progress.nested(f"segment of {sub.n} ops"):
        res = cpsat(sub, budget=budget, hint="heft", workers=workers, progress=False, tick=1.0)
    lb = res.lower_bound if res.lower_bound is not None else cp_len
    sol = (list(res.placement), list(res.schedule.start)) if res.placement is not None and res.memory_ok else None
    return max(cp_len, lb), res.status == "optimal", sol


def _sequential_lb(inst: Instance, seg: Segment, tick: float, sub: Instance, floor: float, pl: Any,
                   budget: Budget, workers: int, cache: dict[Any, Any]) -> tuple[float | None, bool]:
    """Step 7 of the module docstring: CP-SAT's proven bound (ticks) of the segment's sub-instance in
    sequential comm, without the zero-byte precedence edges, and whether it is that sub-instance's optimum;
    (None, False) where not run. ``sub``: the parallel sub-instance (steps 2-4), whose optimum is proven;
    ``floor``: the bound (ticks) already proven for the segment, ``pl``: the parallel optimum's schedule.
    Skipped where that schedule's placement and device order, simulated in sequential comm on the
    sequential sub-instance, already reach ``floor`` (the sequential sub-instance's optimum is then at most
    ``floor``: nothing to gain)."""
    seq = _sub_instance(inst, seg, tick, reach_extra=False).replace(comm="sequential")
    skey = ("sequential", _shape_key(seq))
    if skey in cache:
        return cache[skey]
    if budget.expired():
        return None, False
    if pl is not None:
        from dplace.schedule.simulate import simulate  # noqa: PLC0415

        order = [sorted((o for o in range(sub.n) if pl[0][o] == d), key=lambda o: (pl[1][o], sub.topo_pos[o]))
                 for d in range(sub.m)]
        if simulate(seq, list(pl[0]), order).makespan <= floor + 1e-9:
            cache[skey] = (None, False)
            return None, False
    from .cpsat import cpsat  # noqa: PLC0415

    with progress.nested(f"segment of {seq.n} ops (sequential)"):
        res = cpsat(seq, budget=budget, hint="heft", workers=workers, progress=False, tick=1.0)
    if res.lower_bound is None:
        return None, False
    out = (float(res.lower_bound), res.status == "optimal")
    cache[skey] = out
    return out


SEARCH_MAX_OPS = 120  # step 4's search (anchored_search_bound) on pieces up to this many ops


def _searched_lb(sub: Instance, lb: float, answer: float, budget: Budget, should_stop=None) -> tuple[float, bool]:
    """(bound in ticks, whether it is the piece's optimum): ``lb`` raised by
    :func:`dplace.bounds.anchored_search.anchored_search_bound` towards ``answer`` (the makespan of a
    schedule of the piece) within ``budget``. The piece's data are whole ticks, so its optimum is a whole
    number of ticks (a schedule's earliest-start schedule for the same placement and device orders is
    no longer and starts every op at a sum of whole numbers): the bound is rounded up to one."""
    from dplace.bounds.anchored_search import anchored_search_bound

    if not answer > lb:
        return lb, False
    got = anchored_search_bound(sub, lb, answer, stop=lambda: budget.expired() or (
        should_stop is not None and should_stop()))
    if got > lb:
        lb = max(lb, float(math.ceil(got - 1e-6)))
    return lb, lb >= answer


def _span(sub: Instance, pl: Any) -> float:
    """The makespan (ticks) of a schedule ``(placement, starts)`` of a segment's sub-instance."""
    return max((st + sub.dur[o][d] for o, (d, st) in enumerate(zip(*pl))), default=0.0)


CHEAP_FIRST_MAX_OPS = 5000  # segment_bound's cheap pass up to this many ops (3.7 s on the 36k Transformer)


def segment_bound(inst: Instance, *, windows: tuple[int, ...] = (48, 24, 12, 6, 3, 0), time_limit_s: float = 30.0,
                  segment_time_s: float = 2.0, max_segment_ops: int = 60, workers: int = 1,
                  should_stop=None, solutions: list[dict[str, Any]] | None = None,
                  cache: dict[Any, Any] | None = None, budget: Budget | None = None,
                  cheap_first: int = CHEAP_FIRST_MAX_OPS, cheap_lbs: dict[Any, float] | None = None,
                  seq_pieces: bool = False) -> SegmentBound:
    """Sum of proven segment bounds (module docstring).

    ``windows`` from wide to narrow: the decomposition with the widest window is used where its segments
    have at most ``max_segment_ops`` ops; a larger segment is bounded by the decomposition of its span with
    the next window (a wider window keeps more ops, so its cuts are cuts of every narrower window and the
    span between two of them is bounded by the narrower segments inside it). ``budget`` (else
    ``time_limit_s`` from now) caps the whole computation: segments left when it runs out (or once ``should_stop()`` is true) count with their
    cheap bounds only (still a bound).

    ``solutions``: when a list is given, every segment CP-SAT solved is appended to it as
    ``{"level", "a", "b", "members", "placement", "start"}`` (path indices of its cuts, the instance's op
    indices of its ops, the device and start (µs) of each in the best schedule found): the pieces :mod:`dplace.formulations.stitch`
    puts together into a schedule of the whole instance.

    ``pieces``: per segment bounded (each level), its window, ops, bound (µs), whether proven optimal, its cuts'
    path indices ``a``/``b`` and ``answer_us``, the makespan of the best schedule found for it (None: none).

    ``cache``: a dict shared between calls (a segment's bound depends only on its shape: the key holds
    every number of its sub-instance, ticks included), e.g. the whole graph's bound and its parts'.

    ``cheap_first``: on instances of at most that many ops, the same decomposition is first bounded with
    the cheap bounds alone (no CP-SAT, no HEFT; within half the budget; 0.1-0.5 s on the bundled and the
    NAS-style graphs): a segment that CP-SAT's pass then has no time for counts with that pass's bound of
    it (the same segment: the decomposition depends on the window only), and the result is the larger of
    the two passes' sums. So the bound no longer falls to path sums where the box is loaded (Inception-v3:
    455,071 at 4 s and 480,947 at 12 s without it, 486,465 from the cheap pass alone in 0.24 s).

    ``cheap_lbs``: shape key -> the cheap bounds' value (ticks) of a segment, filled by a pass that stops
    before CP-SAT and read by the next: the CP-SAT pass does not compute the cheap pass's bounds again.

    ``seq_pieces``: in sequential comm, each segment whose parallel optimum CP-SAT proved is also solved in
    sequential comm (step 7, :func:`_sequential_lb`); ``pieces`` then hold ``parallel_us`` (steps 4-5) and
    ``sequential_us``. Off by default: on NASNet-Mobile, Inception-v3 and ResNeXt-50 (PipeDream) in sequential
    comm it raised no piece and cost Inception-v3 5.4 s of a 30-s bound (benchmarks/RESULTS.md, "Branchy
    (NAS-style) graphs").
    """
    import bisect

    t0 = time.perf_counter()
    budget = Budget.resolve(budget, time_limit_s)
    windows = tuple(sorted(set(windows), reverse=True)) or (0,)
    cheap = None
    cheap_lbs = {} if cheap_lbs is None else cheap_lbs
    floor: dict[tuple[int, int, int], float] = {}  # (window, a, b) -> the cheap pass's bound of that segment
    if 0 < inst.n <= cheap_first and max_segment_ops > 0 and not budget.expired():
        cheap = segment_bound(inst, windows=windows, max_segment_ops=0, should_stop=should_stop,
                              budget=budget.share(0.5), cheap_first=0, cheap_lbs=cheap_lbs)
        floor = {(p["window"], p["a"], p["b"]): p["bound_us"] for p in cheap.pieces}
    # the narrower decompositions are made when a segment is refined (0.04 s each at 36k ops), so none is
    # made once the budget has run out
    levels = [segments(inst, windows[0])]
    starts = [[s.a for s in levels[0][1]]]

    def level_segments(level: int) -> list:
        while len(levels) <= level:
            path_, segs = segments(inst, windows[len(levels)])
            levels.append((path_, segs))
            starts.append([s.a for s in segs])
        return levels[level][1]

    path = levels[0][0]
    if not path:
        return SegmentBound(0.0, windows[0], 1.0, 0, 0, 0, 0, 0.0)
    total_us = sum(min(inst.dur[o]) for o in path)
    tick = 10.0 ** math.floor(math.log10(max(1.0, total_us / 1e7)))  # ~1e7 ticks along the path at most
    stats = {"n": 0, "opt": 0, "kept": 0, "largest": 0}
    pieces: list[dict[str, Any]] = []
    parents: list[int | None] = []  # per piece, the piece it refines (None: a piece of the widest level)
    # per piece: its segment (None: not built), its own bound and its narrower pieces' sum (µs; None: none)
    nodes: list[tuple[Segment | None, float, float | None]] = []
    cache = {} if cache is None else cache  # shape -> (bound in ticks, proven optimal, schedule)

    def span(level: int, a: int, b: int) -> float:
        segs = level_segments(level)
        k = bisect.bisect_left(starts[level], a)
        total = 0.0
        while k < len(segs) and segs[k].b <= b:
            seg = segs[k]
            k += 1
            if budget.expired() or (should_stop is not None and should_stop()):
                # out of time: no sub-instance is built (seconds each on big graphs); the path ops from
                # c_a up to c_b still run one after the other, which bounds the segment's span
                lb = sum(min(inst.dur[path[j]]) for j in range(max(seg.a, 0), min(seg.b, len(path))))
                lb = max(lb, floor.get((windows[level], seg.a, seg.b), 0.0))  # the cheap pass's, where it ran
                stats["n"] += 1
                parents.append(None)
                nodes.append((None, lb, None))
                pieces.append({"window": windows[level], "ops": None, "bound_us": lb, "optimal": False, "a": seg.a,
                               "b": seg.b, "answer_us": None})
                total += lb
                continue
            size = len(seg.ops) + (seg.first is not None) + (seg.last is not None)
            sub = _sub_instance(inst, seg, tick, reach_extra=True)
            key = _shape_key(sub)
            if key in cache:  # repeated layers give the same segment: solved once
                lb, opt, pl = cache[key]
            else:
                stop = (should_stop is not None and should_stop()) or size > max_segment_ops
                lb, opt, pl = _segment_lb(sub, None if stop else budget.child(segment_time_s), workers,
                                          cheap_lbs.get(key))
                if not (stop or opt or pl is None) and sub.n <= SEARCH_MAX_OPS:  # step 4's search
                    lb, opt = _searched_lb(sub, lb, _span(sub, pl), budget.child(segment_time_s), should_stop)
                cache[key] = (lb, opt, pl)
                if stop:  # no budget: lb is the cheap bounds' value
                    cheap_lbs.setdefault(key, lb)
            if solutions is not None and pl is not None:
                solutions.append({"level": level, "a": seg.a, "b": seg.b, "members": _members(inst, seg),
                                  "placement": pl[0], "start": [x * tick for x in pl[1]]})
            par_lb, par_opt = lb, opt
            seq_lb = None
            if inst.comm == "sequential" and sub.n > 2:  # the segment's sends queue on links (step 1's relaxation
                # loses that; :func:`dplace.bounds.fanin.fan_in_bound` keeps it): the larger proven bound
                fan = fan_in_bound(sub, sequential=True, real_edges=memo(sub, "_real_edges", lambda: 0), floor=lb)
                if fan > lb:
                    lb, opt = fan, False
                if (seq_pieces and par_opt and size <= max_segment_ops
                        and not (should_stop is not None and should_stop())):
                    seq_lb, seq_opt = _sequential_lb(inst, seg, tick, sub, lb, pl, budget.child(segment_time_s),
                                                     workers, cache)
                    if seq_lb is not None and seq_lb > lb:
                        lb, opt = seq_lb, seq_opt
            lb *= tick
            own, inner = lb, None
            first_child = len(pieces)
            if not opt and level + 1 < len(windows) and sub.n > 2:  # the narrower pieces may prove more
                inner = span(level + 1, seg.a, seg.b)
                lb = max(lb, inner)
            for c in range(first_child, len(pieces)):
                if parents[c] is None:
                    parents[c] = len(pieces)
            parents.append(None)
            nodes.append((seg, own, inner))
            stats["n"] += 1
            stats["opt"] += int(opt)
            stats["kept"] += len(seg.ops)
            stats["largest"] = max(stats["largest"], sub.n)
            pieces.append({"window": windows[level], "ops": sub.n, "bound_us": lb, "optimal": opt, "a": seg.a,
                           "b": seg.b, "answer_us": None if pl is None else tick * _span(sub, pl),
                           "parallel_us": par_lb * tick, "sequential_us": None if seq_lb is None else seq_lb * tick})
            total += lb
        return total

    value = span(0, -1, len(path))
    if len(path) > 3 and not budget.expired() and not (should_stop is not None and should_stop()):
        gain, n_pairs = _mirror_gain(inst, pieces, parents, nodes, tick, budget, should_stop)
        value += gain
        stats["mirrored"] = n_pairs
    from dplace.bounds.memory import segment_cut_costs

    # the widest level's segments with their bounds: a device change memory forces inside one adds its
    # transfer (in sequential comm with the link's queue, unless the budget is spent) beyond the segment's
    # slack (bounds.memory)
    extra = segment_cut_costs(inst, path, _widest(pieces, parents), queue=not budget.expired())
    if cheap is not None and cheap.value + cheap.memory_cuts > value + extra:  # the cheap pass proved more
        value, stats["mirrored"], extra = cheap.value, cheap.mirrored, cheap.memory_cuts
    return SegmentBound(value, windows[0], tick, stats["n"], stats["kept"], stats["largest"], stats["opt"],
                        time.perf_counter() - t0, pieces, memory_cuts=extra, mirrored=stats.get("mirrored", 0))
