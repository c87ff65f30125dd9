"""``benchmarks/bench_starts.py``: its parts on small graphs, each figure checked against the simulator, the
annealing's guarantee and the brute force."""
from __future__ import annotations

import argparse
import dataclasses
import json
import random

import dplace
from dplace.formulations.units import placement_order
from dplace.testing import random_instance
from dplace.verify.oracle import brute_force


def test_stitch_and_anneal_come_back_through_the_simulator(benchmark_script):
    mod = benchmark_script("bench_starts")
    inst = random_instance(random.Random(7), n_ops=24, n_devices=2, pins=False)
    sb, _, pl, own, reordered = mod.stitched(inst, 5.0, 1.0)
    assert pl is not None  # the segment bound solved pieces here (bound 28, stitched 53.5)
    assert reordered == dplace.simulate(inst, pl, placement_order(inst, pl)).makespan
    assert min(own, reordered) >= sb.value - 1e-6  # the bound is below every schedule
    args = argparse.Namespace(starts="heft", seeds=1, anneal_s=0.3, workers=1, bound_s=5.0, segment_time=1.0)
    (name, seed, m0, m1), = mod.part_anneal(inst, args, pl)
    heft = dplace.solve(inst, "heft")
    assert name == "heft" and seed == 0 and m1 <= m0  # the annealing never returns worse than its start
    assert m0 == dplace.simulate(inst, heft.placement, placement_order(inst, heft.placement)).makespan


def test_order_part_bounds_the_best_order_of_the_answer_s_placement(benchmark_script, tmp_path):
    """Its bound is at most, and its order at least, the optimum over orders of the answer's placement (brute
    force on the instance with every op pinned to its device there)."""
    mod = benchmark_script("bench_starts")
    inst = random_instance(random.Random(3), n_ops=7, n_devices=2, colocation=False, pins=False)
    res = dplace.solve(inst, "heft")
    f = tmp_path / "r.json"
    f.write_text(json.dumps(res.to_dict()))
    m0, found, bound = mod.part_order(inst, argparse.Namespace(answer=str(f), order_s=10.0, workers=1))
    assert m0 == res.makespan
    names = [d.name for d in inst.devices]
    pinned = inst.replace(ops=[dataclasses.replace(op, device=names[res.placement[o]])
                               for o, op in enumerate(inst.ops)])
    best = brute_force(pinned, time_limit_s=60).optimum
    assert found is not None and bound is not None
    assert bound <= best * (1 + 1e-9) + 1e-9 and best <= found * (1 + 1e-9) + 1e-9 and found <= m0 + 1e-9
