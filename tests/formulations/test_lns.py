"""Group-move LNS (formulations/lns.py): never worse than its start, keeps colocation and memory, finds the
move a hand-made instance needs, and is what ``portfolio`` runs on graphs above K ops."""
import pytest

from dplace.verify.check import check
from dplace.formulations.lns import critical_path_of, improve
from dplace.formulations.units import placement_order
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.registry import solve
from dplace.result import make_result
from dplace.schedule.simulate import simulate


def _two_chains(mem=10, cap=1000):
    """Two independent chains of 5 ops (each chain one colocation group) on 2 devices."""
    ops, edges = [], []
    for c in "ab":
        for i in range(5):
            ops.append(Op(f"{c}{i}", 10, mem, colocation=f"g{c}"))
            if i:
                edges.append(Edge(f"{c}{i - 1}", f"{c}{i}", 100.0))
    return Instance("chains", [Device("d0", cap), Device("d1", cap)], ops, edges, link=Link(1.0, 1.0))


def test_improve_moves_a_whole_group_off_the_busy_device():
    inst = _two_chains()
    pl = [0] * inst.n  # everything on d0: 100 µs; optimum 50 (one chain per device)
    new_pl, od, st = improve(inst, pl, None, time_limit_s=5.0, target=50.0)
    res = make_result(inst, "lns", new_pl, od)
    assert check(inst, res).ok
    assert res.makespan == pytest.approx(50.0)
    assert st.moves_kept >= 1 and st.makespan == pytest.approx(50.0)
    for g in inst.groups:
        assert len({new_pl[o] for o in g}) == 1


def test_improve_repairs_memory_by_moving_units_off_the_path():
    # d1 is full of a filler op that is off the critical path: moving chain b there needs it moved out
    inst0 = _two_chains(mem=10)
    ops = list(inst0.ops) + [Op("filler", 1, 60)]
    devices = [Device("d0", 200), Device("d1", 65), Device("d2", 200)]
    inst = Instance("repair", devices, ops, list(inst0.edges), link=Link(1.0, 1.0))
    pl = [0] * 10 + [1]
    start = simulate(inst, pl)
    new_pl, od, st = improve(inst, pl, None, time_limit_s=5.0, target=51.0)
    res = make_result(inst, "lns", new_pl, od)
    assert res.memory_ok and check(inst, res).ok
    assert res.makespan < start.makespan
    assert st.repairs >= 1


def test_improve_never_worse_than_start_on_a_generated_graph():
    from dplace.formats.generate import transformer_training

    inst = transformer_training(400, 3, seed=1)
    h = solve(inst, "heft")
    pl, od, st = improve(inst, h.placement, h.order, time_limit_s=2.0, seed=3)
    res = make_result(inst, "lns", pl, od)
    assert check(inst, res).ok
    assert res.memory_ok
    assert res.makespan <= h.makespan + 1e-9
    assert st.makespan == pytest.approx(res.makespan)


def test_placement_order_and_critical_path_are_consistent():
    from dplace.formats.generate import transformer_training

    inst = transformer_training(300, 2, seed=0)
    h = solve(inst, "heft")
    od = placement_order(inst, h.placement)
    sch = simulate(inst, h.placement, od)
    path = critical_path_of(inst, sch, od)
    o, _ = path[0]
    assert sch.end[o] == pytest.approx(sch.makespan)
    assert path[-1][1] == -1 and sch.start[path[-1][0]] == pytest.approx(0.0)
    for (a, why), (b, _) in zip(path, path[1:]):
        assert why == b and sch.end[b] <= sch.start[a] + 1e-9


@pytest.mark.solver
def test_portfolio_runs_the_lns_stage_on_large_graphs():
    from dplace.formats.generate import transformer_training

    inst = transformer_training(300, 2, seed=2)
    res = solve(inst, "portfolio", time_limit_s=6, K=20, coarse_share=0.0)
    assert check(inst, res).ok and res.memory_ok
    assert "lns" in res.extra and res.bound_source is not None
    assert res.makespan <= min(v["makespan"] for v in res.extra["heuristics"].values()
                               if "makespan" in v and v["memory_ok"]) + 1e-9
    assert res.lower_bound <= res.makespan + 1e-9


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_improve_times_a_kept_moves_own_order_in_sequential_comm_only(monkeypatch, comm):
    """Sequential comm: every kept move's placement is timed once more in ``placement_order``'s order
    (the answer is never slower than that order of its placement); parallel comm: only the start's."""
    from dplace.formulations import lns

    inst = _two_chains().replace(comm=comm)
    calls = []
    real = lns.placement_order

    def spy(i, pl, *a, **k):
        calls.append(list(pl))
        return real(i, pl, *a, **k)

    monkeypatch.setattr(lns, "placement_order", spy)
    pl0 = [0] * inst.n
    new_pl, od, st = improve(inst, pl0, None, time_limit_s=5.0, target=50.0)
    assert st.moves_kept >= 1 and st.kicks == 0
    if comm == "sequential":
        assert len(calls) == 1 + st.moves_kept and calls[-1] == list(new_pl)
        assert st.makespan <= simulate(inst, new_pl, real(inst, new_pl)).makespan + 1e-9
    else:
        assert calls == [pl0]
    res = make_result(inst, "lns", new_pl, od)
    assert check(inst, res).ok and res.makespan == pytest.approx(st.makespan)
