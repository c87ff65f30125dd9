"""``benchmarks/bench_chaincuts.py``: the cut model's optimum against every placement of a small training chain."""
from __future__ import annotations

import itertools

import pytest

from dplace import Device, Edge, Instance, Link, Op


def _chain(layers: int, seed: int) -> Instance:
    """A training chain: forward ops f0 -> f1 -> ..., their gradients back, each gradient colocated with its
    forward op and reading its activation; a skip edge f0 -> f2 so one cut is crossed twice."""
    import random

    rnd = random.Random(seed)
    ops, edges = [], []
    for i in range(layers):
        ops.append(Op(f"f{i}", rnd.uniform(1, 5), rnd.randint(2, 6) * 100, colocation=f"u{i}"))
        ops.append(Op(f"g{i}", rnd.uniform(1, 5), 0, colocation=f"u{i}"))
        edges.append(Edge(f"f{i}", f"g{i}", rnd.uniform(1, 9) * 1000))
        if i:
            edges.append(Edge(f"f{i - 1}", f"f{i}", rnd.uniform(1, 9) * 1000))
            edges.append(Edge(f"g{i}", f"g{i - 1}", rnd.uniform(1, 9) * 1000))
    edges.append(Edge(f"f{layers - 1}", f"g{layers - 1}", 500.0))
    edges.append(Edge("f0", "f2", 7000.0))
    mem = sum(o.memory for o in ops)
    devs = [Device(f"d{d}", int(mem * 0.45)) for d in range(3)]
    return Instance("chain", devs, ops, edges, link=Link(10.0, 1000.0), comm="sequential")


@pytest.mark.solver
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cut_model_optimum_equals_brute_force(benchmark_script, seed):
    mod = benchmark_script("bench_chaincuts")
    inst = _chain(6, seed)
    pos, mem, cost = mod.chain(inst)
    assert len(mem) == 6 and len(cost) == 5
    # the skip edge f0 -> f2 adds its send to cuts 0 and 1 (one producer: f0's largest edge across)
    assert cost[0] > 0 and cost[1] > 0
    cap = inst.devices[0].memory
    best = min(sum(cost[k] for k in range(5) if dev[k] != dev[k + 1])
               for dev in itertools.product(range(3), repeat=6)
               if all(sum(mem[k] for k in range(6) if dev[k] == d) <= cap for d in range(3)))
    assert best > 0  # memory forces at least one cut
    obj, lb, dev = mod.min_cuts(inst, mem, cost, 5.0)
    assert lb <= obj
    assert obj == pytest.approx(sum(round(cost[k]) for k in range(5) if dev[k] != dev[k + 1]))
    assert abs(obj - best) <= 5  # CP-SAT's costs are rounded to whole µs
    r = mod.report(inst, seconds=5.0)
    assert r["memory_ok"] and r["simulated"] >= r["critical_path"] - 1e-9
