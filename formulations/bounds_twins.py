"""Twin-stem bound: two parts tied op by op that both begin with a chain.

Some training graphs are two parts that share no edge, each colocation group holding one op of each
(:func:`dplace.formulations.twins.twin_sides`; InceptionV3's converted graph). Where both parts begin with
a chain of twins, the part that runs its chain second on a shared device starts everything after its
chain late. The segment bound follows one critical path and cannot see that; this bound does.

The relaxation, step by step (each step only removes constraints or rounds times down):

1. Stems. Part A begins with a chain a_1 -> ... -> a_k: a_1 is A's only op without inputs, and for
   i < k, a_i's only successor is a_{i+1}, whose only predecessor is a_i. Part B begins with the chain
   of their twins b_1 -> ... -> b_k (b_i in a_i's colocation group), under the same conditions. Then
   every other op of A descends from a_k (it descends from a_1, and no path leaves the chain before a_k),
   and likewise in B.
2. In any schedule, A's other ops (A's *rest*) start at or after E_A, the end of a_k, and a rest op fed
   by a_k on another device than a_k's no earlier than E_A plus that edge's transfer. Shifted back by E_A,
   the rest and a_k shrunk to time 0 (at time 0 on its device, where it takes no device time) form a
   schedule of the rest as an instance of its own, *anchored* at a_k: those ops and a_k (time 0 on every
   device, its memory and pin), the edges among them (a_k's into the rest included: each input still
   arrives its transfer after a_k's end, now 0), their memory (a subset of what each device holds), pins;
   no colocation: their twins are dropped; parallel comm: sequential transfers only delay. So A ends at
   or after E_A + L_A for every proven lower bound L_A of that instance (here its segment bound,
   :mod:`dplace.formulations.bounds_segments`; the anchor is its path's first op, so the rest's first
   segment is anchored there and spreading that segment away from a_k's device pays the transfers).
   Likewise B with E_B + L_B. (The anchor raised the bundled InceptionV3's rests from 150,823 / 119,163 to
   152,921 / 122,005 µs, the bound from 306,382 to 309,224: benchmarks/RESULTS.md, "Branchy (NAS-style) graphs".)
3. The 2k stem ops, restricted from the same schedule, form a schedule of the *stem instance* (those ops,
   the edges among them, memory, pins, colocation; parallel comm). Hence every schedule's makespan is at
   least max(E_A + L_A, E_B + L_B) for the E_A, E_B of some stem schedule, so at least the least such value
   over all stem schedules.
4. That least value is the optimum of the stem instance with two more ops: t_A of time L_A after a_k and
   t_B of time L_B after b_k, each pinned to a device of its own that no stem op can usefully use (a stem
   op takes ``big`` there: more than a schedule of the stem on the real devices one op at a time, which
   exists whenever the instance has a schedule), reached without transfer. Every time and transfer is
   rounded down to whole ticks (a relaxation with integer data) and CP-SAT's proven bound of that
   instance (confirmed as every CP-SAT bound is, :mod:`dplace.verify.claims`) times the tick is the bound.

Only for identical links between every device pair (the transfer of an edge is then one number).

Budget: the rests' segment bounds get :data:`REST_SHARE` of it (0.15), the stems' CP-SAT the rest. The
stems' proof is what the bound hangs on (unproven, its bound is ~280k on the bundled InceptionV3 against
~306-309k proven), its time varies with L_A, L_B in no order found (the stems with the anchored rests 152,921 /
122,005 took 16.5-21.3 s at load 4.3-4.6, with 150,319 / 117,303 4.4 s), and the rests' bounds are anytime
(their cheap pass first). Session 17 moved the share from 0.6 to 0.35; with the anchored rests, the bound alone
at 11.5 s (as in ``portfolio``'s 60 s) on InceptionV3, load 4.5-5.2: 0.35 proved the stems in 1 of 5 runs,
0.25 in 2 of 3 (307,347-307,360 µs), 0.15 in 4 of 5 (305,969-305,973; rests ~151.5k / 118.8k): benchmarks/RESULTS.md,
"Branchy (NAS-style) graphs".
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from dplace import progress
from dplace.bounds import BoundPart, lower_bound, register_solver_bound
from dplace.budget import Budget
from dplace.instance.model import Device, Edge, Instance, Link, Op

from .bounds_segments import segment_bound

__all__ = ["TwinStemBound", "rest_instance", "stem_instance", "twin_stem_bound", "twin_stems"]


# the rests' segment bounds' share of the budget, the stems' CP-SAT getting the rest (module docstring,
# "Budget")
REST_SHARE = 0.15


@dataclass
class TwinStemBound:
    value: float  # µs, proven lower bound on every schedule's makespan
    stem: int  # ops in each part's chain
    rest_bounds: tuple[float, float]  # L_A, L_B (µs)
    optimal: bool  # CP-SAT proved the stem instance's optimum
    time_s: float


def _chain(inst: Instance, ops: list[int]) -> list[int]:
    """The chain a part begins with (step 1 of the module docstring); [] when the part has several ops
    without inputs."""
    inside = set(ops)
    sources = [o for o in ops if not any(inst.esrc[e] in inside for e in inst.pred[o])]
    if len(sources) != 1:
        return []
    chain = [sources[0]]
    while True:
        out = {inst.edst[e] for e in inst.succ[chain[-1]]}
        if len(out) != 1:
            return chain
        (w,) = out
        if len({inst.esrc[e] for e in inst.pred[w]}) != 1:
            return chain
        chain.append(w)


def twin_stems(inst: Instance) -> tuple[list[int], list[int]] | None:
    """(a_1..a_k, b_1..b_k): the two parts' common chains of twins (k >= 1), or None when the graph is
    not two tied parts, its links differ between device pairs, or the parts do not begin so."""
    from .twins import twin_sides

    if inst.m < 2 or len({(inst.lat[x][y], inst.bw[x][y]) for x in range(inst.m) for y in range(inst.m) if x != y}) != 1:
        return None
    sides = twin_sides(inst)
    if sides is None:
        return None
    twin = {}
    for g in inst.groups:
        twin[g[0]], twin[g[1]] = g[1], g[0]
    ca = _chain(inst, [o for o in range(inst.n) if sides[o] == 0])
    cb = _chain(inst, [o for o in range(inst.n) if sides[o] == 1])
    k = 0
    while k < min(len(ca), len(cb)) and twin.get(ca[k]) == cb[k]:
        k += 1
    if k == 0:
        return None
    return ca[:k], cb[:k]


def rest_instance(inst: Instance, ops: list[int], name: str, anchor: int | None = None) -> Instance:
    """The ops as an instance of their own: edges among them, memory, pins, no colocation, parallel comm.
    ``anchor`` (the part's stem end, step 2 of the module docstring): added with time 0 on every device, its
    memory and pin, and its edges into ``ops``."""
    keep = set(ops) | ({anchor} if anchor is not None else set())
    new_ops = [Op(inst.ops[o].id, {d.name: 0.0 if o == anchor else inst.dur[o][i] for i, d in enumerate(inst.devices)},
                  inst.mem[o], device=inst.ops[o].device) for o in sorted(keep, key=lambda x: inst.topo_pos[x])]
    edges = [Edge(inst.ops[inst.esrc[e]].id, inst.ops[inst.edst[e]].id, inst.ebytes[e])
             for e in range(len(inst.esrc)) if inst.esrc[e] in keep and inst.edst[e] in keep]
    devices = [Device(d.name, d.memory, 1.0) for d in inst.devices]
    return Instance(f"{inst.name}-{name}", devices, new_ops, edges, link=inst.link, pairs=inst.pairs, comm="parallel")


def stem_instance(inst: Instance, sa: list[int], sb: list[int], la: float, lb: float, tick: float) -> Instance:
    """Step 4's instance, in ticks (every time rounded down)."""
    fl = lambda x: float(math.floor(x / tick + 1e-9))  # noqa: E731
    stem = sa + sb
    keep = set(stem)
    tt = inst.lat[0][1] + 0.0  # identical links: one latency, one bandwidth
    bw = inst.bw[0][1]
    edges = [(inst.esrc[e], inst.edst[e], fl(tt + inst.ebytes[e] / bw)) for e in range(len(inst.esrc))
             if inst.esrc[e] in keep and inst.edst[e] in keep]
    names = [d.name for d in inst.devices]
    ta, tb = "__tail_a", "__tail_b"
    while ta in inst.op_index or tb in inst.op_index or ta in names or tb in names:
        ta, tb = ta + "_", tb + "_"
    big = sum(fl(max(inst.dur[o])) for o in stem) + sum(c for _, _, c in edges) + fl(la) + fl(lb) + 1.0
    ops = []
    for o in stem:
        t = {names[d]: fl(inst.dur[o][d]) for d in range(inst.m)}
        t[ta] = t[tb] = big
        ops.append(Op(inst.ops[o].id, t, inst.mem[o], colocation=inst.ops[o].colocation, device=inst.ops[o].device))
    ops.append(Op(ta, fl(la), 0, device=ta))
    ops.append(Op(tb, fl(lb), 0, device=tb))
    cap = max(inst.capacity)
    devices = [Device(d.name, d.memory, 1.0) for d in inst.devices] + [Device(ta, cap, 1.0), Device(tb, cap, 1.0)]
    out = [Edge(inst.ops[u].id, inst.ops[v].id, c) for u, v, c in edges]
    out += [Edge(inst.ops[sa[-1]].id, ta, 0.0), Edge(inst.ops[sb[-1]].id, tb, 0.0)]
    return Instance(f"{inst.name}-stems", devices, ops, out, link=Link(0.0, 1.0), comm="parallel")


def twin_stem_bound(inst: Instance, *, time_limit_s: float = 30.0, workers: int = 1, should_stop=None,
                    cache: dict | None = None, budget: Budget | None = None) -> TwinStemBound | None:
    """The twin-stem bound (module docstring) within ``budget`` (else ``time_limit_s`` from now;
    :data:`REST_SHARE` for the rests' segment bounds, the rest for CP-SAT on the stems); None where the graph
    is not of that shape.
    ``cache``: :func:`dplace.formulations.bounds_segments.segment_bound`'s, shared with a segment bound of the whole
    graph (the first part's rest has the same segments as the whole graph's critical path there)."""
    from .cpsat import cpsat  # noqa: PLC0415 — the cpsat package imports the methods

    t0 = time.perf_counter()
    budget = Budget.resolve(budget, time_limit_s)
    rests_budget = budget.share(REST_SHARE)
    stems = twin_stems(inst)
    if stems is None:
        return None
    sa, sb = stems
    from .twins import twin_sides

    sides = twin_sides(inst)
    stem = set(sa) | set(sb)
    rests = [[o for o in range(inst.n) if sides[o] == sides[s[0]] and o not in stem] for s in (sa, sb)]
    ls = []
    for i, ops in enumerate(rests):
        if not ops:
            ls.append(0.0)
            continue
        sub = rest_instance(inst, ops, f"rest{i}", anchor=(sa, sb)[i][-1])
        # the larger of two proven bounds: the segment bound rounds times down to whole ticks, which at
        # magnitudes below a tick leaves the cheap bounds more
        ls.append(max(segment_bound(sub, budget=rests_budget.share(1.0 / (2 - i)), workers=workers,
                                    should_stop=should_stop, cache=cache).best[0] if sub.n > 2 else 0.0,
                      lower_bound(sub)))
    total = sum(min(inst.dur[o]) for o in stem) + sum(ls)
    tick = 10.0 ** math.floor(math.log10(max(1.0, total / 1e7)))
    sub = stem_instance(inst, sa, sb, ls[0], ls[1], tick)
    cheap = max(sum(min(inst.dur[o]) for o in s) + l for s, l in zip((sa, sb), ls))
    value, opt = cheap, False
    if not budget.expired() and not (should_stop is not None and should_stop()):
        with progress.nested("twin stems"):
            res = cpsat(sub, budget=budget, hint="heft", workers=workers, progress=False, tick=1.0)
        if res.lower_bound is not None and res.lower_bound * tick > value:
            value = res.lower_bound * tick
        opt = res.status == "optimal"
    return TwinStemBound(value, len(sa), (ls[0], ls[1]), opt, time.perf_counter() - t0)


def _portfolio_parts(inst: Instance, *, time_limit_s: float, workers: int) -> list[BoundPart]:
    """``bound_portfolio``'s parts that need CP-SAT: the segment bound (and its memory-cut variant), then
    on graphs of two tied parts that begin with chains the twin-stem bound, each within ``time_limit_s``."""
    out = []
    cache: dict[Any, Any] = {}
    sb = segment_bound(inst, time_limit_s=time_limit_s, workers=workers, cache=cache)
    detail = {"segments": sb.n_segments, "proven_optimal": sb.proven_optimal, "largest": sb.largest_segment,
              "kept_ops": sb.kept_ops, "mirrored": sb.mirrored}
    out.append(BoundPart("segments", sb.value, sb.time_s, detail))
    if sb.memory_cuts > 0:
        out.append(BoundPart("segments_memory", sb.best[0], sb.time_s, {**detail, "memory_cuts": sb.memory_cuts}))
    tb = twin_stem_bound(inst, time_limit_s=time_limit_s, workers=workers, cache=cache)
    if tb is not None:
        out.append(BoundPart("twin_stems", tb.value, tb.time_s,
                             {"stem": tb.stem, "rests": list(tb.rest_bounds), "stems_optimal": tb.optimal}))
    return out


def _strengthen(inst: Instance, value: float, name: str, *, budget: Budget, should_stop=None) -> tuple[float, str]:
    """``strong_bound``'s step: the segment bound within the budget (half of it on twin-stemmed graphs, the
    twin-stem bound getting the rest); the larger of ``value`` and theirs, with its source."""
    twins = twin_stems(inst) is not None
    cache: dict[Any, Any] = {}
    sb = segment_bound(inst, budget=budget.share(0.5 if twins else 1.0), should_stop=should_stop, cache=cache)
    if sb.best[0] > value:
        value, name = sb.best
    if twins:
        tb = twin_stem_bound(inst, budget=budget, should_stop=should_stop, cache=cache)
        if tb is not None and tb.value > value:
            value, name = tb.value, "twin_stems"
    return value, name


register_solver_bound("segments, twin_stems", portfolio=_portfolio_parts, strengthen=_strengthen)
