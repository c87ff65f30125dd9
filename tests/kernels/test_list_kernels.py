"""Compiled HEFT / DPOS (dplace.kernels) against the pure-Python reference (DPLACE_KERNEL=python):
identical placement, per-device order and makespan, float for float, on random instances that cover
pins, colocation groups, memory pressure (the fallback device), per-pair links, per-device times,
zero times, ties and magnitudes from 1e-3 to 1e10."""
from __future__ import annotations

import random

import numpy as np
import pytest

from dplace import kernels
from dplace.kernels import state as kstate
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.schedule.ranks import upward_rank, upward_rank_array
from dplace.heuristics.fastt import dpos
from dplace.heuristics.heft import heft

METHODS = {"heft": heft, "dpos": dpos}

pytestmark = pytest.mark.skipif(not kernels._numba_ok(), reason="numba not importable")


def _rand(seed: int) -> Instance:
    rng = random.Random(seed)
    n = rng.randint(1, 220)
    m = rng.randint(1, 6)
    scale = 10.0 ** rng.choice([-3, 0, 2, 6, 10])
    ties = rng.random() < 0.4  # few distinct values: equal ranks, equal finish times

    def num(hi: float) -> float:
        if rng.random() < 0.1:
            return 0.0
        if ties:
            return float(rng.choice([1, 2, 3])) * scale
        return round(rng.uniform(0, hi), 3) * scale

    hetero = rng.random() < 0.4
    ops = []
    for i in range(n):
        t = {f"d{d}": num(9) for d in range(m)} if hetero else num(9)
        ops.append(Op(f"o{i}", t, rng.randint(0, 5)))
    edges = []
    width = rng.choice([3, 10, 40])
    for j in range(n):
        for i in range(max(0, j - width), j):
            if rng.random() < 2.0 / width:
                edges.append(Edge(f"o{i}", f"o{j}", num(6)))
    for g in range(rng.randint(0, 4)):  # colocation groups
        if n >= 3:
            for k in rng.sample(range(n), rng.randint(2, min(6, n))):
                if ops[k].colocation is None:
                    ops[k] = Op(ops[k].id, ops[k].time, ops[k].memory, colocation=f"g{g}")
    if m >= 2:
        for _ in range(rng.randint(0, 5)):
            k = rng.randrange(n)
            if ops[k].colocation is None:
                ops[k] = Op(ops[k].id, ops[k].time, ops[k].memory, device=f"d{rng.randrange(m)}")
    total = sum(op.memory for op in ops)
    mem = max(12, int(rng.choice([0.5, 0.9, 1.2, 5.0]) * total / m) + 6)  # 0.5, 0.9: the fallback
    for g in {op.colocation for op in ops} - {None}:  # a group must fit one device
        mem = max(mem, sum(op.memory for op in ops if op.colocation == g))
    speeds = [1.0] * m if hetero else [rng.choice([1.0, 2.0, 0.5]) for _ in range(m)]
    devices = [Device(f"d{d}", mem, speeds[d]) for d in range(m)]
    link = Link(num(3), float(rng.choice([1, 2, 4])) * scale)
    pairs = {}
    for _ in range(rng.randint(0, 3) if m >= 2 else 0):
        a, b = rng.sample(range(m), 2)
        pairs[(f"d{a}", f"d{b}")] = Link(num(3), float(rng.choice([1, 2, 3])) * scale)
    return Instance(f"r{seed}", devices, ops, edges, link=link, pairs=pairs, comm="parallel")


def _both(monkeypatch, inst: Instance, method: str, **options):
    # small blocks of device order too: inserting into full blocks splits them
    monkeypatch.setattr(kstate, "_BL", (2, 3, 4, 8, 256)[inst.n % 5])
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    ref = METHODS[method](inst, **options)  # not solve(): it refuses instances short of memory
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    got = METHODS[method](inst, **options)
    return ref, got


def _same(ref, got) -> None:
    assert got.placement == ref.placement
    assert got.order == ref.order
    assert got.makespan == ref.makespan
    assert got.claimed_makespan == ref.claimed_makespan
    assert got.schedule.start == ref.schedule.start


@pytest.mark.parametrize("seed", range(40))
def test_rank_same_floats(seed):
    inst = _rand(seed)
    for how in (("mean", "mean"), ("max", "max"), ("min", "zero")):
        assert upward_rank_array(inst, *how).tolist() == upward_rank(inst, *how)


@pytest.mark.parametrize("seed", range(40))
def test_heft_kernel_is_the_reference(monkeypatch, seed):
    inst = _rand(seed)
    _same(*_both(monkeypatch, inst, "heft"))
    if seed % 4 == 0:
        _same(*_both(monkeypatch, inst, "heft", insertion=False))


@pytest.mark.parametrize("seed", range(40))
def test_dpos_kernel_is_the_reference(monkeypatch, seed):
    inst = _rand(seed)
    ref, got = _both(monkeypatch, inst, "dpos")
    _same(ref, got)
    assert got.extra == ref.extra
    if seed % 4 == 0:
        for opts in ({"insertion": False}, {"critical_path": False}, {"cp_one_device": True}):
            _same(*_both(monkeypatch, inst, "dpos", **opts))


@pytest.mark.parametrize("seed", range(24))
def test_state_commits_like_the_reference(monkeypatch, seed):
    """Random commits, some at a start that does not fit (later ops move: re-timing, stale gaps,
    a rejected gap update), est queried on every device after each: the compiled state gives the
    reference's numbers throughout."""
    from dplace.kernels import inst_arrays
    from dplace.kernels.state import REPLAYS, RETIMED, commit, est, inst_tuple, new_state, order_lists
    from dplace.schedule.state import ScheduleState

    inst = _rand(1000 + seed)
    rng = random.Random(seed)
    monkeypatch.setattr(kstate, "_BL", rng.choice([2, 3, 5, 256]))
    if seed % 3 == 0:  # every cascade too long: replays
        monkeypatch.setattr(kernels, "CASCADE_BUDGET", 0)
    ref = ScheduleState(inst)
    I = inst_tuple(inst_arrays(inst))
    S = new_state(inst.n, inst.m)
    ins = rng.random() < 0.8
    for o in inst.topo:
        for d in range(inst.m):
            for q in (ins, not ins) if rng.random() < 0.2 else (ins,):
                assert est(I, S, o, d, q) == ref.est(o, d, q)
        d = rng.randrange(inst.m)
        r = rng.random()
        start = None if r < 0.5 else ref.est(o, d, ins) if r < 0.7 else ref.data_ready(o, d) + rng.uniform(0, ref.makespan + 1)
        got = commit(I, S, o, d, 0.0 if start is None else start, start is not None, ins)
        assert got == ref.commit(o, d, start=start, insertion=ins)
        assert S.start.tolist() == ref.start and S.end.tolist() == ref.end
    assert S.cnt[REPLAYS] == ref.replays and S.cnt[RETIMED] == ref.retimed
    assert order_lists(S) == ref.order()


@pytest.mark.parametrize("seed", range(6))
def test_state_many_early_insertions(monkeypatch, seed):
    """Sparse ops first (explicit starts far apart: gaps everywhere), then the rest inserted into the
    earliest gaps, now and then one at a start that pushes later ops (re-timing) or at another op's
    start (the new op goes first, zero-time or not): device orders in
    blocks of 2-5 ops split again and again, in the reference's order and times throughout."""
    from dplace.kernels import inst_arrays
    from dplace.kernels.state import commit, est, inst_tuple, new_state, order_lists
    from dplace.schedule.state import ScheduleState

    rng = random.Random(seed)
    n, m = 400, rng.choice([1, 2, 3])
    ops = [Op(f"o{i}", float(rng.choice([0, 1, 2, 5, 7])), 0) for i in range(n)]
    edges = [Edge(f"o{i}", f"o{j}", 8.0) for j in range(60, n) for i in rng.sample(range(60), 1)
             if rng.random() < 0.3]
    inst = Instance(f"e{seed}", [Device(f"d{d}", 10**9) for d in range(m)], ops, edges,
                    link=Link(1.0, 4.0), comm="parallel")
    monkeypatch.setattr(kstate, "_BL", rng.choice([2, 3, 4, 5]))
    ref = ScheduleState(inst)
    I = inst_tuple(inst_arrays(inst))
    S = new_state(inst.n, inst.m)
    for o in range(n):
        d = rng.randrange(m)
        if o < 60:
            start = 40.0 * o + rng.choice([0.0, 3.0])
        elif rng.random() < 0.05:
            start = ref.data_ready(o, d) + rng.uniform(0, 50)
        elif rng.random() < 0.05 and ref.order()[d]:  # where an op starts: o goes before it
            start = max(ref.data_ready(o, d), ref.start[rng.choice(ref.order()[d])])
        else:
            start = None
        got = commit(I, S, o, d, 0.0 if start is None else start, start is not None, True)
        assert got == ref.commit(o, d, start=start, insertion=True)
        if o % 7 == 0 and o + 1 < n:
            assert [est(I, S, o + 1, e, True) for e in range(m)] == [ref.est(o + 1, e, True) for e in range(m)]
    assert S.start.tolist() == ref.start and S.end.tolist() == ref.end
    assert order_lists(S) == ref.order()
    assert S.cnt[kstate.RETIMED] == ref.retimed
    assert max(len(x) for x in order_lists(S)) > 100 and S.cnt[kstate.N_BLOCKS] > 40


@pytest.mark.parametrize("seed", range(12))
def test_rank_order_is_kahns(seed):
    """The priority order by one sort (decreasing rank, ties by topological position) is Kahn's
    heap order: on upward ranks (ties from zero costs), on ops listed out of topological order, and on
    ranks that do not follow the edges (then Kahn's algorithm itself runs)."""
    from dplace.kernels import inst_arrays
    from dplace.kernels.lists import priority_order, rank_order

    inst = _rand(seed)
    rng = random.Random(seed)
    if seed % 2:  # ops listed in a shuffled order: topological position is not the index
        perm = list(range(inst.n))
        rng.shuffle(perm)
        inst = Instance(inst.name, inst.devices, [inst.ops[i] for i in perm], inst.edges, link=inst.link,
                        pairs=inst.pairs, comm=inst.comm)
    a = inst_arrays(inst)
    ranks = [upward_rank_array(inst, "mean", "mean"), upward_rank_array(inst, "max", "zero"),
             np.array([float(rng.choice([0, 1, 2])) for _ in range(inst.n)])]
    for rank in ranks:
        want = priority_order(rank, a.topo_pos, a.pred_ptr, a.succ_ptr, a.succ_edge, a.edst)
        assert rank_order(rank, a).tolist() == want.tolist()
