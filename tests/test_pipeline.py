"""Pipelined model parallelism (issue #7): chain format, 1F1B*, k-periodic patterns, validator, DP and
CP-SAT models, and the paper's results (Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021)."""
from __future__ import annotations

import argparse
import itertools
import json
import random
from pathlib import Path

import pytest

from dplace.pipeline import (Chain, chain_from_dict, chain_from_instance, chain_from_pipedream, chain_to_dict,
                             load_chain, make_chain, save_chain)
from dplace.errors import InfeasibleError, InvalidInstanceError
from dplace import pipeline as pl
from dplace.pipeline.dp import _needed_period
from dplace.pipeline.pattern import _batch_sequence
from dplace.pipeline import (PatternOp, Pattern, contiguous_cpsat, contiguous_dp, general_cpsat,
                             k_periodic, one_f_one_b_star, pattern_from_times, validate_pattern)

ROOT = Path(__file__).resolve().parents[1]
CHAINS = ROOT / "instances" / "chains"
PROFILES = Path("/work/shared/data/pipedream-profiles")


def singletons(chain: Chain) -> list[tuple[int, int]]:
    return [(l, l + 1) for l in range(chain.L)]


def brute_contiguous(chain: Chain, P: int, M):
    """Least 1F1B* period over every contiguous partition into at most P stages (reference)."""
    best = None
    for r in range(min(P, chain.L)):
        for cuts in itertools.combinations(range(1, chain.L), r):
            b = [0, *cuts, chain.L]
            stages = list(zip(b, b[1:]))
            T = _needed_period(chain, stages, M)
            if validate_pattern(one_f_one_b_star(chain, stages, T).pattern, M).ok and (best is None or T < best):
                best = T
    return best


def random_chain(rng: random.Random, L: int, P: int, cost: int, memory, bandwidth=lambda: None) -> Chain:
    """Times 1..cost forward and 0..cost backward, weights 0..4, activations 0..3; ``memory`` and
    ``bandwidth`` are drawn last (callables), in that order."""
    fb = [(rng.randint(1, cost), rng.randint(0, cost)) for _ in range(L)]
    w, a = [rng.randint(0, 4) for _ in range(L)], [rng.randint(0, 3) for _ in range(L)]
    m = memory()
    return make_chain(fb, weights=w, activations=a, processors=P, memory=m, bandwidth=bandwidth())


def delay_patterns(chain: Chain, T: float, step: float = 1.0):
    """Every 1-periodic pattern with one layer per processor whose single-batch times are built from
    delays in {0, step, ..., T - step} between consecutive operations of Figure 1 (F_1..F_L, B_L..B_1).
    A delay ≥ T can be cut by T without moving any op modulo T nor raising any NCA, so on this time
    grid this is every pattern that can matter."""
    L = chain.L
    grid = [i * step for i in range(int(round(T / step)))]
    seq = _batch_sequence(L)
    for delays in itertools.product(grid, repeat=2 * L - 1):
        tau = {}
        t = 0.0
        for i, (kind, l) in enumerate(seq):
            if i:
                t += delays[i - 1]
            tau[kind, l] = t
            t += chain.layers[l].forward if kind == "F" else chain.layers[l].backward
        # cheap pre-filter: F_l and B_l must not overlap modulo T on their processor
        ok = True
        for l in range(L):
            d = (tau["B", l] - tau["F", l]) % T
            if not (chain.layers[l].forward - 1e-9 <= d <= T - chain.layers[l].backward + 1e-9):
                ok = False
                break
        yield ok, tau


def from_tau(chain, tau, T):
    return pattern_from_times(chain, list(range(chain.L)), [tau["F", l] for l in range(chain.L)],
                              [tau["B", l] for l in range(chain.L)], T, [f"p{p}" for p in range(chain.L)], chain.L)


# ------------------------------------------------------------------------------------- format
def test_chain_roundtrip(tmp_path):
    c = make_chain([(1, 2), (3, 4)], weights=[5, 6], activations=[7, 8], processors=3, memory=100, bandwidth=2.0)
    p = tmp_path / "c.json"
    save_chain(c, p)
    back = load_chain(p)
    assert back == c
    assert chain_to_dict(back)["format"] == "dplace-chain/1"


@pytest.mark.parametrize("data, msg", [
    ({"layers": []}, "at least one layer"),
    ({"format": "x", "layers": [{"id": "a", "forward": 1, "backward": 1}]}, "format must be"),
    ({"layers": [{"id": "a", "forward": -1, "backward": 1}]}, "layer 'a': forward must be >= 0, got -1"),
    ({"layers": [{"id": "a", "forward": 1}]}, "layer 'a': missing field 'backward'"),
    ({"layers": [{"id": "a", "forward": 1, "backward": 1}, {"id": "a", "forward": 1, "backward": 1}]}, "duplicate"),
    ({"layers": [{"id": "a", "forward": 1, "backward": 1}], "processors": 0}, "processors must be an integer >= 1, got 0"),
    ({"layers": [{"id": "a", "forward": 1, "backward": 1}], "bandwidth": 0}, "bandwidth must be > 0, got 0"),
    ({"layers": [{"id": "a", "forward": "x", "backward": 1}]}, "layer 'a': forward must be a number, got 'x'"),
])
def test_chain_errors_name_field_and_value(data, msg):
    with pytest.raises(InvalidInstanceError) as ei:
        chain_from_dict(data)
    assert msg in str(ei.value) and "\n" not in str(ei.value)


@pytest.mark.skipif(not PROFILES.exists(), reason="shared PipeDream profiles not present")
def test_pipedream_converter_matches_bundled():
    c = chain_from_pipedream(PROFILES / "gnmt.graph.txt", processors=4)
    assert c.L == 48
    assert c == load_chain(CHAINS / "gnmt.json")
    # times ms -> µs; a list of output sizes is summed
    assert all(float(x).is_integer() for x in c.u)


def test_bundled_chains_load():
    files = sorted(CHAINS.glob("*.json"))
    assert len(files) == 11 and (CHAINS / "LICENSE-pipedream.txt").exists()
    for f in files:
        assert load_chain(f).L >= 20


def test_chain_from_instance_pairs_backward_twins():
    from dplace.io import instance_from_dict

    inst = instance_from_dict({
        "format": "dplace-instance/1", "devices": [{"name": "d0", "memory": 100}, {"name": "d1", "memory": 80}],
        "ops": [{"id": "f1", "time": 2, "memory": 3}, {"id": "f2", "time": 4, "memory": 1},
                {"id": "b2", "time": 5, "forward_of": "f2"}, {"id": "b1", "time": 6, "forward_of": "f1"},
                {"id": "upd", "time": 1, "memory": 2}],
        "edges": [{"src": "f1", "dst": "f2", "bytes": 10}, {"src": "f2", "dst": "b2", "bytes": 7},
                  {"src": "b2", "dst": "b1", "bytes": 10}, {"src": "f1", "dst": "b1", "bytes": 10},
                  {"src": "b1", "dst": "upd", "bytes": 1}],
    })
    c = chain_from_instance(inst)
    assert [ly.id for ly in c.layers] == ["f1", "f2"]
    assert c.uf == [2, 4] and c.ub == [6 + 1, 5]  # the update joins b1's layer
    assert c.a == [10, 0] and c.w == [0, 1]  # f1: 3 + upd 2 - its kept output 10 -> 0
    assert c.processors == 2 and c.memory == 80


# ------------------------------------------------------------------------------ done-when tests
def test_121_contiguous_3_general_2():
    c = make_chain([1, 2, 1], processors=2)
    assert contiguous_dp(c).period == 3
    assert contiguous_cpsat(c).period == 3
    g = general_cpsat(c)
    assert g.period == 2 and g.ok and g.allocation[0] == g.allocation[2] != g.allocation[1]


def test_lemma2_only_general_fits():
    c = make_chain([1, 2, 1], weights=[1, 2, 1], processors=2, memory=2)
    with pytest.raises(InfeasibleError):
        contiguous_dp(c)
    with pytest.raises(InfeasibleError):
        contiguous_cpsat(c)
    g = general_cpsat(c)
    assert g.ok and max(g.memory_used) <= 2


@pytest.mark.parametrize("k", [2, 3])
def test_theorem5_ratio(k):
    # costs scaled by 2k+1 (ε = 1): general k(2k+1); contiguous (2k-1)(2k+1) + 1 = (2k-1+ε)(2k+1)
    c = pl.theorem5_chain(k)
    cont, gen = contiguous_dp(c), general_cpsat(c, time_limit_s=20)
    assert gen.status == "optimal" and gen.ok and cont.ok
    s = 2 * k + 1
    assert gen.period == k * s and cont.period == (2 * k - 1) * s + 1
    ratio = cont.period / gen.period
    assert ratio > 2 - 1 / k and ratio == pytest.approx(2 - 1 / k + 1 / (k * s))  # → 2 - 1/k as ε → 0


@pytest.mark.parametrize("k", [3, 4])
def test_theorem6_ratio(k):
    c = pl.theorem6_chain(k)
    cont, gen = contiguous_dp(c), general_cpsat(c, time_limit_s=20)
    assert cont.ok and gen.ok and gen.status == "optimal"
    assert gen.period == k and cont.period == k * (k - 1)
    assert cont.period / gen.period >= k - 1


def test_theorem3_exhaustive_shifts_never_beat_1f1b_star():
    rng = random.Random(3)
    cases = 0
    while cases < 6:
        L = rng.randint(2, 4)
        c = make_chain([(rng.randint(1, 2), rng.randint(1, 2)) for _ in range(L)], processors=3)
        S = rng.randint(2, min(3, L))
        cuts = sorted(rng.sample(range(1, L), S - 1))
        b = [0, *cuts, L]
        stages = list(zip(b, b[1:]))
        loads = [sum(c.u[x:y]) for x, y in stages]
        if max(loads) > 6:
            continue
        T = rng.randint(max(loads), min(sum(loads), 6))
        star = one_f_one_b_star(c, stages, T)
        rep = validate_pattern(star.pattern)
        assert rep.ok and rep.nca == star.nca
        # the same partition at stage level: one "layer" per stage
        stage_chain = make_chain([(sum(c.uf[x:y]), sum(c.ub[x:y])) for x, y in stages], processors=S)
        best = [99] * S
        for ok, tau in delay_patterns(stage_chain, T):
            if not ok:
                continue
            r = validate_pattern(from_tau(stage_chain, tau, T))
            if r.ok:
                best = [min(x, y) for x, y in zip(best, r.nca)]
        star_stage = [star.nca[x] for x, _ in stages]
        assert best == star_stage  # 1F1B* reaches the least NCA of every stage at once
        cases += 1


@pytest.mark.parametrize("k", [2, 3])
def test_theorem4_k_periodic_beats_every_1_periodic(k):
    c = pl.theorem4_chain(k)
    one = one_f_one_b_star(c, singletons(c), 2.0)  # 1F1B: no idle time, NCA_1 = k + 1
    assert validate_pattern(one.pattern).nca[0] == k + 1
    assert not validate_pattern(one.pattern, c.memory).ok
    kp = k_periodic(one.pattern, k)
    rep = validate_pattern(kp, c.memory)
    assert rep.ok, rep.errors
    assert kp.k == k and rep.normalised_period == pytest.approx(2 * (1 + 1 / k))
    assert rep.nca[0] == k and pl.nca_from_shifts(kp) == rep.nca
    # every 1-periodic pattern with period < 2(1 + 1/k) is rejected (two layers on one processor
    # would load it with 4 > T, so one layer per processor); times on the half-integer grid
    grids = [(2.0, 1.0), (2.0, 0.5), (2.5, 0.5)]
    checked = 0
    for T, step in grids:
        assert T < 2 * (1 + 1 / k)
        for ok, tau in delay_patterns(c, T, step):
            if ok or k == 2:  # k = 2: send every pattern to the validator; k = 3: the plausible ones
                assert not validate_pattern(from_tau(c, tau, T), c.memory).ok
                checked += 1
    assert checked > 0


def test_contiguous_dp_agrees_with_milp_and_general_is_never_worse():
    rng = random.Random(7)
    for _ in range(25):
        L, P = rng.randint(2, 6), rng.randint(1, 3)
        c = random_chain(rng, L, P, 5, lambda: rng.choice([None, rng.randint(5, 25)]))
        try:
            d = contiguous_dp(c)
        except InfeasibleError:
            with pytest.raises(InfeasibleError):
                contiguous_cpsat(c, time_limit_s=10)
            continue
        m = contiguous_cpsat(c, time_limit_s=10)
        assert d.ok and m.ok and m.status == "optimal"
        assert d.period == m.period == brute_contiguous(c, P, c.memory)
        g = general_cpsat(c, time_limit_s=10)
        assert g.ok and g.period <= d.period


def test_contiguous_dp_with_communication_layers():
    rng = random.Random(11)
    for _ in range(15):
        L, P = rng.randint(2, 5), rng.randint(2, 3)
        c = random_chain(rng, L, P, 5, lambda: rng.choice([None, rng.randint(6, 25)]),
                         lambda: rng.choice([0.5, 1.0, 2.0]))
        try:
            d = contiguous_dp(c)
        except InfeasibleError:
            assert brute_contiguous(c, P, c.memory) is None
            with pytest.raises(InfeasibleError):
                contiguous_cpsat(c, time_limit_s=10)
            continue
        assert d.ok, d.report.errors
        assert d.period == pytest.approx(brute_contiguous(c, P, c.memory))
        m = contiguous_cpsat(c, time_limit_s=10)
        assert m.ok and m.period == pytest.approx(d.period)
        g = general_cpsat(c, time_limit_s=10)
        assert g.ok and g.period <= d.period + 1e-9
        # the cut's link carries 2·a/β per batch
        links = [r for r in d.pattern.resources if r.startswith("link")]
        assert len(links) == len(d.stages) - 1


def test_communication_layer_time():
    c = make_chain([(1, 1), (1, 1)], activations=[3, 0], processors=2, bandwidth=2.0)
    star = one_f_one_b_star(c, [(0, 1), (1, 2)], 3.0)
    comm = [op for op in star.pattern.ops if op.layer == 1]  # expanded chain: l1, comm, l2
    assert sum(op.duration for op in comm) == pytest.approx(2 * 3 / 2.0)
    assert validate_pattern(star.pattern).ok


# ------------------------------------------------------------------------------------ validator
def _two_layer_pattern(changes=None):
    c = make_chain([(1, 1), (1, 1)], weights=[1, 1], activations=[1, 1], processors=2)
    star = one_f_one_b_star(c, singletons(c), 2.0)
    ops = list(star.pattern.ops)
    for (kind, layer), kw in (changes or {}).items():
        i = next(i for i, o in enumerate(ops) if o.kind == kind and o.layer == layer)
        ops[i] = PatternOp(**{**ops[i].__dict__, **kw})
    p = star.pattern
    return Pattern(p.period, p.k, tuple(ops), p.chain, p.resources, p.processors)


def test_validator_accepts_1f1b_and_reports_nca_and_memory():
    rep = validate_pattern(_two_layer_pattern(), memory=3)
    assert rep.ok and rep.nca == [2, 1] and rep.memory == [3, 2]
    assert not validate_pattern(_two_layer_pattern(), memory=2.5).ok


@pytest.mark.parametrize("change, msg", [
    ({("F", 1): {"resource": 0}}, "ops on resources"),
    ({("F", 0): {"duration": 2.0}}, "duration must be"),
    ({("B", 0): {"shift": 5}}, "dependency"),
    ({("F", 0): {"start": 2.0}}, "start must be in"),
])
def test_validator_rejects(change, msg):
    rep = validate_pattern(_two_layer_pattern(change))
    assert not rep.ok and any(msg in e for e in rep.errors), rep.errors


def test_validator_rejects_overlap():
    c = make_chain([(1, 1), (1, 1)], processors=1)
    p = pattern_from_times(c, [0, 0], [0, 1], [2, 3], 3.0, ["p0"], 1)  # load 4 > period 3
    rep = validate_pattern(p)
    assert not rep.ok and any("overlaps" in e for e in rep.errors)


@pytest.mark.parametrize("k", [2, 3])
def test_theorem4_search_finds_the_papers_pattern_and_scopes_the_1_periodic_optimum(k):
    # §5.2: the unrolled no-idle pattern has period 2(k+1), T/k = 2(1 + 1/k) (8/3 for k = 3), NCA_1 = k;
    # every j-periodic pattern has T/j >= 2(1 + 1/j), so 1-periodic ones need 4
    c = pl.theorem4_chain(k)
    one = contiguous_dp(c)
    assert one.period == 4 and one.status == "optimal" and one.optimal_over == pl.ONE_PERIODIC_CONTIGUOUS
    assert one.lower_bound == 2 and one.lower_bound_over == pl.K_PERIODIC_CONTIGUOUS  # every layer costs 2
    best = pl.solve_pipeline(c, max_k=4)
    rep = validate_pattern(best.pattern, c.memory)
    assert rep.ok and best.k == k and best.period == 2 * (k + 1)
    assert best.normalised_period == pytest.approx(2 * (1 + 1 / k)) and rep.nca[0] == k
    assert best.status == "feasible" and best.optimal_over is None  # not proven: no bound reached
    for row in best.extra["k_search"]:  # no j-periodic pattern with j < k beats the paper's bound
        assert not row["valid"] or row["normalised_period"] >= 2 * (1 + 1 / row["k"]) - 1e-9
    assert best.extra["one_periodic"] == dict(method="contiguous_dp", period=4, status="optimal",
                                              optimal_over=pl.ONE_PERIODIC_CONTIGUOUS)
    assert pl.solve_pipeline(c, k=1).period == 4  # 1: no search


def test_k_option_builds_theorem4_and_flags_a_worse_period():
    c = pl.theorem4_chain(2)  # 1-periodic optimum 4; unrolling that memory-feasible pattern gave 3·4/2 = 6
    two = pl.solve_pipeline(c, k=2)
    assert validate_pattern(two.pattern, c.memory).ok and two.period == 6 and two.normalised_period == 3
    assert "worse_than_1_periodic" not in two.extra and two.status == "feasible"
    three = pl.solve_pipeline(c, k=3)  # 3 groups at most: k = 3 drops nothing that counts, T/k = 4·4/3
    assert three.normalised_period == pytest.approx(16 / 3) and three.status == "feasible"
    assert "above the 1-periodic 4" in three.extra["worse_than_1_periodic"]


@pytest.mark.parametrize("costs, P, expect", [([1, 2, 1], 2, pl.K_PERIODIC_CONTIGUOUS),  # 3 > general bound 2
                                             ([1, 1], 2, pl.K_PERIODIC_GENERAL)])
def test_unlimited_memory_optimum_is_proven_over_k_periodic(costs, P, expect):
    sol = pl.solve_pipeline(make_chain(costs, processors=P))
    assert sol.k == 1 and sol.status == "optimal" and sol.optimal_over == expect and "k_search" not in sol.extra


def test_load_bound_above_the_arithmetic_floor_is_confirmed():
    # three layers of cost 3 on 2 processors: one processor holds two, so T/k >= 6 for every k-periodic
    # pattern, above max(3, 9/2); CP-SAT's bound 6 counts only after a search without presolve finds no T <= 5
    g = general_cpsat(make_chain([3, 3, 3], processors=2))
    assert g.period == 6 and g.status == "optimal" and g.optimal_over == pl.K_PERIODIC_GENERAL
    assert g.lower_bound == 6 and "claim_notes" not in g.extra


def test_contiguous_lower_bound_matches_brute_force_and_bounds_every_pattern():
    rng = random.Random(5)
    for _ in range(30):
        L, P = rng.randint(2, 6), rng.randint(1, 4)
        c = random_chain(rng, L, P, 4, lambda: rng.randint(4, 14), lambda: rng.choice([None, 1.0, 4.0]))
        # oracle: every partition into <= P stages whose stages fit with NCA 1; T >= stage loads, cut links
        want = None
        for r in range(min(P, L)):
            for cuts in itertools.combinations(range(1, L), r):
                b = [0, *cuts, L]
                if any(sum(c.w[x:y]) + sum(c.a[x:y]) > c.memory for x, y in zip(b, b[1:])):
                    continue
                t = max([sum(c.u[x:y]) for x, y in zip(b, b[1:])] + [pl.communication_time(c, y - 1) for y in cuts])
                want = t if want is None else min(want, t)
        got = pl.contiguous_lower_bound(c)
        assert got == (None if want is None else pytest.approx(want))
        if want is None:
            continue
        for k in (2, 3):
            sol = pl.contiguous_theorem4(c, k=k)
            assert sol.ok and sol.normalised_period >= got - 1e-9


def test_k_periodic_for_k1_halves_throughput():
    c = make_chain([(1, 1)] * 3, activations=[1, 1, 1], processors=3)
    star = one_f_one_b_star(c, singletons(c), 2.0)
    kp = k_periodic(star.pattern, 1)
    rep = validate_pattern(kp)
    assert rep.ok and kp.period == 4 and rep.nca[0] <= star.nca[0]


def test_solution_json_and_k_option():
    c = pl.theorem4_chain(2)
    sol = pl.solve_pipeline(c.replace(memory=None), k=2)
    assert sol.k == 2 and sol.ok
    d = json.loads(json.dumps(sol.to_dict()))
    assert d["k"] == 2 and d["valid"] and set(d["nca"]) == {ly.id for ly in c.layers}


# ------------------------------------------------------------------------------------------ CLI
def _cli(argv):
    from dplace.pipeline.cli import add_cli

    ap = argparse.ArgumentParser(prog="dplace")
    add_cli(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(argv)
    return args.func(args)


def test_cli_text_json_gantt(tmp_path, capsys):
    f = tmp_path / "c.json"
    save_chain(make_chain([(1, 1), (2, 2), (1, 1)], weights=[1, 2, 1], activations=[1, 1, 1], processors=2), f)
    assert _cli(["pipeline", str(f), "--memory", "8"]) == 0
    out = capsys.readouterr().out
    assert "period 6" in out and "NCA per layer: l1=2 l2=1 l3=1" in out and "p1 |" in out
    assert _cli(["pipeline", str(f), "--allocation", "general", "--k", "2", "--json",
                 "--gantt", str(tmp_path / "g.png")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["period"] == 12 and d["normalised_period"] == 6 and (tmp_path / "g.png").stat().st_size > 1000
    assert _cli(["pipeline", str(f), "--bandwidth", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert any(r.startswith("link") for r in d["pattern"]["resources"])
    assert _cli(["pipeline", str(f), "--bandwidth", "1", "--processors", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)  # 4 processors, fewer stages: unused ones hold nothing
    assert len(d["memory_used"]) == 4 and d["memory_used"][3] == 0


def test_cli_statuses_say_their_scope(tmp_path, capsys):
    f = tmp_path / "t4.json"
    save_chain(pl.theorem4_chain(3), f)
    assert _cli(["pipeline", str(f)]) == 0
    out = capsys.readouterr().out
    assert "k = 3, normalised period T/k 2.66667 µs" in out and "status feasible; proven T/k >= 2 µs" in out
    assert "period 4 µs, optimal over 1-periodic contiguous patterns" in out
    assert _cli(["pipeline", str(f), "--k", "1"]) == 0
    out = capsys.readouterr().out
    assert "status optimal over 1-periodic patterns of contiguous allocations only" in out
    assert _cli(["pipeline", str(f), "--k", "4", "--json"]) == 0  # 4 groups at most: k = 4 gains nothing
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "feasible" and d["optimal_over"] is None and d["normalised_period"] == 5
    assert "above the 1-periodic 4" in d["extra"]["worse_than_1_periodic"]
    assert _cli(["pipeline", str(f), "--k", "4"]) == 0
    assert "warning: T/k 5 with k = 4 is above the 1-periodic 4" in capsys.readouterr().out


def test_cli_user_errors(tmp_path):
    from dplace.errors import DplaceError

    f = tmp_path / "c.json"
    save_chain(make_chain([1, 2, 1], weights=[1, 2, 1], processors=2), f)
    with pytest.raises(InfeasibleError):
        _cli(["pipeline", str(f), "--memory", "2"])
    with pytest.raises(DplaceError, match="--memory must be"):
        _cli(["pipeline", str(f), "--memory", "lots"])
    with pytest.raises(DplaceError, match="--bandwidth must be a number > 0 or none, got '0'"):
        _cli(["pipeline", str(f), "--bandwidth", "0"])
    with pytest.raises(DplaceError, match="--max-k must be >= 1, got 0"):
        _cli(["pipeline", str(f), "--max-k", "0"])
    for t in ("-1", "0", "nan"):  # was accepted (-1: ran with a negative CP-SAT limit)
        with pytest.raises(DplaceError, match="--time-limit must be a number of seconds > 0"):
            _cli(["pipeline", str(f), "--allocation", "general", "--time-limit", t])
    (tmp_path / "bad.json").write_text('{"layers": [{"id": "a", "forward": -3, "backward": 0}]}')
    with pytest.raises(InvalidInstanceError, match="forward must be >= 0, got -3"):
        _cli(["pipeline", str(tmp_path / "bad.json")])


@pytest.mark.parametrize("name", ["vgg16", "gnmt", "squeezenet1_0"])
def test_real_chains_validator_nca_is_group_number(name):
    # zero-time layers (inputs, reshapes) included: the validator's count matches 1F1B*'s group numbers
    c = load_chain(CHAINS / f"{name}.json")
    free = contiguous_dp(c, 4, None, use_chain_memory=False)
    sol = contiguous_dp(c, 4, 0.8 * max(free.memory_used))
    star = one_f_one_b_star(c, sol.stages, sol.period)
    assert sol.ok and validate_pattern(star.pattern).nca == star.nca == sol.nca
    assert sol.period >= free.period


from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def chain_partition_period(draw):
    L = draw(st.integers(1, 7))
    fb = draw(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=L, max_size=L))
    if sum(f + b for f, b in fb) == 0:
        fb[0] = (1, 0)
    acts = draw(st.lists(st.integers(0, 4), min_size=L, max_size=L))
    beta = draw(st.sampled_from([None, 1.0, 2.0]))
    c = make_chain(fb, activations=acts, processors=L, bandwidth=beta)
    cuts = sorted(draw(st.sets(st.integers(1, L - 1), max_size=L - 1))) if L > 1 else []
    b = [0, *cuts, L]
    stages = list(zip(b, b[1:]))
    items = [sum(c.u[x:y]) for x, y in stages] + [pl.communication_time(c, y - 1) for _, y in stages[:-1]]
    T = max(items) + draw(st.integers(0, 10))
    return c, stages, max(T, 1)


@settings(max_examples=40, deadline=None)
@given(chain_partition_period())
def test_1f1b_star_is_valid_and_nca_is_group_number(case):
    c, stages, T = case
    star = one_f_one_b_star(c, stages, T)
    rep = validate_pattern(star.pattern)
    assert rep.ok, rep.errors
    real = [e for e, o in enumerate(star.origin) if o is not None]
    for i, e in enumerate(real):  # the group number; a zero-time layer may count fewer (its F and B coincide)
        assert rep.nca[e] == star.nca[i] or (rep.nca[e] < star.nca[i] and c.u[i] == 0)
    assert pl.nca_from_shifts(star.pattern) == rep.nca  # the paper's max h − h' rule
    assert max(star.nca) == len(star.groups) or star.nca[0] <= len(star.groups)
    kp = k_periodic(star.pattern, 2)
    r2 = validate_pattern(kp)
    assert r2.ok and all(a <= b for a, b in zip(r2.nca, rep.nca))
    for e, l in enumerate(real):  # g − ⌊g/3⌋ (exact when the layer takes time; zero-time ones may count fewer)
        want = pl.theorem4_nca(star.nca[e], 2)
        assert r2.nca[l] == want or (r2.nca[l] < want and c.u[e] == 0)
    if all(op.duration > 0 for op in kp.ops):
        assert pl.nca_from_shifts(kp) == r2.nca


def test_main_cli_wires_pipeline(tmp_path, capsys):
    from dplace.cli import main

    f = tmp_path / "c.json"
    save_chain(make_chain([1, 2, 1], weights=[1, 2, 1], processors=2), f)
    assert main(["pipeline", str(f), "--allocation", "general", "--memory", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["period"] == 2
    assert main(["pipeline", str(f), "--memory", "2"]) == 2  # no contiguous allocation fits
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no contiguous allocation" in err


def brute_general(c: Chain, P: int):
    """Least period of any 1-periodic pattern (any allocation, times on the integer grid) that the
    validator accepts under the chain's memory: allocations × single-batch delays in [0, T)."""
    L = c.L
    seq = _batch_sequence(L)
    for T in range(int(max(max(c.u), -(-sum(c.u) // P))), int(sum(c.u)) + 1):
        for alloc in itertools.product(range(P), repeat=L):
            loads = [sum(c.u[l] for l in range(L) if alloc[l] == p) for p in range(P)]
            if alloc[0] != 0 or max(loads) > T:
                continue
            for delays in itertools.product(range(T), repeat=2 * L - 1):
                tau, t = {}, 0
                for i, (kind, l) in enumerate(seq):
                    t += delays[i - 1] if i else 0
                    tau[kind, l] = t
                    t += c.layers[l].forward if kind == "F" else c.layers[l].backward
                pat = pattern_from_times(c, list(alloc), [tau["F", l] for l in range(L)],
                                         [tau["B", l] for l in range(L)], T, [f"p{p}" for p in range(P)], P)
                if validate_pattern(pat, c.memory).ok:
                    return T
    return None


GENERAL_CASES = [([3, 2, 3], [0, 0, 0], [2, 3, 1], 4, 5), ([3, 4, 4], [0, 0, 1], [2, 2, 2], 7, 7),
                 ([3, 2, 3], [2, 0, 0], [1, 1, 1], 6, 5),
                 pytest.param([3, 3, 4], [1, 1, 2], [3, 3, 3], 8, 10, marks=pytest.mark.slow),
                 pytest.param([3, 4, 4], [1, 0, 1], [3, 3, 2], 9, 8, marks=pytest.mark.slow)]


@pytest.mark.parametrize("costs, w, a, M, expected", GENERAL_CASES)
def test_general_position_model_matches_exhaustive_search(costs, w, a, M, expected):
    c = make_chain([((x + 1) // 2, x // 2) for x in costs], weights=w, activations=a, processors=2, memory=M)
    assert brute_general(c, 2) == expected
    g = general_cpsat(c, time_limit_s=10, hint=False)
    # optimal among 1-periodic integer-grid patterns only: not claimed as a proven optimum overall
    assert g.ok and (g.status == "optimal" or g.extra["position_model_optimal"]) and g.period == expected
    assert g.status != "optimal" or g.period <= g.extra["bound"] + 1e-9
