"""Sequential comm's judges stopped early (dplace.kernels.anneal._seq_run_cut, _judge_ranked): a simulation
stopped once an op's start plus its rank is above the cut returns ``inf`` exactly when the full simulation
ends above the cut, and the full value otherwise, bit for bit; and the annealing's walk with the judges
stopped early is the walk without, step for step (the same best, placements, moves accepted), on instances
with every feature of the model (fuzz: per-device times, per-pair links, pins, colocation, magnitudes
1e-3..1e10) and on branchy cells, with judges FAST and MIXED, incremental and from scratch."""
from __future__ import annotations

import random

import numpy as np
import pytest

from dplace import kernels
from dplace.formulations.units import Units
from dplace.testing import cells
from dplace.verify.fuzz import fuzz_instance

pytestmark = pytest.mark.skipif(not kernels._numba_ok(), reason="numba not importable")


def _scratch(a):
    n, m = a.n, a.m
    return dict(rank=np.empty(n), start=np.empty(n), end=np.empty(n), bs=np.empty((m, n + 1)),
                be=np.empty((m, n + 1)), cnt=np.zeros(m, dtype=np.int64), lfree=np.zeros((m, m)), arr=np.empty(n * m))


@pytest.mark.parametrize("seed", range(40))
def test_a_stopped_simulation_is_inf_exactly_when_the_full_one_ends_above_the_cut(seed):
    from dplace.kernels import inst_arrays
    from dplace.kernels.anneal import CUT_SLACK, _seq_mixed_cut, _seq_mixed_in, _seq_run, _seq_run_cut
    from dplace.kernels.placerank import placement_rank, radix_sorted_ops

    inst = fuzz_instance(9100 + seed, n_ops=(3, 30)).replace(comm="sequential")
    a = inst_arrays(inst)
    w = _scratch(a)
    rng = np.random.default_rng(seed)
    for _ in range(10):
        pl = np.asarray([rng.choice(inst.allowed_devices(o)) for o in range(inst.n)], dtype=np.int64)
        placement_rank(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.succ_ptr, a.succ_edge, w["rank"])
        order = radix_sorted_ops(a.topo, w["rank"], -1.0)
        run = (order, pl, a.dur, a.lat, a.bw, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge, a.succ_ptr,
               a.succ_edge, a.m, w["start"], w["end"], w["lfree"], w["arr"])
        v = _seq_run(*run)
        mix = (order, pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge, a.succ_ptr,
               a.succ_edge, a.m, w["start"], w["end"], w["bs"], w["be"], w["cnt"], w["lfree"], w["arr"])
        vm, om = _seq_mixed_in(*mix)
        om = om.copy()
        for f in (0.0, 0.5, 0.999, 1 - 1e-6):  # below the value: stopped
            assert _seq_run_cut(*run, w["rank"], v * f) == np.inf
            assert _seq_mixed_cut(*mix, w["rank"], vm * f)[0] == np.inf
        for f in (1 + 2 * CUT_SLACK, 1.01, 3.0, np.inf):  # above: the full value, bit for bit
            assert _seq_run_cut(*run, w["rank"], v * f) == v
            got, og = _seq_mixed_cut(*mix, w["rank"], vm * f)
            assert got == vm and og.tolist() == om.tolist()


def _walk(inst, seed: int, incremental: bool, prune: bool, judge: str):
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
    a = Annealer(inst, pl, u.members, u.allowed, blocks, 0.3 if blocks else 0.0, judge=JUDGES[judge],
                 incremental=incremental, p_relabel=0.2, prune=prune)
    m0 = None
    trace = []
    for c in range(6):  # hot, then cold: accepted worse moves and a greedy end
        if m0 is None:
            a.step(1, 0.0, 0.0, seed)
            m0 = a.cur
        t = m0 * (0.05 if c < 3 else 1e-6)
        a.step(150, t, t / 10, seed * 10 + c)
        trace.append((a.result[0], a.result[1].tolist(), a.cur, a.accepted, a.pl.tolist()))
    return trace


@pytest.mark.parametrize("judge", ["fast", "mixed"])
@pytest.mark.parametrize("seed", range(15))
def test_the_walk_with_stopped_simulations_is_the_walk_without(seed, judge):
    if seed % 5 == 4:
        inst = cells(k=3, branches=3, m=3, comm="sequential")
    else:
        inst = fuzz_instance(9200 + seed, n_ops=(4, 24)).replace(comm="sequential")
    full = _walk(inst, seed, True, False, judge)
    assert _walk(inst, seed, True, True, judge) == full
    assert _walk(inst, seed, False, True, judge) == full  # from scratch, stopped early: the same walk
    assert full[-1][3] > 0  # moves were accepted: the walk went somewhere
