"""Where a graph of two tied parts (``formulations.bounds_twins``: InceptionV3's bundled graph) holds its gap.

    .venv/bin/python benchmarks/bench_twins.py FILE [--rest-s 20] [--stems-s 30] [--answer R.json]
                                                    [--relax OUT.json] [--solve-rests 30]
                                                    [--pairs 24 [--pairs-s 4] [--pairs-cpsat 10]]
                                                    [--serial OUT.json]

Prints, for the instance in FILE:
- each part's rest bounded alone (``segment_bound`` within ``--rest-s``), without and with the anchor at its
  stem's end (step 2 of ``formulations/bounds_twins.py``), and the stems' CP-SAT value for each pair;
- with ``--solve-rests S``: each rest anchored at its stem's end (the instance the bound bounds) solved by
  ``portfolio`` within S seconds, in parallel and in sequential comm: its answer beside its own proven bound. Where
  both are close, the twin-stem bound's relaxation holds each rest alone, and what it leaves out is the two rests
  sharing the devices (session 33: within 0.5-2.1 % on the bundled InceptionV3; benchmarks/RESULTS.md, "Which method
  when: sequential comm");
- with ``--answer``: in that result (``dplace solve --out``), when each stem ends (E_A, E_B), each part's rest's
  span after it, and each device's busy share;
- with ``--relax``: writes the *lag-chain relaxation*: the two stems, each rest's critical path (the twin of
  A's path must be B's), their colocation and memory, and per segment of each rest's decomposition an op of
  time (segment bound - its first cut's time) on a private device of that part, between the segment's first
  cut and its last (the first segment's op after the stem's end; the last one's has no successor). Any
  schedule restricted to those ops, with each segment's op put between its cuts, is a schedule of it
  (a segment's span is at least its bound), so its optimum is a lower bound. It is a diagnosis, not a bound
  the product claims: ``dplace solve OUT --method portfolio`` finds how much such a relaxation can prove at
  most (session 19: 307,405 µs against the twin-stem bound's 306,382: the two critical paths' sharing of the
  devices does not hold InceptionV3's gap; benchmarks/RESULTS.md, "Branchy (NAS-style) graphs").
- with ``--pairs W``: both anchored rests cut by the segment decomposition of window W (B's segments must be the
  twins of A's), and per pair of twin segments: each one's proven bound alone (``--pairs-s`` each), and the
  bound of their *sum* when both use one placement (twins share a device), by dplace's own arithmetic:
  :func:`dplace.bounds.mirror.mirror_split_bound` of A's segment and B's segment *reversed in time* (B's first
  cut becomes its last, so A's source is tied to the reversed B's sink and A's sink to its source, the crosswise
  ties that bound needs; a schedule reversed in time is one of the reversed piece, with the same span, and the
  two pieces need not share a time frame). With ``--pairs-cpsat S``: also CP-SAT's optimum of that sum
  (a model of its own: one placement, each part's ops alone on each device, minimise the two spans' sum;
  CP-SAT's word, not confirmed, so no claim). Then the sums: T_A + T_B >= L_sum, so every schedule with stems
  ending at E_A, E_B is at least max(E_A + L_A, E_B + L_B, (E_A + E_B + L_sum) / 2); with ``--answer`` that value
  at the answer's own stems, an upper limit on what this pairing can add to the twin-stem bound (session 34:
  none on the bundled InceptionV3: benchmarks/RESULTS.md, "Which method when: sequential comm").
- with ``--serial OUT``: writes both anchored rests *in series*: A's rest, then a join op after all of A's ops, then
  B's rest after it, twins colocated (memory of both, no stems). Its optimum is the least T_A + T_B over one
  placement with the two rests never running at the same time; ``dplace solve OUT --method portfolio`` finds
  how low that sum goes (an answer, not a bound), and the placement it finds can be timed with the stems (session
  34: the rests' sum 314,749 µs, but that placement run concurrently timed at 442,887 µs).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import dplace  # noqa: E402
from dplace.bounds.mirror import mirror_split_bound  # noqa: E402
from dplace.budget import Budget  # noqa: E402
from dplace.formulations.bounds_segments import _segment_lb, _sub_instance, segment_bound, segments  # noqa: E402
from dplace.formulations.bounds_twins import rest_instance, stem_instance, twin_stems  # noqa: E402
from dplace.formulations.twins import twin_sides  # noqa: E402
from dplace.instance.graph import critical_path_ops  # noqa: E402
from dplace.instance.model import Device, Edge, Instance, Link, Op  # noqa: E402


def _refuse(message: str) -> None:
    """Bad input: one line on stderr, exit code 2."""
    print(f"bench_twins.py: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _parts(inst: Instance) -> tuple[list[int], list[int], list[list[int]]]:
    stems = twin_stems(inst)
    if stems is None:
        _refuse(f"instance: {inst.name!r} is not two tied parts that begin with chains (twin_stems)")
    sa, sb = stems
    sides = twin_sides(inst)
    stem = set(sa) | set(sb)
    rests = [[o for o in range(inst.n) if sides[o] == sides[s[0]] and o not in stem] for s in (sa, sb)]
    return sa, sb, rests


def _where(inst: Instance, path: str) -> None:
    sa, sb, rests = _parts(inst)
    with open(path) as f:
        res = dplace.result_from_dict(inst, json.load(f))  # placement and order, re-simulated
    s, order = res.schedule, res.schedule.order
    ea, eb = s.end[sa[-1]], s.end[sb[-1]]
    ends = [max((s.end[o] for o in rest), default=e) for rest, e in zip(rests, (ea, eb))]
    print(f"answer {path}: makespan {s.makespan:,.0f} µs; E_A {ea:,.0f}, E_B {eb:,.0f}; rest A ends {ends[0]:,.0f} "
          f"(span {ends[0] - ea:,.0f}), rest B {ends[1]:,.0f} (span {ends[1] - eb:,.0f})")
    for d in range(inst.m):
        busy = sum(s.end[o] - s.start[o] for o in order[d])
        print(f"  device {inst.devices[d].name}: {len(order[d])} ops, busy {busy:,.0f} µs ({busy / s.makespan:.2f})")


def _solve_rests(inst: Instance, seconds: float) -> None:
    sa, sb, rests = _parts(inst)
    print(f"each rest alone, anchored at its stem's end, `portfolio` {seconds:g} s:")
    print("| rest | ops | comm | answer µs | proven bound µs | gap |")
    print("|---|---|---|---|---|---|")
    for i, (s, ops) in enumerate(zip((sa, sb), rests)):
        sub = rest_instance(inst, ops, f"rest{i}", anchor=s[-1])
        for comm in ("parallel", "sequential"):
            res = dplace.solve(sub.replace(comm=comm), "portfolio", time_limit_s=seconds)
            gap = "—" if res.gap is None else f"{100 * res.gap:.1f} %"
            lb = "—" if res.lower_bound is None else _us(res.lower_bound)
            print(f"| {'AB'[i]} | {sub.n} | {comm} | {_us(res.makespan)} | {lb} | {gap} |", flush=True)


def _us(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.6g}"


def _relax(inst: Instance, rest_s: float, out: str) -> None:
    sa, sb, rests = _parts(inst)
    chains, lags = [], []
    for s, ops in zip((sa, sb), rests):
        sub = rest_instance(inst, ops, "rest")
        sbd = segment_bound(sub, time_limit_s=rest_s)
        top = max(p["window"] for p in sbd.pieces)
        chains.append(list(s) + [inst.op_index[sub.ops[o].id] for o in critical_path_ops(sub)])
        lags.append(sorted(((p["a"], p["b"], p["bound_us"]) for p in sbd.pieces if p["window"] == top)))
    twin = {}
    for g in inst.groups:
        twin[g[0]], twin[g[1]] = g[1], g[0]
    if [twin.get(o) for o in chains[0]] != chains[1]:
        _refuse("--relax: the twins of A's critical path are not B's: no lag-chain relaxation")
    keep = set(chains[0]) | set(chains[1])
    tt, bw = inst.lat[0][1], inst.bw[0][1]
    names = [d.name for d in inst.devices]
    priv = ["__lag_a", "__lag_b"]
    big = 4.0 * sum(max(inst.dur[o]) for o in keep)
    ops = []
    for o in sorted(keep, key=lambda x: inst.topo_pos[x]):
        t = {names[d]: inst.dur[o][d] for d in range(inst.m)}
        t.update({p: big for p in priv})
        ops.append(Op(inst.ops[o].id, t, inst.mem[o], colocation=inst.ops[o].colocation, device=inst.ops[o].device))
    edges = [Edge(inst.ops[inst.esrc[e]].id, inst.ops[inst.edst[e]].id, math.floor(tt + inst.ebytes[e] / bw))
             for e in range(len(inst.esrc)) if inst.esrc[e] in keep and inst.edst[e] in keep]
    for c, (chain, lg, s, p) in enumerate(zip(chains, lags, (sa, sb), priv)):
        path = chain[len(s):]
        for a, b, x in lg:
            name = f"__lag{c}_{a}"
            src = s[-1] if a < 0 else path[a]
            ops.append(Op(name, max(0.0, x - (0.0 if a < 0 else min(inst.dur[src]))), 0, device=p))
            edges.append(Edge(inst.ops[src].id, name, 0.0))
            if b < len(path):
                edges.append(Edge(name, inst.ops[path[b]].id, 0.0))
    cap = max(inst.capacity)
    relaxed = Instance(f"{inst.name}-lagchains", [Device(d.name, d.memory, 1.0) for d in inst.devices]
                       + [Device(p, cap, 1.0) for p in priv], ops, edges, link=Link(0.0, 1.0), comm="parallel")
    from dplace.instance.io import save_instance

    save_instance(relaxed, out)
    print(f"wrote {out}: {relaxed.n} ops (stems, both rests' critical paths, {sum(map(len, lags))} segment ops)")


def _tied(sub: Instance, names: dict[str, str], reverse: bool = False) -> Instance:
    """A segment's sub-instance with each op's colocation set to ``names[id]`` (its twin pair's name; none
    where the twin is not in the other piece), its edges reversed with ``reverse``."""
    devs = [d.name for d in sub.devices]
    ops = [Op(op.id, {devs[d]: sub.dur[o][d] for d in range(sub.m)}, sub.mem[o], colocation=names.get(op.id),
              device=op.device) for o, op in enumerate(sub.ops)]
    ends = [(sub.ops[sub.esrc[e]].id, sub.ops[sub.edst[e]].id) for e in range(len(sub.esrc))]
    edges = [Edge(v, u, sub.ebytes[e]) if reverse else Edge(u, v, sub.ebytes[e]) for e, (u, v) in enumerate(ends)]
    return Instance(sub.name + ("-reversed" if reverse else ""), [Device(d.name, d.memory, 1.0) for d in sub.devices],
                    ops, edges, link=sub.link, pairs=sub.pairs, comm="parallel")


def _pair_cpsat(a: Instance, b: Instance, seconds: float) -> tuple[float, float, str]:
    """(CP-SAT's bound, its best value, status) of min over one placement of span(A) + span(B): A's and B's
    ops each alone on their devices (two NoOverlaps a device), twins on one device, memory of both. Times are
    whole ticks already (the segments' sub-instances)."""
    from ortools.sat.python import cp_model as cp

    from dplace.formulations.cpsat.model import build_model
    from dplace.formulations.cpsat.search import run_search, status_name
    from dplace.formulations.cpsat.solve import _params
    from dplace.formulations.cpsat.ticks import Ticks

    both = Instance("pair", [Device(d.name, d.memory, 1.0) for d in a.devices],
                    list(a.ops) + list(b.ops), list(a.edges) + list(b.edges), link=a.link, pairs=a.pairs,
                    comm="parallel")
    T = Ticks(both, 1.0, None)
    horizon = int(sum(max(row) for row in T.p) + sum(max(v for r in M for v in r) for M in T.c)) + 1
    V = build_model(both, T, horizon=horizon, hint_only=True, symmetry=True)  # no NoOverlap: added per part
    md = V.model
    in_a = [o < a.n for o in range(both.n)]
    for d in range(both.m):
        k, parts = 0, ([], [])
        for o in range(both.n):
            if d in V.allowed[o]:
                parts[0 if in_a[o] else 1].append(V.intervals[d][k])
                k += 1
        for ivs in parts:
            if len(ivs) > 1:
                md.add_no_overlap(ivs)
    spans = []
    for side in (True, False):
        mk = md.new_int_var(0, horizon, f"span{int(side)}")
        md.add_max_equality(mk, [V.e[o] for o in range(both.n) if in_a[o] == side])
        spans.append(mk)
    md.minimize(spans[0] + spans[1])
    sv = cp.CpSolver()
    _params(sv, seconds, 1, 0)
    # dplace's deadline and probing setting, not CP-SAT's own limit (it has run 21 s past it)
    got = run_search(sv, md, budget=Budget(seconds))
    ans = got.answer
    best = ans.objective_value if ans is not None and got.status in (cp.OPTIMAL, cp.FEASIBLE) else math.nan
    bound = math.nan if ans is None or got.abandoned else ans.best_objective_bound  # an abandoned search proves nothing
    return bound, best, status_name(got.status) + (" (abandoned)" if got.abandoned else "")


def _pairs(inst: Instance, window: int, seconds: float, cpsat_s: float | None, rests_lb: list[float],
           answer: str | None) -> None:
    sa, sb, rests = _parts(inst)
    twin = {}
    for g in inst.groups:
        twin[g[0]], twin[g[1]] = g[1], g[0]
    subs = [rest_instance(inst, ops, f"rest{i}", anchor=s[-1]) for i, (s, ops) in enumerate(zip((sa, sb), rests))]
    (path_a, seg_a), (_, seg_b) = (segments(sub, window) for sub in subs)
    tw = {inst.ops[o].id: inst.ops[twin[o]].id for o in twin}
    ids = [[[sub.ops[o].id for o in ([s.first] if s.first is not None else []) + s.ops
             + ([s.last] if s.last is not None else [])] for s in segs] for sub, segs in zip(subs, (seg_a, seg_b))]
    if len(seg_a) != len(seg_b) or any(sorted(tw[x] for x in p) != sorted(q) for p, q in zip(*ids)):
        _refuse(f"--pairs: window {window}: B's segments are not the twins of A's: no pairs")
    total_us = sum(min(subs[0].dur[o]) for o in path_a)
    tick = 10.0 ** math.floor(math.log10(max(1.0, total_us / 1e7)))  # as segment_bound's
    print(f"twin segments of window {window} ({len(seg_a)} pairs, tick {tick:g} µs): each alone (`_segment_lb`, "
          f"{seconds:g} s each), their sum with one placement (mirror bound of A and B reversed)"
          + (f", CP-SAT's optimum of that sum ({cpsat_s:g} s, its word: no claim)" if cpsat_s else "") + ":")
    print("| pair | ops | A alone µs | B alone µs | sum µs | one placement µs | gain µs |"
          + (" CP-SAT bound / best µs |" if cpsat_s else ""))
    print("|---|---|---|---|---|---|---|" + ("---|" if cpsat_s else ""))
    sums = [0.0, 0.0, 0.0, 0.0]
    for j, (x, y) in enumerate(zip(seg_a, seg_b)):
        a, b = _sub_instance(subs[0], x, tick, True), _sub_instance(subs[1], y, tick, True)
        la, _, _ = _segment_lb(a, Budget.resolve(None, seconds), 1)
        lb, _, _ = _segment_lb(b, Budget.resolve(None, seconds), 1)
        names = {op.id: "twin:" + op.id for op in a.ops}
        names.update({tw[op.id]: "twin:" + op.id for op in a.ops})
        ta, tb = _tied(a, names), _tied(b, names, reverse=True)
        both = mirror_split_bound(ta, tb, la, lb) if a.n > 2 and b.n > 2 else la + lb
        sums[0] += la
        sums[1] += lb
        sums[2] += both
        if a.n <= 2 or b.n <= 2 or (a.n == 3 and both == la + lb == 0):  # a cut and one op, or nothing to gain
            sums[3] += both
            continue
        gain = both - la - lb if both - la - lb > 1e-6 * both else 0.0  # the bounds' rounding, not a gain
        row = (f"| {j} | {a.n} + {b.n} | {_us(la * tick)} | {_us(lb * tick)} | {_us((la + lb) * tick)} | "
               f"{_us(both * tick)} | {_us(gain * tick)} |")
        if cpsat_s:
            cb, cv, st = _pair_cpsat(ta, _tied(b, names), cpsat_s)
            sums[3] += max(cb, both)
            row += f" {_us(cb * tick)} / {_us(cv * tick)} ({st}) |"
        print(row, flush=True)
    la_, lb_ = rests_lb
    l_sum = max(sums[2] * tick, la_ + lb_)
    print(f"sums: A alone {_us(sums[0] * tick)}, B alone {_us(sums[1] * tick)}, one placement {_us(sums[2] * tick)}"
          + (f" (with CP-SAT's word on the pairs shown: {_us(sums[3] * tick)})" if cpsat_s else "")
          + f"; the rests' segment bounds L_A {_us(la_)} + L_B {_us(lb_)} = {_us(la_ + lb_)}; "
          f"L_sum = {_us(l_sum)} (+{_us(l_sum - la_ - lb_)})")
    if answer:
        with open(answer) as f:
            res = dplace.result_from_dict(inst, json.load(f))
        ea, eb = res.schedule.end[sa[-1]], res.schedule.end[sb[-1]]
        terms = (ea + la_, eb + lb_, (ea + eb + l_sum) / 2)
        print(f"at the answer's stems (E_A {_us(ea)}, E_B {_us(eb)}): "
              f"max(E_A + L_A, E_B + L_B, (E_A + E_B + L_sum) / 2) = max({', '.join(_us(t) for t in terms)}) = "
              f"{_us(max(terms))}: the most this pairing can prove (the answer: {_us(res.makespan)})")


def _serial(inst: Instance, out: str) -> None:
    sa, sb, rests = _parts(inst)
    ka, kb = sa[-1], sb[-1]
    parts = [set(rests[0]) | {ka}, set(rests[1]) | {kb}]
    keep = parts[0] | parts[1]
    ops = [Op(inst.ops[o].id, 0.0 if o in (ka, kb) else {d.name: inst.dur[o][i] for i, d in enumerate(inst.devices)},
              inst.mem[o], colocation=inst.ops[o].colocation, device=inst.ops[o].device)
           for o in sorted(keep, key=lambda x: inst.topo_pos[x])]
    edges = [Edge(inst.ops[inst.esrc[e]].id, inst.ops[inst.edst[e]].id, inst.ebytes[e]) for e in range(len(inst.esrc))
             if any(inst.esrc[e] in p and inst.edst[e] in p for p in parts)]
    join = "__join"
    while join in inst.op_index:
        join += "_"
    ops.append(Op(join, 0.0, 0))
    edges += [Edge(inst.ops[o].id, join, 0.0) for o in parts[0]]
    edges.append(Edge(join, inst.ops[kb].id, 0.0))
    serial = Instance(f"{inst.name}-rests-in-series", [Device(d.name, d.memory, 1.0) for d in inst.devices], ops, edges,
                      link=inst.link, pairs=inst.pairs, comm="parallel")
    from dplace.instance.io import save_instance

    save_instance(serial, out)
    print(f"wrote {out}: {serial.n} ops (A's rest, a join, B's rest; twins colocated)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("instance")
    ap.add_argument("--rest-s", type=float, default=20.0, help="each rest's segment bound's time (s)")
    ap.add_argument("--stems-s", type=float, default=30.0, help="the stems' CP-SAT time (s)")
    ap.add_argument("--answer", help="a result file (dplace solve --out) of the instance")
    ap.add_argument("--relax", help="write the lag-chain relaxation (module docstring) to this file")
    ap.add_argument("--solve-rests", type=float, metavar="S",
                    help="also solve each anchored rest alone by portfolio within S seconds, in both comm modes")
    ap.add_argument("--serial", help="write both rests in series (module docstring) to this file")
    ap.add_argument("--pairs", type=int, metavar="W",
                    help="bound the twin segments of window W in pairs (module docstring)")
    ap.add_argument("--pairs-s", type=float, default=4.0, help="each segment's own bound's time with --pairs (s)")
    ap.add_argument("--pairs-cpsat", type=float, metavar="S",
                    help="with --pairs: also CP-SAT's optimum of each pair's sum within S seconds (its word)")
    args = ap.parse_args()
    for name in ("solve_rests", "pairs_s", "pairs_cpsat"):
        v = getattr(args, name)
        if v is not None and not (v > 0 and math.isfinite(v)):
            ap.error(f"--{name.replace('_', '-')}: must be > 0 seconds, got {v}")
    if args.pairs is not None and args.pairs < 0:
        ap.error(f"--pairs: must be a window >= 0, got {args.pairs}")
    if args.answer is not None and not os.path.isfile(args.answer):
        ap.error(f"--answer: no such file: {args.answer!r}")
    from dplace.formulations.cpsat import cpsat

    inst = dplace.load_instance(args.instance)
    sa, sb, rests = _parts(inst)
    print(f"{inst.name}: {inst.n} ops, comm {inst.comm}; stems of {len(sa)} ops; rests of {len(rests[0])} / "
          f"{len(rests[1])} ops; load {open('/proc/loadavg').read().split()[:3]}")
    for anchored in (False, True):
        ls: list[float] = []
        for i, (s, ops) in enumerate(zip((sa, sb), rests)):
            t0 = time.perf_counter()
            sub = rest_instance(inst, ops, f"rest{i}", anchor=s[-1] if anchored else None)
            ls.append(segment_bound(sub, time_limit_s=args.rest_s).best[0])
            print(f"  rest {'AB'[i]} {'anchored at its stem end' if anchored else 'alone'}: {ls[-1]:,.0f} µs "
                  f"({time.perf_counter() - t0:.1f} s)")
        t0 = time.perf_counter()
        res = cpsat(stem_instance(inst, sa, sb, ls[0], ls[1], 1.0), time_limit_s=args.stems_s, hint="heft",
                    progress=False, tick=1.0)
        print(f"  stems with these rests (CP-SAT, whole ticks): {res.status}, bound {res.lower_bound:,.0f} µs "
              f"({time.perf_counter() - t0:.1f} s)")
    if args.solve_rests:
        _solve_rests(inst, args.solve_rests)
    if args.answer:
        _where(inst, args.answer)
    if args.relax:
        _relax(inst, args.rest_s, args.relax)
    if args.serial:
        _serial(inst, args.serial)
    if args.pairs is not None:
        _pairs(inst, args.pairs, args.pairs_s, args.pairs_cpsat, ls, args.answer)


if __name__ == "__main__":
    main()
