"""Session 21's measurements behind ``large.STITCH_CHAIN`` and CP-SAT's probing level, as one script.

  stitch  the segment bound within ``--bound-s`` (``--segment-time`` per piece) and the stitched placement
          (:func:`dplace.formulations.stitch.stitch`): bound, pieces, proven pieces, time, the stitched
          makespan in its own order and in ``placement_order``'s (what ``portfolio`` starts from)
  anneal  ``anneal_placement`` for ``--anneal-s`` seconds (``--workers`` chains) from each start in ``--starts``
          (``stitch`` or a method name), seeds 0..``--seeds``-1: start and annealed makespan (``placement_order``)
  twins   the twin-stem bound within ``--bound-s`` (two tied parts that begin with chains, e.g. the bundled
          InceptionV3): value, stems proven, time
  order   CP-SAT with the placement of ``--answer`` (a ``dplace solve --out`` file) fixed, ``--order-s`` seconds:
          the best order found and the bound proven for that placement (what the order alone can still gain)

``--probing L`` sets CP-SAT's probing level (``formulations.cpsat.search.PROBING_LEVEL``; shipped 0, CP-SAT's
default 2). Makespans in µs are ``dplace.simulate``'s; times are wall-clock on a shared machine.

    .venv/bin/python benchmarks/bench_starts.py nas_par.json stitch anneal --starts stitch,dpos --seeds 2
    .venv/bin/python benchmarks/bench_starts.py instances/inceptionv3_training_4dev.json twins --bound-s 12 --probing 2
    .venv/bin/python benchmarks/bench_starts.py nas_par.json order --answer r.json --order-s 30
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import dplace  # noqa: E402
from dplace.budget import Budget  # noqa: E402
from dplace.result import result_from_dict  # noqa: E402

PARTS = ("stitch", "anneal", "twins", "order")


def stitched(inst, bound_s: float, segment_time_s: float):
    """(segment bound, seconds, stitched placement, its makespan in its own order, in ``placement_order``'s)."""
    from dplace.formulations.bounds_segments import segment_bound
    from dplace.formulations.stitch import stitch
    from dplace.formulations.units import placement_order

    sols: list = []
    t0 = time.perf_counter()
    sb = segment_bound(inst, budget=Budget(bound_s), segment_time_s=segment_time_s, solutions=sols)
    took = time.perf_counter() - t0
    if not sols:
        return sb, took, None, None, None
    pl, od = stitch(inst, sols)
    return (sb, took, pl, dplace.simulate(inst, pl, od).makespan,
            dplace.simulate(inst, pl, placement_order(inst, pl)).makespan)


def part_stitch(inst, args) -> list[int] | None:
    sb, took, pl, own, reordered = stitched(inst, args.bound_s, args.segment_time)
    print(f"stitch: bound {sb.value:,.1f} µs, {sb.n_segments} pieces, {sb.proven_optimal} proven, {took:.1f} s; "
          + (f"stitched {own:,.1f} µs, re-ordered {reordered:,.1f} µs" if pl is not None else "no piece solved"),
          flush=True)
    return pl


def part_anneal(inst, args, stitch_pl) -> list[tuple[str, int, float, float]]:
    from dplace.formulations.anneal import anneal_placement
    from dplace.formulations.units import placement_order

    starts = {}
    for name in args.starts.split(","):
        if name == "stitch":
            if stitch_pl is None:
                stitch_pl = stitched(inst, args.bound_s, args.segment_time)[2]
            if stitch_pl is not None:
                starts[name] = stitch_pl
        else:
            starts[name] = list(dplace.solve(inst, name).placement)
    rows = []
    for seed in range(args.seeds):
        for name, pl in starts.items():
            m0 = dplace.simulate(inst, pl, placement_order(inst, pl)).makespan
            pl2, st = anneal_placement(inst, pl, time_limit_s=args.anneal_s, seed=seed, workers=args.workers)
            m1 = dplace.simulate(inst, pl2, placement_order(inst, pl2)).makespan
            rows.append((name, seed, m0, m1))
            print(f"anneal {name:12s} seed {seed}: start {m0:,.1f} -> {m1:,.1f} µs ({st.steps} steps)", flush=True)
    return rows


def part_twins(inst, args) -> None:
    from dplace.formulations.bounds_twins import twin_stem_bound

    t0 = time.perf_counter()
    tb = twin_stem_bound(inst, time_limit_s=args.bound_s, workers=args.workers)
    if tb is None:
        print("twins: not two tied parts that begin with chains")
        return
    print(f"twins: {tb.value:,.1f} µs, stems proven {tb.optimal}, rests {tb.rest_bounds[0]:,.1f} / "
          f"{tb.rest_bounds[1]:,.1f}, {time.perf_counter() - t0:.1f} s", flush=True)


def part_order(inst, args) -> tuple[float, float | None, float | None]:
    """(the answer's makespan, the best order's, the bound proven for its placement), µs."""
    import json

    from dplace.formulations.cpsat.hint import hinted_model
    from dplace.formulations.cpsat.solve import solve_model
    from dplace.formulations.cpsat.ticks import Ticks

    res = result_from_dict(inst, json.loads(Path(args.answer).read_text()))
    pl = list(res.placement)
    order = res.order if res.order is not None else res.schedule.order
    m0 = dplace.simulate(inst, pl, order).makespan
    budget = Budget(args.order_s)
    T = Ticks(inst, None, m0)
    V, _ = hinted_model(inst, T, (pl, order), fixed=dict(enumerate(pl)), windows=True, budget=budget)
    out = solve_model(V, workers=args.workers, seed=0, budget=budget)
    found = bound = None
    if out.placement is not None:
        found = dplace.simulate(inst, out.placement, out.order).makespan
    if out.bound_ticks is not None and out.bound_ticks > 0:
        bound = T.real_bound(out.bound_ticks)
    print(f"order: answer {m0:,.1f} µs; placement fixed, CP-SAT {out.status_name}: best order "
          + (f"{found:,.1f}" if found is not None else "none") + " µs, proven for this placement "
          + (f"{bound:,.1f}" if bound is not None else "nothing") + " µs", flush=True)
    return m0, found, bound


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("parts", nargs="+", choices=PARTS)
    ap.add_argument("--bound-s", type=float, default=12.0, help="segment / twin-stem bound's time (s, default 12)")
    ap.add_argument("--segment-time", type=float, default=2.0, help="CP-SAT's time per piece (s, default 2)")
    ap.add_argument("--starts", default="stitch,dpos", help="anneal: comma-separated starts (stitch or methods)")
    ap.add_argument("--anneal-s", type=float, default=30.0, help="anneal: seconds per run (default 30)")
    ap.add_argument("--seeds", type=int, default=2, help="anneal: seeds 0..N-1 (default 2)")
    ap.add_argument("--workers", type=int, default=2, help="annealing chains / CP-SAT workers (default 2)")
    ap.add_argument("--answer", help="order: a result file of the instance (dplace solve --out)")
    ap.add_argument("--order-s", type=float, default=30.0, help="order: CP-SAT's time (s, default 30)")
    ap.add_argument("--probing", type=int, default=None, help="CP-SAT's probing level (default: as shipped)")
    args = ap.parse_args(argv)
    if "order" in args.parts and not args.answer:
        ap.error("order needs --answer")
    if args.probing is not None:
        from dplace.formulations.cpsat import search

        search.PROBING_LEVEL = args.probing
    inst = dplace.load_instance(args.instance)
    import ortools

    probing = args.probing if args.probing is not None else "as shipped"
    print(f"{inst.name}: {inst.n} ops, comm {inst.comm}; ortools {ortools.__version__}, probing {probing}; "
          f"load {open('/proc/loadavg').read().split()[0]}")
    pl = part_stitch(inst, args) if "stitch" in args.parts else None
    if "anneal" in args.parts:
        part_anneal(inst, args, pl)
    if "twins" in args.parts:
        part_twins(inst, args)
    if "order" in args.parts:
        part_order(inst, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
