"""Every method's claims against the brute-force oracle (dplace.verify.oracle) on random fuzz instances.

An ``optimal`` status must be the oracle's optimum, a lower bound must not exceed it, ``infeasible``
only when no placement fits memory, no memory-feasible makespan below it, and no exception on a valid
instance. 150 instances in CI (3-9 ops, 2-3 devices, every model feature); the exact methods on a
subset each to keep CI short. ``benchmarks/fuzz_claims.py`` runs the same checks on 10,000 instances.
"""
import functools

import pytest

import dplace
from dplace.verify.oracle import brute_force, judge
from dplace.verify.fuzz import fuzz_instance

pytestmark = pytest.mark.solver

SEEDS = 150
CHUNK = 15
HEURISTICS = ("heft", "m_etf", "dpos", "m_sct", "celeritas", "m_topo")
# exact method -> every k-th seed (their cost per instance differs ~10x)
EXACT_EVERY = {"cpsat": 2, "refine": 5, "portfolio": 5, "milp-cbc": 6, "milp-highs": 10}
TIME_LIMIT = 3.0  # a claim is judged whatever the status, so a short limit still tests every claim

# (seed, method) pairs that fail today because of a real defect; each is run on its own below, xfail
# strict, until the owner fixes it (then the test says XPASS and the entry must go).
KNOWN: dict[tuple[int, str], str] = {
    # empty since CP-SAT runs without probing (formulations/cpsat/search.py PROBING_LEVEL): its wrong OPTIMALs
    # on seeds 61 and 1143 (22.8666 / 14000060 against 21.9460 / 14000045) came from OR-Tools 9.15's probing
    # (9.14, pinned since, solves them right either way)
}
# wrong with OR-Tools 9.15's probing on (CP-SAT's own claims; the solver level): each must now hold
FORMERLY_WRONG = [(61, "cpsat"), (1143, "cpsat"), (1143, "portfolio")]


def _call(spec):
    if spec.startswith("milp-"):
        return "milp", {"solver": spec[5:]}
    return spec, ({"progress": False} if spec == "cpsat" else {})


@pytest.fixture(autouse=True)
def _solver_claims_only(monkeypatch):
    """dplace.verify.claims may settle claims of <= 9-op graphs with this same oracle (judged against the
    oracle that is circular) and with the other formulation: the solvers' own claims are judged here
    (tests/test_exact_claims.py judges the shipped claims on the known cases, brute force off)."""
    try:
        from dplace.verify import claims
    except ImportError:
        return
    for knob in ("EXHAUSTIVE_MAX_OPS", "CROSS_MAX_OPS"):  # brute force; the other formulation's check
        if hasattr(claims, knob):
            monkeypatch.setattr(claims, knob, 0)
    if hasattr(claims, "SAME_SOLVER_CONFIRMS"):  # the solver's claim as its own re-solve confirms it
        monkeypatch.setattr(claims, "SAME_SOLVER_CONFIRMS", True)


@functools.lru_cache(maxsize=None)
def _oracle(seed):
    inst = fuzz_instance(seed)
    orc = brute_force(inst, time_limit_s=120)
    assert orc.complete, f"oracle did not finish on seed {seed}"
    return inst, orc


def _defects(seed, spec, time_limit=TIME_LIMIT):
    inst, orc = _oracle(seed)
    name, opts = _call(spec)
    try:
        res = dplace.solve(inst, name, time_limit_s=time_limit, seed=seed, **opts)
    except Exception as exc:  # noqa: BLE001 - any exception on a valid instance is a defect
        return [f"error {exc!r:.200}"]
    return judge(res, orc)


def _methods_for(seed):
    out = list(HEURISTICS)
    out += [m for m, k in EXACT_EVERY.items() if seed % k == 0]
    return [m for m in out if (seed, m) not in KNOWN]


@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK))
def test_no_claim_beyond_the_oracle(first):
    bad = []
    for seed in range(first, first + CHUNK):
        for spec in _methods_for(seed):
            d = _defects(seed, spec)
            if d:
                bad.append((seed, spec, d))
    assert not bad, bad


@pytest.mark.parametrize("seed,spec", [
    pytest.param(s, m, marks=pytest.mark.xfail(strict=True, reason=why)) for (s, m), why in sorted(KNOWN.items())
] + [pytest.param(s, m, id=f"{s}-{m}-probing-off") for s, m in FORMERLY_WRONG])
def test_known_wrong_claims(seed, spec):
    # a long limit: the wrong OPTIMAL comes within ~1 s on a quiet machine, but a loaded one (the suite at -n 2
    # beside other work) once reached 10 s first, and the strict xfail then failed as an XPASS
    inst, orc = _oracle(seed)
    name, opts = _call(spec)
    res = dplace.solve(inst, name, time_limit_s=60.0, seed=seed, **opts)
    if res.status != "optimal":
        # no OPTIMAL within the limit (a loaded machine: the suite at -n 2 beside other work once gave an
        # XPASS this way): the defect was not reached, so this run says nothing about it either way
        pytest.skip(f"{spec} on seed {seed}: status {res.status} within 60 s, the known claim not reached")
    assert judge(res, orc) == []


def test_benchmark_runs_and_resumes(tmp_path, capsys, benchmark_script):
    mod = benchmark_script("fuzz_claims")
    out = tmp_path / "r.jsonl"
    args = ["--n", "3", "--methods", "heft,cpsat", "--workers", "1", "--out", str(out), "--cases", str(tmp_path / "c")]
    assert mod.main(args) == 0
    assert len(out.read_text().splitlines()) == 9  # heft, cpsat/solver, cpsat/product
    assert mod.main(args) == 0  # resumed: nothing new to run
    assert len(out.read_text().splitlines()) == 9  # heft, cpsat/solver, cpsat/product
    assert "heft" in capsys.readouterr().out


def test_benchmark_instance_families_are_one_choice(tmp_path, capsys, benchmark_script):
    """--composed and --mixed pick one family of instances (both given: a usage error, exit 2); each seed
    is made by its family's maker."""
    mod = benchmark_script("fuzz_claims")
    with pytest.raises(SystemExit) as e:
        mod.main(["--composed", "--mixed", "--n", "1", "--out", str(tmp_path / "r.jsonl")])
    assert e.value.code == 2 and "not allowed with" in capsys.readouterr().err
    assert [mod.instance_of(1006988, f)[2]["kind"] for f in ("small", "composed")] == ["fuzz", "side_by_side"]
    assert mod.instance_of(3, "mixed")[0].n >= 10


# sequential transfers, zero-time ops and tied times (fuzz seeds 150-312 with all three, 7-9 ops); CP-SAT
# proves every one OPTIMAL on exact ticks within ~1 s here
THROWN_SEEDS = (170, 174, 202, 230, 243, 253, 265, 285, 287, 311, 312)


def test_a_proven_optimum_is_returned_as_optimal():
    """Whenever CP-SAT proves OPTIMAL (right by the oracle), the Result is that optimum with status
    optimal: the order read back keeps the model's choices on ties (zero-time ops, sequential transfers)
    and the claim is not thrown away (the solvers' own claims: brute force and the cross check off)."""
    proven = 0
    for seed in THROWN_SEEDS:
        inst, orc = _oracle(seed)
        assert inst.comm == "sequential" and any(min(r) == 0 for r in inst.dur)
        res = dplace.solve(inst, "cpsat", time_limit_s=10, seed=seed, progress=False)
        assert judge(res, orc) == [], (seed, res.status, res.makespan, orc.optimum, res.extra.get("claim_notes"))
        if res.extra.get("solver_status") == "OPTIMAL" and res.extra.get("ticks_exact"):
            proven += 1
            assert res.status == "optimal" and abs(res.makespan - orc.optimum) <= 1e-6 * orc.optimum, seed
    assert proven >= len(THROWN_SEEDS) - 2  # the check ran (a loaded machine may cut one or two short)


def test_judge_sees_an_optimum_thrown_away():
    from dataclasses import replace

    from dplace.result import make_result

    inst, orc = _oracle(170)
    best = make_result(inst, "cpsat", orc.placement, orc.order, status="feasible")
    assert judge(best, orc) == []
    assert "optimum_thrown_away" in judge(replace(best, lower_bound=best.makespan), orc)  # "feasible", yet proven
    worse = replace(dplace.solve(inst, "m_topo"), status="feasible", lower_bound=None)  # 1.6, optimum 1.5
    assert worse.memory_ok and worse.makespan > orc.optimum * (1 + 1e-6)
    said = {"solver_status": "OPTIMAL", "ticks_exact": True, "bound_ticks": orc.optimum, "tick_us": 1.0}
    assert judge(replace(worse, extra=said), orc) == ["optimum_thrown_away"]
    assert judge(replace(worse, extra=dict(said, bound_ticks=2 * orc.optimum)), orc) == []  # a wrong claim


def test_milp_keeps_its_own_order_on_ties():
    """HiGHS proves the optimum of seed 13820 (8 ops, a zero-time op) with starts 1e-6 apart against its
    own ordering binary: read back by start alone, the schedule was 12.20 and the proven 10.75 was
    thrown away (found by the claims campaign). The order the binaries chose is read back as well."""
    inst, orc = _oracle(13820)
    assert any(min(r) == 0 for r in inst.dur)
    res = dplace.solve(inst, "milp", solver="highs", time_limit_s=10, seed=13820)
    assert judge(res, orc) == [], (res.status, res.makespan, orc.optimum)
    assert res.status == "optimal" and abs(res.makespan - orc.optimum) <= 1e-6 * orc.optimum


def test_cpsat_keeps_its_own_order_on_ties():
    """Seed 59308 (6 ops, sequential comm): CP-SAT proves 5000 with zero-time producers at one instant on
    one device, their transfers on the link in the order its literals chose; read back by topological
    position on ties, the simulator sent them in another order, 6000, and the proven optimum was thrown
    away (found by the final claims campaign). The order the literals chose is read back as well."""
    inst, orc = _oracle(59308)
    assert inst.comm == "sequential" and any(min(r) == 0 for r in inst.dur)
    res = dplace.solve(inst, "cpsat", time_limit_s=10, seed=59308)
    assert judge(res, orc) == [], (res.status, res.makespan, orc.optimum)
    assert res.status == "optimal" and abs(res.makespan - orc.optimum) <= 1e-6 * orc.optimum


def _seq_1021112(benchmark_script, level: str) -> dict:
    mod = benchmark_script("fuzz_claims")
    (row,) = mod.check_seed(1021112, ["cpsat"], 20.0, levels=(level,), family="composed")
    return row


def test_composed_1021112_ships_the_optimum(benchmark_script):
    """Session 20's audit: on composed seed 1021112 (16 ops, sequential comm) what ships is right."""
    row = _seq_1021112(benchmark_script, "product")
    assert row["defects"] == [], row


def test_composed_1021112_cpsat_model_holds_the_optimum(benchmark_script):
    """CP-SAT alone (no cross check) proved 19.2939 here where the optimum is 17.0642: not the model (it holds
    the optimum's schedule, below) but OR-Tools 9.15's probing, now off (``PROBING_LEVEL``)."""
    row = _seq_1021112(benchmark_script, "solver")
    assert row["status"] != "optimal" or row["defects"] == [], row
