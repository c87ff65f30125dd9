"""The compiled sequential-comm state (dplace.kernels.seqstate) against the pure-Python reference
(dplace.schedule.state.ScheduleState), op by op: est on every device before each commit, the start each
commit returns, every op's start and end after it, the order, the re-timing and replay counts; and
whole HEFT / DPOS / m-ETF / m-SCT schedules (DPLACE_KERNEL=numba against python) on random instances
with pins, colocation, memory pressure, per-pair links, zero times and ties."""
from __future__ import annotations

import random

import pytest

from dplace import kernels
from dplace.kernels import state as kstate
from dplace.schedule.simulate import simulate
from dplace.schedule.state import ScheduleState

from test_list_kernels import _rand, _same

pytestmark = pytest.mark.skipif(not kernels._numba_ok(), reason="numba not importable")


def _seq(seed: int):
    return _rand(seed).replace(comm="sequential")


_CASCADES: list[tuple[int, int]] = []


@pytest.mark.parametrize("seed", range(30))
def test_seq_state_commits_like_the_reference(monkeypatch, seed):
    """Random commits (devices at random, so sends join links before sends already there and lengthen
    them: long re-timing cascades), some at a start that does not fit; every third seed with a zero
    cascade budget (every cascade a replay)."""
    from dplace.kernels.seqstate import ArraySeqState

    inst = _seq(2000 + seed)
    rng = random.Random(seed)
    monkeypatch.setattr(kstate, "_BL", rng.choice([2, 3, 5, 256]))
    if seed % 3 == 0:
        monkeypatch.setattr(kernels, "CASCADE_BUDGET", 0)
    ref, got = ScheduleState(inst), ArraySeqState(inst)
    ins = rng.random() < 0.7
    order = list(inst.topo)
    if seed % 2:  # a rank-like order: ops committed long after their producers' later neighbours
        order = sorted(order, key=lambda o: (rng.random() < 0.5, inst.topo_pos[o]))
        pos = {o: i for i, o in enumerate(order)}
        if any(pos[inst.esrc[e]] > pos[inst.edst[e]] for e in range(len(inst.edges))):
            order = list(inst.topo)
    for o in order:
        for d in range(inst.m):
            for q in (ins, not ins) if rng.random() < 0.2 else (ins,):
                assert got.est(o, d, q) == ref.est(o, d, q)
            assert got.data_ready(o, d) == ref.data_ready(o, d)
        d = rng.randrange(inst.m)
        r = rng.random()
        start = None if r < 0.6 else ref.est(o, d, ins) if r < 0.8 else ref.data_ready(o, d) + rng.uniform(0, ref.makespan + 1)
        assert got.commit(o, d, start=start, insertion=ins) == ref.commit(o, d, start=start, insertion=ins)
        assert got.start == ref.start and got.end == ref.end
    assert (got.retimed, got.replays) == (ref.retimed, ref.replays)
    assert got.order() == ref.order()
    _CASCADES.append((ref.retimed, ref.replays))
    sim = simulate(inst, ref.placement, ref.order())
    assert got.makespan == sim.makespan


def test_seq_state_cases_cover_cascades_and_replays():
    """The random commits above re-timed committed ops and replayed (not only appends)."""
    if len(_CASCADES) == 30:
        assert sum(r > 50 for r, _ in _CASCADES) >= 5 and sum(p > 10 for _, p in _CASCADES) >= 5


def _both(monkeypatch, inst, method: str, **options):
    from dplace.registry import get_method

    fn = get_method(method)
    monkeypatch.setattr(kstate, "_BL", (2, 3, 4, 8, 256)[inst.n % 5])
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    ref = fn(inst, **options)
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    return ref, fn(inst, **options)


@pytest.mark.parametrize("method", ["heft", "heft_links", "dpos", "m_etf", "m_sct"])
@pytest.mark.parametrize("seed", range(12))
def test_seq_list_schedulers_are_the_reference(monkeypatch, method, seed):
    inst = _seq(seed)
    ref, got = _both(monkeypatch, inst, method)
    _same(ref, got)
    assert got.claimed_makespan == got.makespan  # claimed == simulated, exact
    if seed % 4 == 0 and method in ("heft", "heft_links", "dpos"):
        _same(*_both(monkeypatch, inst, method, insertion=False))


@pytest.mark.parametrize("lookahead", [2.0, 50.0])
@pytest.mark.parametrize("seed", range(6))
def test_seq_heft_links_each_weight_is_the_reference(monkeypatch, lookahead, seed):
    """heft_links' split cost (heuristics.heft.split_cost, kernels.lists.split_cost) in the compiled loop
    gives the reference's schedule at every weight, not only at the best one."""
    inst = _seq(seed)
    _same(*_both(monkeypatch, inst, "heft_links", lookahead=(lookahead,)))


_PAIR: list[int] = []


@pytest.mark.parametrize("seed", range(8))
def test_seq_state_equals_parallel_state_without_queues(seed):
    """The deliberate pair (kernels.seqstate's ``_retime`` / ``_replay`` beside kernels.state's): with
    instant transfers (no bytes, no latency) a send never waits on its link, so the sequential state
    must time every commit as the parallel one does, through re-timing cascades and replays."""
    from dplace.instance.model import Edge, Link
    from dplace.kernels import inst_arrays
    from dplace.kernels.seqstate import ArraySeqState
    from dplace.kernels.state import BUDGET, commit, est, inst_tuple, new_state, order_lists

    inst = _rand(3000 + seed)
    inst = inst.replace(edges=[Edge(e.src, e.dst, 0.0) for e in inst.edges], link=Link(0.0, inst.link.bandwidth),
                        pairs={k: Link(0.0, v.bandwidth) for k, v in inst.pairs.items()})
    rng = random.Random(seed)
    seq = ArraySeqState(inst.replace(comm="sequential"))
    I, S = inst_tuple(inst_arrays(inst)), new_state(inst.n, inst.m)
    if seed % 2:  # every cascade a replay in both
        S.cnt[BUDGET] = seq.S.cnt[BUDGET] = 0
    ins = rng.random() < 0.8
    for o in inst.topo:
        for d in range(inst.m):
            assert seq.est(o, d, ins) == est(I, S, o, d, ins)
        d = rng.randrange(inst.m)
        start = None if rng.random() < 0.5 else seq.data_ready(o, d) + rng.uniform(0, seq.makespan + 1)
        got = commit(I, S, o, d, 0.0 if start is None else start, start is not None, ins)
        assert seq.commit(o, d, start=start, insertion=ins) == got
        assert seq.start == S.start.tolist() and seq.end == S.end.tolist()
    assert seq.order() == order_lists(S)
    if seed % 2:  # (more often there: every new send re-times in the sequential state)
        assert seq.replays >= S.cnt[kstate.REPLAYS]
    _PAIR.append(int(S.cnt[kstate.REPLAYS]) + int(S.cnt[kstate.RETIMED]))


def test_seq_state_pair_cases_cover_cascades():
    """The instances above re-timed committed ops or replayed (not only appends)."""
    if len(_PAIR) == 8:
        assert sum(x > 0 for x in _PAIR) >= 4, _PAIR


@pytest.mark.parametrize("seed", range(4))
def test_seq_heft_links_coplace_is_the_reference(monkeypatch, seed):
    """heft_links' co-placement of backward ops (heuristics.heft.coplaced, kernels.lists._keep_device):
    the compiled loop gives the reference's schedule."""
    from dplace.formats.generate import transformer_training

    inst = transformer_training(150 + 40 * seed, 3, comm="sequential", seed=seed)  # ops name forward_of
    ref, got = _both(monkeypatch, inst, "heft_links", lookahead=(2.0,), coplace=True)
    _same(ref, got)
    assert ref.placement != _both(monkeypatch, inst, "heft_links", lookahead=(2.0,))[0].placement
