"""Wall time of refine/portfolio (or any method) against its time limit, every phase included.

    python benchmarks/bench_limits.py INSTANCE [--limits 2,5,10] [--methods refine,portfolio] [--workers 2]

Prints one row per (method, limit): the seconds ``dplace.solve`` took, the allowed max(1.1 x limit,
limit + 1 s), their ratio to the limit, and how the neighbourhood search ended. Method modules are
imported first (once per process: not the method's time). A loaded machine makes the numbers worse.
"""
from __future__ import annotations

import argparse
import time

import dplace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--limits", default="2,5,10")
    ap.add_argument("--methods", default="refine,portfolio")
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    inst = dplace.load_instance(a.instance)
    dplace.registry.methods()
    print(f"{inst.name}: {inst.n} ops, {len(inst.edges)} edges, {inst.m} devices")
    print(f"{'method':10s} {'limit s':>8s} {'took s':>8s} {'allowed s':>10s} {'took/limit':>10s} {'ok':>3s}  "
          f"{'lns':>4s}  stopped")
    for method in a.methods.split(","):
        for limit in map(float, a.limits.split(",")):
            t0 = time.perf_counter()
            res = dplace.solve(inst, method, time_limit_s=limit, workers=a.workers)
            took = time.perf_counter() - t0
            allowed = max(1.1 * limit, limit + 1.0)
            e = res.extra
            print(f"{method:10s} {limit:8.1f} {took:8.2f} {allowed:10.1f} {took / limit:10.2f} "
                  f"{'yes' if took <= allowed else 'NO':>3s}  {str(e.get('lns_steps', '-')):>4s}  "
                  f"{e.get('lns_stopped', e.get('stage', ''))}", flush=True)


if __name__ == "__main__":
    main()
