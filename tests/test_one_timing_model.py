"""One timing model: what a list scheduler plans (``ScheduleState``) is what ``simulate`` computes.

Every registered heuristic that reports a ``claimed_makespan`` must claim exactly the simulated
makespan of its own placement and order, in both comm modes, on graphs of 1k+ ops with per-pair links,
device speeds, colocation and pins; small hand-made sequential cases pin down the send rules."""
import random

import pytest

import dplace
from dplace import kernels
from dplace import Device, Edge, Instance, Link, Op, ScheduleState, simulate
from dplace.formats.generate import layered_dag
from dplace.registry import method_info, methods
from dplace.testing import random_instance

LIST_SCHEDULERS = ["heft", "heft_links", "m_etf", "m_sct", "dpos", "os_dpos", "m_etf_capped", "m_sct_capped",
                   "os_dpos_model_graph"]


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def _with_links_and_speeds(inst: Instance, seed: int) -> Instance:
    """``inst`` on devices of mixed speeds with a different link for every ordered device pair."""
    rng = random.Random(seed)
    devices = [Device(d.name, d.memory, rng.choice([1.0, 1.5, 2.0])) for d in inst.devices]
    pairs = {(a.name, b.name): Link(rng.choice([2.0, 5.0, 10.0]), rng.choice([1000.0, 12000.0, 25000.0]))
             for a in inst.devices for b in inst.devices if a is not b}
    return inst.replace(devices=devices, pairs=pairs)


def _heuristics() -> list[str]:
    return [m for m in methods() if method_info(m).kind in ("heuristic", "baseline")]


_BIG: dict[str, Instance] = {}


def _big(comm: str) -> Instance:
    """A 1k-op graph per mode: random (zero times, colocation, pins, one odd pair) in parallel mode,
    layered with a link per device pair and mixed speeds in sequential mode."""
    if comm not in _BIG:
        if comm == "parallel":
            _BIG[comm] = random_instance(random.Random(7), n_ops=1000, n_devices=3, comm=comm,
                                         edge_prob=3 / 1000, memory_slack=3.0)
        else:
            _BIG[comm] = _with_links_and_speeds(layered_dag(1000, 4, ccr=2.0, comm=comm, seed=3), seed=3)
    return _BIG[comm]


def test_every_list_scheduler_is_checked():
    """Every registered heuristic that claims a makespan is in LIST_SCHEDULERS (checked below on 1k ops)."""
    assert set(LIST_SCHEDULERS) <= set(_heuristics())
    for comm in ("parallel", "sequential"):
        inst = random_instance(random.Random(11), n_ops=60, n_devices=3, comm=comm, edge_prob=0.08, memory_slack=3.0)
        for method in _heuristics():
            res = dplace.solve(inst, method)
            assert (res.claimed_makespan is not None) == (method in LIST_SCHEDULERS), method
            if res.claimed_makespan is not None:
                assert _same(res.claimed_makespan, res.makespan), (comm, method)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
@pytest.mark.parametrize("method,opts", [(m, {}) for m in LIST_SCHEDULERS] + [("heft", {"insertion": False}),
                                                                               ("dpos", {"insertion": False})])
def test_claimed_equals_simulated_on_1k_op_graphs(comm, method, opts):
    inst = _big(comm)
    assert inst.n >= 1000
    res = dplace.solve(inst, method, **opts)
    assert _same(res.claimed_makespan, res.makespan), (inst.name, method, opts, res.claimed_makespan, res.makespan)


@pytest.mark.skipif(not kernels._numba_ok(), reason="numba not importable")
@pytest.mark.parametrize("method", LIST_SCHEDULERS)
def test_claimed_equals_simulated_on_1k_op_graphs_compiled_sequential(monkeypatch, method):
    """The same in sequential comm on the compiled state (dplace.kernels.seqstate)."""
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    inst = _big("sequential")
    res = dplace.solve(inst, method)
    assert _same(res.claimed_makespan, res.makespan), (inst.name, method, res.claimed_makespan, res.makespan)


def _random_list_schedule(inst: Instance, rng: random.Random, state=None) -> ScheduleState:
    """Commit the ops in a random topological order to random devices, with or without insertion."""
    st = ScheduleState(inst) if state is None else state
    indeg = [len(p) for p in inst.pred]
    ready = [o for o in range(inst.n) if indeg[o] == 0]
    while ready:
        o = ready.pop(rng.randrange(len(ready)))
        d = inst.pinned[o] if inst.pinned[o] >= 0 else rng.randrange(inst.m)
        ins = rng.random() < 0.5
        t = st.est(o, d, ins)
        assert t >= st.data_ready(o, d, ins) - 1e-9
        st.commit(o, d, insertion=ins)
        for e in inst.succ[o]:
            v = inst.edst[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return st


def _assert_state_is_simulation(inst: Instance, st: ScheduleState) -> None:
    sim = simulate(inst, st.placement, st.order())
    assert sim.start == st.start and sim.end == st.end, inst.name
    assert sim.makespan == st.makespan


@pytest.mark.parametrize("seed", range(300))
def test_random_list_schedules_are_the_simulation(seed):
    """Any commit sequence (random device, random insertion, zero times, ties) leaves the state equal,
    op by op, to the simulation of its placement and order."""
    rng = random.Random(seed)
    inst = random_instance(rng, n_ops=rng.randint(2, 14), comm="sequential" if seed % 3 else "parallel")
    _assert_state_is_simulation(inst, _random_list_schedule(inst, rng))


def test_replay_fallback_is_the_simulation(monkeypatch):
    """With no budget for incremental re-timing every knock-on effect is a full replay: same result."""
    monkeypatch.setattr(kernels, "CASCADE_BUDGET", 0)
    replays = 0
    for seed in range(60):
        rng = random.Random(1000 + seed)
        inst = random_instance(rng, n_ops=rng.randint(4, 14), comm="sequential")
        st = _random_list_schedule(inst, rng)
        _assert_state_is_simulation(inst, st)
        replays += st.replays
    assert replays > 0


def test_1k_op_random_list_schedule_sequential():
    rng = random.Random(5)
    inst = _with_links_and_speeds(layered_dag(1200, 3, ccr=3.0, comm="sequential", seed=5), seed=5)
    st = _random_list_schedule(inst, rng)
    _assert_state_is_simulation(inst, st)
    assert st.retimed > 0  # the late sends did delay committed work here
    if kernels._numba_ok():  # the compiled state, the same commits: the same simulation
        from dplace.kernels.seqstate import ArraySeqState

        got = _random_list_schedule(inst, random.Random(5), ArraySeqState(inst))
        _assert_state_is_simulation(inst, got)
        assert (got.start, got.end, got.retimed) == (st.start, st.end, st.retimed)


# ---------------------------------------------------------------- hand-made sequential cases
def _two(ops, edges, lat=1.0, bw=1.0):
    return Instance("t", [Device("a", 100), Device("b", 100)], ops, [Edge(*e) for e in edges],
                    link=Link(lat, bw), comm="sequential")


def test_late_consumer_sends_first_and_delays_committed_work():
    # p1 ends at 1, p2 at 3 on a; c2 (needs p2) is committed on b first: p2's send [3, 8], c2 at 8.
    inst = _two([Op("p1", 1), Op("p2", 2), Op("c1", 1), Op("c2", 1)], [("p1", "c1", 4), ("p2", "c2", 4)])
    st = ScheduleState(inst)
    st.commit(0, 0)
    st.commit(1, 0)
    st.commit(3, 1)
    assert (st.start[3], st.est(2, 1)) == (8.0, 9.0)
    # c1 on b: p1 finished first, so its send goes first, [1, 6]; p2's moves to [6, 11] and c2 to 11.
    st.commit(2, 1, insertion=True)
    assert (st.start[2], st.start[3]) == (6.0, 11.0)
    assert st.retimed == 1
    _assert_state_is_simulation(inst, st)


def test_a_larger_tensor_lengthens_the_send_for_every_consumer():
    inst = _two([Op("p", 1), Op("c1", 1), Op("c2", 1)], [("p", "c1", 2), ("p", "c2", 6)])
    st = ScheduleState(inst)
    st.commit(0, 0)
    st.commit(1, 1)
    assert st.start[1] == 1 + 1 + 2
    assert st.est(2, 1) == 1 + 1 + 6  # the one send, with the larger tensor
    st.commit(2, 1)
    assert (st.start[1], st.start[2]) == (8.0, 9.0)  # c1 now waits for the longer send too
    _assert_state_is_simulation(inst, st)


def test_sends_of_simultaneous_finishes_go_in_event_order():
    """x (10 µs) and then z (0 µs) on a both finish at 10; z starts only once x has finished, so x's
    send is issued first although z comes first topologically; the state follows the simulator."""
    inst = _two([Op("z", 0), Op("x", 10), Op("cz", 1), Op("cx", 1)], [("z", "cz", 4), ("x", "cx", 4)])
    st = ScheduleState(inst)
    st.commit(1, 0)
    st.commit(0, 0)  # after x on a
    st.commit(3, 1)
    st.commit(2, 1)
    sim = simulate(inst, st.placement, st.order())
    assert sim.transfers[0][0] == 1 and sim.transfers[0][3:5] == (10.0, 15.0)
    assert (st.start[3], st.start[2]) == (15.0, 20.0)
    _assert_state_is_simulation(inst, st)


def test_parallel_mode_never_retimes_and_est_is_the_start():
    inst = random_instance(random.Random(3), n_ops=200, n_devices=3, comm="parallel", edge_prob=0.03)
    rng = random.Random(3)
    st = ScheduleState(inst)
    indeg = [len(p) for p in inst.pred]
    ready = [o for o in range(inst.n) if indeg[o] == 0]
    while ready:
        o = ready.pop(rng.randrange(len(ready)))
        d = rng.randrange(inst.m)
        t = st.est(o, d, True)
        assert st.commit(o, d, insertion=True) == t
        for e in inst.succ[o]:
            indeg[inst.edst[e]] -= 1
            if indeg[inst.edst[e]] == 0:
                ready.append(inst.edst[e])
    assert st.retimed == 0
    _assert_state_is_simulation(inst, st)
