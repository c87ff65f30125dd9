"""The annealing stage: its compiled list schedule against the oracle's timing and against
``placement_order`` + ``simulate``; moves that keep memory, pins and colocation; the clock."""
import random

import pytest

from dplace.verify.check import check
from dplace.formulations.anneal import anneal_placement, applies, judged_order
from dplace.formulations.units import Units, placement_order
from dplace.kernels.anneal import list_makespan
from dplace.instance.model import Device, Edge, Instance, Op
from dplace.verify.oracle import time_schedule
from dplace.verify.fuzz import fuzz_instance
from dplace.result import make_result
from dplace.schedule.simulate import simulate


@pytest.fixture(scope="module")
def compiled():
    """The annealing kernel compiled (or loaded from numba's cache) before any clock is read."""
    from dplace.kernels.anneal import Annealer

    inst = _wide(random.Random(0), 2, 2, 2, memory=10**6)
    u = Units(inst)
    Annealer(inst, [0] * inst.n, u.members, u.allowed).step(1, 1.0, 1.0, 0)


def _parallel(inst: Instance) -> Instance:
    return inst if inst.comm == "parallel" else inst.replace(comm="parallel")


@pytest.mark.parametrize("seed", range(60))
def test_list_schedule_is_timed_as_the_oracle_times_its_order(seed):
    """Every feature of the model (fuzz instances: per-device times, per-pair links, pins, colocation,
    zero times, magnitudes 1e-3..1e10), parallel comm, random placements: each op starts at the earliest
    time its device order allows (the oracle, written from the model's text, times the same order the
    same way; :func:`judged_order` is that order, and dplace.simulate gives it the same makespan), and where
    no op takes zero time the makespan is placement_order's, simulated."""
    inst = _parallel(fuzz_instance(7000 + seed, n_ops=(3, 14)))
    rng = random.Random(seed)
    for _ in range(5):
        pl = [rng.choice(inst.allowed_devices(o)) for o in range(inst.n)]
        mk, start, end = list_makespan(inst, pl)
        orc = time_schedule(inst, pl, judged_order(inst, pl))
        tol = 1e-9 * max(1.0, mk)
        assert max(abs(a - b) for a, b in zip(orc.start, start)) <= tol
        assert mk == pytest.approx(orc.makespan, rel=1e-12, abs=1e-12)
        assert simulate(inst, pl, judged_order(inst, pl)).makespan == pytest.approx(mk, rel=1e-12, abs=1e-12)
        if all(inst.dur[o][pl[o]] > 0 for o in range(inst.n)):
            assert mk == pytest.approx(simulate(inst, pl, placement_order(inst, pl)).makespan, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(60))
def test_sequential_judge_is_the_simulation_of_its_order(seed):
    """Sequential comm: the judge is the simulation of the placement's rank order without insertion
    (``placement_order(..., insertion=False)``), as dplace.simulate and the oracle time that order."""
    inst = fuzz_instance(9000 + seed, n_ops=(3, 14)).replace(comm="sequential")
    rng = random.Random(seed)
    for _ in range(5):
        pl = [rng.choice(inst.allowed_devices(o)) for o in range(inst.n)]
        mk, start, end = list_makespan(inst, pl)
        od = placement_order(inst, pl, insertion=False)
        sim = simulate(inst, pl, od)
        assert mk == pytest.approx(sim.makespan, rel=1e-12, abs=1e-12)
        assert max(abs(a - b) for a, b in zip(sim.start, start)) <= 1e-9 * max(1.0, mk)
        assert time_schedule(inst, pl, od).makespan == pytest.approx(mk, rel=1e-12, abs=1e-12)
        assert simulate(inst, pl, judged_order(inst, pl, "fast")).makespan == pytest.approx(mk, rel=1e-12, abs=1e-12)


def _wide(rng: random.Random, layers: int, width: int, m: int, memory: int) -> Instance:
    """Layers of parallel ops, each op fed by two of the layer before; pairs of ops tied by colocation,
    one op pinned; transfers comparable to op times."""
    ops, edges = [], []
    for i in range(layers):
        for j in range(width):
            ops.append(Op(f"o{i}_{j}", float(rng.randint(1, 9)), memory=rng.randint(1, 4),
                          colocation=f"g{i}" if j < 2 else None, device="d0" if (i, j) == (0, 2) else None))
            if i:
                for k in rng.sample(range(width), 2):
                    edges.append(Edge(f"o{i - 1}_{k}", f"o{i}_{j}", float(rng.randint(0, 6))))
    return Instance("wide", [Device(f"d{x}", memory) for x in range(m)], ops, edges)


def test_anneal_keeps_memory_pins_and_colocation_and_never_gets_worse(compiled):
    rng = random.Random(3)
    inst = _wide(rng, 12, 5, 3, memory=70)
    units = Units(inst)
    pl0 = [0] * inst.n
    used = [0] * inst.m
    for ms, mem, al in zip(units.members, units.mem, units.allowed):  # a start that keeps memory
        d = min(al, key=lambda x: used[x])
        used[d] += mem
        for o in ms:
            pl0[o] = d
    assert max(used) <= 70
    m0 = list_makespan(inst, pl0)[0]
    pl, st = anneal_placement(inst, pl0, time_limit_s=1.0, seed=1, workers=2)
    assert st.start_makespan == m0 and st.steps > 0
    assert st.makespan == list_makespan(inst, pl)[0] <= m0
    # each chain's own best and steps: the best of them is the answer, their steps add up
    assert len(st.per_chain) == 2 and min(b for b, _ in st.per_chain) == st.makespan
    assert sum(n for _, n in st.per_chain) == st.steps and all(b <= m0 for b, _ in st.per_chain)
    assert st.makespan < m0  # a greedy balanced start is far from the best on this graph
    res = make_result(inst, "anneal", pl, placement_order(inst, pl))
    assert res.memory_ok and check(inst, res).ok
    assert pl[inst.op_index["o0_2"]] == 0
    for g in inst.groups:
        assert len({pl[o] for o in g}) == 1


@pytest.mark.parametrize("p_relabel", [0.0, 1.0])
def test_a_start_that_splits_colocation_comes_back_whole(compiled, monkeypatch, p_relabel):
    """A start that splits colocation groups (a caller's mistake, or a start built op by op): each unit is taken
    where its first op is before the walk, so the answer keeps every group whole however the moves are drawn
    (relabel moves only, ``RELABEL_P`` 1, leave a unit they do not touch as it is)."""
    from dplace.formulations import anneal

    monkeypatch.setattr(anneal, "RELABEL_P", p_relabel)
    inst = _wide(random.Random(7), 12, 4, 3, memory=10**6)
    spread = [o % inst.m for o in range(inst.n)]
    spread[inst.op_index["o0_2"]] = 0  # its pin
    assert any(len({spread[o] for o in g}) > 1 for g in inst.groups)
    pl, st = anneal_placement(inst, spread, time_limit_s=0.5, seed=1, workers=1)
    assert st.steps > 0
    assert all(len({pl[o] for o in g}) == 1 for g in inst.groups)
    assert check(inst, make_result(inst, "anneal", pl, placement_order(inst, pl))).ok


def test_a_start_off_its_pin_comes_back_on_it(compiled):
    """A start that puts a pinned op elsewhere: the annealer takes its unit to an allowed device before the walk, so
    the answer keeps the pin even when no move touches that unit (a walk of zero temperature from a start that
    is already good everywhere else)."""
    inst = _wide(random.Random(7), 12, 4, 3, memory=10**6)
    pin = inst.op_index["o0_2"]  # pinned to d0
    start = [1] * inst.n
    from dplace.kernels.anneal import Annealer

    u = Units(inst)
    assert Annealer(inst, start, u.members, u.allowed).pl[pin] == 0  # before any step
    pl, st = anneal_placement(inst, start, time_limit_s=0.3, seed=1, workers=1, t_hi=1e-12, t_lo=1e-12)
    assert st.steps > 0 and pl[pin] == 0
    assert check(inst, make_result(inst, "anneal", pl, placement_order(inst, pl))).ok


def test_anneal_keeps_its_clock_and_stops_when_asked(compiled):
    """On an injected clock (a tick per reading): it stops when its budget is spent, whatever the
    machine's speed; and when asked to stop, long before its budget."""
    import itertools

    from dplace.budget import Budget

    inst = _wide(random.Random(4), 30, 6, 4, memory=10**6)
    pl0 = [0] * inst.n
    ticks = itertools.count()
    clock = lambda: 0.01 * next(ticks)  # noqa: E731 - 100 readings make a second
    budget = Budget(0.5, clock=clock)
    _, st = anneal_placement(inst, pl0, workers=2, budget=budget)
    assert st.stopped == "time limit" and budget.expired() and st.steps > 0
    asked = itertools.count()
    _, st = anneal_placement(inst, pl0, budget=Budget(3600.0, clock=clock), should_stop=lambda: next(asked) >= 5)
    assert st.stopped == "interrupted"


def test_applies_in_both_comm_modes_with_the_kernels(monkeypatch):
    inst = _wide(random.Random(5), 3, 3, 2, memory=10**6)
    assert applies(inst)
    assert applies(inst.replace(comm="sequential"))
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    assert not applies(inst)


def test_portfolio_anneals_in_sequential_comm(compiled):
    import dplace

    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6).replace(comm="sequential")
    res = dplace.solve(inst, "portfolio", time_limit_s=6.0)
    assert check(inst, res).ok
    assert res.extra["anneal"]["steps"] > 0
    # the answer's placement was ordered once more at the end (placement_order, judge links): the answer
    # is the fastest of those orders, as simulated
    fo = res.extra["final_order"]
    assert set(fo["makespans"]) == {"lns", "placement_order", "links"}
    assert res.makespan == pytest.approx(min(fo["makespans"].values()), rel=1e-12)
    assert res.makespan == pytest.approx(fo["makespans"][fo["kept"]], rel=1e-12)


def test_portfolio_anneals_and_its_answer_is_checked(compiled):
    import dplace

    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6)  # 100 ops: above portfolio's K
    res = dplace.solve(inst, "portfolio", time_limit_s=6.0)
    assert check(inst, res).ok and res.memory_ok
    an = res.extra["anneal"]
    assert an["steps"] > 0 and an["makespan"] <= an["start_makespan"]
    assert res.makespan <= res.extra["starts"]["anneal"] * (1 + 1e-12)


def test_portfolio_does_not_compile_the_kernel_in_a_short_budget(monkeypatch):
    """Compiling the kernel takes ~10 s holding the GIL: with less than 30 s for the stage and nothing
    compiled, portfolio skips it (and says so) instead of running past its limit."""
    import dplace
    from dplace.formulations import anneal

    monkeypatch.setattr(anneal, "kernel_ready", lambda: False)
    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6)
    res = dplace.solve(inst, "portfolio", time_limit_s=8.0)
    assert check(inst, res).ok and "skipped" in res.extra["anneal"]


def test_kernel_ready_once_compiled(compiled):
    from dplace.formulations.anneal import kernel_ready

    assert kernel_ready()


def test_chains_anneal_on_a_ladder_of_temperatures(monkeypatch):
    """With k chains, chain i runs at ``ladder ** (i / (k - 1))`` times the temperatures of chain 0 (no
    one temperature suits every graph; formulations/anneal.py's docstring has the figures)."""
    from dplace.kernels import anneal as ka

    seen: dict[int, list[float]] = {}

    class Recorder:
        def __init__(self, inst, start, members, allowed, *blocks):
            self.start_value, self.steps, self.accepted = 1.0, 0, 0
            self.result = (1.0, __import__("numpy").array(start))
            self.ins = [0, 0.0]  # Annealer's [placements judged with insertion, ...]

        def step(self, iters, t0, t1, seed):
            seen.setdefault(id(self), []).append(t0)

    monkeypatch.setattr(ka, "Annealer", Recorder)
    inst = _wide(random.Random(5), 6, 3, 2, memory=10**6)
    anneal_placement(inst, [0] * inst.n, time_limit_s=0.3, workers=3, t_hi=0.01, t_lo=0.01, ladder=0.25)
    firsts = sorted((v[0] for v in seen.values()), reverse=True)
    assert len(firsts) == 3
    assert firsts[1] / firsts[0] == pytest.approx(0.5) and firsts[2] / firsts[0] == pytest.approx(0.25)
    # left None, the ladder runs from the comm mode's own temperatures (sequential: SEQUENTIAL_T) down
    from dplace.formulations.anneal import SEQUENTIAL_T

    seq = inst.replace(comm="sequential")
    pl0 = [0] * seq.n
    m0 = simulate(seq, pl0, placement_order(seq, pl0, insertion=False)).makespan
    seen.clear()
    anneal_placement(seq, pl0, time_limit_s=0.3, workers=2)
    firsts = sorted((v[0] for v in seen.values()), reverse=True)
    # a chain's first temperature is its own hi cooled by the share of the time gone when its first chunk
    # ran: within [hi * t_lo / t_hi, hi] whatever the load (chain 1's hi is 0.1 of chain 0's; the two ranges
    # are disjoint, so the ladder is what puts each first temperature in its range)
    hi, lo = SEQUENTIAL_T[0] * m0, SEQUENTIAL_T[1] * m0
    assert len(firsts) == 2
    assert lo * (1 - 1e-9) <= firsts[0] <= hi * (1 + 1e-9)
    assert 0.1 * lo * (1 - 1e-9) <= firsts[1] <= 0.1 * hi * (1 + 1e-9)


def test_sequential_comm_anneals_at_its_own_temperatures(compiled, monkeypatch):
    """Temperatures: 0.003 -> 1e-4 of the start's makespan in parallel comm, ``SEQUENTIAL_T`` in sequential
    comm (the setting swept on the sequential Transformers), unless given."""
    from dplace.budget import Budget
    from dplace.formulations.anneal import SEQUENTIAL_T
    from dplace.kernels.anneal import Annealer

    seen = []
    step = Annealer.step

    def spy(self, iters, hi, lo, seed):
        seen.append((hi, lo))
        return step(self, iters, hi, lo, seed)

    monkeypatch.setattr(Annealer, "step", spy)
    inst = _wide(random.Random(6), 6, 4, 3, memory=10**6)
    for comm, (hot, cold) in (("parallel", (0.003, 1e-4)), ("sequential", SEQUENTIAL_T), ("given", (0.01, 0.001))):
        one = inst.replace(comm="sequential" if comm != "parallel" else "parallel")
        pl0 = [0] * one.n
        m0 = simulate(one, pl0, placement_order(one, pl0, insertion=one.comm != "sequential")).makespan
        seen.clear()
        kw = {"t_hi": hot, "t_lo": cold} if comm == "given" else {}
        anneal_placement(one, pl0, budget=Budget(0.3), workers=1, **kw)
        assert seen and seen[0][0] > (hot * cold) ** 0.5 * m0  # the first chunk near t_hi (time has passed)
        assert all(cold * m0 * (1 - 1e-9) <= lo <= hi * (1 + 1e-9) <= hot * m0 * (1 + 1e-9) for hi, lo in seen)
    assert SEQUENTIAL_T[0] < 0.003


def _two_branches(chain: int = 6, comm: str = "parallel", branches: str = "ab") -> Instance:
    """A source, two branches of ``chain`` ops with heavy tensors inside them and light ones at their
    ends, a sink; every forward op with a backward op it is colocated with (a training graph's layers)."""
    ops = [Op("s", 1.0), Op("t", 1.0)]
    edges = []
    for br in branches:
        for i in range(chain):
            ops.append(Op(f"{br}{i}", 30.0, memory=1, colocation=f"{br}{i}"))
            ops.append(Op(f"{br}{i}_bw", 30.0, memory=1, colocation=f"{br}{i}"))
            edges.append(Edge(f"{br}{i}", f"{br}{i}_bw", 0.0))
            if i:
                edges.append(Edge(f"{br}{i - 1}", f"{br}{i}", 1e7))
                edges.append(Edge(f"{br}{i}_bw", f"{br}{i - 1}_bw", 1e7))
        edges += [Edge("s", f"{br}0", 1.0), Edge(f"{br}{chain - 1}", "t", 1.0), Edge("t", f"{br}{chain - 1}_bw", 1.0)]
    return Instance("branches", [Device("d0", 10**6), Device("d1", 10**6)], ops, edges, comm=comm)


def test_units_chains_are_branches_forward_and_backward():
    """A training graph's branch (forward ops, their colocated backward ops, edges both ways) is one
    chain of units; where units fork or join there is none."""
    inst = _two_branches(5)
    u = Units(inst)
    chains = u.chains()
    assert len(chains) == 2
    for c, br in zip(sorted(chains, key=lambda c: inst.ops[u.members[c[0]][0]].id), "ab"):
        assert [sorted(inst.ops[o].id for o in u.members[x]) for x in c] == [[f"{br}{i}", f"{br}{i}_bw"]
                                                                               for i in range(5)]
    assert Units(_wide(random.Random(1), 4, 4, 2, memory=99)).chains() == []


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_block_moves_cross_what_single_moves_cannot(compiled, comm):
    """All on one device, the two branches run one after the other; moving one op of a branch to the
    other device costs two heavy transfers, so a search of single moves that accepts nothing worse stays
    put, while one move of a whole branch halves the makespan. Both keep colocation."""
    inst = _two_branches(6, comm)
    pl0 = [0] * inst.n
    m0 = list_makespan(inst, pl0)[0]
    kw = dict(time_limit_s=0.3, seed=2, workers=1, t_hi=1e-12, t_lo=1e-12)
    pl, st = anneal_placement(inst, pl0, p_block=0.0, **kw)
    assert st.makespan == m0 and st.steps > 0
    pl, st = anneal_placement(inst, pl0, p_block=0.5, **kw)
    assert st.makespan == list_makespan(inst, pl)[0] < 0.6 * m0
    res = make_result(inst, "anneal", pl, judged_order(inst, pl))
    assert res.makespan == pytest.approx(st.makespan) and check(inst, res).ok
    for g in inst.groups:
        assert len({pl[o] for o in g}) == 1


def test_block_moves_keep_memory_and_pins(compiled):
    """Only block moves (``p_block`` 1): a branch never lands on a device without room for it, nor moves
    a pinned op."""
    inst = _two_branches(6)
    import dataclasses

    ops = [dataclasses.replace(op, device="d0") if op.id == "b3" else op for op in inst.ops]
    inst = inst.replace(ops=ops, devices=[Device("d0", 10**6), Device("d1", 13)])
    pl, st = anneal_placement(inst, [0] * inst.n, time_limit_s=0.3, seed=1, workers=2, p_block=1.0)
    assert st.steps > 0 and st.accepted > 0
    res = make_result(inst, "anneal", pl, judged_order(inst, pl))
    assert res.memory_ok and check(inst, res).ok and pl[inst.op_index["b3"]] == 0



def test_late_gain_is_zero_once_the_best_stops_falling(compiled):
    """``late_gain``: how much the best fell in the last quarter of the run; on a graph whose best the
    annealing finds in a few ms, none."""
    inst = _two_branches(6)
    pl, st = anneal_placement(inst, [0] * inst.n, time_limit_s=0.6, seed=2, workers=1, p_block=0.5)
    assert st.makespan < 0.6 * st.start_makespan and st.late_gain == 0.0


def test_portfolio_anneals_on_while_the_annealing_still_improves(compiled, monkeypatch):
    """While a run's best still fell by ``LATE_GAIN`` in its last quarter, portfolio anneals on from its
    best at the cold end (t_hi = t_lo = the comm mode's cold temperature) instead of the LNS; once it
    stops improving, no more runs."""
    from dplace.budget import Budget
    from dplace.formulations import anneal, large

    calls = []
    real = anneal.anneal_placement
    gain = 2 * large.LATE_GAIN

    def fake(inst, placement, **kw):
        pl, st = real(inst, placement, **kw)
        calls.append((kw.get("t_hi"), kw.get("t_lo")))
        st.late_gain = gain if len(calls) < 3 else 0.0
        return pl, st

    monkeypatch.setattr(anneal, "anneal_placement", fake)
    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6)
    starts = {"single": make_result(inst, "single", [0] * inst.n, placement_order(inst, [0] * inst.n))}
    # 8 s for the first run, then 4 s and 2 s while it still improves (half of what is left each time)
    res = large.portfolio_large(inst, starts, budget=Budget(16.0), bound_share=0, anneal_share=0.5)
    assert check(inst, res).ok
    cold = anneal.temperatures(inst)[1]
    assert calls == [(None, None), (cold, cold), (cold, cold)]
    assert len(res.extra["anneal"]["more"]) == 2
    calls.clear()
    monkeypatch.setattr(large, "LATE_GAIN", 1.0)  # nothing gains that much: one run
    res = large.portfolio_large(inst, starts, budget=Budget(6.0), bound_share=0, anneal_share=0.5)
    assert calls == [(None, None)] and res.extra["anneal"]["more"] == []


def test_sequential_portfolio_anneals_in_parallel_comm_first(compiled, monkeypatch):
    """Sequential comm: ``PARALLEL_FIRST`` of the annealing's time anneals the same placement in parallel
    comm; its sequential simulation is one more start ("anneal_parallel"), and the sequential annealing
    begins from whichever placement its own judge finds faster. Parallel comm, or ``PARALLEL_FIRST`` 0: no
    parallel run."""
    from dplace.budget import Budget
    from dplace.formulations import anneal, large

    calls = []
    real = anneal.anneal_placement

    def spy(inst, placement, **kw):
        pl, st = real(inst, placement, **kw)
        calls.append((inst.comm, list(placement), pl))
        return pl, st

    monkeypatch.setattr(anneal, "anneal_placement", spy)
    monkeypatch.setattr(large, "PAR_FIRST_SNAPSHOTS", False)  # the run's last best begins (the test below: on)
    seq = _wide(random.Random(6), 20, 5, 3, memory=10**6).replace(comm="sequential")
    one = [0] * seq.n
    starts = {"single": make_result(seq, "single", one, placement_order(seq, one))}
    res = large.portfolio_large(seq, starts, budget=Budget(5.0), bound_share=0, anneal_share=0.5)
    assert check(seq, res).ok
    assert [c[0] for c in calls][:2] == ["parallel", "sequential"] and calls[0][1] == one
    ap = res.extra["anneal_parallel"]
    ppl = calls[0][2]
    assert ap["steps"] > 0 and res.extra["starts"]["anneal_parallel"] >= res.makespan * (1 - 1e-12)
    judged = {n: simulate(seq, p, judged_order(seq, p)).makespan for n, p in (("start", one), ("parallel", ppl))}
    assert ap["judged"] == pytest.approx(judged)
    assert calls[1][1] == (ppl if judged["parallel"] < judged["start"] else one)
    for inst, share in ((seq.replace(comm="parallel"), large.PARALLEL_FIRST), (seq, 0.0)):
        calls.clear()
        monkeypatch.setattr(large, "PARALLEL_FIRST", share)
        starts = {"single": make_result(inst, "single", one, placement_order(inst, one))}
        res = large.portfolio_large(inst, starts, budget=Budget(5.0), bound_share=0, anneal_share=0.5)
        assert [c[0] for c in calls][:1] == [inst.comm] and "anneal_parallel" not in res.extra


def test_anneal_records_the_best_placements_it_went_through(compiled):
    """``snapshots``: the best placement of all chains each time it falls, at most once per ``snapshot_every``
    seconds, with its judged makespan (the list schedule's) and falling values."""
    inst = _wide(random.Random(3), 20, 5, 3, memory=10**6)
    snaps: list = []
    pl, st = anneal_placement(inst, [0] * inst.n, time_limit_s=1.5, workers=2, snapshots=snaps, snapshot_every=0.1)
    assert len(snaps) >= 2
    for (t0, v0, _), (t1, v1, _) in zip(snaps, snaps[1:]):
        assert t1 - t0 >= 0.1 and v1 < v0
    for _, v, p in snaps:
        assert list_makespan(inst, p)[0] == pytest.approx(v)
    assert snaps[-1][1] >= st.makespan - 1e-9


def test_sequential_annealing_begins_from_the_best_placement_the_parallel_run_went_through(compiled, monkeypatch):
    """Sequential comm (``large.PAR_FIRST_SNAPSHOTS``, off by default): the placements the parallel-comm annealing went through
    are timed in sequential comm, and the sequential annealing begins from the best of them when it is faster
    there than that annealing's last best. Here a placement made faster in sequential comm (a sequential
    annealing's) is slipped among them: it is the one the sequential annealing begins from. Off: not asked for."""
    from dplace.budget import Budget
    from dplace.formulations import anneal, large

    seq = _wide(random.Random(6), 20, 5, 3, memory=10**6).replace(comm="sequential")
    one = [0] * seq.n
    good, _ = anneal.anneal_placement(seq, one, time_limit_s=1.0, workers=1)
    real = anneal.anneal_placement
    calls = []

    def spy(inst, placement, **kw):
        pl, st = real(inst, placement, **kw)
        if inst.comm == "parallel" and kw.get("snapshots") is not None:
            kw["snapshots"].append((99.0, 0.0, list(good)))
        calls.append((inst.comm, list(placement), pl, kw.get("snapshots")))
        return pl, st

    monkeypatch.setattr(anneal, "anneal_placement", spy)
    monkeypatch.setattr(large, "LATE_GAIN", 1.0)
    monkeypatch.setattr(large, "PAR_FIRST_SNAPSHOTS", True)  # off by default (no gain measured)
    starts = {"single": make_result(seq, "single", one, placement_order(seq, one))}
    res = large.portfolio_large(seq, starts, budget=Budget(5.0), bound_share=0, anneal_share=0.5)
    assert check(seq, res).ok
    ppl = calls[0][2]
    judge = {n: simulate(seq, p, judged_order(seq, p)).makespan for n, p in (("good", good), ("last", ppl))}
    assert judge["good"] < judge["last"]  # the case this is for
    snap = res.extra["anneal_parallel"]["snapshots"]
    assert snap["judged"] >= 1 and snap["taken"] is True
    assert calls[1][0] == "sequential" and calls[1][1] == list(good)
    assert res.extra["anneal_parallel"]["judged"]["parallel"] == pytest.approx(judge["good"])
    calls.clear()
    monkeypatch.setattr(large, "PAR_FIRST_SNAPSHOTS", False)
    res = large.portfolio_large(seq, starts, budget=Budget(5.0), bound_share=0, anneal_share=0.5)
    assert calls[0][3] is None and res.extra["anneal_parallel"]["snapshots"] is None


def test_go_with_best_moves_a_chain_behind_to_the_best_placement(compiled):
    """A chain whose best is above another chain's goes on from that chain's best: its placement, its
    devices' memory (as recounted from the placement) and its current value become that placement's; the
    chain ahead does not move; nothing moves before the chain has judged its start."""
    import numpy as np

    from dplace.formulations.anneal import _go_with_best
    from dplace.kernels.anneal import Annealer

    inst = _wide(random.Random(5), 8, 4, 3, memory=10**6)
    u = Units(inst)
    good = [0] * inst.n
    for ms, al in zip(u.members, u.allowed):
        d = al[len(ms) % len(al)]
        for o in ms:
            good[o] = d
    a, b = Annealer(inst, [0] * inst.n, u.members, u.allowed), Annealer(inst, good, u.members, u.allowed)
    assert _go_with_best(a, [a, b]) == 0  # a has judged nothing yet
    a.step(1, 0.0, 0.0, 0)
    b.step(1, 0.0, 0.0, 0)
    (va, _), (vb, pb) = a.result, b.result
    ahead, behind = (a, b) if va < vb else (b, a)
    best_pl = ahead.result[1].copy()
    assert va != vb and _go_with_best(ahead, [a, b]) == 0
    assert _go_with_best(behind, [a, b]) == 1
    assert np.array_equal(behind.pl, best_pl) and behind.cur == ahead.result[0]
    used = [0] * inst.m
    for ms, mem in zip(u.members, u.mem):
        used[int(behind.pl[ms[0]])] += mem
    assert list(behind.used) == used
    assert list_makespan(inst, list(behind.pl))[0] == behind.cur  # the value it goes on with is the judge's


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_synced_chains_keep_memory_and_never_get_worse(compiled, comm):
    """With sync, chains meet at the best (``syncs`` counts the moves) and every rule still holds: memory,
    pins, colocation, never worse than the start, the answer the best chain's. Sequential comm (portfolio's
    ``SEQUENTIAL_SYNC``): the value is the judge's, the simulation of :func:`judged_order`'s order."""
    rng = random.Random(3)
    inst = _wide(rng, 12, 5, 3, memory=70).replace(comm=comm)
    units = Units(inst)
    pl0 = [0] * inst.n
    used = [0] * inst.m
    for ms, mem, al in zip(units.members, units.mem, units.allowed):
        d = min(al, key=lambda x: used[x])
        used[d] += mem
        for o in ms:
            pl0[o] = d
    def judged(p):  # the judge's value: sequential comm's is the simulation of its own order
        if comm == "sequential":
            return simulate(inst, p, judged_order(inst, p)).makespan
        return list_makespan(inst, p)[0]

    m0 = judged(pl0)
    pl, st = anneal_placement(inst, pl0, time_limit_s=1.0, seed=1, workers=2, sync=3)
    assert 0 <= st.syncs <= 3 * 2
    assert st.makespan == pytest.approx(judged(pl), rel=1e-12) and st.makespan <= m0 * (1 + 1e-12)
    assert min(b for b, _ in st.per_chain) == st.makespan
    res = make_result(inst, "anneal", pl, placement_order(inst, pl))
    assert res.memory_ok and check(inst, res).ok
    assert pl[inst.op_index["o0_2"]] == 0
    for g in inst.groups:
        assert len({pl[o] for o in g}) == 1


def test_a_second_chain_begins_from_another_placement(compiled, monkeypatch):
    """``others``: chain 1 is made from the placement given there (chain 0 and any further chain from the
    start), and since a chain never returns worse than its own start, the answer is no worse than that
    placement's value even from a start with every op on one device."""
    from dplace.kernels import anneal as K

    made = []
    real = K.Annealer.__init__

    def spy(self, inst, placement, *a, **k):
        made.append([int(d) for d in placement])
        real(self, inst, placement, *a, **k)

    monkeypatch.setattr(K.Annealer, "__init__", spy)
    inst = _wide(random.Random(11), 40, 6, 4, memory=10**6)
    units = Units(inst)
    pl0 = [0] * inst.n
    spread = [0] * inst.n
    for i, ms in enumerate(units.members):
        for o in ms:
            spread[o] = i % inst.m
    m0, m1 = list_makespan(inst, pl0)[0], list_makespan(inst, spread)[0]
    assert m1 < 0.7 * m0
    pl, st = anneal_placement(inst, pl0, time_limit_s=0.5, seed=0, workers=3, others=[spread])
    assert made == [pl0, spread, pl0]
    assert st.makespan == list_makespan(inst, pl)[0] <= m1
    assert len(st.per_chain) == 3 and st.per_chain[1][0] <= m1
    made.clear()
    anneal_placement(inst, pl0, time_limit_s=0.05, seed=0, workers=2)
    assert made == [pl0, pl0]


def test_portfolio_starts_its_second_chain_from_the_stitched_placement(compiled, monkeypatch):
    """Parallel comm, two chains: the second begins from the segments' stitched placement when there is one
    and it is not the best start (``large.STITCH_CHAIN``); off, no chain gets another start."""
    from dplace.budget import Budget
    from dplace.formulations import anneal, large

    got = []
    real = anneal.anneal_placement

    def spy(inst, placement, **kw):
        got.append([list(o) for o in kw.get("others", ())])
        return real(inst, placement, **kw)

    monkeypatch.setattr(anneal, "anneal_placement", spy)
    monkeypatch.setattr(large, "LATE_GAIN", 1.0)  # one annealing run
    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6)
    heft = __import__("dplace").solve(inst, "heft")
    starts = {"heft": heft}
    res = large.portfolio_large(inst, starts, budget=Budget(8.0), bound_share=0.4, anneal_share=0.5,
                                options={"workers": 2})
    assert check(inst, res).ok
    tried = res.extra["starts"]
    assert "stitch" in tried  # the segment bound solved pieces and they were stitched
    others_expected = tried["stitch"] > min(v for k, v in tried.items() if k not in ("stitch", "anneal"))
    # on this graph (seed 6) the stitch (328 µs) is not the best start (heft 303): the case the option is for
    assert others_expected and res.extra["anneal"]["stitch_chain"] is True
    assert len(got) == 1 and len(got[0]) == int(others_expected)
    if others_expected:
        assert got[0][0] != list(heft.placement)
    got.clear()
    monkeypatch.setattr(large, "STITCH_CHAIN", False)
    res = large.portfolio_large(inst, starts, budget=Budget(8.0), bound_share=0.4, anneal_share=0.5,
                                options={"workers": 2})
    assert got == [[]] and res.extra["anneal"]["stitch_chain"] is False


def test_sequential_portfolio_anneals_in_parallel_comm_as_the_parallel_path_does(compiled, monkeypatch):
    """Sequential comm: the parallel-comm annealing that comes first (``large._parallel_first``) runs its chains
    synchronised, the second from the stitched placement when it is not the best start, as the parallel path's
    annealing does (``large.PAR_FIRST_AS_PARALLEL``); the sequential annealing after it begins every chain from the
    one start, and synchronises them as often as ``large.SEQUENTIAL_SYNC`` says (off by default, on here). Off: one
    unsynchronised annealing from the best start, and the sequential chains unsynchronised with 0."""
    from dplace.budget import Budget
    from dplace.formulations import anneal, large

    got = []
    real = anneal.anneal_placement

    def spy(inst, placement, **kw):
        got.append((inst.comm, kw.get("sync", 0), [list(o) for o in kw.get("others", ())]))
        return real(inst, placement, **kw)

    monkeypatch.setattr(anneal, "anneal_placement", spy)
    monkeypatch.setattr(large, "LATE_GAIN", 1.0)  # one annealing run in each comm mode
    monkeypatch.setattr(large, "SEQUENTIAL_SYNC", 3)  # off by default: on here, to see it passed
    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6).replace(comm="sequential")
    starts = {"heft": __import__("dplace").solve(inst, "heft")}
    res = large.portfolio_large(inst, starts, budget=Budget(8.0), bound_share=0.4, anneal_share=0.5,
                                options={"workers": 2})
    assert check(inst, res).ok
    tried = res.extra["starts"]
    assert "stitch" in tried and tried["stitch"] > tried["heft"]  # the case the option is for
    assert [(c, s, len(o)) for c, s, o in got] == [("parallel", anneal.SYNC, 1), ("sequential", 3, 0)]
    assert res.extra["anneal"]["syncs"] <= 3 * 2
    assert got[0][2][0] != list(starts["heft"].placement)
    assert res.extra["anneal_parallel"]["stitch_chain"] is True
    got.clear()
    monkeypatch.setattr(large, "PAR_FIRST_AS_PARALLEL", False)
    monkeypatch.setattr(large, "SEQUENTIAL_SYNC", 0)
    res = large.portfolio_large(inst, starts, budget=Budget(8.0), bound_share=0.4, anneal_share=0.5,
                                options={"workers": 2})
    assert got == [("parallel", 0, []), ("sequential", 0, [])] and res.extra["anneal"]["syncs"] == 0
    assert res.extra["anneal_parallel"]["stitch_chain"] is False


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_portfolio_reports_an_incumbent_that_only_falls_and_ends_at_the_answer(compiled, monkeypatch, comm):
    """The large-graph portfolio reports its best as it goes (the starts, the parallel-comm annealing's placement
    timed in sequential comm, each annealing's best as it falls, the LNS's kept moves, the final orders): never a
    value above one reported before (the LNS after a kick, the parallel-comm annealing's own values, are not the
    incumbent), and the last is the answer's makespan."""
    import io

    from dplace import progress
    from dplace.budget import Budget
    from dplace.formulations import large

    inst = _wide(random.Random(6), 20, 5, 3, memory=10**6).replace(comm=comm)
    starts = {"heft": __import__("dplace").solve(inst, "heft")}
    rep = progress.Reporter("solve portfolio", mode="plain", stream=io.StringIO(), delay_s=1e9)
    seen = []
    real = rep.update

    def spy(**kw):
        if kw.get("incumbent") is not None:
            seen.append(kw["incumbent"])
        real(**kw)

    monkeypatch.setattr(rep, "update", spy)
    progress._current = rep
    try:
        res = large.portfolio_large(inst, starts, budget=Budget(6.0), bound_share=0.3, anneal_share=0.5,
                                    options={"workers": 2})
    finally:
        progress._current = None
    assert check(inst, res).ok
    assert len(seen) >= 2 and all(b <= a for a, b in zip(seen, seen[1:]))
    assert seen[0] <= starts["heft"].makespan and seen[-1] == pytest.approx(res.makespan, rel=1e-12)
