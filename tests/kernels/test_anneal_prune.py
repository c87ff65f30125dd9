"""Sequential comm's judges stopped early (dplace.kernels.anneal._seq_run_cut, _judge_ranked): a simulation
stopped once an op's start plus its rank is above the cut returns ``inf`` exactly when the full simulation
ends above the cut, and the full value otherwise, bit for bit, on instances with every feature of the model
(fuzz: per-device times, per-pair links, pins, colocation, magnitudes 1e-3..1e10). Judge LINKS stopped early is
the best of its three orders' full simulations. The annealing's walk with the judges stopped early is the walk
without, step for step: tests/kernels/test_anneal_incremental.py."""
from __future__ import annotations

import numpy as np
import pytest

from dplace import kernels
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


@pytest.mark.parametrize("seed", range(30))
def test_the_links_judge_stopped_early_is_its_three_simulations_best(seed):
    """Judge LINKS (dplace.kernels.anneal._seq_links_cut): the best of its three orders' full simulations, each
    written out here (the rank order; the parallel-comm insertion schedule's start order; the link schedule's
    start order), the first on a tie; stopped (``inf``) exactly when that best is above the cut."""
    from dplace.kernels import inst_arrays
    from dplace.kernels.anneal import CUT_SLACK, _schedule_in, _seq_links, _seq_links_cut, _seq_run
    from dplace.kernels.placerank import placement_rank, radix_sorted_ops
    from dplace.kernels.seqorder import link_schedule

    inst = fuzz_instance(9300 + seed, n_ops=(3, 30)).replace(comm="sequential")
    a = inst_arrays(inst)
    w = _scratch(a)
    n, m = a.n, a.m
    ls, le, lcnt = np.empty((m * m, n + 1)), np.empty((m * m, n + 1)), np.zeros(m * m, dtype=np.int64)
    rng = np.random.default_rng(seed)
    for _ in range(10):
        pl = np.asarray([rng.choice(inst.allowed_devices(o)) for o in range(inst.n)], dtype=np.int64)
        placement_rank(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.succ_ptr, a.succ_edge, w["rank"])
        o1 = radix_sorted_ops(a.topo, w["rank"], -1.0)
        _schedule_in(o1, pl, a.dur, a.lat, a.bw, a.esrc, a.ebytes, a.pred_ptr, a.pred_edge, m, w["start"], w["end"],
                     w["bs"], w["be"], w["cnt"])
        o2 = radix_sorted_ops(a.topo, w["start"], 1.0)
        link_schedule(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge, a.succ_ptr,
                      a.succ_edge, w["rank"], m, w["start"], w["end"], w["bs"], w["be"], w["cnt"], ls, le, lcnt,
                      w["arr"])
        o3 = radix_sorted_ops(a.topo, w["start"], 1.0)
        vals = [_seq_run(o, pl, a.dur, a.lat, a.bw, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge, a.succ_ptr,
                         a.succ_edge, m, w["start"], w["end"], w["lfree"], w["arr"]) for o in (o1, o2, o3)]
        k = min(range(3), key=lambda i: (vals[i], i))
        want, want_order = vals[k], (o1, o2, o3)[k].tolist()
        args = (pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge, a.succ_ptr,
                a.succ_edge, w["rank"], m, w["start"], w["end"], w["bs"], w["be"], w["cnt"], w["lfree"], w["arr"], ls,
                le, lcnt)
        got, og = _seq_links(*args)
        assert got == want and og.tolist() == want_order
        cut_args = (o1, pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.pred_ptr, a.pred_edge,
                    a.succ_ptr, a.succ_edge, m, w["start"], w["end"], w["bs"], w["be"], w["cnt"], w["lfree"], w["arr"],
                    ls, le, lcnt, w["rank"])
        for f in (0.0, 0.5, 0.999, 1 - 1e-6):  # below the best: stopped
            assert _seq_links_cut(*cut_args, want * f)[0] == np.inf
        for f in (1 + 2 * CUT_SLACK, 1.01, 3.0, np.inf):  # above: the best, bit for bit, and its order
            got, og = _seq_links_cut(*cut_args, want * f)
            assert got == want and og.tolist() == want_order
