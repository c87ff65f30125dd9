"""Where a graph of two tied parts (``formulations.bounds_twins``: InceptionV3's bundled graph) holds its gap.

    .venv/bin/python benchmarks/bench_twins.py FILE [--rest-s 20] [--stems-s 30] [--answer R.json]
                                                    [--relax OUT.json] [--solve-rests 30]

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
from dplace.formulations.bounds_segments import segment_bound  # noqa: E402
from dplace.formulations.bounds_twins import rest_instance, stem_instance, twin_stems  # noqa: E402
from dplace.formulations.twins import twin_sides  # noqa: E402
from dplace.instance.graph import critical_path_ops  # noqa: E402
from dplace.instance.model import Device, Edge, Instance, Link, Op  # noqa: E402


def _parts(inst: Instance) -> tuple[list[int], list[int], list[list[int]]]:
    stems = twin_stems(inst)
    if stems is None:
        raise SystemExit(f"{inst.name}: not two tied parts that begin with chains (twin_stems)")
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
        raise SystemExit("the twins of A's critical path are not B's: no lag-chain relaxation")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("instance")
    ap.add_argument("--rest-s", type=float, default=20.0, help="each rest's segment bound's time (s)")
    ap.add_argument("--stems-s", type=float, default=30.0, help="the stems' CP-SAT time (s)")
    ap.add_argument("--answer", help="a result file (dplace solve --out) of the instance")
    ap.add_argument("--relax", help="write the lag-chain relaxation (module docstring) to this file")
    ap.add_argument("--solve-rests", type=float, metavar="S",
                    help="also solve each anchored rest alone by portfolio within S seconds, in both comm modes")
    args = ap.parse_args()
    if args.solve_rests is not None and not args.solve_rests > 0:
        ap.error(f"--solve-rests: must be > 0 seconds, got {args.solve_rests}")
    from dplace.formulations.cpsat import cpsat

    inst = dplace.load_instance(args.instance)
    sa, sb, rests = _parts(inst)
    print(f"{inst.name}: {inst.n} ops, comm {inst.comm}; stems of {len(sa)} ops; rests of {len(rests[0])} / "
          f"{len(rests[1])} ops; load {open('/proc/loadavg').read().split()[:3]}")
    for anchored in (False, True):
        ls = []
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


if __name__ == "__main__":
    main()
