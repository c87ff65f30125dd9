"""The list schedulers' link policy in sequential comm (``dplace.kernels.LINK_MOVES`` / ``LINK_REPLAYS``;
:meth:`dplace.schedule.state.ScheduleState.frozen`, :func:`dplace.kernels.seqlinks.frozen`): exact re-timing
until the commits have moved LINK_MOVES x n ops, then frozen links (a new or longer send does not delay the sends
behind it on its link) with exact replays; the compiled state against the reference op by op under the policy,
a hand-timed case, and the final state being the simulation (claimed == simulated) whatever the policy."""
from __future__ import annotations

import random

import pytest

from dplace import kernels
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.kernels import state as kstate
from dplace.schedule.simulate import simulate
from dplace.schedule.state import ScheduleState

from test_list_kernels import _rand, _same

pytestmark = pytest.mark.skipif(not kernels._numba_ok(), reason="numba not importable")


def _seq(seed: int):
    return _rand(seed).replace(comm="sequential")


def _weight_first() -> Instance:
    """d0 runs w (a weight, 0-1) and x (1-2); y on d1 reads x, z on d1 reads w, q (no inputs) comes last. A
    send takes 10. Committed w, x, y, z, q: z's send of w joins the link d0 -> d1 ahead of x's (the producers'
    order), so the simulator's rule sends x at 11 instead of 2 and y runs at 21 instead of 12."""
    ops = [Op("w", 1.0, 0), Op("x", 1.0, 0), Op("y", 1.0, 0), Op("z", 1.0, 0), Op("q", 1.0, 0)]
    edges = [Edge("w", "x", 0.0), Edge("x", "y", 10.0), Edge("w", "z", 10.0)]
    return Instance("weight-first", [Device("d0", 10**6), Device("d1", 10**6)], ops, edges, link=Link(0.0, 1.0),
                    comm="sequential")


@pytest.mark.parametrize("frozen", [False, True])
def test_a_frozen_link_keeps_the_sends_behind_a_new_one(frozen):
    from dplace.kernels.seqstate import ArraySeqState

    inst = _weight_first()
    sim = simulate(inst, [0, 0, 1, 1, 0], [[0, 1, 4], [2, 3]])
    for st in (ScheduleState(inst, 0.0 if frozen else -1.0, 0), ArraySeqState(inst, 0.0 if frozen else -1.0, 0)):
        assert st.frozen() is frozen
        for o, d in ((0, 0), (1, 0), (2, 1)):
            st.commit(o, d)
        assert st.start[2] == 12.0
        assert st.data_ready(3, 1) == 11.0  # w's send first on the link, in both
        st.commit(3, 1)
        # exact: x's send waits for w's (11-21), y runs at 21, z after it; frozen: x's send and y keep their times
        assert (st.start[2], st.start[3]) == ((12.0, 13.0) if frozen else (21.0, 22.0))
        st.commit(4, 0)  # the last commit: a frozen state is replayed, the simulation again
        assert list(st.start) == sim.start and st.makespan == sim.makespan == 23.0
        if frozen:
            assert st.replays == 1 and st.retimed == 0


@pytest.mark.parametrize("seed", range(30))
def test_frozen_state_commits_like_the_reference(monkeypatch, seed):
    """Random commits (devices at random: sends join links ahead of committed ones), the policy switching on at
    0, 0.3 or 2 x n moves, with 0, 1, 3 or 50 replays: est and data_ready on every device, each commit's start,
    every start and end after it, the counts; after the last commit the state is the simulation."""
    from dplace.kernels.seqstate import ArraySeqState

    inst = _seq(5000 + seed)
    rng = random.Random(seed)
    monkeypatch.setattr(kstate, "_BL", rng.choice([2, 3, 5, 256]))
    if seed % 5 == 0:
        monkeypatch.setattr(kernels, "CASCADE_BUDGET", 0)
    moves, reps = rng.choice([0.0, 0.3, 2.0]), rng.choice([0, 1, 3, 50])
    ref, got = ScheduleState(inst, moves, reps), ArraySeqState(inst, moves, reps)
    ins = rng.random() < 0.7
    for o in inst.topo:
        for d in range(inst.m):
            assert got.est(o, d, ins) == ref.est(o, d, ins)
            assert got.data_ready(o, d) == ref.data_ready(o, d)
        d = rng.randrange(inst.m)
        start = None if rng.random() < 0.8 else ref.data_ready(o, d) + rng.uniform(0, ref.makespan + 1)
        assert got.commit(o, d, start=start, insertion=ins) == ref.commit(o, d, start=start, insertion=ins)
        assert got.start == ref.start and got.end == ref.end
    assert (got.retimed, got.replays) == (ref.retimed, ref.replays)
    assert got.order() == ref.order()
    sim = simulate(inst, ref.placement, ref.order())
    assert ref.start == sim.start and ref.makespan == sim.makespan


@pytest.mark.parametrize("method", ["heft", "heft_links", "dpos", "m_etf", "m_sct"])
@pytest.mark.parametrize("seed", range(8))
def test_frozen_list_schedulers_are_the_reference(monkeypatch, method, seed):
    """Whole list schedules under the policy (on from the start or after half n moves; 0, 2 or 9 replays): the
    compiled loops give the reference's schedules, and the claim is the simulation."""
    from dplace.registry import get_method

    inst = _seq(seed)
    monkeypatch.setattr(kernels, "LINK_MOVES", (0.0, 0.5)[seed % 2])
    monkeypatch.setattr(kernels, "LINK_REPLAYS", (0, 2, 9)[seed % 3])
    fn = get_method(method)
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    ref = fn(inst)
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    got = fn(inst)
    _same(ref, got)
    assert got.claimed_makespan == got.makespan  # claimed == simulated, exact


def _heft(inst, moves: float):
    """HEFT's compiled run with ``dplace.kernels.LINK_MOVES`` = ``moves`` (restored after)."""
    from dplace.kernels import lists as kl

    old = kernels.LINK_MOVES
    kernels.LINK_MOVES = moves
    try:
        return kl.run_heft(inst)
    finally:
        kernels.LINK_MOVES = old


def test_the_policy_bounds_the_moves_on_a_graph_with_long_cascades():
    """A generated sequential Transformer whose exact HEFT re-times over LINK_MOVES x n ops: under the default
    policy HEFT spends that budget and then re-times fewer ops than exact HEFT (LINK_MOVES < 0), and both final
    states are the simulation."""
    from dplace.formats.generate import transformer_training
    from dplace.kernels import lists as kl

    inst = transformer_training(3000, 4, comm="sequential")
    exact, policy = _heft(inst, -1.0), kl.run_heft(inst)
    cap = kernels.LINK_MOVES * inst.n
    assert exact.retimed > 1.2 * cap  # the graph has the cascades the policy is for
    assert cap <= policy.retimed < exact.retimed
    for st in (exact, policy):
        sim = simulate(inst, st.placement, st.order())
        assert st.makespan == sim.makespan and list(st.start) == sim.start


def test_the_policy_leaves_exact_schedulers_where_cascades_are_short():
    """On a graph whose exact re-timing stays below LINK_MOVES x n, the policy changes nothing: the same schedule
    as with it off, no replay of its own."""
    from dplace.kernels import lists as kl

    inst = _seq(7)
    exact = _heft(inst, -1.0)
    assert exact.retimed < kernels.LINK_MOVES * inst.n
    policy = kl.run_heft(inst)
    assert list(policy.start) == list(exact.start) and policy.order() == exact.order()
    assert policy.replays == exact.replays
