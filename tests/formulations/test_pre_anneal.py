"""portfolio's chain beside the bounds (formulations.large.PRE_ANNEAL, off by default): parallel comm,
two or more cores, one annealing chain from the fastest start while the proven bounds run; its best is one more
start ("pre_anneal"), the answer is still simulated and checked; it stops when the bounds end; an error in its
thread reaches the caller; nowhere else (sequential comm, one core, off, no bounds)."""
from __future__ import annotations

import random
import threading

import pytest

from dplace.budget import Budget
from dplace.formulations.units import placement_order
from dplace.result import make_result
from dplace.schedule.simulate import simulate
from dplace.verify.check import check

from test_anneal import _wide


@pytest.fixture(scope="module")
def compiled():
    from dplace.formulations.units import Units
    from dplace.kernels.anneal import Annealer

    inst = _wide(random.Random(0), 2, 2, 2, memory=10**6)
    u = Units(inst)
    Annealer(inst, [0] * inst.n, u.members, u.allowed).step(1, 1.0, 1.0, 0)


def _starts(inst):
    one, spread = [0] * inst.n, [o % inst.m for o in range(inst.n)]
    spread[inst.op_index["o0_2"]] = 0  # its pin
    return {name: make_result(inst, name, pl, placement_order(inst, pl)) for name, pl in (("one", one),
                                                                                          ("spread", spread))}


def _spy(monkeypatch, calls, fail_in_pre: bool = False):
    from dplace.formulations import anneal

    real = anneal.anneal_placement

    def spy(inst, placement, **kw):
        pre = threading.current_thread().name == "dplace-pre-anneal"
        if pre and fail_in_pre:
            raise RuntimeError("chain failed")
        pl, st = real(inst, placement, **kw)
        calls.append((pre, list(placement), kw.get("workers"), st.wall_s))
        return pl, st

    monkeypatch.setattr(anneal, "anneal_placement", spy)


def test_the_chain_beside_the_bounds_is_one_more_start(compiled, monkeypatch):
    from dplace.formulations import large

    monkeypatch.setattr(large, "PRE_ANNEAL", True)
    calls = []
    _spy(monkeypatch, calls)
    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6)
    starts = _starts(inst)
    res = large.portfolio_large(inst, starts, budget=Budget(8.0), bound_share=0.3, anneal_share=0.5,
                                options={"workers": 2})
    assert check(inst, res).ok
    pre = [c for c in calls if c[0]]
    assert len(pre) == 1 and pre[0][2] == 1  # one chain, one worker
    fastest = min(starts.values(), key=lambda r: r.makespan)
    assert pre[0][1] == list(fastest.placement)
    info = res.extra["pre_anneal"]
    assert info["steps"] > 0 and info["makespan"] <= info["start_makespan"]
    # it ran while the bounds did, and stopped when they ended (before the bounds' share, 2.4 s, was spent)
    assert pre[0][3] <= 0.3 * 8.0 + 0.5
    got = res.extra["starts"]["pre_anneal"]
    assert got >= res.makespan * (1 - 1e-12)
    if res.extra["winner"] == "pre_anneal":
        assert res.extra["start_makespan"] == got
    assert res.makespan == pytest.approx(simulate(inst, res.placement, res.order).makespan)


@pytest.mark.parametrize("case", ["sequential", "one core", "off", "no bounds"])
def test_no_chain_beside_the_bounds_where_it_does_not_apply(compiled, monkeypatch, case):
    from dplace.formulations import large

    monkeypatch.setattr(large, "PRE_ANNEAL", True)
    calls = []
    _spy(monkeypatch, calls)
    inst = _wide(random.Random(7), 12, 4, 3, memory=10**6)
    workers, share = 2, 0.3
    if case == "sequential":
        inst = inst.replace(comm="sequential")
    elif case == "one core":
        workers = 1
    elif case == "off":
        monkeypatch.setattr(large, "PRE_ANNEAL", False)
    else:
        share = 0.0
    res = large.portfolio_large(inst, _starts(inst), budget=Budget(4.0), bound_share=share, anneal_share=0.5,
                                options={"workers": workers})
    assert check(inst, res).ok
    assert "pre_anneal" not in res.extra and "pre_anneal" not in res.extra["starts"]
    assert not any(c[0] for c in calls)


def test_an_error_in_the_chain_reaches_the_caller(compiled, monkeypatch):
    from dplace.formulations import large

    monkeypatch.setattr(large, "PRE_ANNEAL", True)
    _spy(monkeypatch, [], fail_in_pre=True)
    inst = _wide(random.Random(8), 12, 4, 3, memory=10**6)
    with pytest.raises(RuntimeError, match="chain failed"):
        large.portfolio_large(inst, _starts(inst), budget=Budget(4.0), bound_share=0.3, anneal_share=0.5,
                              options={"workers": 2})
