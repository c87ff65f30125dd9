"""The sequential judges' op sort: ``dplace.kernels.placerank.radix_sorted_ops`` against ``sorted_ops``
(numba's merge sort; the same permutation), alone inside a compiled loop, and the cost of a placement judged
by the annealing (judges ``mixed`` and ``links``, which use the radix sort) with the code as it is.

    .venv/bin/python benchmarks/bench_opsort.py FILE [--reps 5000] [--steps 2000]

Session 18 (NASNet-Mobile sequential, 1,842 ops, quiet box): alone, radix ~36 µs against the merge sort's
~24 µs; a judged placement ``mixed`` ~205 µs, ``links`` ~425 µs, and with ``sorted_ops`` put in place of
``radix_sorted_ops`` in ``dplace/kernels/anneal.py`` and ``seqorder.py`` (then ``dplace warm``) ~236 / ~475 µs:
the radix sort wins inside the judges though it loses alone.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numba import njit  # noqa: E402

import dplace  # noqa: E402
from dplace.formulations.anneal import JUDGE_SLACK, JUDGES  # noqa: E402
from dplace.formulations.units import Units  # noqa: E402
from dplace.kernels.anneal import Annealer, _arrays, list_makespan  # noqa: E402
from dplace.kernels.placerank import placement_rank, radix_sorted_ops, sorted_ops  # noqa: E402


@njit
def _loop(which, topo, v, s, reps):
    x = 0
    for _ in range(reps):
        x += (sorted_ops(topo, v, s) if which == 0 else radix_sorted_ops(topo, v, s))[0]
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--steps", type=int, default=2000)
    args = ap.parse_args()
    inst = dplace.load_instance(args.instance)
    a = _arrays(inst)
    pl = list(dplace.solve(inst, "heft").placement)
    pa = np.asarray(pl, dtype=np.int64)
    rank = np.empty(a.n)
    placement_rank(pa, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.succ_ptr, a.succ_edge, rank)
    start = np.asarray(list_makespan(inst, pa)[1])
    print(f"{inst.name}: {inst.n} ops, comm {inst.comm}; load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'keys':>7} {'merge sort µs':>14} {'radix µs':>9}")
    for name, v, s in (("rank", rank, -1.0), ("starts", start, 1.0)):
        assert (sorted_ops(a.topo, v, s) == radix_sorted_ops(a.topo, v, s)).all()
        got = []
        for which in (0, 1):
            _loop(which, a.topo, v, s, 2)
            t = time.perf_counter()
            _loop(which, a.topo, v, s, args.reps)
            got.append((time.perf_counter() - t) / args.reps * 1e6)
        print(f"{name:>7} {got[0]:>14.1f} {got[1]:>9.1f}")
    if inst.comm == "sequential":
        units = Units(inst)
        for judge in ("mixed", "links"):
            ann = Annealer(inst, pl, units.members, units.allowed, units.chains(), 0.1, JUDGES[judge], JUDGE_SLACK)
            ann.step(50, 1e-4, 1e-5, 0)
            t = time.perf_counter()
            ann.step(args.steps, 30.0, 3.0, 1)
            print(f"judge {judge}: {(time.perf_counter() - t) / args.steps * 1e6:.0f} µs a placement")


if __name__ == "__main__":
    main()
