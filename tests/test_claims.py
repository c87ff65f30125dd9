"""dplace.verify.claims: the one place where ``optimal``, a proven bound and ``infeasible`` are decided."""
import dplace
from dplace.verify import claims
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.result import make_result


def _two_chain():
    ops = [Op("a", 3, 1), Op("b", 4, 1), Op("c", 2, 1)]
    return Instance("two-chain", [Device("g0", 10), Device("g1", 10)], ops,
                    [Edge("a", "b", 8), Edge("b", "c", 8)], link=Link(1.0, 1.0))


def test_reaches_uses_one_relative_tolerance():
    assert claims.reaches(100.0, 100.0 - 0.5e-4)  # within 1e-6 relative
    assert not claims.reaches(100.0, 100.0 - 2e-4)
    assert claims.reaches(0.0, 0.0) and claims.tol(0.5) == 0.5 * claims.TOL + 1e-12
    # relative at small magnitudes too (fuzz seed 1584, milp-highs: 1.03e-6 relative above the optimum at
    # 0.0363 µs passed as optimal under an absolute floor of 1e-6)
    assert not claims.reaches(0.036306021814098394, 0.0363059346457678)


def test_confirm_weaker_claim_wins_and_unchecked_is_dropped():
    b, notes = claims.confirm(claims.Bound(10.0, "cpsat"), [("presolve off", 8.0)])
    assert b == claims.Bound(8.0, "presolve off") and "weaker claim wins" in notes[0]
    b, _ = claims.confirm(claims.Bound(10.0, "cpsat"), [("presolve off", 12.0)])
    assert b.value == 10.0
    b, notes = claims.confirm(claims.Bound(10.0, "cpsat"), [("presolve off", 10.0 - 1e-6)])  # within tol
    assert b.value == 10.0 - 1e-6 and notes == []  # never above what the check proved
    assert claims.confirm(claims.Bound(10.0, "cpsat"), [("presolve off", None)])[0] is None
    assert claims.confirm(claims.Bound(10.0, "cpsat"), [])[0] is None


def test_decide_drops_a_bound_that_a_valid_answer_refutes():
    dec = claims.decide(9.0, [claims.Bound(5.0, "critical_path"), claims.Bound(10.0, "cpsat")])
    assert dec.bound == claims.Bound(5.0, "critical_path") and not dec.optimal
    assert "wrong, dropped" in dec.notes[0]
    dec = claims.decide(9.0, [claims.Bound(9.0 + 1e-9, "cpsat")])  # float noise: clipped, proves optimality
    assert dec.optimal and dec.bound.value == 9.0
    assert not claims.decide(9.0, [claims.Bound(9.0, "x")], feasible=False).optimal  # memory broken


def test_settle_sets_status_bound_source_and_notes():
    inst = _two_chain()
    res = make_result(inst, "t", [0, 0, 0], status="optimal")  # serial: 9, the optimum
    assert res.makespan == 9.0
    got = claims.settle(res, [claims.Bound(8.0, "work")], notes=["why"])
    assert got.status == "feasible" and got.lower_bound == 8.0 and got.bound_source == "work"
    assert got.extra["claim_notes"] == ["why"]
    assert res.status == "optimal" and res.lower_bound is None and res.extra == {}  # a new Result
    got = claims.settle(got, [claims.base_bound(inst)])
    assert got.status == "optimal" and got.bound_source == "critical_path" and got.lower_bound == 9.0


def test_no_placement_never_says_infeasible_when_a_heuristic_keeps_memory():
    inst = _two_chain()
    res = claims.no_placement(inst, "m", "m: no placement", solver_says_infeasible=True, confirmed=True)
    assert res.status == "feasible" and res.placement is not None and res.memory_ok
    assert "solver is wrong" in res.extra["claim_notes"][0]


def test_no_placement_infeasible_only_when_confirmed():
    ops = [Op("a", 1, 6), Op("b", 1, 6), Op("c", 1, 6)]
    inst = Instance("full", [Device("g0", 10), Device("g1", 10)], ops, [], link=Link(1.0, 1.0))
    dplace.check_memory_feasible(inst)  # the necessary conditions pass (18 bytes, 20 in all); nothing fits
    r = claims.no_placement(inst, "m", "m: none", solver_says_infeasible=True, confirmed=True)
    assert r.status == "infeasible"
    r = claims.no_placement(inst, "m", "m: none", solver_says_infeasible=True, confirmed=False)
    assert r.status == "no_solution" and "no independent check" in r.extra["claim_notes"][0]


def test_a_method_that_finds_no_placement_says_infeasible_only_when_none_keeps_memory():
    """``single`` (every op on one device) finds nothing when no device holds all: that is its failure,
    not the instance's, while another placement keeps memory."""
    ops = [Op("a", 1, 6), Op("b", 1, 6)]
    inst = Instance("split", [Device("g0", 10), Device("g1", 10)], ops, [], link=Link(1.0, 1.0))
    r = dplace.solve(inst, "single")
    assert r.status == "no_solution" and r.placement is None and "not infeasible" in r.extra["claim_notes"][0]
    assert r.lower_bound == 1.0  # the proven bound stays
    ops.append(Op("c", 1, 6))  # 18 bytes, 20 in all, yet no two ops share a device: nothing fits
    r = dplace.solve(Instance("full", [Device("g0", 10), Device("g1", 10)], ops, [], link=Link(1.0, 1.0)), "single")
    assert r.status == "infeasible"
