"""CP-SAT model: hint completeness (fix-to-hint), ticks and proven bounds, limits, progress."""
import random
import time

import pytest
from ortools.sat.python import cp_model as cp

import dplace
from dplace.formulations import cpsat as C
from dplace.formulations._brute import brute_force, task_graph
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.testing import contract_instances, random_instance

pytestmark = pytest.mark.solver


def _fix_to_hint_feasible(inst, method="heft"):
    """Build the model, complete the hint from ``method``, then fix every variable to its hint value:
    the fixed model must be feasible (the hint is complete and valid)."""
    res = dplace.solve(inst, method)
    T = C.Ticks(inst, None, res.makespan)
    order = res.order if res.order is not None else res.schedule.order
    V, vals = C.hinted_model(inst, T, (res.placement, order), symmetry=True)
    assert vals is not None, f"no hint for {inst}"
    md = V.model.clone()
    for i, v in enumerate(vals):
        var = md.get_int_var_from_proto_index(i)
        md.add(var == v)
    sv = cp.CpSolver()
    sv.parameters.num_workers = 1
    assert sv.solve(md) in (cp.OPTIMAL, cp.FEASIBLE)
    # the hinted makespan (ticks) is at least the heuristic's real makespan (rounding is pessimistic)
    assert vals[V.mk.index] * T.tick >= res.makespan - 1e-9


@pytest.mark.parametrize("inst", list(contract_instances()), ids=lambda i: i.name)
def test_fix_to_hint_contract(inst):
    _fix_to_hint_feasible(inst)


@pytest.mark.parametrize("seed", range(6))
def test_fix_to_hint_random(seed):
    rng = random.Random(seed)
    inst = random_instance(rng, n_ops=8, n_devices=3, memory_slack=3.0)
    _fix_to_hint_feasible(inst)


def test_fix_to_hint_identical_devices_symmetry():
    inst = task_graph(12, 4, 1.0, seed=2, comm="sequential")
    assert inst.has_identical_devices
    _fix_to_hint_feasible(inst)


def test_contract_results_check_and_claims():
    for inst in contract_instances():
        res = dplace.solve(inst, "cpsat", time_limit_s=5, progress=False)
        assert res.status == "optimal", inst
        assert dplace.check(inst, res).ok
        assert res.claimed_makespan == pytest.approx(res.makespan)
        assert res.lower_bound == pytest.approx(res.makespan)


def _fractional(comm):
    ops = [Op("a", 1.3, 1), Op("b", 2.71, 1), Op("c", 0.45, 1), Op("d", 3.05, 1), Op("e", 1.0, 1)]
    edges = [Edge("a", "b", 3.3), Edge("a", "c", 1.1), Edge("b", "d", 0.7), Edge("c", "d", 2.2), Edge("c", "e", 5)]
    return Instance(f"frac-{comm}", [Device("g0", 10), Device("g1", 10, 2.0)], ops, edges,
                    link=Link(0.25, 2.0), comm=comm)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_coarse_ticks_keep_bound_proven(comm):
    """With tick 1 µs on fractional data the model rounds up: the Result's bound must stay below the
    true optimum (brute force) and ``optimal`` is only claimed when the simulated makespan reaches it."""
    inst = _fractional(comm)
    opt = brute_force(inst)[0]
    res = dplace.solve(inst, "cpsat", time_limit_s=10, tick=1.0, progress=False)
    assert res.extra["ticks_exact"] is False
    assert res.lower_bound <= opt + 1e-9
    assert res.makespan >= opt - 1e-9
    assert res.claimed_makespan >= res.makespan - 1e-9  # pessimistic model: simulation is never worse
    if res.status == "optimal":
        assert res.makespan <= res.lower_bound + 1e-6
    fine = dplace.solve(inst, "cpsat", time_limit_s=10, progress=False)  # automatic tick: exact here
    assert fine.extra["ticks_exact"] is True
    assert fine.status == "optimal" and fine.makespan == pytest.approx(opt)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_times_no_power_of_ten_represents_are_proven_optimal(comm):
    """Times like 1/3 µs and pi µs: the automatic tick is the finest the horizon allows, so rounding
    stays far below the claims' tolerance and the optimum (brute force) is proven, not just found;
    a transfer of 1e12 µs next to them is cut to the cap (the bound stays a lower bound)."""
    import math

    from dplace.verify.oracle import brute_force as oracle

    ops = [Op("a", 1 / 3), Op("b", math.pi), Op("c", math.e), Op("d", math.sqrt(2)), Op("e", 0.1 / 7)]
    edges = [Edge("a", "b", 1 / 7), Edge("a", "c", 2 / 9), Edge("b", "d", 1e12), Edge("c", "d", 1 / 11),
             Edge("c", "e", 0.3)]
    inst = Instance(f"irr-{comm}", [Device("g0", 10), Device("g1", 10, 1.5)], ops, edges,
                    link=Link(0.01, 1.0), comm=comm)
    opt = oracle(inst).optimum
    T = C.Ticks(inst, None, 2 * opt)
    assert not T.exact and T.slack * T.tick < 1e-7 * opt
    assert max(max(row) for M in T.c for row in M) == int(T.cap)
    res = dplace.solve(inst, "cpsat", time_limit_s=10, progress=False)
    assert res.status == "optimal" and res.makespan == pytest.approx(opt, rel=1e-9)
    assert res.lower_bound <= opt * (1 + 1e-12)


def test_time_limit_respected_and_gap_reported():
    """A 1-s limit: on a machine loaded by parallel test suites it may run out before the search; the
    answer then says so (the heuristic's, labelled), else the search's with its gap. No wall-clock
    assert (it would flake on a loaded machine): every stage was given at most the time left when it
    started (the limit itself: tests/test_limits.py, benchmarks/bench_limits.py)."""
    inst = task_graph(30, 4, 10.0, seed=5)
    res = dplace.solve(inst, "cpsat", time_limit_s=1.0, progress=False, workers=2)
    for st in res.extra.get("stages", []):
        assert st["limit_s"] <= st["left_s"] + 1e-9 <= 1.0 + 1e-9, st
    if res.status == "heuristic":
        assert res.extra["returned"] == "hint" and "before the search" in res.extra["stopped"]
        return
    assert res.status in ("optimal", "feasible")
    assert res.lower_bound <= res.makespan + 1e-9
    assert dplace.check(inst, res).ok
    heft = dplace.solve(inst, "heft")
    assert res.makespan <= heft.makespan + 1e-9  # never worse than its hint


@pytest.mark.parametrize("cross", [True, False])
def test_each_claim_check_fits_in_the_time_left(cross):
    """Stage budget after the search: a check's limit plus what it may run past it (HiGHS's child: asked
    to stop a grace after its limit, killed a grace later) never exceeds the time left, so the last
    check ends by the deadline (seed 10787 of fuzz_claims ran 1.6 s past a 10-s limit there)."""
    from dplace.heuristics.highs_worker import grace_s, limit_within

    for left in (-1.0, 0.0, 0.01, 0.2, 0.3, 0.5, 0.6, 1.0, 2.0, 5.0, 9.7, 30.0, 600.0):
        for stage in C.CLAIM_STAGES:
            lim = C.stage_limit(stage, left, cross)
            worst = lim + (2 * grace_s(lim) if stage == "cross check" and lim > 0 else 0.0)
            assert 0.0 <= lim and worst <= max(0.0, left) + 1e-12, (stage, left, lim)
        assert limit_within(left) + 2 * grace_s(limit_within(left)) <= max(left, 0.5) + 1e-12
    assert C.stage_limit("confirm", 10.0, True) == pytest.approx(3.0)  # its share: later checks keep theirs
    assert C.stage_limit("confirm", 10.0, False) == 10.0


def test_a_cross_check_that_never_answers_ends_within_its_share(monkeypatch):
    """The instance of fuzz seed 10787 (9 ops, sequential comm) with brute force off and the HiGHS child
    hung: the MILP check runs to its worst case (its limit, then two graces, then killed). It was given
    the time left less its graces, so it ends by the deadline; the claim it did not confirm is not used."""
    from dplace.verify import claims
    from dplace.heuristics import highs_worker
    from dplace.verify.fuzz import fuzz_instance

    hung = 'print("ready", flush=True)\nimport sys, time\nfor line in sys.stdin:\n    time.sleep(3600)\n'
    monkeypatch.setattr(claims, "EXHAUSTIVE_MAX_OPS", 0)
    monkeypatch.setattr(highs_worker, "CHILD", hung)
    highs_worker.shutdown()
    try:
        inst = fuzz_instance(10787)
        res = dplace.solve(inst, "cpsat", time_limit_s=3.0, progress=False, seed=10787)
    finally:
        highs_worker.shutdown()
    stages = {s["stage"]: s for s in res.extra["stages"]}
    assert list(stages)[:2] == ["model", "search"] and "cross check" in stages
    cc = stages["cross check"]
    assert cc["limit_s"] + 2 * highs_worker.grace_s(cc["limit_s"]) <= cc["left_s"] + 1e-5
    assert res.status == "feasible" and dplace.check(inst, res).ok
    assert any("not confirmed by the MILP" in n for n in res.extra["claim_notes"])


def test_a_limit_too_short_for_every_bound_gives_the_quick_ones():
    """dplace.solve under a limit shorter than ten times the cheap bounds' estimated cost: the bound (its
    own and the method's) is the max of the quick parts only, weaker but proven; the full set is not
    computed, and is used once it is known."""
    from dplace import bounds
    from dplace.formulations._brute import task_graph

    inst = task_graph(400, 4, 1.0, seed=3, comm="sequential")
    limit = 5 * bounds.bound_cost_s(inst)
    res = dplace.solve(inst, "cpsat", time_limit_s=limit, progress=False)
    assert "_lower_bound_parts" not in inst.__dict__ and res.bound_source in bounds.QUICK_PARTS
    quick = max(bounds.critical_path_length(inst), bounds.work_bound(inst), bounds.pinned_bound(inst),
                max(min(row) for row in inst.dur))
    assert res.lower_bound == quick and res.status == "heuristic" and dplace.check(inst, res).ok
    full = dplace.lower_bound(inst)
    assert quick <= full and bounds.bound_cost_s(inst) == 0.0
    assert dplace.solve(inst, "heft", time_limit_s=limit).lower_bound == full


def test_progress_line_on_stderr(capsys):
    inst = task_graph(8, 2, 1.0, seed=1)
    dplace.solve(inst, "cpsat", time_limit_s=5, hint="none", workers=1)
    err = capsys.readouterr().err
    assert "cpsat: solution" in err and "incumbent" in err and "bound" in err


def test_memory_infeasible_is_reported():
    ops = [Op("a", 1, 6), Op("b", 1, 6), Op("c", 1, 6)]
    inst = Instance("mem", [Device("d0", 10), Device("d1", 10)], ops, [Edge("a", "b", 1)])
    res = dplace.solve(inst, "cpsat", time_limit_s=5, progress=False)
    assert res.status == "infeasible" and res.placement is None and res.message


def test_bad_options_rejected():
    inst = task_graph(5, 2, 1.0)
    with pytest.raises(dplace.InvalidInstanceError):
        dplace.solve(inst, "cpsat", hint="magic")
    with pytest.raises(dplace.InvalidInstanceError):
        dplace.solve(inst, "cpsat", workers="0")


@pytest.mark.slow
def test_ctrl_c_returns_best_so_far():
    """SIGINT during the search stops CP-SAT; the best schedule found so far comes back."""
    import os
    import signal
    import subprocess
    import sys

    code = (
        "import dplace\n"
        "from dplace.formulations._brute import task_graph\n"
        "inst = task_graph(40, 4, 1.0, seed=1)\n"  # unproven after 12 s here: the signal finds a search
        "r = dplace.solve(inst, 'cpsat', time_limit_s=60, workers=1, hint='none')\n"
        "print('RESULT', r.status, r.makespan, r.lower_bound, r.interrupted, flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    t0 = time.perf_counter()
    for line in proc.stderr:  # wait for the first progress line
        if "cpsat: solution" in line or time.perf_counter() - t0 > 30:
            break
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)  # far below the 60-s limit, or TimeoutExpired: the search stopped
    assert proc.returncode == 0
    line = [x for x in out.splitlines() if x.startswith("RESULT")][0]
    status, mk = line.split()[1], float(line.split()[2])
    assert status in ("feasible", "optimal") and mk > 0
    assert line.split()[4] == "True"  # interrupted


@pytest.mark.parametrize("seed", range(8))
def test_time_windows_contain_every_optimal_schedule(seed):
    """Start windows for horizon U hold for any schedule of makespan <= U (here: the brute-force optimum)."""
    rng = random.Random(50 + seed)
    inst = random_instance(rng, n_ops=6, n_devices=2, integer=True, memory_slack=3.0)
    opt, pl, order = brute_force(inst)
    T = C.Ticks(inst)  # automatic tick: exact for these data
    assert T.exact
    sch = dplace.simulate(inst, pl, order)
    U = int(round(opt / T.tick))
    st = [x / T.tick for x in sch.start]
    lo, hi = C.time_windows(inst, T, U)
    for o in range(inst.n):
        assert lo[o] <= st[o] + 1e-6 and st[o] <= hi[o] + 1e-6
    # and with the optimum's devices fixed and its order as extra precedences
    prec = [(a, b) for ops in order for a, b in zip(ops, ops[1:])]
    lo, hi = C.time_windows(inst, T, U, fixed=dict(enumerate(pl)), prec=prec)
    for o in range(inst.n):
        assert lo[o] <= st[o] + 1e-6 and st[o] <= hi[o] + 1e-6


@pytest.mark.parametrize("seed", range(10))
def test_energetic_bound_below_optimum(seed):
    rng = random.Random(70 + seed)
    inst = random_instance(rng, n_ops=rng.randint(4, 7), n_devices=rng.randint(2, 3), integer=True, memory_slack=3.0)
    opt = brute_force(inst)[0]
    T = C.Ticks(inst)
    hi = int(round(opt / T.tick))
    assert C.energetic_bound(inst, T, 0, hi) * T.tick <= opt + 1e-9


def test_energetic_bound_proves_packing_case():
    """4 identical processors, low CCR: the work bound is 59.75, the optimum 63; energetic reasoning gets 63."""
    inst = task_graph(25, 4, 0.1, seed=1)
    res = dplace.solve(inst, "cpsat", time_limit_s=20, progress=False, workers=2)
    assert res.extra["energetic_bound_ticks"] * res.extra["tick_us"] == pytest.approx(63.0)
    assert res.status == "optimal" and res.makespan == pytest.approx(63.0)


def test_instance_where_cpsat_with_start_windows_was_wrong():
    """OR-Tools 9.14/9.15 said INFEASIBLE (presolve) / OPTIMAL 11.797 (no presolve) on this 7-op instance
    when start windows were set, though its optimum (11.703, brute force) satisfies every constraint of
    that model. cpsat now builds no windows: it must neither claim a wrong optimum nor a bound above it."""
    import random as _random

    from dplace.formulations._brute import brute_force
    from dplace.testing import random_instance

    rng = _random.Random(1035)
    inst = random_instance(rng, n_ops=rng.randint(1, 7), integer=rng.random() < 0.5)
    opt = brute_force(inst)[0]
    assert opt == pytest.approx(11.703)
    for tick in (None, 0.01):
        res = dplace.solve(inst, "cpsat", time_limit_s=10, progress=False, tick=tick)
        assert dplace.check(inst, res).ok
        assert res.lower_bound <= opt + 1e-9
        if res.status == "optimal":
            assert res.makespan == pytest.approx(opt)


def test_the_windowed_model_is_solved_right_without_probing():
    """The same 7-op instance: its windowed model was solved wrongly because of CP-SAT's probing (OR-Tools
    9.14 and 9.15; INFEASIBLE with presolve, OPTIMAL 11.797 without). With probing off, as dplace runs every
    search (``search.PROBING_LEVEL``), both searches prove the optimum 11.703."""
    import random as _random

    from dplace.formulations.cpsat import search
    from dplace.formulations.cpsat.hint import hinted_model
    from dplace.formulations.cpsat.solve import solve_model
    from dplace.formulations.cpsat.ticks import Ticks
    from dplace.testing import random_instance

    assert search.PROBING_LEVEL == 0
    rng = _random.Random(1035)
    inst = random_instance(rng, n_ops=rng.randint(1, 7), integer=rng.random() < 0.5)
    h = dplace.solve(inst, "heft")
    for presolve in (True, False):
        T = Ticks(inst, None, h.makespan)
        V, _ = hinted_model(inst, T, (h.placement, h.order or h.schedule.order), windows=True)
        out = solve_model(V, workers=1, seed=0, presolve=presolve, time_limit_s=10)
        assert out.status_name == "OPTIMAL" and T.to_us(out.objective_ticks) == pytest.approx(11.703), presolve
