"""What the other formulation's confirmation of a CP-SAT claim costs (``milp.cross_check``: the MILP with
HiGHS, presolve off, in HiGHS's child Python), per call and per CP-SAT solve, on fuzz-like instances
(``dplace.verify.fuzz.fuzz_instance`` with a fixed op count).

Table 1, per op count and mode: wall seconds of one ``cross_check`` call (mean, median, max) and how
often it proved the incumbent (heft's schedule) optimal. Modes: ``fresh`` ends HiGHS's child before every
call (a child started per call: what every call paid before the child was reused), ``reused`` keeps it.
Table 2 (``--solve``): ``cpsat`` with ``claims.CROSS_MAX_OPS`` 0 (no cross check) and >= the op count (as
shipped where on): mean / max wall and the share of answers proven optimal; brute force inside
``dplace.verify.claims`` off in both (it would settle the small ones by itself).

  .venv/bin/python benchmarks/bench_cross_check.py --sizes 9,20,40 --seeds 5 --limit 2 --solve
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def instances(n: int, k: int, start: int = 0):
    """``k`` fuzz instances of ``n`` ops whose heft schedule keeps memory (the incumbent of a CP-SAT claim)."""
    import dplace
    from dplace.verify.fuzz import fuzz_instance

    seed = start
    while k > 0 and seed < start + 50 * k:
        inst = fuzz_instance(seed, n_ops=(n, n))
        seed += 1
        try:
            inc = dplace.solve(inst, "heft")
        except Exception:  # noqa: BLE001 — an instance where nothing fits: not a claim to confirm
            continue
        if inc.memory_ok and inc.schedule is not None:
            k -= 1
            yield seed - 1, inst, inc


def per_call(sizes, seeds: int, limit: float) -> list[dict]:
    from dplace.verify import claims
    from dplace.heuristics import highs_worker
    from dplace.formulations.milp import cross_check

    rows = []
    for n in sizes:
        cases = list(instances(n, seeds))
        for mode in ("fresh", "reused"):
            highs_worker.shutdown()
            if mode == "reused":  # one call that starts the child; not counted
                s, inst, inc = cases[0]
                cross_check(inst, inc, claims.base_bound(inst).value, limit, s)
            walls, proved = [], 0
            for s, inst, inc in cases:
                if mode == "fresh":
                    highs_worker.shutdown()
                t0 = time.perf_counter()
                got, _ = cross_check(inst, inc, claims.base_bound(inst).value, limit, s)
                walls.append(time.perf_counter() - t0)
                proved += got is not None and claims.reaches(inc.makespan, got)
            rows.append({"ops": n, "mode": mode, "calls": len(walls), "mean_s": statistics.mean(walls),
                         "median_s": statistics.median(walls), "max_s": max(walls), "proved": proved})
    return rows


def per_solve(sizes, seeds: int, limit: float) -> list[dict]:
    import dplace
    from dplace.verify import claims

    rows = []
    saved = claims.EXHAUSTIVE_MAX_OPS, claims.CROSS_MAX_OPS
    try:
        claims.EXHAUSTIVE_MAX_OPS = 0
        for n in sizes:
            cases = list(instances(n, seeds))
            for cross in (0, n):
                claims.CROSS_MAX_OPS = cross
                walls, opt, xs = [], 0, []
                for s, inst, _ in cases:
                    t0 = time.perf_counter()
                    res = dplace.solve(inst, "cpsat", time_limit_s=limit, seed=s, progress=False)
                    walls.append(time.perf_counter() - t0)
                    opt += res.status == "optimal"
                    if "cross_check_wall_s" in res.extra:
                        xs.append(res.extra["cross_check_wall_s"])
                rows.append({"ops": n, "cross": "on" if cross else "off", "solves": len(walls),
                             "mean_s": statistics.mean(walls), "max_s": max(walls), "optimal": opt,
                             "cross_calls": len(xs), "cross_mean_s": statistics.mean(xs) if xs else float("nan")})
    finally:
        claims.EXHAUSTIVE_MAX_OPS, claims.CROSS_MAX_OPS = saved
    return rows


def show(title: str, rows: list[dict]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title)
    for c in rows[0]:
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(*(f"{v:.3f}" if isinstance(v, float) else str(v) for v in r.values()))
    Console(width=160).print(t)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="9,20,40", help="op counts (comma-separated)")
    ap.add_argument("--seeds", type=int, default=5, help="instances per op count")
    ap.add_argument("--limit", type=float, default=2.0, help="seconds per cross_check call / cpsat solve")
    ap.add_argument("--solve", action="store_true", help="also time whole cpsat solves with the check off / on")
    args = ap.parse_args(argv)
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x]
    except ValueError:
        print(f"error: --sizes must be integers, got {args.sizes!r}", file=sys.stderr)
        return 2
    if not sizes or min(sizes) < 2 or args.seeds < 1 or args.limit <= 0:
        print(f"error: --sizes >= 2, --seeds >= 1, --limit > 0; got {args.sizes!r}, {args.seeds}, {args.limit}",
              file=sys.stderr)
        return 2
    show(f"cross_check per call (limit {args.limit:g} s)", per_call(sizes, args.seeds, args.limit))
    if args.solve:
        show(f"cpsat per solve (limit {args.limit:g} s), brute force off", per_solve(sizes, args.seeds, args.limit))
    return 0


if __name__ == "__main__":
    sys.exit(main())
