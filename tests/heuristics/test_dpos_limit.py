"""DPOS stops at its time limit: the compiled loop's stop count (lowered by a timer, or cut by the tests)
and the reference's check give the same schedule for the same cut, the ops left go to
``dpos_rest_device`` at once, and the Result says how many DPOS's rule placed."""
import itertools
import random

import pytest

import dplace
from dplace.budget import Budget
from dplace.formats.generate import transformer_training
from dplace.heuristics import fastt
from dplace.testing import random_instance
from dplace.verify.check import check


def _run(inst, monkeypatch, mode, **kw):
    monkeypatch.setenv("DPLACE_KERNEL", mode)
    opts = fastt.DposOptions()
    return fastt._dpos_result(inst, "dpos", opts, {}, fastt._dpos_schedule(inst, opts, **kw))


@pytest.mark.parametrize("seed", range(16))
def test_a_cut_dpos_kernel_is_the_reference(monkeypatch, seed):
    rng = random.Random(seed)
    inst = random_instance(rng, n_ops=rng.randint(2, 30), n_devices=rng.randint(2, 4),
                           comm=("parallel", "sequential")[seed % 2], memory_slack=rng.choice([0.6, 3.0]))
    for cut in sorted({0, 1, inst.n // 2, inst.n - 1}):
        ref, got = (_run(inst, monkeypatch, mode, stop_after=cut) for mode in ("python", "numba"))
        assert (got.placement, got.order, got.makespan, got.claimed_makespan) == \
            (ref.placement, ref.order, ref.makespan, ref.claimed_makespan)
        assert got.extra["time_limit"]["ops_placed_by_method"] == ref.extra["time_limit"]["ops_placed_by_method"] == cut
        assert got.claimed_makespan is None  # the rest is placed, not timed: no claim, the simulation judges
        assert check(inst, got).ok


def test_dpos_past_its_deadline_places_by_the_rest_rule(monkeypatch):
    """A budget already spent (an injected clock): DPOS's rule places nothing, the rest rule everything,
    in both paths; an unlimited run has no time_limit entry."""
    inst = transformer_training(300, 4, seed=7)
    for mode in ("python", "numba"):
        monkeypatch.setenv("DPLACE_KERNEL", mode)
        now = itertools.count()
        res = dplace.solve(inst, "dpos", budget=Budget(0.5, clock=lambda: next(now)))
        assert res.extra["time_limit"]["ops_placed_by_method"] == 0 and check(inst, res).ok
        assert "time_limit" not in dplace.solve(inst, "dpos").extra


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_the_compiled_dpos_loop_stops_at_the_limit(monkeypatch, comm):
    """A real timer lowers the compiled loop's stop count while it runs (12k ops: ~0.02 s of loop in parallel
    comm since its kernels borrow their arrays, ~0.1 s in sequential comm: a 2 ms limit cuts both)."""
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    inst = transformer_training(12000, 4, seed=7, comm=comm)
    dplace.solve(inst, "dpos")  # kernels loaded, bound known
    res = dplace.solve(inst, "dpos", time_limit_s=0.002)
    assert 0 <= res.extra["time_limit"]["ops_placed_by_method"] < inst.n
    assert check(inst, res).ok and res.solve_time_s < 1.0
