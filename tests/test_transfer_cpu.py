"""The receive cost ``transfer_cpu`` (issue #24): each tensor received from another device costs the
receiving device's core ``transfer_cpu`` µs, once per (producer, destination device), paid by the
tensor's first consumer there (smallest topological index). Instance, io, simulator (both modes, Python
path), checker, oracle, kernel routing, and the exact models (CP-SAT, MILP) against the oracle."""
from __future__ import annotations

import random

import pytest

from dplace.errors import InvalidInstanceError
from dplace.instance.io import instance_from_dict, instance_to_dict
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.instance.npz import instance_to_npz_bytes, load_npz
from dplace.result import make_result
from dplace.schedule.simulate import seq_kernel_wanted, simulate, use_kernel
from dplace.verify.check import check
from dplace.verify.fuzz import fuzz_instance
from dplace.verify.oracle import time_schedule


def fan(c: float, comm: str = "parallel") -> Instance:
    """a on d0 feeds b and c2 on d1 (one tensor, two consumers) and e on d0."""
    devs = [Device("d0", 100), Device("d1", 100)]
    ops = [Op("a", 10.0), Op("b", 4.0), Op("c2", 3.0), Op("e", 1.0)]
    edges = [Edge("a", "b", 10.0), Edge("a", "c2", 20.0), Edge("a", "e", 5.0)]
    return Instance("fan", devs, ops, edges, link=Link(2.0, 10.0), comm=comm, transfer_cpu=c)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_receive_cost_paid_once_per_tensor_by_its_first_consumer(comm):
    pl = [0, 1, 1, 0]
    base = simulate(fan(0.0, comm), pl, [[0, 3], [2, 1]])
    s = simulate(fan(7.0, comm), pl, [[0, 3], [2, 1]])
    assert fan(7.0, comm).receive_times(pl) == [0.0, 7.0, 0.0, 0.0]  # b: topological index before c2
    assert s.end[1] - s.start[1] == 4.0 + 7.0
    assert s.end[2] - s.start[2] == 3.0  # the same tensor: no second receive
    assert s.end[3] - s.start[3] == 1.0  # same device: no receive
    assert s.makespan > base.makespan
    assert simulate(fan(7.0, comm), [0, 0, 0, 0]).makespan == simulate(fan(0.0, comm), [0, 0, 0, 0]).makespan


def test_zero_leaves_json_unchanged_and_the_field_round_trips(tmp_path):
    assert "transfer_cpu" not in instance_to_dict(fan(0.0))
    d = instance_to_dict(fan(47.5))
    assert d["transfer_cpu"] == 47.5
    assert instance_from_dict(d).transfer_cpu == 47.5
    p = tmp_path / "x.npz"
    p.write_bytes(instance_to_npz_bytes(fan(47.5)))
    assert load_npz(p).transfer_cpu == 47.5
    assert fan(47.5).replace(name="y").transfer_cpu == 47.5


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "x", True, 1e19])
def test_bad_value_one_line_naming_the_field(bad):
    d = instance_to_dict(fan(0.0))
    d["transfer_cpu"] = bad
    with pytest.raises(InvalidInstanceError) as ei:
        instance_from_dict(d)
    assert "transfer_cpu" in str(ei.value) and "\n" not in str(ei.value)


def test_fuzz_simulator_checker_and_oracle_agree_with_the_term():
    seen = 0
    for seed in range(60):
        inst = fuzz_instance(seed, receive_rate=1.0)
        seen += bool(inst.transfer_cpu)
        rng = random.Random(seed)
        allowed = [inst.allowed_devices(o) for o in range(inst.n)]
        pl = [rng.choice(a) for a in allowed]
        for o in range(inst.n):  # colocation: the group's first member decides
            g = inst.group_of[o]
            if g >= 0:
                pl[o] = pl[inst.groups[g][0]]
        res = make_result(inst, "test", pl)
        rep = check(inst, res)
        assert rep.ok, (seed, rep.summary())
        t = time_schedule(inst, res.placement, res.schedule.order)
        assert t.makespan == pytest.approx(res.makespan, rel=1e-9, abs=1e-9), seed
    assert seen >= 40


def test_checker_rejects_a_schedule_without_the_receive_cost():
    inst = fan(7.0)
    res = make_result(fan(0.0), "test", [0, 1, 1, 0])
    rep = check(inst, res.to_dict())
    assert not rep.ok and any("'b'" in e for e in rep.errors)


def test_kernel_policy_routes_the_term_to_python(monkeypatch):
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    inst = fuzz_instance(3, n_ops=(8, 8), receive_rate=1.0).replace(comm="parallel", transfer_cpu=3.0)
    assert not use_kernel(inst)
    assert not seq_kernel_wanted(inst.replace(comm="sequential"))
    pl = [inst.allowed_devices(o)[-1] for o in range(inst.n)]
    for o in range(inst.n):
        g = inst.group_of[o]
        if g >= 0:
            pl[o] = pl[inst.groups[g][0]]
    a = simulate(inst, pl)
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    b = simulate(inst, pl)
    assert a.start == b.start and a.end == b.end and a.makespan == b.makespan


# fuzz seeds (5-8 ops, receive cost 0.7 x the median op time) where the term changes the optimum; both
# comm modes among them
MATTER = (2, 4, 5, 8, 10, 13, 15, 18)


def _matter_case(seed: int):
    import statistics

    from dplace.verify.oracle import brute_force

    base = fuzz_instance(seed, n_ops=(5, 8))
    inst = base.replace(transfer_cpu=0.7 * statistics.median(v for row in base.dur for v in row if v > 0))
    orc, orc0 = brute_force(inst, time_limit_s=60), brute_force(base, time_limit_s=60)
    assert orc.complete and orc.optimum is not None and orc.optimum != pytest.approx(orc0.optimum, rel=1e-9)
    return inst, orc


@pytest.mark.solver
@pytest.mark.parametrize("method", ["cpsat", "milp-highs", "milp-cbc"])
def test_exact_models_prove_the_oracle_optimum_with_the_term(method, monkeypatch):
    """The solver's own claim (brute force and the other formulation switched off in dplace.verify.claims):
    optimal at the oracle's optimum, which the term changes. Without the term in the model these end
    ``feasible`` (a bound below the optimum) or with a wrong claim."""
    import dplace
    from dplace.verify import claims
    from dplace.verify.oracle import judge

    monkeypatch.setattr(claims, "EXHAUSTIVE_MAX_OPS", 0)
    monkeypatch.setattr(claims, "CROSS_MAX_OPS", 0)
    monkeypatch.setattr(claims, "SAME_SOLVER_CONFIRMS", True)
    name, opts = ("milp", {"solver": method[5:]}) if method.startswith("milp") else (method, {"progress": False})
    comms = set()
    for seed in MATTER:
        inst, orc = _matter_case(seed)
        comms.add(inst.comm)
        res = dplace.solve(inst, name, time_limit_s=20, seed=seed, **opts)
        assert judge(res, orc) == [], seed
        assert res.status == "optimal" and res.makespan == pytest.approx(orc.optimum, rel=1e-6), (seed, res.status)
        assert "skipped" not in res.extra
    assert comms == {"parallel", "sequential"}


@pytest.mark.solver
@pytest.mark.parametrize("method", ["cpsat", "milp", "refine", "portfolio"])
def test_fuzz_receive_rate_instances_pass_the_claims_check(method):
    """The shipped claims (dplace.verify.claims as it is) on the fuzzer's instances with the term."""
    import dplace
    from dplace.verify.oracle import brute_force, judge

    seen = 0
    for seed in range(12):
        inst = fuzz_instance(seed, receive_rate=1.0)
        seen += bool(inst.transfer_cpu)
        orc = brute_force(inst, time_limit_s=60)
        res = dplace.solve(inst, method, time_limit_s=3, seed=seed, **({"progress": False} if method == "cpsat" else {}))
        assert judge(res, orc) == [], (seed, method)
    assert seen >= 8


def test_the_hint_completes_with_the_term():
    """The heuristic's schedule is a complete CP-SAT hint: the model's receive costs are the simulator's."""
    import dplace

    inst, _ = _matter_case(MATTER[0])
    res = dplace.solve(inst, "cpsat", time_limit_s=10, progress=False)
    assert res.extra["hint_used"] is True
