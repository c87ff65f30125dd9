"""Branchy (NAS-style) graphs (issue 25 item 3): every list heuristic and ``portfolio`` on PipeDream's
NASNet-Mobile, Inception-v3 and ResNeXt-50 training graphs, old code beside new; and sub-graphs solved
exactly, to see whether the answers or the bound hold the gap.

    .venv/bin/python benchmarks/bench_nas.py                        # the table, new code
    .venv/bin/python benchmarks/bench_nas.py --old 34ce35c          # old beside new
    .venv/bin/python benchmarks/bench_nas.py --graphs nasnetamobile --comm sequential
    .venv/bin/python benchmarks/bench_nas.py --slices 250:290,450:490 --slice-s 60
    .venv/bin/python benchmarks/bench_nas.py --where --graphs nasnetamobile   # where the gap sits
    .venv/bin/python benchmarks/bench_nas.py --pieces 28 --answer r.json       # per piece: span, alone, bound
    .venv/bin/python benchmarks/bench_nas.py --slices 200:320 --probe 30       # + CP-SAT's horizon verdicts
    .venv/bin/python benchmarks/bench_nas.py --piece-probe 24 --slice-s 10     # per piece: bound vs verdict
    .venv/bin/python benchmarks/bench_nas.py --couple 24 --slice-s 30          # forward and backward pieces tied
    .venv/bin/python benchmarks/bench_nas.py --dropped --bound-s 30             # what the dropped ops could add

Graphs: ``dplace convert pipedream instances/sources/pipedream-profiles/G.graph.txt --devices 4
--memory-fraction 0.4`` (the issue's settings; MIT, msr-fiddle/pipedream, licence beside the files).
Each cell is one whole ``dplace solve`` process (:func:`bench_seqcomm._run`: wall/CPU s, the makespan and the
proven bound read back from its result); ``portfolio`` gets ``--time-limit`` ``--portfolio-s``. "bound":
the best proven bound any cell of that code reported for the graph (each result carries its own: the
heuristics' the cheap bounds, portfolio's the segment bound too); "gap" = (makespan - bound) / makespan.
"x heft": the makespan over heft's (the issue's goal for Baechi's and Celeritas' methods: at most 1.2).

``--slices a:b,...``: the forward ops at forward-topological positions [a, b) of NASNet-Mobile (or of the first
of ``--graphs``) with their backward ops, as an instance (device memory 0.4 of its op memory, as the whole graph's); per slice heft,
``portfolio`` (a third of ``--slice-s``), ``cpsat`` (``--slice-s``: its answer and proven bound) and the
segment bound (a third), in this process. "answers %": portfolio's makespan above the best answer of
the two; "bound %": the best answer above the best proven bound (CP-SAT's, portfolio's, the segments').
Where CP-SAT proves a slice optimal, the first is the answers' share of the gap and the second is 0.
``--probe S``: per slice also CP-SAT's model with a horizon H (makespan <= H), on the slice with every time
rounded down to whole ticks (a relaxation), S seconds per probe, bisecting [best proven bound, best answer)
``--probes`` times (:func:`probe`): "no sched <=" is the largest H
CP-SAT answered INFEASIBLE for, **CP-SAT's verdict, not a proven bound** (no independent check confirms it, so
dplace never claims it; a diagnostic of where the optimum lies), and "bound side %" the share of the gap
between the bound and that H: how much of the gap the bound, not the answers, would hold if the verdict is
right. A probe that finds a schedule lowers the best answer.
``--piece-probe W``: per segment of the segment bound at window W (more than 12 ops; NASNet-Mobile or
``--instance``, each ``--comm``): its bound inside the whole graph's segment bound, CP-SAT's answer for it alone
(``--slice-s``) and a probe between them (``--probe`` s each, default 10): whether the pieces' bounds or the
decomposition hold the bound's share of the gap.
``--pieces W``: NASNet-Mobile (first ``--comm``; each piece alone solved in that comm mode) cut at window W of the segment bound (W = 28: its stages
and stems); per piece with more than 12 ops its span in a whole schedule (``--answer``: a result file of
``dplace solve --out``, else portfolio ``--portfolio-s`` run here), the best answer for the piece alone
(portfolio ``--piece-s``) and that run's proven bound; the sums include every piece (the small ones:
HEFT or CP-SAT 5 s, the cheap bounds). Also the whole schedule's critical chain: op time, time in
transfers, and how many of its ops waited for their device rather than their inputs.
``--slice-memory whole``: the slices keep the whole graph's device memory (the default, "slice", caps each device
at 0.4 of the slice's own memory: tighter than the whole graph's cap, so such a slice's verdicts are not about
the whole graph's optimum).
``--couple W``: per forward piece of the segment bound at window W and the later piece holding most of its
colocation mates (its backward piece): the two solved apart (CP-SAT ``--slice-s`` each) and tied together as
one instance (:func:`_pair_instance`): whether the tie the segment bound drops between them costs anything.
``--dropped``: the ops the segment bound's windows drop (those that may run beside more than the window's
path ops), measured two ways against the pieces the bound sums (:func:`dropped`): their work, as energy over every
range of consecutive pieces, and the paths through them between two ops of one piece, as delays. With ``--answer
F``: also where that answer spends its time beyond the pieces' bounds (each piece's span in it; ``--losses`` N).
Report ``cat /proc/loadavg`` beside the figures: the box is shared.
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time

from bench_seqcomm import NEW, ROOT, _num, _old_exe, _run

SOURCES = os.path.join(ROOT, "instances", "sources", "pipedream-profiles")
GRAPHS = "nasnetamobile,inception_v3,resnext50"
METHODS = "heft,dpos,m_topo,m_etf,m_sct,celeritas,portfolio"


def convert(name: str, comm: str, folder: str) -> str:
    """The issue's conversion of a PipeDream profile; the path of the instance."""
    out = os.path.join(folder, f"{name}_{comm}.json")
    subprocess.run([NEW, "convert", "pipedream", os.path.join(SOURCES, f"{name}.graph.txt"), "--devices", "4",
                    "--memory-fraction", "0.4", "--comm", comm, "--out", out], check=True, capture_output=True)
    return out


def warm_anneal(src: str) -> None:
    """Compile (or load from numba's cache) the annealing kernel of the code in ``src`` before any timed
    run: a run that compiles it holds the GIL ~10 s and anneals for less time on a colder schedule, which
    on NASNet-Mobile gave 311,574 against 321,112 µs warm (sequential comm, 60 s): not the code's doing."""
    code = ("from dplace.instance.model import Device, Edge, Instance, Op\n"
            "from dplace.formulations.units import Units\nfrom dplace.kernels.anneal import Annealer\n"
            "i = Instance('w', [Device('a', 9), Device('b', 9)], [Op('x', 1), Op('y', 2)], [Edge('x', 'y', 1.0)])\n"
            "for comm in ('parallel', 'sequential'):\n"
            "    j = i.replace(comm=comm); u = Units(j)\n"
            "    Annealer(j, [0, 0], u.members, u.allowed).step(1, 1.0, 1.0, 0)\n")
    env = dict(os.environ, PYTHONPATH=src)
    subprocess.run([sys.executable, "-P", "-c", code], env=env, check=True, capture_output=True, cwd=src)


def table(args: argparse.Namespace, tmp: str) -> None:
    codes = [("new", NEW)] + ([("old", args.old)] if args.old else [])
    warm_anneal(ROOT)
    if args.old and os.path.isdir(os.path.join(tmp, "old")):
        warm_anneal(os.path.join(tmp, "old"))
    for comm in args.comm.split(","):
        for g in args.graphs.split(","):
            path = convert(g, comm, tmp)
            rows = {}
            for m in args.methods.split(","):
                extra = ["--time-limit", str(args.portfolio_s)] if m in ("portfolio", "refine") else []
                for code, exe in codes:
                    rows[m, code] = _run(exe, path, m, args.timeout, tmp, extra)
            print(f"\n{g} ({comm} comm), load {open('/proc/loadavg').read().split()[:3]}")
            print(f"{'method':10} " + " ".join(f"{c + ' ' + h:>14}" for c, _ in codes
                                               for h in ("makespan", "x heft", "gap", "wall/CPU s")))
            for code, _ in codes:
                bounds = [r[2] for (m, c), r in rows.items() if c == code and r[2] is not None]
                rows["bound", code] = max(bounds) if bounds else None
            for m in args.methods.split(","):
                cells = []
                for code, _ in codes:
                    t, mk, _ = rows[m, code]
                    heft = rows.get(("heft", code), (None, None))[1]
                    lb = rows["bound", code]
                    cells += [_num(mk), "-" if mk is None or not heft else f"{mk / heft:.2f}",
                              "-" if mk is None or lb is None else f"{100 * (mk - lb) / mk:.1f}%", t]
                print(f"{m:10} " + " ".join(f"{x:>14}" for x in cells), flush=True)
            print(f"{'bound':10} " + " ".join(f"{_num(rows['bound', c]):>14}" + " " * 45 for c, _ in codes))


def slices(args: argparse.Namespace) -> None:
    sys.path.insert(0, ROOT)
    import dplace
    from dplace.formulations.bounds_segments import segment_bound
    from dplace.formats.pipedream import from_pipedream

    g = args.graphs.split(",")[0]  # the first of --graphs (default: nasnetamobile)
    whole = from_pipedream(os.path.join(SOURCES, f"{g}.graph.txt"), devices=4, memory_fraction=0.4,
                           comm=args.comm.split(",")[0])
    print(f"{g} slices ({whole.comm} comm, device memory: {args.slice_memory}), "
          f"load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'slice':>9} {'ops':>4} {'heft':>9} {'portfolio':>10} {'cpsat':>9} {'cpsat bound':>12} {'status':>9} "
          f"{'segments':>9} {'answers %':>9} {'bound %':>8}"
          + (f" {'no sched <=':>13} {'best':>9} {'bound side %':>12}" if args.probe else ""))
    for spec in args.slices.split(","):
        a, b = map(int, spec.split(":"))
        inst = forward_slice(whole, a, b, args.slice_memory)
        heft = dplace.solve(inst, "heft").makespan
        pf = dplace.solve(inst, "portfolio", time_limit_s=args.slice_s / 3)
        cp = dplace.solve(inst, "cpsat", time_limit_s=args.slice_s, progress=False)
        seg = segment_bound(inst, time_limit_s=args.slice_s / 3).best[0]
        lb = max(cp.lower_bound or 0.0, pf.lower_bound or 0.0, seg)
        best = min(pf.makespan, cp.makespan)
        line = (f"{spec:>9} {inst.n:>4} {_num(heft):>9} {_num(pf.makespan):>10} {_num(cp.makespan):>9} "
                f"{_num(cp.lower_bound):>12} {cp.status:>9} {_num(seg):>9} "
                f"{100 * (pf.makespan - best) / pf.makespan:>9.1f} {100 * (best - lb) / best:>8.1f}")
        if args.probe:
            got = probe(inst, lb, best, args.probe, args.probes)
            best = min(best, got["found_us"] or best)
            share = 100 * (got["refuted_us"] - lb) / (best - lb) if got["refuted_us"] and best > lb else 0.0
            line += f" {_num(got['refuted_us']):>13} {_num(best):>9} {share:>12.1f}"
        print(line, flush=True)


def probe(inst, lb_us: float, ub_us: float, seconds: float, probes: int) -> dict:
    """CP-SAT's model with the horizon H, bisecting [``lb_us``, ``ub_us``), on ``inst`` relaxed to whole
    ticks (every op and transfer time rounded *down*, as the segment bound's pieces: a schedule of ``inst``
    is one of the relaxation, so "no schedule <= H" there holds for ``inst``; its comm mode kept). Returns
    the largest H (µs) where CP-SAT answered INFEASIBLE (``refuted_us``, None: none; CP-SAT's verdict, not a
    proven bound: nothing independent checks it; where the relaxation's times are not whole ticks of the model,
    H is lowered by the rounding's slack, :meth:`Ticks.real_bound`), the best makespan (µs) of a probe's
    placement and device order simulated on ``inst`` (``found_us``; None: none; memory kept), the tick, and
    (H µs, CP-SAT's status, seconds) per probe (``log``). Each probe, model building included, gets
    ``seconds`` (one :class:`dplace.budget.Budget`). A probe that answers neither (out of time) moves the
    search down, as a schedule found does."""
    from ortools.sat.python import cp_model as cp_

    from dplace import simulate
    from dplace.budget import Budget
    from dplace.errors import InvalidInstanceError
    from dplace.formulations.frame import OutOfTime
    from dplace.formulations.bounds_segments import Segment, _members, _sub_instance
    from dplace.formulations.cpsat.model import build_model
    from dplace.formulations.cpsat.solve import solve_model
    from dplace.formulations.cpsat.ticks import Ticks

    T = Ticks(inst, None, None)
    tick = T.tick if T.exact else 10.0 ** math.floor(math.log10(max(ub_us, 1e-300) / 1e6))
    whole = Segment(None, None, list(range(inst.n)))
    members = _members(inst, whole)  # the relaxation's op i is inst's op members[i]
    while True:  # a tick too fine for the model's integers (times of 1e-3..1e10 µs): ten times coarser
        rel = _sub_instance(inst, whole, tick, reach_extra=False).replace(comm=inst.comm)
        try:
            RT = Ticks(rel, 1.0, None)
            break
        except InvalidInstanceError:
            tick *= 10.0
    lo, hi = int(math.ceil(lb_us / tick - 1e-9)), int(math.floor(ub_us / tick + 1e-9)) - 1
    out = {"refuted_us": None, "found_us": None, "tick": tick, "log": []}
    for _ in range(probes):
        if lo > hi:
            break
        mid = (lo + hi) // 2
        budget = Budget(seconds)
        try:
            V = build_model(rel, RT, horizon=mid, symmetry=True, budget=budget)
        except OutOfTime:
            out["log"].append((mid * tick, "model not built in time", seconds))
            hi = mid - 1
            continue
        got = solve_model(V, workers=os.cpu_count() or 1, seed=0, budget=budget)
        out["log"].append((mid * tick, got.status_name, round(got.wall_s, 2)))
        if got.status == cp_.INFEASIBLE:
            # no tick-model schedule <= mid ticks, so none of the relaxation <= mid - slack (RT.real_bound)
            if RT.real_bound(mid) > 0:
                out["refuted_us"] = RT.real_bound(mid) * tick
            lo = mid + 1
        elif got.status in (cp_.OPTIMAL, cp_.FEASIBLE):
            pl = [0] * inst.n
            for i, o in enumerate(members):
                pl[o] = got.placement[i]
            order = [[members[i] for i in dev] for dev in got.order]
            sch = simulate(inst, pl, order)
            if sch.memory_ok:
                mk = sch.makespan
                out["found_us"] = mk if out["found_us"] is None else min(out["found_us"], mk)
                hi = min(mid, int(math.floor(mk / tick + 1e-9))) - 1
            else:
                hi = mid - 1
        else:
            hi = mid - 1
    return out


def where_gap(args: argparse.Namespace) -> None:
    """Per window of the segment bound: how its segments' bounds, the best answers found for them, and their
    spans in portfolio's whole schedule add up (the spans add up to the makespan; "kept": ops the
    window keeps, the others are dropped by the relaxation)."""
    sys.path.insert(0, ROOT)
    import dplace
    from dplace.formats.pipedream import from_pipedream
    from dplace.formulations.bounds_segments import critical_path_ops, segment_bound, segments

    for g in args.graphs.split(","):
        for comm in args.comm.split(","):
            inst = from_pipedream(os.path.join(SOURCES, f"{g}.graph.txt"), devices=4, memory_fraction=0.4, comm=comm)
            pf = dplace.solve(inst, "portfolio", time_limit_s=args.portfolio_s)
            sb = segment_bound(inst, time_limit_s=args.bound_s)
            path = critical_path_ops(inst)
            at = [0.0] + [pf.schedule.start[c] for c in path] + [pf.makespan]  # index j + 1: start of c_j
            print(f"\n{g} ({comm} comm): portfolio {args.portfolio_s:.0f} s {_num(pf.makespan)}, segment bound "
                  f"{args.bound_s:.0f} s {_num(sb.value)} ({sb.time_s:.0f} s), critical path {len(path)} ops, "
                  f"load {open('/proc/loadavg').read().split()[:3]}")
            print(f"{'window':>6} {'kept':>5} {'segments':>8} {'solved':>6} {'optimal':>7} {'bounds':>9} {'answers':>9} "
                  f"{'spans':>9}")
            for w in sorted({p["window"] for p in sb.pieces}, reverse=True):
                ps = [p for p in sb.pieces if p["window"] == w]
                solved = [p for p in ps if p["answer_us"] is not None]
                kept = sum(len(s.ops) for s in segments(inst, w)[1])
                print(f"{w:>6} {kept:>5} {len(ps):>8} {len(solved):>6} {sum(p['optimal'] for p in ps):>7} "
                      f"{_num(sum(p['bound_us'] for p in ps)):>9} {_num(sum(p['answer_us'] or p['bound_us'] for p in ps)):>9} "
                      f"{_num(sum(at[p['b'] + 1] - at[p['a'] + 1] for p in ps)):>9}", flush=True)


def piece_probe(args: argparse.Namespace) -> list[dict]:
    """Per segment of the segment bound's decomposition at window ``--piece-probe`` (more than 12 ops): its
    bound inside the whole graph's segment bound (``--bound-s``), CP-SAT's best answer for the piece alone
    (``--slice-s``) and :func:`probe`'s verdict between the two (CP-SAT's word, not a proven bound): how far
    each piece's proven bound is from the piece's optimum, so whether the pieces or the decomposition (the
    ops it drops, the ties between pieces) hold the bound's share of the gap."""
    sys.path.insert(0, ROOT)
    import dplace
    from dplace.formats.pipedream import from_pipedream
    from dplace.formulations.bounds_segments import _sub_instance, segment_bound, segments

    w = args.piece_probe
    rows: list[dict] = []
    for comm in args.comm.split(","):
        inst = (dplace.load_instance(args.instance).replace(comm=comm) if args.instance else
                from_pipedream(os.path.join(SOURCES, "nasnetamobile.graph.txt"), devices=4, memory_fraction=0.4,
                               comm=comm))
        sb = segment_bound(inst, time_limit_s=args.bound_s)
        own = {(p["a"], p["b"]): p["bound_us"] for p in sb.pieces if p["window"] == w}
        print(f"\n{inst.name} ({comm} comm), window {w}: segment bound {_num(sb.value)} ({sb.time_s:.0f} s), load "
              f"{open('/proc/loadavg').read().split()[:3]}")
        print(f"{'piece':>9} {'ops':>4} {'bound':>9} {'cpsat':>9} {'no sched <=':>12} {'found':>9} "
              f"{'bound below %':>13}")
        sums = [0.0, 0.0, 0.0]
        for seg in segments(inst, w)[1]:
            if len(seg.ops) <= 12:
                continue
            sub = _sub_instance(inst, seg, sb.tick, reach_extra=True)  # in ticks, every time rounded down
            cp = dplace.solve(sub, "cpsat", time_limit_s=args.slice_s, progress=False)
            lb = max(own.get((seg.a, seg.b), 0.0) / sb.tick, cp.lower_bound or 0.0)
            got = probe(sub, lb, cp.makespan, args.probe or 10.0, args.probes)
            best = min(cp.makespan, got["found_us"] or cp.makespan)
            no = got["refuted_us"] if got["refuted_us"] is not None else lb
            sums = [sums[0] + lb * sb.tick, sums[1] + best * sb.tick, sums[2] + max(no, lb) * sb.tick]
            rows.append({"comm": comm, "a": seg.a, "b": seg.b, "ops": sub.n, "bound": lb * sb.tick,
                         "answer": best * sb.tick,
                         "refuted": None if got["refuted_us"] is None else got["refuted_us"] * sb.tick})
            print(f"{seg.a:>4}:{seg.b:<4} {sub.n:>4} {_num(lb * sb.tick):>9} {_num(best * sb.tick):>9} "
                  f"{_num(no * sb.tick) if got['refuted_us'] is not None else '-':>12} "
                  f"{_num(got['found_us'] * sb.tick) if got['found_us'] else '-':>9} "
                  f"{100 * (max(no, lb) - lb) / max(no, lb) if no else 0.0:>13.1f}", flush=True)
        print(f"{'sum':>9} {'':>4} {_num(sums[0]):>9} {_num(sums[1]):>9} {_num(sums[2]):>12}")
    return rows


def _pair_instance(inst, p, q, tick: float):
    """Pieces P and Q of the segment bound (:func:`dplace.formulations.bounds_segments.segments`) as one
    instance: each piece's sub-instance (every time rounded down to whole ticks, P's and Q's last op of time
    0), their ops' colocation kept (an op of P and its twin in Q share a device), and P's last op before Q's
    first with no transfer (its bytes 0 on the sub-instances' link of latency 0). Every op of Q descends
    from Q's first op and every op of P is an ancestor of P's last, so its optimum is the least sum of the
    two pieces' spans over the placements they can share."""
    from dplace.formulations.bounds_segments import _sub_instance
    from dplace.instance.model import Edge, Instance

    a = _sub_instance(inst, p, tick, reach_extra=True)
    b = _sub_instance(inst, q, tick, reach_extra=True)
    edges = list(a.edges) + list(b.edges) + [Edge(a.ops[-1].id, b.ops[0].id, 0.0)]
    return Instance(f"{inst.name}-pair", list(a.devices), list(a.ops) + list(b.ops), edges, link=a.link,
                    pairs=dict(a.pairs), comm="parallel")


def couple(args: argparse.Namespace) -> list[dict]:
    """Per piece P of the segment bound at window ``--couple`` W (more than ``--couple-min-ops`` ops, both ends cut
    ops) whose colocation mates lie mostly in one later piece Q (its mirror in the backward pass): the two bounded
    apart, as the segment bound does (their bounds inside the whole graph's segment bound, ``--bound-s``, and
    CP-SAT's answers for each alone, ``--slice-s``), and together (:func:`_pair_instance`: CP-SAT's answer and
    proven bound, ``--slice-s``): what tying a forward piece to its backward piece adds to the two pieces'
    optima. "tie %": the pair's answer above the sum of the answers alone (at most what bounding the two
    together could add; 0 when the best schedules alone share a placement)."""
    import collections

    sys.path.insert(0, ROOT)
    import dplace
    from dplace.formats.pipedream import from_pipedream
    from dplace.formulations.bounds_segments import _members, _sub_instance, segment_bound, segments

    w = args.couple
    rows: list[dict] = []
    inst = (dplace.load_instance(args.instance) if args.instance else
            from_pipedream(os.path.join(SOURCES, "nasnetamobile.graph.txt"), devices=4, memory_fraction=0.4,
                           comm=args.comm.split(",")[0])).replace(comm="parallel")
    # the default windows, with W among them (NASNet-Mobile's 24 is)
    sb = segment_bound(inst, windows=tuple(sorted({48, 24, 12, 6, 3, 0, w}, reverse=True)), time_limit_s=args.bound_s)
    own = {(x["a"], x["b"]): x["bound_us"] for x in sb.pieces if x["window"] == w}
    segs = [x for x in segments(inst, w)[1] if x.first is not None and x.last is not None]
    where = {o: x for x in segs for o in x.ops}
    print(f"{inst.name} (parallel comm), window {w}: segment bound {_num(sb.value)} ({sb.time_s:.0f} s), load "
          f"{open('/proc/loadavg').read().split()[:3]}")
    print(f"{'P':>9} {'ops':>4} {'Q':>9} {'ops':>4} {'bounds':>9} {'alone':>9} {'pair':>9} {'pair bound':>10} "
          f"{'tie %':>6} {'alone proven':>12}")
    sums = [0.0, 0.0, 0.0]
    g = inst.group_of
    for p in segs:
        if len(p.ops) <= args.couple_min_ops:
            continue
        mates = collections.Counter(where[x].a for o in p.ops if g[o] >= 0 for x in inst.groups[g[o]]
                                    if x != o and x in where and where[x].a > p.a)
        if not mates:
            continue
        q = next(x for x in segs if x.a == mates.most_common(1)[0][0])
        alone, optimal = 0.0, True
        for x in (p, q):
            got = dplace.solve(_sub_instance(inst, x, sb.tick, reach_extra=True), "cpsat", time_limit_s=args.slice_s,
                               progress=False)
            alone += got.makespan * sb.tick
            optimal = optimal and got.status == "optimal"
        pair = dplace.solve(_pair_instance(inst, p, q, sb.tick), "cpsat", time_limit_s=args.slice_s, progress=False)
        bounds = own.get((p.a, p.b), 0.0) + own.get((q.a, q.b), 0.0)
        row = {"p": (p.a, p.b), "q": (q.a, q.b), "ops": (len(_members(inst, p)), len(_members(inst, q))),
               "bounds": bounds, "alone": alone, "pair": pair.makespan * sb.tick,
               "pair_bound": (pair.lower_bound or 0.0) * sb.tick, "alone_optimal": optimal}
        rows.append(row)
        sums = [sums[0] + bounds, sums[1] + alone, sums[2] + row["pair"]]
        print(f"{p.a:>4}:{p.b:<4} {row['ops'][0]:>4} {q.a:>4}:{q.b:<4} {row['ops'][1]:>4} {_num(bounds):>9} "
              f"{_num(alone):>9} {_num(row['pair']):>9} {_num(row['pair_bound']):>10} "
              f"{100 * (row['pair'] - alone) / alone:>6.1f} {'yes' if optimal else 'no':>12}", flush=True)
    print(f"{'sum':>9} {'':>4} {'':>9} {'':>4} {_num(sums[0]):>9} {_num(sums[1]):>9} {_num(sums[2]):>9}")
    return rows


def _load_answer(inst, path: str):
    """The simulated schedule of a result file's placement and order on ``inst`` (same op ids)."""
    import json

    import dplace

    with open(path) as f:
        res = dplace.result_from_dict(inst, json.load(f))  # placement and order, re-simulated
    return list(res.placement), res.schedule.order, res.schedule


def critical_chain(inst, pl, order, sch) -> dict:
    """Walk back from the last op: at each op, the input whose arrival is its start (its transfer time
    counted when it crossed devices), else the op before it on its device (a device wait)."""
    tol = 1e-6
    before = {b: a for d in range(inst.m) for a, b in zip(order[d], order[d][1:])}
    o = max(range(inst.n), key=lambda x: sch.end[x])
    out = {"ops": 0, "op_us": 0.0, "transfers": 0, "transfer_us": 0.0, "device_waits": 0, "idle_us": 0.0}
    while True:
        out["ops"] += 1
        out["op_us"] += sch.end[o] - sch.start[o]
        st, nxt = sch.start[o], None
        for e in inst.pred[o]:
            u = inst.esrc[e]
            c = inst.transfer_time(e, pl[u], pl[o]) if pl[u] != pl[o] else 0.0
            if abs(sch.end[u] + c - st) <= tol * max(1.0, st):
                nxt = u
                if c > 0:
                    out["transfers"] += 1
                    out["transfer_us"] += c
                break
        if nxt is None and o in before and abs(sch.end[before[o]] - st) <= tol * max(1.0, st):
            nxt = before[o]
            out["device_waits"] += 1
        if nxt is None:  # a gap (sequential comm: a send waited for its link), or the start
            cands = [(sch.end[inst.esrc[e]], inst.esrc[e]) for e in inst.pred[o]] + (
                [(sch.end[before[o]], before[o])] if o in before else [])
            if not cands:
                break
            t, nxt = max(cands)
            out["idle_us"] += st - t
        o = nxt
    return out


def pieces(args: argparse.Namespace) -> None:
    sys.path.insert(0, ROOT)
    import dplace
    from dplace.bounds import lower_bound_with_source
    from dplace.formats.pipedream import from_pipedream
    from dplace.formulations.bounds_segments import _sub_instance, segments

    if args.instance:  # any instance file (its own comm mode) in place of NASNet-Mobile
        inst = dplace.load_instance(args.instance)
    else:
        inst = from_pipedream(os.path.join(SOURCES, "nasnetamobile.graph.txt"), devices=4, memory_fraction=0.4,
                              comm=args.comm.split(",")[0])
    if args.answer:
        pl, order, sch = _load_answer(inst, args.answer)
    else:
        pf = dplace.solve(inst, "portfolio", time_limit_s=args.portfolio_s)
        pl, order, sch = list(pf.placement), [list(x) for x in pf.order], pf.schedule
    ch = critical_chain(inst, pl, order, sch)
    path, segs = segments(inst, args.pieces)
    at = [0.0] + [sch.start[c] for c in path] + [sch.makespan]
    print(f"{inst.name} ({inst.comm} comm): whole {_num(sch.makespan)}; critical chain {ch['ops']} ops, "
          f"{_num(ch['op_us'])} op time, {_num(ch['transfer_us'])} in {ch['transfers']} transfers, "
          f"{ch['device_waits']} device waits, {_num(ch['idle_us'])} idle; window {args.pieces}: {len(segs)} pieces, "
          f"{sum(len(s.ops) for s in segs)} ops kept; load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'piece':>9} {'ops':>4} {'span':>9} {'alone':>9} {'bound':>9}")
    total = [0.0, 0.0, 0.0]
    for seg in segs:
        # _sub_instance relaxes to parallel comm (the segment bound's piece); a piece alone is solved in the
        # graph's own comm mode (in sequential comm the precedence edges through dropped ops, one latency each,
        # then queue on links too: an answer no better than the piece's own)
        sub = _sub_instance(inst, seg, 1.0, reach_extra=True).replace(comm=inst.comm)
        span = at[seg.b + 1] - at[seg.a + 1]
        if sub.n <= 12:
            lb = lower_bound_with_source(sub)[0]
            best = dplace.solve(sub, "heft").makespan if sub.n > 1 else lb
            if sub.n > 2:
                best = min(best, dplace.solve(sub, "cpsat", time_limit_s=5, progress=False).makespan)
        else:
            pf = dplace.solve(sub, "portfolio", time_limit_s=args.piece_s, progress=False)
            best, lb = pf.makespan, pf.lower_bound
            print(f"{f'{seg.a}:{seg.b}':>9} {sub.n:>4} {_num(span):>9} {_num(best):>9} {_num(lb):>9}", flush=True)
        for k, x in enumerate((span, best, lb)):
            total[k] += x
    print(f"{'all':>9} {'':>4} " + " ".join(f"{_num(x):>9}" for x in total))


def counted_pieces(pieces: list[dict]) -> list[dict]:
    """The pieces whose bounds the segment bound adds up (before its mirror step), in path order: a piece
    whose narrower pieces add up to its ``bound_us`` counts as those pieces, else as itself."""
    windows = sorted({p["window"] for p in pieces}, reverse=True)
    at = {w: sorted((p for p in pieces if p["window"] == w), key=lambda p: p["a"]) for w in windows}

    def leaves(level: int, a: int, b: int) -> list[dict]:
        out = []
        for p in at[windows[level]]:
            if p["a"] < a or p["b"] > b:
                continue
            inner = leaves(level + 1, p["a"], p["b"]) if level + 1 < len(windows) else []
            if inner and abs(sum(x["bound_us"] for x in inner) - p["bound_us"]) <= 1e-6 * max(1.0, p["bound_us"]):
                out += inner
            else:
                out.append(p)
        return out

    return leaves(0, -2, 1 << 60)


def range_energy(inst, path: list[int], leaves: list[dict]) -> dict:
    """Energy over every range of consecutive ``leaves`` (pieces with path indices ``a``/``b`` and ``bound_us``):
    the ops that must run inside the range's span (every op o with A(o) >= a of its first piece and D(o) <= b of
    its last, a path op c_j with a <= j < b: :func:`dplace.formulations.bounds_segments._path_windows`), their
    smallest times summed over the devices (m), against the sum of the range's pieces' bounds. A positive
    ``margin`` (work over m above the bounds) would raise the bound (each piece's span is at least its bound, the
    range's span at least its work over m). Returns the range (of bounds > 0) where work over m is the largest
    share of its bounds: that share (``ratio``), the margin there and the range's path indices."""
    import bisect

    from dplace.formulations.bounds_segments import _path_windows

    A, D = _path_windows(inst, path)
    on = set(path)
    starts = [p["a"] for p in leaves]
    ends = [p["b"] for p in leaves]
    k = len(leaves)
    grid = [[0.0] * k for _ in range(k)]  # grid[i][j]: work of ops whose tightest range is leaves i..j
    for o in range(inst.n):
        d = D[o] + 1 if o in on else D[o]
        i = bisect.bisect_right(starts, A[o]) - 1
        j = bisect.bisect_left(ends, d)
        if 0 <= i and j < k:
            grid[i][j] += min(inst.dur[o])
    pre = [0.0]
    for p in leaves:
        pre.append(pre[-1] + p["bound_us"])
    best = {"margin": -math.inf, "range": None, "work_m": 0.0, "bounds": 0.0, "ratio": 0.0}
    cum = [[0.0] * (k + 1) for _ in range(k + 1)]  # cum[i][j+1]: ops with first >= i and last <= j
    for i in range(k - 1, -1, -1):
        row = 0.0
        for j in range(k):
            row += grid[i][j]
            cum[i][j + 1] = cum[i + 1][j + 1] + row
    for i in range(k):
        for j in range(i, k):
            w = cum[i][j + 1] / inst.m
            b = pre[j + 1] - pre[i]
            if b > 0 and w / b > best["ratio"]:
                best = {"margin": w - b, "range": (leaves[i]["a"], leaves[j]["b"]), "work_m": w, "bounds": b,
                        "ratio": w / b}
    return best


def piece_delays(inst, seg, solution: dict | None = None) -> dict:
    """Paths through dropped ops inside one piece (``seg``: a :class:`~dplace.formulations.bounds_segments.Segment`):
    for every two of its ops u, v joined by a path whose inner ops are all outside the piece, the longest such
    path's inner ops' smallest times (a delay every schedule pays between u's end and v's start; the piece keeps
    only a zero-byte edge, one latency between devices; no such path is longer than the critical path between
    the piece's cuts, so the delays never lengthen that). Returns how many pairs, how many of them above the
    latency, the largest delay and, given the piece's schedule from the segment bound (``solution``: its
    ``members``, ``placement``, ``start`` in µs), how many delays it breaks: where it breaks none, the delays
    cannot raise that piece's optimum."""
    from dplace.formulations.bounds_segments import _members

    mem = _members(inst, seg)
    pos = set(mem)
    hi = max(inst.topo_pos[o] for o in mem)
    delay: dict[tuple[int, int], float] = {}
    for u in mem:
        dist = {u: 0.0}
        for x in inst.topo[inst.topo_pos[u]:hi + 1]:
            if x not in dist or (x != u and x in pos):
                continue
            dx = dist[x] + (min(inst.dur[x]) if x != u else 0.0)
            for e in inst.succ[x]:
                y = inst.edst[e]
                if inst.topo_pos[y] > hi:
                    continue
                if y in pos:
                    if x != u:
                        delay[(u, y)] = max(delay.get((u, y), 0.0), dx)
                elif dx > dist.get(y, -1.0):
                    dist[y] = dx
    broken = None
    if solution is not None:
        at = {o: i for i, o in enumerate(solution["members"])}
        st, pl = solution["start"], solution["placement"]
        broken = sum(st[at[v]] < st[at[u]] + inst.dur[u][pl[at[u]]] + d - 1e-6 * max(1.0, d)
                     for (u, v), d in delay.items())
    lat = inst.lat[0][1] if inst.m > 1 else 0.0
    return {"pairs": len(delay), "over_latency": sum(d > lat for d in delay.values()),
            "largest": max(delay.values(), default=0.0), "broken": broken}


def dropped(args: argparse.Namespace) -> dict:
    """What the ops the segment bound's windows drop could add to it (NASNet-Mobile or ``--instance``, parallel
    comm; the segment bound in ``--bound-s``): their count and work; the largest energy margin over ranges of
    the pieces it adds up (:func:`counted_pieces`, :func:`range_energy`); and per counted piece the paths
    through dropped ops between its ops (:func:`piece_delays`), checked against the piece's schedule that the
    segment bound found."""
    sys.path.insert(0, ROOT)
    import dplace
    from dplace.formats.pipedream import from_pipedream
    from dplace.formulations.bounds_segments import segment_bound, segments

    inst = (dplace.load_instance(args.instance) if args.instance else
            from_pipedream(os.path.join(SOURCES, "nasnetamobile.graph.txt"), devices=4, memory_fraction=0.4,
                           comm=args.comm.split(",")[0])).replace(comm="parallel")
    sols: list[dict] = []
    sb = segment_bound(inst, time_limit_s=args.bound_s, solutions=sols)
    windows = sorted({p["window"] for p in sb.pieces}, reverse=True)
    solved = {(windows[x["level"]], x["a"], x["b"]): x for x in sols}
    leaves = counted_pieces(sb.pieces)
    path = segments(inst, leaves[0]["window"])[0]
    kept: set[int] = set(path)
    rows = []
    for w in sorted({p["window"] for p in leaves}):
        segs = {(s.a, s.b): s for s in segments(inst, w)[1]}
        for p in (x for x in leaves if x["window"] == w):
            seg = segs[(p["a"], p["b"])]
            kept.update(seg.ops)
            if len(seg.ops) > 1:
                rows.append({"a": p["a"], "b": p["b"], "window": w, "optimal": p["optimal"],
                             **piece_delays(inst, seg, solved.get((w, p["a"], p["b"])))})
    n_drop = inst.n - len(kept)
    work_drop = sum(min(inst.dur[o]) for o in range(inst.n) if o not in kept)
    energy = range_energy(inst, path, leaves)
    out = {"bound": sb.value, "pieces": len(leaves), "sum": sum(p["bound_us"] for p in leaves), "dropped": n_drop,
           "dropped_work": work_drop, "work": sum(min(r) for r in inst.dur), "energy": energy, "delays": rows}
    print(f"{inst.name} (parallel comm): segment bound {_num(sb.value)} ({sb.time_s:.0f} s), {len(leaves)} pieces "
          f"adding up to {_num(out['sum'])}; load {open('/proc/loadavg').read().split()[:3]}")
    print(f"dropped ops: {n_drop} of {inst.n}, work {_num(work_drop)} of {_num(out['work'])} "
          f"(all ops' work over {inst.m} devices: {_num(out['work'] / inst.m)})")
    r = energy["range"]
    if r is None:  # no piece with a bound above 0
        print("energy: no range of pieces with a bound above 0")
    else:  # the densest range, and that range as one piece with every op it confines
        from dplace.bounds import anchored_split_bound, energetic_bound
        from dplace.formulations.bounds_segments import Segment, _path_windows, _sub_instance

        print(f"energy: over every range of consecutive pieces, work/m is at most {100 * energy['ratio']:.0f} % of "
              f"the pieces' bounds (path {r[0]}:{r[1]}: {_num(energy['work_m'])} against {_num(energy['bounds'])}, "
              f"margin {_num(energy['margin'])}); above 100 % would raise the bound")
        A, D = _path_windows(inst, path)
        on = set(path)
        inner = [o for o in range(inst.n) if o not in on and A[o] >= r[0] and D[o] <= r[1]]
        ends = (path[r[0]] if r[0] >= 0 else None, path[r[1]] if r[1] < len(path) else None)
        sub = _sub_instance(inst, Segment(*ends, inner + path[r[0] + 1:r[1]], r[0], r[1]), sb.tick, reach_extra=True)
        whole = max(energetic_bound(sub, grid=48), anchored_split_bound(sub)) * sb.tick
        out["energy"]["whole_range"] = whole
        print(f"  that range as one piece with all {sub.n} ops it confines: energetic / anchored split bound "
              f"{_num(whole)} (its pieces' bounds: {_num(energy['bounds'])})")
    if args.answer:  # where an answer spends its time beyond the pieces' bounds
        sch = _load_answer(inst, args.answer)[2]
        at = [sch.start[c] for c in path] + [sch.makespan]  # a piece's cut b <= len(path): the makespan there
        spans = [(at[p["b"]] - (at[p["a"]] if p["a"] >= 0 else 0.0), p) for p in leaves]
        out["answer"] = {"makespan": sch.makespan, "pieces": [(p["a"], p["b"], sp, p["bound_us"]) for sp, p in spans]}
        top = sorted(spans, key=lambda x: x[1]["bound_us"] - x[0])[:args.losses]
        print(f"answer {args.answer}: {_num(sch.makespan)}, {_num(sch.makespan - out['sum'])} above the pieces' bounds; "
              f"the pieces where it spends most beyond their bounds:")
        for sp, p in top:
            print(f"  {p['a']:>4}:{p['b']:<4} {p['ops'] or 0:>4} ops  span {_num(sp):>8}  bound {_num(p['bound_us']):>8}  "
                  f"+{_num(sp - p['bound_us'])}")
    checked = [x for x in rows if x["broken"] is not None and x["over_latency"]]
    print(f"paths through dropped ops inside a piece: {sum(x['pairs'] for x in rows)} pairs in {len(rows)} pieces, "
          f"{sum(x['over_latency'] for x in rows)} longer than a latency (largest {_num(max((x['largest'] for x in rows), default=0.0))}); "
          f"the pieces' own schedules break {sum(x['broken'] for x in checked)} of them "
          f"({sum(x['over_latency'] for x in rows if x['broken'] is None)} in pieces with no schedule)")
    return out


def forward_slice(inst, a: int, b: int, memory: str = "slice"):
    """The forward ops at forward-topological positions [a, b) with their backward ops (``X/grad``) and the
    edges among them. ``memory`` "slice": each device holds 0.4 of the slice's op memory (at least its largest
    group), a tighter cap than the whole graph's, so the slice is *not* a relaxation of the whole graph
    restricted to it; "whole": each device keeps the whole graph's capacity (a relaxation: the whole graph's
    schedule restricted to the slice is one of the slice's)."""
    from dplace.instance.model import Device, Instance

    fw = [o for o in inst.topo if not inst.ops[o].extra.get("backward")]
    index = {op.id: i for i, op in enumerate(inst.ops)}
    keep = set(fw[a:b]) | {index[inst.ops[o].id + "/grad"] for o in fw[a:b] if inst.ops[o].id + "/grad" in index}
    ops = [inst.ops[o] for o in sorted(keep)]
    edges = [inst.edges[e] for e in range(len(inst.esrc)) if inst.esrc[e] in keep and inst.edst[e] in keep]
    groups: dict = {}
    for op in ops:
        groups[op.colocation] = groups.get(op.colocation, 0) + op.memory
    cap = max(int(0.4 * sum(groups.values())), max(groups.values()))
    devices = [Device(d.name, d.memory if memory == "whole" else cap, d.speed) for d in inst.devices]
    return Instance(f"{inst.name}-{a}-{b}", devices, ops, edges, link=inst.link, pairs=inst.pairs, comm=inst.comm)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default=GRAPHS)
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--comm", default="parallel", help="parallel, sequential or both (comma-separated)")
    ap.add_argument("--portfolio-s", type=float, default=60.0)
    ap.add_argument("--old", default=None, help="dplace executable of the old code, or a git revision")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--slices", default=None, help="a:b,... forward positions of NASNet-Mobile (exact sub-graphs)")
    ap.add_argument("--slice-s", type=float, default=60.0)
    ap.add_argument("--probe", type=float, default=None,
                    help="--slices: seconds per CP-SAT horizon probe (CP-SAT's verdict, not a proven bound)")
    ap.add_argument("--probes", type=int, default=8, help="--probe: probes per slice")
    ap.add_argument("--piece-probe", type=int, default=None,
                    help="window: per segment its bound, CP-SAT's answer (--slice-s) and a probe (--probe s)")
    ap.add_argument("--where", action="store_true", help="per window: segment bounds, answers, spans in portfolio's schedule")
    ap.add_argument("--bound-s", type=float, default=60.0, help="--where, --piece-probe: the segment bound's time limit")
    ap.add_argument("--pieces", type=int, default=None, help="window: per piece its span, answer alone, bound")
    ap.add_argument("--piece-s", type=float, default=20.0, help="--pieces: portfolio's time per piece")
    ap.add_argument("--answer", default=None, help="--pieces: a result file (dplace solve --out) to read spans from")
    ap.add_argument("--instance", default=None,
                    help="--pieces, --piece-probe, --couple: an instance file in place of NASNet-Mobile")
    ap.add_argument("--couple", type=int, default=None,
                    help="window: per forward piece and its backward piece, bounded apart and together")
    ap.add_argument("--couple-min-ops", type=int, default=12, help="--couple: forward pieces of more ops than this")
    ap.add_argument("--slice-memory", choices=("slice", "whole"), default="slice",
                    help="--slices: each device holds 0.4 of the slice's memory (slice) or the whole graph's capacity")
    ap.add_argument("--losses", type=int, default=10, help="--dropped --answer F: how many pieces to list")
    ap.add_argument("--dropped", action="store_true",
                    help="what the ops the segment bound's windows drop could add to it (energy, paths)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    if args.dropped:
        dropped(args)
    elif args.couple is not None:
        couple(args)
    elif args.piece_probe is not None:
        piece_probe(args)
    elif args.pieces is not None:
        pieces(args)
    elif args.where:
        where_gap(args)
    elif args.slices:
        slices(args)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            if args.old and not os.path.isfile(args.old):
                args.old = _old_exe(args.old, tmp)
            table(args, tmp)
    print(f"\n{time.perf_counter() - t0:.0f} s; load {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
