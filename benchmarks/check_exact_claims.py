"""Audit of the exact methods' claims against brute force on random small instances (issue #6).

For each random instance (``dplace.testing.random_instance``: 1–7 ops, 1–3 devices, both comm modes,
integer or fractional data, colocation, pins, speeds, heterogeneous times) it computes the optimum by
brute force (``formulations._brute.brute_force``: every placement x every per-device order, timed by
``dplace.simulate``) and counts the answers that claim too much: a status ``optimal`` above the optimum,
or a lower bound above it; errors are counted too. Prints one line per method and exits 1 on any wrong
claim. Usage: ``.venv/bin/python benchmarks/check_exact_claims.py --seeds 0:300 --methods cpsat,milp``.
"""
from __future__ import annotations

import argparse
import random
import sys

import dplace
from dplace.formulations._brute import brute_force
from dplace.testing import random_instance


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0:200", help="range A:B of instance seeds")
    ap.add_argument("--methods", default="cpsat,milp", help="comma-separated methods to audit")
    ap.add_argument("--time-limit", type=float, default=5.0)
    args = ap.parse_args(argv)
    a, b = (int(x) for x in args.seeds.split(":"))
    methods = [m for m in args.methods.split(",") if m]
    stats = {m: {"checked": 0, "optimal": 0, "wrong": 0, "errors": 0} for m in methods}
    for seed in range(a, b):
        rng = random.Random(seed)
        inst = random_instance(rng, n_ops=rng.randint(1, 7), integer=rng.random() < 0.5)
        try:
            opt = brute_force(inst)[0]
        except dplace.DplaceError:
            continue
        tol = 1e-6 * max(1.0, opt)
        for m in methods:
            st = stats[m]
            try:
                kw = {"progress": False} if m == "cpsat" else {}
                r = dplace.solve(inst, m, time_limit_s=args.time_limit, seed=seed, **kw)
            except Exception as exc:  # noqa: BLE001 - an audit counts every failure
                st["errors"] += 1
                print(f"seed {seed} {m}: error {exc!r}"[:300])
                continue
            st["checked"] += 1
            if r.status == "optimal":
                st["optimal"] += 1
                if abs(r.makespan - opt) > tol:
                    st["wrong"] += 1
                    print(f"seed {seed} {m}: claims optimal {r.makespan}, brute force {opt}")
            if r.lower_bound is not None and r.lower_bound > opt + tol:
                st["wrong"] += 1
                print(f"seed {seed} {m}: bound {r.lower_bound} above the optimum {opt}")
            if r.makespan is not None and r.makespan < opt - tol:
                st["wrong"] += 1
                print(f"seed {seed} {m}: makespan {r.makespan} below the brute-force optimum {opt}")
    print(f"{'method':10s} {'checked':>8s} {'optimal':>8s} {'wrong':>6s} {'errors':>7s}")
    for m, st in stats.items():
        print(f"{m:10s} {st['checked']:8d} {st['optimal']:8d} {st['wrong']:6d} {st['errors']:7d}")
    return 1 if any(st["wrong"] or st["errors"] for st in stats.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
