"""Mirrored pieces solved together, as pieces for :func:`.transplant.transplant`.

On a training graph whose forward ops are tied to their backward twins by colocation, a piece of the
forward critical path and its mirror in the backward pass (piece P's first op tied to Q's last, P's last
to Q's first: the pairs :func:`dplace.bounds.mirror.mirror_split_bound` bounds) share one placement.
Solved apart, each piece's best schedule places the other badly (NASNet-Mobile, parallel comm: the
forward stem's 17,366-µs schedule put into a 251,963-µs answer shortens the forward stem by 9.4k and
lengthens the backward stem by 15.5k). :func:`chained` makes the pair one instance: the two pieces' ops
(their own times, edges, memory and colocation), and P's last op before Q's first (no bytes), so its
makespan is the two spans' sum when nothing else runs between them; :func:`pair_pieces` solves it with
``portfolio`` and returns the schedule as a piece of two parts.

Not in ``portfolio``: measured on NASNet-Mobile, parallel comm (session 18, load 2.5-4.5), it gained
nothing that stays. The pair chained alone (CP-SAT 20 s: 53,292 µs against the stems' 57,668 in a
251,963-µs answer) put back into that answer: no gain; with the neighbours pinned (54,230): no gain (the
forward stem 8.5k shorter, the rest 6k longer: its first ops wait for the stem's outputs on other
devices); widened by the ops beside the stems (176 ops, CP-SAT 8-20 s: 56.9-58.6k): 643 µs once in
four tries. Inside ``portfolio`` after the first annealing round (CP-SAT 5.8 s): not kept (252,844). A
cold annealing of 9 s from the re-placed stems against from the annealed placement itself, three
times: 259,228 / 258,577 / 257,234 against 258,416 / 259,412 / 257,830 (the same). benchmarks/RESULTS.md, "Branchy
(NAS-style) graphs".
"""
from __future__ import annotations

from typing import Any

from dplace.budget import Budget
from dplace.instance.model import Device, Edge, Instance, Op

__all__ = ["chained", "mirrored_pairs", "pair_pieces"]


def mirrored_pairs(inst: Instance, window: int = 24, max_ops: int = 160) -> list[tuple[list[int], list[int]]]:
    """(P's members, Q's members) of every mirrored pair of segments (:func:`.bounds_segments.segments`
    with ``window``), P before Q on the critical path, at most ``max_ops`` ops together; largest first."""
    from .bounds_segments import _members, segments

    g = inst.group_of
    _, segs = segments(inst, window)
    segs = [s for s in segs if s.first is not None and s.last is not None and s.ops
            and g[s.first] >= 0 and g[s.last] >= 0]
    by_ends: dict[tuple[int, int], list[Any]] = {}
    for s in segs:
        by_ends.setdefault((g[s.first], g[s.last]), []).append(s)
    out, used = [], set()
    for p in segs:
        for q in by_ends.get((g[p.last], g[p.first]), []):
            if q.a <= p.a or id(p) in used or id(q) in used:
                continue
            a, b = _members(inst, p), _members(inst, q)
            if len(a) + len(b) <= max_ops:
                out.append((a, b))
                used.update((id(p), id(q)))
                break
    out.sort(key=lambda ab: -(len(ab[0]) + len(ab[1])))
    return out


def chained(inst: Instance, a: list[int], b: list[int], placement: list[int] | None = None,
            cut: tuple[int, int] | None = None) -> tuple[Instance, list[int]]:
    """(the pair as one instance, its first ops' indices in ``inst``): module docstring. With ``placement``
    (a whole answer's) the pair's neighbours come too, each as an op of no time and memory pinned to its
    device there: those that feed P or Q (real bytes: the transfers into the pair) and those P or Q
    feeds (real bytes out); one unpinned op of no time joins P's outputs' receivers to Q's inputs'
    senders (no bytes) in place of everything between the two pieces, after ``cut[0]`` (default P's last
    op) and before ``cut[1]`` (Q's first); an op whose colocation group has ops outside the two is pinned
    to its device in ``placement``."""
    members = list(dict.fromkeys(a + b))
    cut = cut or (a[-1], b[0])
    pos = {o: i for i, o in enumerate(members)}
    names = [d.name for d in inst.devices]
    ids = inst.columns.ids
    coloc = [inst.group_names[inst.group_of[o]] if inst.group_of[o] >= 0 else None for o in members]
    pins = inst.columns.pin_codes(names)
    inside = set(members)

    def pin(o: int) -> str | None:
        if pins[o] >= 0:
            return names[pins[o]]
        g = inst.group_of[o]
        if placement is not None and g >= 0 and any(x not in inside for x in inst.groups[g]):
            return names[placement[o]]
        return None

    ops = [Op(ids[o], {names[d]: inst.dur[o][d] for d in range(inst.m)}, inst.mem[o], colocation=c,
              device=pin(o)) for o, c in zip(members, coloc)]
    edges = [Edge(ids[inst.esrc[e]], ids[inst.edst[e]], float(inst.ebytes[e]))
             for o in members for e in inst.succ[o] if inst.edst[e] in pos]
    if placement is None:
        if not any(inst.edst[e] == cut[1] for e in inst.succ[cut[0]]):
            edges.append(Edge(ids[cut[0]], ids[cut[1]], 0.0))
    else:
        in_a, in_b = set(a), set(b)
        near: dict[int, str] = {}  # neighbour -> its role: "pre" (feeds P), "mid_in" (P feeds it),
        # "mid_out" (it feeds Q), "post" (Q feeds it)

        def node(o: int, role: str) -> str:
            name = f"~{role}~{ids[o]}"
            if (o, role) not in near:
                near[(o, role)] = name
                ops.append(Op(name, 0.0, 0, device=names[placement[o]]))
            return name

        for o in members:
            for e in inst.pred[o]:
                u = inst.esrc[e]
                if u not in pos:
                    edges.append(Edge(node(u, "pre" if o in in_a else "mid_out"), ids[o], float(inst.ebytes[e])))
            for e in inst.succ[o]:
                v = inst.edst[e]
                if v not in pos:
                    edges.append(Edge(ids[o], node(v, "mid_in" if o in in_a else "post"), float(inst.ebytes[e])))
        ops.append(Op("~rest", 0.0, 0))
        mids = [(o, r) for (o, r) in near if r in ("mid_in", "mid_out")]
        edges += [Edge(near[(o, r)], "~rest", 0.0) for o, r in mids if r == "mid_in"]
        edges += [Edge("~rest", near[(o, r)], 0.0) for o, r in mids if r == "mid_out"]
        edges.append(Edge(ids[cut[0]], "~rest", 0.0))
        edges.append(Edge("~rest", ids[cut[1]], 0.0))
        pre = [near[k] for k in near if k[1] == "pre"]  # the pre nodes before P's first op: no wait for them
        edges += [Edge(x, ids[a[0]], 0.0) for x in pre if not any(ed.src == x and ed.dst == ids[a[0]] for ed in edges)]
    devices = [Device(d.name, d.memory, d.speed) for d in inst.devices]
    sub = Instance(f"{inst.name}-pair", devices, ops, edges, link=inst.link, pairs=dict(inst.pairs), comm=inst.comm)
    return sub, members


def widened(inst: Instance, sch: Any, a: list[int], b: list[int]) -> tuple[list[int], list[int]]:
    """P and Q with every op that starts within P's span in the schedule ``sch`` (P's first start up to
    its last end) added to P, and every other op that starts within Q's span added to Q (in
    topological order, P's first op first). Why: a segment keeps only the ops near its stretch of the
    critical path; on NASNet-Mobile a branch of the forward stem that feeds a later cell is not in the
    stem's segment, and with the stem alone re-placed that branch became the critical path."""
    sa = min(sch.start[o] for o in a)
    ea = max(sch.end[o] for o in a)
    sb = min(sch.start[o] for o in b)
    eb = max(sch.end[o] for o in b)
    in_a, in_b = set(a), set(b)
    pa = [o for o in inst.topo if o != a[0] and (o in in_a or (sa <= sch.start[o] < ea and o not in in_b))]
    got = set(pa)
    pb = [o for o in inst.topo if o not in in_a and o not in got and (o in in_b or sb <= sch.start[o] < eb)]
    return [a[0]] + pa, pb


def pair_pieces(inst: Instance, *, budget: Budget, pairs: int = 1, method: str = "portfolio",
                should_stop=None, placement: list[int] | None = None, schedule: Any = None,
                max_ops: int = 300) -> list[dict[str, Any]]:
    """The first ``pairs`` mirrored pairs (:func:`mirrored_pairs`) solved by ``method`` in equal shares of
    ``budget``, as pieces for :func:`.transplant.transplant` (``part`` 0: P's ops, 1: Q's). With
    ``placement`` (an answer's) the pair's neighbours are pinned where it has them (:func:`chained`) and,
    with its ``schedule`` too, the pair is :func:`widened` first (when that makes at most ``max_ops`` ops)."""
    from dplace.registry import solve

    out: list[dict[str, Any]] = []
    todo = mirrored_pairs(inst)[:pairs]
    for k, (a, b) in enumerate(todo):
        if budget.left() < 0.5 or (should_stop is not None and should_stop()):
            break
        cut = (a[-1], b[0])
        if placement is not None and schedule is not None:
            wa, wb = widened(inst, schedule, a, b)
            if len(wa) + len(wb) <= max_ops:
                a, b = wa, wb
        sub, members = chained(inst, a, b, placement, cut=cut)
        opts = {"progress": False} if method == "cpsat" else {}
        res = solve(sub, method, budget=budget.share(1.0 / (len(todo) - k)), **opts)
        if res.placement is None or res.schedule is None:
            continue
        in_a = set(a)
        k_ = len(members)
        out.append({"members": members, "placement": list(res.placement)[:k_], "start": list(res.schedule.start)[:k_],
                    "makespan": res.makespan, "part": [0 if o in in_a else 1 for o in members],
                    "fixed_devices": placement is not None})
    return out
