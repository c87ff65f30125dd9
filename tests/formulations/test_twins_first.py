"""``portfolio_large`` on graphs of two tied parts (``TWINS_FIRST``): the twin-stem bound runs first and the
whole graph's segment bound only when the stems are not proven; the claimed bound stays at most the
brute-force optimum in both comm modes; ``TWINS_FIRST`` False is main's order."""
import dataclasses

import pytest


from dplace.budget import Budget
from dplace.registry import solve
from dplace.formulations import large
from dplace.formulations.bounds_twins import twin_stems
from dplace.testing import audit_bound, stemmed_twins
from dplace import check


SEED = 1


def _spied(monkeypatch):
    """Calls of the segment bound on the whole graph (the one asked for its segments' solutions; not the
    rests') and of the twin-stem bound, in order."""
    import dplace.formulations.bounds_segments as bs
    import dplace.formulations.bounds_twins as bt

    calls = []
    seg, twin = bs.segment_bound, bt.twin_stem_bound
    monkeypatch.setattr(bs, "segment_bound", 
                        lambda inst, **kw: ("solutions" in kw and calls.append("segments")) or seg(inst, **kw))
    monkeypatch.setattr(bt, "twin_stem_bound", lambda inst, **kw: calls.append("twins") or twin(inst, **kw))
    return calls


def _run(inst, budget_s: float = 6.0):
    starts = {"heft": solve(inst, method="heft")}
    return large.portfolio_large(inst, starts, budget=Budget(budget_s), anneal_share=0, twins_share=0.1)


def test_proven_stems_skip_the_segment_bound(monkeypatch):
    inst = stemmed_twins(SEED, k=3, r=3)
    assert twin_stems(inst) is not None
    calls = _spied(monkeypatch)
    res = _run(inst)
    assert check(inst, res).ok
    assert res.extra["twin_stem_bound"]["stems_optimal"]
    assert calls == ["twins"] and "skipped" in res.extra["segment_bound"]
    assert res.lower_bound >= res.extra["twin_stem_bound"]["value"] - 1e-9


def test_unproven_stems_run_the_segment_bound_after(monkeypatch):
    import dplace.formulations.bounds_twins as bt

    inst = stemmed_twins(SEED, k=3, r=3)
    calls = _spied(monkeypatch)
    spied = bt.twin_stem_bound

    def unproven(i, **kw):
        tb = spied(i, **kw)
        tb.optimal = False
        return tb

    monkeypatch.setattr(bt, "twin_stem_bound", unproven)
    res = _run(inst)
    assert calls == ["twins", "segments"] and "value" in res.extra["segment_bound"]
    assert res.lower_bound >= max(res.extra["segment_bound"]["value"], res.extra["twin_stem_bound"]["value"]) - 1e-9


def test_twins_first_off_is_mains_order(monkeypatch):
    inst = stemmed_twins(SEED, k=3, r=3)
    calls = _spied(monkeypatch)
    monkeypatch.setattr(large, "TWINS_FIRST", False)
    res = _run(inst)
    assert calls == ["segments", "twins"] and "value" in res.extra["segment_bound"]


def test_graphs_not_of_two_parts_run_only_the_segment_bound(monkeypatch):
    inst = stemmed_twins(SEED, k=3, r=3)
    plain = inst.replace(ops=[dataclasses.replace(o, colocation=None) for o in inst.ops])
    assert twin_stems(plain) is None
    calls = _spied(monkeypatch)
    res = _run(plain)
    assert calls == ["segments"] and "twin_stem_bound" not in res.extra


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_portfolio_bound_with_twins_first_never_above_the_optimum(comm):
    graphs = [stemmed_twins(seed, k=1 + seed % 3, r=2 + (seed // 3) % 2, m=2 + seed % 2).replace(comm=comm)
              for seed in range(2000, 2008)]
    def bound(i):
        res = _run(i, 1.0)
        # no memory-feasible start (heft) gives no answer; its claim is the bound portfolio reports then
        return res.lower_bound if res is not None else float("-inf")

    checked, _, positive = audit_bound(iter(graphs), bound, "twin_stems")
    assert checked >= 5 and positive >= 5
