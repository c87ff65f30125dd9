"""The sequential annealing's judge with insertion (dplace.kernels.seqjudge): its makespan is
dplace.simulate's of the placement and the order it produces, op by op, and that order is
placement_order's (the compiled state reset in place between placements: a reset that leaves anything
behind would change the second placement's schedule); the annealing with it returns placements whose
judged makespan is the simulated one."""
from __future__ import annotations

import random

import pytest

from dplace import kernels
from dplace.formulations.units import Units, placement_order
from dplace.schedule.simulate import simulate
from dplace.verify.fuzz import fuzz_instance

from test_list_kernels import _rand

pytestmark = pytest.mark.skipif(not kernels._numba_ok(), reason="numba not importable")


def _instances(seed: int):
    yield fuzz_instance(9100 + seed, n_ops=(3, 16)).replace(comm="sequential")
    yield _rand(seed).replace(comm="sequential")


@pytest.mark.parametrize("seed", range(25))
def test_insert_judge_is_the_simulation_of_its_order(seed):
    from dplace.kernels.seqjudge import SeqInsertJudge

    for inst in _instances(seed):
        if inst.transfer_cpu:
            continue
        judge = SeqInsertJudge(inst)  # one state for every placement: reset between them
        rng = random.Random(seed)
        for _ in range(4):
            pl = [rng.choice(inst.allowed_devices(o)) for o in range(inst.n)]
            mk, od = judge(pl)
            assert od == placement_order(inst, pl)
            sim = simulate(inst, pl, od)
            tol = 1e-9 * max(1.0, mk)
            assert abs(sim.makespan - mk) <= tol
            assert max((abs(a - b) for a, b in zip(sim.start, judge.S.start.tolist())), default=0.0) <= tol
            assert max((abs(a - b) for a, b in zip(sim.end, judge.S.end.tolist())), default=0.0) <= tol


@pytest.mark.parametrize("judge", [1, 2, 3])
@pytest.mark.parametrize("seed", range(4))
def test_annealing_with_insertion_returns_what_it_judged(judge, seed):
    """judge INSERT (1), BOTH (2), MIXED (3): the best value a chain returns is the simulated makespan of its
    placement in placement_order's order, never above the start's, and moves keep memory and colocation."""
    from dplace.kernels.anneal import Annealer, seq_mixed

    inst = _rand(100 + seed).replace(comm="sequential")
    if inst.m < 2 or inst.n < 4:
        inst = fuzz_instance(9300 + seed, n_ops=(12, 16), n_devices=(3, 3)).replace(comm="sequential")
    u = Units(inst)
    pl0 = [0] * inst.n
    for ms, al in zip(u.members, u.allowed):
        for o in ms:
            pl0[o] = al[0]
    s0 = (seq_mixed(inst, pl0)[0] if judge == 3 else simulate(inst, pl0, placement_order(inst, pl0)).makespan)
    a = Annealer(inst, pl0, u.members, u.allowed, judge=judge)
    a.step(300, 0.05 * s0, 0.001 * s0, seed)
    a.step(300, 0.001 * s0, 0.0001 * s0, seed + 1)
    best, pl = a.result
    pl = pl.tolist()
    assert a.start_value == pytest.approx(s0, rel=1e-12, abs=1e-12)
    order = seq_mixed(inst, pl)[1] if judge == 3 else placement_order(inst, pl)
    assert best == pytest.approx(simulate(inst, pl, order).makespan, rel=1e-12, abs=1e-12)
    assert best <= s0 + 1e-9 * s0
    assert (a.ins[0] > 0) == (judge == 2)
    for g in inst.groups:
        assert len({pl[o] for o in g}) == 1


@pytest.mark.parametrize("seed", range(25))
def test_mixed_judge_is_the_simulation_of_its_order_and_never_worse_than_fast(seed):
    """Judge MIXED (dplace.kernels.anneal.seq_mixed): its value is dplace.simulate's of the order it
    gives (op by op: every device's list, each op once), and never above FAST's (the rank order without
    insertion), which it takes when that is the better."""
    from dplace.kernels.anneal import list_makespan, seq_mixed

    for inst in _instances(seed):
        rng = random.Random(seed)
        for _ in range(4):
            pl = [rng.choice(inst.allowed_devices(o)) for o in range(inst.n)]
            mk, od = seq_mixed(inst, pl)
            assert sorted(o for lst in od for o in lst) == list(range(inst.n))
            assert all(pl[o] == d for d, lst in enumerate(od) for o in lst)
            sim = simulate(inst, pl, od)
            assert abs(sim.makespan - mk) <= 1e-9 * max(1.0, mk)
            assert mk <= list_makespan(inst, pl)[0]


@pytest.mark.parametrize("seed", range(25))
def test_links_judge_is_the_simulation_of_its_order_and_never_worse_than_mixed(seed):
    """Judge LINKS (dplace.kernels.anneal.seq_links): its value is dplace.simulate's of the order it gives
    (every device's list, each op once, on its device), and never above MIXED's, which it takes on a tie."""
    from dplace.kernels.anneal import seq_links, seq_mixed

    for inst in _instances(seed):
        rng = random.Random(seed)
        for _ in range(4):
            pl = [rng.choice(inst.allowed_devices(o)) for o in range(inst.n)]
            mk, od = seq_links(inst, pl)
            assert sorted(o for lst in od for o in lst) == list(range(inst.n))
            assert all(pl[o] == d for d, lst in enumerate(od) for o in lst)
            sim = simulate(inst, pl, od)
            assert abs(sim.makespan - mk) <= 1e-9 * max(1.0, mk)
            mx, omx = seq_mixed(inst, pl)
            assert mk <= mx
            if mk == mx:
                assert od == omx


def test_links_judge_finds_faster_orders_than_mixed():
    """The third order is not dead weight: on random sequential instances and placements LINKS is strictly
    below MIXED somewhere (and never above it, above)."""
    from dplace.kernels.anneal import seq_links, seq_mixed

    better = 0
    for seed in range(25):
        for inst in _instances(seed):
            rng = random.Random(seed)
            for _ in range(4):
                pl = [rng.choice(inst.allowed_devices(o)) for o in range(inst.n)]
                better += seq_links(inst, pl)[0] < seq_mixed(inst, pl)[0] * (1 - 1e-9)
    assert better > 0


def test_mixed_judge_inserts_into_a_gap():
    """A device idle while a long op waits for a transfer: FAST's rank order runs the short
    independent op after the long one; MIXED's order runs it in the gap."""
    from dplace.instance.model import Device, Edge, Instance, Op
    from dplace.kernels.anneal import list_makespan, seq_mixed

    ops = [Op("a", 5.0), Op("b", 10.0), Op("c", 1.0), Op("d", 1.0)]
    edges = [Edge("a", "b", 10.0), Edge("c", "d", 0.0)]
    inst = Instance("gap", [Device("x", 100), Device("y", 100)], ops, edges, comm="sequential")
    pl = [0, 1, 1, 1]  # b waits on y for a's tensor (arrives at 5 + 10 / bw); c, d fit before it
    fast = list_makespan(inst, pl)[0]
    mk, od = seq_mixed(inst, pl)
    assert mk < fast
    assert od[1].index(inst.op_index["c"]) < od[1].index(inst.op_index["b"])


@pytest.mark.parametrize("seed", range(10))
def test_radix_sorted_ops_is_sorted_ops(seed):
    """radix_sorted_ops gives the merge sort's permutation: ascending sign * value, ties (also -0.0 against
    0.0, subnormals, huge values) by topological position."""
    import numpy as np

    from dplace.kernels.placerank import radix_sorted_ops, sorted_ops

    rng = np.random.default_rng(seed)
    for n in (0, 1, 2, 7, 60, 700):
        topo = rng.permutation(n).astype(np.int64)
        for v in (rng.normal(size=n) * 1e5, rng.choice([-2.5, -0.0, 0.0, 1.0, 3.25, 1e300, -1e-300, 5e-324], size=n)):
            for sign in (-1.0, 1.0):
                assert radix_sorted_ops(topo, v, sign).tolist() == sorted_ops(topo, v, sign).tolist()
