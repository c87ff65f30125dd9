"""``benchmarks/bench_linkpolicy.py``: its HEFT loops are HEFT's choice, and what they print is checked against
what is proven.

- With sends that cost nothing (no bytes, no latency) no policy changes a time, so each loop places and orders
  as dplace's ``heft`` does on the same graph: the same simulated makespan.
- Every sequential schedule is no faster than the parallel model's schedule of its placement and order, so each
  loop's simulated makespan is at least the proven bound of the instance; and the ``idle`` plan is a schedule
  (no two sends overlap on a link) of the parallel model with sends as links' busy intervals, so it is too."""
from __future__ import annotations

import random

import pytest

from dplace import Link, lower_bound
from dplace.testing import random_instance


_MOD: dict = {}


def _mod(benchmark_script):
    """The script, loaded (and its loops compiled: it keeps no disk cache) once for this file."""
    if "m" not in _MOD:
        _MOD["m"] = benchmark_script("bench_linkpolicy")
    return _MOD["m"]


def _instances(n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        yield random_instance(rng, n_ops=rng.randint(6, 40), n_devices=rng.randint(2, 4), comm="sequential",
                              edge_prob=0.15, memory_slack=3.0)


@pytest.mark.parametrize("seed", [1, 2])
def test_free_sends_make_each_loop_heft(benchmark_script, seed):
    mod = _mod(benchmark_script)
    for inst in _instances(15, seed):
        free = inst.replace(edges=[e.__class__(e.src, e.dst, 0.0) for e in inst.edges], link=Link(0.0, 1.0),
                            pairs={})
        _, heft = mod.run_exact(free)
        for pol in mod.POLICIES.values():
            _, planned, simulated = mod.run_policy(free, pol)
            assert simulated == pytest.approx(heft, rel=1e-9), (inst.name, pol)
            assert planned == pytest.approx(heft, rel=1e-9), (inst.name, pol)


def test_simulated_and_idle_plans_respect_the_proven_bound(benchmark_script):
    mod = _mod(benchmark_script)
    for inst in _instances(30, 3):
        lb = lower_bound(inst)
        for name, pol in mod.POLICIES.items():
            _, planned, simulated = mod.run_policy(inst, pol)
            assert simulated >= lb * (1 - 1e-9), (inst.name, name)
            if name == "idle":
                assert planned >= lb * (1 - 1e-9), inst.name


def test_idle_plans_are_schedules_with_busy_links(benchmark_script):
    """The ``idle`` plan: each op after its inputs (on another device, after their send, which starts after the
    producer ends and lasts latency + bytes / bandwidth at least), one op at a time per device, and no two sends
    overlapping on a link."""
    mod = _mod(benchmark_script)
    for inst in _instances(30, 4):
        g = mod.plan(inst, mod.POLICIES["idle"])
        S, m = g["S"], inst.m
        for e in range(len(inst.edges)):
            p, v = inst.esrc[e], inst.edst[e]
            dp, dv = int(S.placement[p]), int(S.placement[v])
            if dp == dv:
                assert S.start[v] >= S.end[p] - 1e-9
            else:
                c = inst.lat[dp][dv] + inst.ebytes[e] / inst.bw[dp][dv]
                assert g["arr"][p * m + dv] >= S.end[p] + c - 1e-9 * max(1.0, c)
                assert S.start[v] >= g["arr"][p * m + dv] - 1e-9
        for d in range(m):
            ops = sorted((S.start[o], S.end[o]) for o in range(inst.n) if S.placement[o] == d)
            assert all(a[1] <= b[0] + 1e-9 for a, b in zip(ops, ops[1:])), (inst.name, d)
        for lnk in range(m * m):
            iv = list(zip(g["ls"][lnk, :g["ln"][lnk]], g["le"][lnk, :g["ln"][lnk]]))
            assert all(a[1] <= b[0] + 1e-9 and a[0] <= a[1] for a, b in zip(iv, iv[1:])), (inst.name, lnk)
