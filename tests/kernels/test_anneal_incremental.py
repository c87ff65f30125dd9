"""The incremental judge in the annealing (dplace.kernels.anneal._judge_moved): the ranks
brought up to date op by op equal placement_rank's from scratch, bit for bit; the insertion sort from the
last order gives sorted_ops' permutation (ties by topological position); and the whole walk, step for step,
is the one the judge from scratch takes (same best, same placements, same moves accepted), on instances
with every feature of the model and on branchy cells (block moves); in sequential comm with judges FAST,
MIXED and LINKS too, and there with simulations stopped early (``prune``) or not."""
from __future__ import annotations

import random

import numpy as np
import pytest

from dplace import kernels
from dplace.formulations.units import Units
from dplace.testing import cells
from dplace.verify.fuzz import fuzz_instance

pytestmark = pytest.mark.skipif(not kernels._numba_ok(), reason="numba not importable")


def _arrays(inst):
    from dplace.kernels import inst_arrays

    return inst_arrays(inst)


def _tpos(a) -> np.ndarray:
    t = np.empty(a.n, dtype=np.int64)
    t[a.topo] = np.arange(a.n)
    return t


@pytest.mark.parametrize("seed", range(30))
def test_rank_update_is_placement_rank_from_scratch(seed):
    from dplace.kernels.anneal import _rank_update
    from dplace.kernels.placerank import placement_rank

    inst = fuzz_instance(8300 + seed, n_ops=(3, 20)).replace(comm="parallel")
    a = _arrays(inst)
    rng = np.random.default_rng(seed)
    pl = rng.integers(0, a.m, a.n).astype(np.int64)
    rank, ref = np.empty(a.n), np.empty(a.n)
    placement_rank(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.succ_ptr, a.succ_edge, rank)
    dirty = np.zeros(a.n, dtype=np.bool_)
    changed, old, moved = np.empty(a.n, dtype=np.int64), np.empty(a.n), np.empty(a.n, dtype=np.int64)
    tpos = _tpos(a)
    for _ in range(40):
        k = int(rng.integers(1, min(4, a.n) + 1))
        ops = rng.choice(a.n, size=k, replace=False)
        before = rank.copy()
        for j, o in enumerate(ops):
            pl[o] = rng.integers(0, a.m)
            moved[j] = o
        nch = _rank_update(pl, a.dur, a.lat, a.bw, a.topo, tpos, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge,
                           a.succ_ptr, a.succ_edge, rank, moved, k, dirty, changed, old)
        placement_rank(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.succ_ptr, a.succ_edge, ref)
        assert rank.tobytes() == ref.tobytes()  # bit for bit
        assert not dirty.any()
        diff = set(np.nonzero(before != rank)[0].tolist())
        assert set(changed[:nch].tolist()) == diff and len(diff) == nch
        assert all(old[j] == before[changed[j]] for j in range(nch))


@pytest.mark.parametrize("seed", range(20))
def test_resort_is_sorted_ops(seed):
    """Ties (whole-number ranks drawn from a few values), -0.0 beside 0.0, an order far from sorted."""
    from dplace.kernels.anneal import _resort
    from dplace.kernels.placerank import sorted_ops

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    topo = rng.permutation(n).astype(np.int64)
    tpos = np.empty(n, dtype=np.int64)
    tpos[topo] = np.arange(n)
    order = rng.permutation(n).astype(np.int64)
    for _ in range(5):
        rank = rng.integers(0, 4, n).astype(float)
        rank[rank == 0] = rng.choice([0.0, -0.0], size=int((rank == 0).sum()))
        cand = np.empty(n, dtype=np.int64)
        assert _resort(order, cand, rank, tpos, n * n)
        assert cand.tolist() == sorted_ops(topo, rank, -1.0).tolist()
        order = cand
    rank = np.arange(n, dtype=float)  # increasing along ``order``: every op must move
    order = np.arange(n, dtype=np.int64)
    if n > 2:
        assert not _resort(order, np.empty(n, dtype=np.int64), rank, tpos, 0)


def _walk(inst, seed: int, incremental: bool, p_block: float, judge: str = "fast", p_relabel: float = 0.0,
          prune: bool = True, relative: bool = False):
    """Six chunks from a random placement, hot then cold: temperatures 1e3 then 1e-3, or (``relative``) 0.05 then
    1e-6 times the start's value; the trace of (best, its placement, current value, moves accepted, placement)."""
    from dplace.formulations.anneal import JUDGES
    from dplace.kernels.anneal import Annealer

    u = Units(inst)
    rng = random.Random(seed)
    start = [rng.choice(al) for al in u.allowed]
    pl = [0] * inst.n
    for members, d in zip(u.members, start):
        for o in members:
            pl[o] = d
    blocks = u.chains()
    a = Annealer(inst, pl, u.members, u.allowed, blocks, p_block if blocks else 0.0, judge=JUDGES[judge],
                 incremental=incremental, p_relabel=p_relabel, prune=prune)
    scale = 1.0
    if relative:
        a.step(1, 0.0, 0.0, seed)
        scale = a.cur
    trace = []
    for c in range(6):  # chunks: the second and later begin from the walk's last placement
        hot = (0.05 if c < 3 else 1e-6) * scale if relative else (1e3 if c < 3 else 1e-3)
        a.step(150, hot, hot / 10, seed * 10 + c)
        trace.append((a.result[0], a.result[1].tolist(), a.cur, a.accepted, a.pl.tolist()))
    return trace


@pytest.mark.parametrize("seed", range(25))
def test_incremental_walk_is_the_walk_from_scratch(seed):
    if seed % 5 == 4:
        inst = cells(k=3, branches=3, m=3)
    else:
        inst = fuzz_instance(8400 + seed, n_ops=(4, 24)).replace(comm="parallel")
    fresh = _walk(inst, seed, False, 0.4)
    inc = _walk(inst, seed, True, 0.4)
    assert inc == fresh
    assert fresh[-1][3] > 0  # moves were accepted: the walk went somewhere


@pytest.mark.parametrize("judge", ["fast", "mixed", "links"])
@pytest.mark.parametrize("seed", range(15))
def test_incremental_walk_is_the_walk_from_scratch_in_sequential_comm(seed, judge):
    """Sequential comm's judges FAST, MIXED and LINKS sort the same ranks: incremental there too, the same walk."""
    if seed % 5 == 4:
        inst = cells(k=3, branches=3, m=3, comm="sequential")
    else:
        inst = fuzz_instance(8500 + seed, n_ops=(4, 24)).replace(comm="sequential")
    fresh = _walk(inst, seed, False, 0.4, judge)
    inc = _walk(inst, seed, True, 0.4, judge)
    assert inc == fresh
    assert fresh[-1][3] > 0


@pytest.mark.parametrize("seed", range(15))
def test_incremental_walk_is_the_walk_from_scratch_with_relabel_moves(seed):
    """Relabel moves (two devices swapped over a run of units) are judged incrementally too: the same walk, in
    both comm modes."""
    comm = "parallel" if seed % 2 else "sequential"
    if seed % 5 == 4:
        inst = cells(k=3, branches=3, m=3, comm=comm)
    else:
        inst = fuzz_instance(8600 + seed, n_ops=(4, 24)).replace(comm=comm)
    judge = "fast" if comm == "parallel" else "mixed"
    fresh = _walk(inst, seed, False, 0.3, judge, p_relabel=0.3)
    inc = _walk(inst, seed, True, 0.3, judge, p_relabel=0.3)
    assert inc == fresh
    assert fresh[-1][3] > 0


@pytest.mark.parametrize("seed", range(20))
def test_relabel_move_swaps_two_devices_over_a_run_of_units(seed):
    """``_relabel_move``: over a run of consecutive units (in the order given) the units on device a go to b and
    those on b to a, every other unit stays; the record names exactly the units moved and their devices before;
    a unit not allowed on its new device, or a device that gains memory beyond its capacity, means no move."""
    from dplace.kernels.anneal import _relabel_move

    rng = np.random.default_rng(seed)
    nu, m = int(rng.integers(2, 12)), int(rng.integers(2, 5))
    sizes = rng.integers(1, 4, nu)
    unit_ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(unit_ptr[-1])
    unit_members = rng.permutation(n).astype(np.int64)
    unit_mem = rng.integers(0, 5, nu).astype(np.int64)
    allowed = rng.random((nu, m)) < (0.8 if seed % 2 else 2.0)  # even seeds: every unit allowed everywhere
    udev = np.array([rng.choice(np.nonzero(allowed[u])[0]) if allowed[u].any() else 0 for u in range(nu)])
    allowed[np.arange(nu), udev] = True
    pl = np.empty(n, dtype=np.int64)
    for u in range(nu):
        pl[unit_members[unit_ptr[u]:unit_ptr[u + 1]]] = udev[u]
    used = np.zeros(m, dtype=np.int64)
    np.add.at(used, udev, unit_mem)
    capacity = used + rng.integers(0, 6, m) + 10 * (seed % 2 == 0)
    seg = rng.permutation(nu).astype(np.int64)
    moves = 0
    for k in range(200):
        _seed(seed * 100 + k)
        before = pl.copy()
        mv_u, mv_d = np.full(nu, -1, dtype=np.int64), np.full(nu, -1, dtype=np.int64)
        nr = _relabel_move(pl, unit_ptr, unit_members, unit_mem, allowed, capacity, used, seg, nu, m, mv_u, mv_d)
        if nr == 0:
            assert (pl == before).all()
            continue
        moves += 1
        moved = mv_u[:nr].tolist()
        pos = sorted(int(np.nonzero(seg == u)[0][0]) for u in moved)
        devs = {int(d) for d in mv_d[:nr]}
        assert 1 <= len(devs) <= 2
        for u in range(nu):
            ops = unit_members[unit_ptr[u]:unit_ptr[u + 1]]
            d0, d1 = int(before[ops[0]]), int(pl[ops[0]])
            assert (pl[ops] == d1).all()  # colocation kept
            if u in moved:
                assert d0 == int(mv_d[moved.index(u)]) and d1 != d0 and allowed[u, d1]
            else:
                assert d1 == d0
        a, b = sorted(devs) if len(devs) == 2 else (next(iter(devs)), None)
        for u in moved:  # a swap of two devices: one unit's old device is another's new one, or a free device
            d0 = int(mv_d[moved.index(u)])
            d1 = int(pl[unit_members[unit_ptr[u]]])
            assert b is None or {d0, d1} == {a, b}
        # every unit of the run between the first and the last moved one on those devices moved
        for j in range(pos[0], pos[-1] + 1):
            u = int(seg[j])
            if int(before[unit_members[unit_ptr[u]]]) in devs | {int(pl[unit_members[unit_ptr[moved[0]]]])}:
                assert u in moved
        new_used = np.zeros(m, dtype=np.int64)
        for u in range(nu):
            new_used[pl[unit_members[unit_ptr[u]]]] += unit_mem[u]
        for d in range(m):  # a device that gained memory is within its capacity
            assert new_used[d] <= used[d] or new_used[d] <= capacity[d]
        used = new_used
    assert moves > 0 or seed % 2  # even seeds: moves can be made


@kernels.njit
def _seed(s):
    """Seeds numba's own generator (np.random.seed called from Python seeds NumPy's only)."""
    np.random.seed(s)


@pytest.mark.parametrize("judge", ["fast", "mixed", "links"])
@pytest.mark.parametrize("seed", range(15))
def test_the_walk_with_stopped_simulations_is_the_walk_without(seed, judge):
    """Sequential comm's judges stop a simulation once the placement is sure to miss the acceptance threshold
    (``prune``, dplace.kernels.anneal._seq_run_cut): the same walk as every simulation to its end, incremental and
    from scratch, hot (worse placements accepted) and cold (the greedy end)."""
    if seed % 5 == 4:
        inst = cells(k=3, branches=3, m=3, comm="sequential")
    else:
        inst = fuzz_instance(9200 + seed, n_ops=(4, 24)).replace(comm="sequential")

    def walk(incremental, prune):
        return _walk(inst, seed, incremental, 0.3, judge, p_relabel=0.2, prune=prune, relative=True)

    full = walk(True, False)
    assert walk(True, True) == full
    assert walk(False, True) == full  # from scratch, stopped early: the same walk
    assert full[-1][3] > 0  # moves were accepted: the walk went somewhere
