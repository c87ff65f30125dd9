"""twins: two parts tied by colocation; the placement bound checked against enumeration."""
import itertools
import random

import pytest

from dplace.verify.check import check
from dplace.formulations.twins import jackson_bound, placement_bound, schedule, search, twin_sides
from dplace.instance.model import Device, Edge, Instance, Op
from dplace.verify.oracle import time_schedule
from dplace.verify.fuzz import fuzz_instance
from dplace.result import make_result


def _twins(rng: random.Random, k: int, m: int = 3, memory: int = 10**9) -> Instance:
    """A random DAG of k ops and its copy with other times and the same edges, op i of one tied to op i
    of the other by colocation (the shape of a converted InceptionV3 layer graph)."""
    ops, edges = [], []
    for side in "fb":
        for i in range(k):
            ops.append(Op(f"{side}{i}", float(rng.randint(0, 9)), memory=rng.randint(0, 3), colocation=f"g{i}"))
    for j in range(1, k):
        for i in rng.sample(range(j), min(j, rng.randint(1, 2))):
            b = float(rng.choice([0, 6000, 30000]))
            edges += [Edge(f"f{i}", f"f{j}", b), Edge(f"b{i}", f"b{j}", b)]
    return Instance("twins", [Device(f"d{x}", memory) for x in range(m)], ops, edges)


def test_twin_sides_finds_the_two_parts_and_only_them():
    inst = _twins(random.Random(1), 6)
    sides = twin_sides(inst)
    assert sides is not None
    f = {sides[inst.op_index[f"f{i}"]] for i in range(6)}
    b = {sides[inst.op_index[f"b{i}"]] for i in range(6)}
    assert len(f) == len(b) == 1 and f != b
    # an edge between the parts, a group of three, no colocation: not twins
    ops = list(inst.ops)
    assert twin_sides(Instance("x", inst.devices, ops, list(inst.edges) + [Edge("f0", "b5", 0.0)])) is None
    ops3 = ops + [Op("z", 1.0, colocation="g0")]
    assert twin_sides(Instance("x", inst.devices, ops3, list(inst.edges))) is None
    plain = [Op(o.id, o.time) for o in ops]
    assert twin_sides(Instance("x", inst.devices, plain, list(inst.edges))) is None


def _best_for_placement(inst: Instance, pl: list[int]) -> float:
    """Enumeration: every order of every device arises from some topological order of the ops."""
    pred = [set(inst.esrc[k] for k in inst.pred[o]) for o in range(inst.n)]
    best = float("inf")
    for perm in itertools.permutations(range(inst.n)):
        pos = {o: i for i, o in enumerate(perm)}
        if any(pos[p] > pos[o] for o in range(inst.n) for p in pred[o]):
            continue
        lists = [[o for o in perm if pl[o] == d] for d in range(inst.m)]
        best = min(best, time_schedule(inst, pl, lists).makespan)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_placement_bound_never_above_the_best_schedule_of_the_placement(seed):
    inst = fuzz_instance(seed, n_ops=(3, 6))
    rng = random.Random(seed)
    pl = [rng.randrange(inst.m) for _ in range(inst.n)]
    v, cp, js = placement_bound(inst, pl)
    opt = _best_for_placement(inst, pl)
    assert v <= opt * (1 + 1e-9) + 1e-9
    assert v == max([cp] + js)


def test_jackson_bound_against_permutations():
    rng = random.Random(3)
    for _ in range(200):
        jobs = [(rng.randint(0, 9), rng.randint(0, 5), rng.randint(0, 9)) for _ in range(rng.randint(1, 5))]
        v = jackson_bound(jobs)
        best = float("inf")
        for perm in itertools.permutations(jobs):
            t, worst = 0, 0
            for r, p, q in perm:
                t = max(t, r) + p
                worst = max(worst, t + q)
            best = min(best, worst)
        assert v <= best
        # the preemptive schedule still reaches the plain bounds
        assert v >= max(r + p + q for r, p, q in jobs)
        assert v >= min(r for r, _, _ in jobs) + sum(p for _, p, _ in jobs) + min(q for _, _, q in jobs)


def test_search_and_schedule_keep_colocation_memory_and_lower_the_bound():
    rng = random.Random(5)
    inst = _twins(rng, 14, m=3, memory=30)
    sides = twin_sides(inst)
    pl0 = [0] * inst.n
    used = [0] * inst.m
    for g in inst.groups:  # a start that keeps memory: each group to the emptiest device
        d = min(range(inst.m), key=lambda x: used[x])
        used[d] += sum(inst.mem[o] for o in g)
        for o in g:
            pl0[o] = d
    assert all(u <= 30 for u in used)
    v0 = placement_bound(inst, pl0)[0]
    pl, v = search(inst, pl0, time_limit_s=5.0, seed=0)
    assert v <= v0
    assert v == placement_bound(inst, pl)[0]
    for g in inst.groups:
        assert pl[g[0]] == pl[g[1]]
    od, sch = schedule(inst, pl, sides, time_limit_s=0.3, seed=1)
    res = make_result(inst, "twins", pl, od)
    assert res.memory_ok and check(inst, res).ok
    assert res.makespan == pytest.approx(sch.makespan)
    assert v <= res.makespan * (1 + 1e-9)
    # the deterministic priorities come first: more time never gives a worse order
    assert sch.makespan <= schedule(inst, pl, sides)[1].makespan
