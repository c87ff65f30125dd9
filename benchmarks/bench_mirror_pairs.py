"""Mirrored pieces beyond the segment bound's own pairs: does one placement cost twin pieces anything?

    .venv/bin/python benchmarks/bench_mirror_pairs.py FILE [--window 12] [--seconds 30] [--cpsat 5]

On a graph whose forward ops are tied to their backward ops by colocation (NASNet-Mobile's PipeDream conversion:
921 pairs), the segment decomposition of window ``--window`` (alone, bounded within ``--seconds``) cuts the
critical path into pieces. For a piece from cut c_a to cut c_b whose anchors' twins are both cuts later on the
path, its *partner* is the span from twin(c_b) to twin(c_a) (the pieces between them merged; its bound their sum).
Each pair is bounded by :func:`dplace.bounds.mirror.mirror_split_bound` (dplace's own arithmetic: the partner's
source is tied to the piece's sink and its sink to the piece's source) and, with ``--cpsat S``, by CP-SAT's
optimum of the two spans' sum with one placement (``bench_twins._pair_cpsat``: its word, not confirmed, no claim).
Where that optimum equals the two bounds' sum, one placement costs the pair nothing, and a bound of the pieces
together cannot add more than the mirror step already does (session 34 on NASNet-Mobile: benchmarks/RESULTS.md,
"Which method when: sequential comm").
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dplace  # noqa: E402
from bench_twins import _pair_cpsat, _us  # noqa: E402
from dplace.bounds.mirror import mirror_split_bound  # noqa: E402
from dplace.formulations.bounds_segments import Segment, _sub_instance, segment_bound, segments  # noqa: E402


def pairs(inst, window: int, seconds: float, cpsat_s: float | None) -> dict[str, float]:
    """Prints the table (module docstring); returns the sums of the pairs' gains (µs)."""
    t0 = time.perf_counter()
    sbd = segment_bound(inst, windows=(window,), time_limit_s=seconds)
    path, segs = segments(inst, window)
    bound = {(p["a"], p["b"]): p["bound_us"] for p in sbd.pieces if p["window"] == window}
    print(f"{inst.name}: {inst.n} ops; window {window}: {len(segs)} pieces, bound {_us(sbd.value)} µs "
          f"({time.perf_counter() - t0:.1f} s; its own mirrored pairs: {sbd.mirrored})")
    twin = {}
    for g in inst.groups:
        if len(g) == 2:
            twin[g[0]], twin[g[1]] = g[1], g[0]
    pos = {o: j for j, o in enumerate(path)}
    cuts = {s.a for s in segs if s.a >= 0}
    print("| piece | ops | bound µs | partner | ops | bound µs | mirror gain µs |"
          + (" CP-SAT bound / best µs | CP-SAT gain µs |" if cpsat_s else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if cpsat_s else ""))
    used: set[tuple[int, int]] = set()
    out = {"pairs": 0, "mirror": 0.0, "cpsat": 0.0}
    for s in segs:
        if s.first is None or s.last is None or not s.ops or (s.a, s.b) in used:
            continue
        ta, tb = twin.get(s.first), twin.get(s.last)
        if ta not in pos or tb not in pos:
            continue
        ia, ib = pos[tb], pos[ta]
        if not (s.b <= ia < ib and ia in cuts and ib in cuts):
            continue
        inner = [x for x in segs if x.a >= ia and x.b <= ib]
        if any((x.a, x.b) in used for x in inner) or any((x.a, x.b) not in bound for x in inner + [s]):
            continue
        ops = [o for x in inner for o in x.ops + ([] if x.a == ia else [path[x.a]])]
        merged = Segment(path[ia], path[ib], ops, ia, ib)
        tick = sbd.tick
        la, lb = bound[(s.a, s.b)] / tick, sum(bound[(x.a, x.b)] for x in inner) / tick
        a, b = _sub_instance(inst, s, tick, True), _sub_instance(inst, merged, tick, True)
        both = mirror_split_bound(a, b, la, lb)
        gain = both - la - lb if both - la - lb > 1e-6 * both else 0.0
        used.add((s.a, s.b))
        used.update((x.a, x.b) for x in inner)
        out["pairs"] += 1
        out["mirror"] += gain * tick
        row = (f"| {s.a}-{s.b} | {a.n} | {_us(la * tick)} | {ia}-{ib} | {b.n} | {_us(lb * tick)} | "
               f"{_us(gain * tick)} |")
        if cpsat_s:
            cb, cv, st = _pair_cpsat(a, b, cpsat_s)
            cg = max(0.0, max(cb, both) - la - lb)
            cg = cg if cg > 1e-6 * max(cb, both) else 0.0
            out["cpsat"] += cg * tick
            row += f" {_us(cb * tick)} / {_us(cv * tick)} ({st}) | {_us(cg * tick)} |"
        print(row, flush=True)
    print(f"{out['pairs']} pairs: mirror gains {_us(out['mirror'])} µs"
          + (f", with CP-SAT's word {_us(out['cpsat'])} µs" if cpsat_s else ""))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("instance")
    ap.add_argument("--window", type=int, default=12, help="the decomposition's window")
    ap.add_argument("--seconds", type=float, default=30.0, help="the decomposition's bound's time (s)")
    ap.add_argument("--cpsat", type=float, metavar="S", help="also CP-SAT's optimum of each pair within S seconds")
    args = ap.parse_args()
    if args.window < 0:
        ap.error(f"--window: must be >= 0, got {args.window}")
    for name in ("seconds", "cpsat"):
        v = getattr(args, name)
        if v is not None and not (v > 0 and math.isfinite(v)):
            ap.error(f"--{name}: must be > 0 seconds, got {v}")
    pairs(dplace.load_instance(args.instance), args.window, args.seconds, args.cpsat)


if __name__ == "__main__":
    main()
