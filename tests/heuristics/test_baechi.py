"""Tests for Baechi's placers (heuristics/baechi.py) and the SCT LP (heuristics/sct_lp.py)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dplace
from dplace.errors import InvalidInstanceError
from dplace.heuristics.sct_lp import favorite_children, solve_sct_lp
from dplace.heuristics.baechi import BaechiOptions, build_units, fuse
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.testing import assert_valid_result, random_instance

BAECHI = ("m_topo", "m_etf", "m_sct")
OFF = dict(coplacement=False, fusion=False, forward_placement=False)


def _inst(ops, edges, *, m=2, memory=10**9, latency=0.0, bandwidth=100.0, comm="parallel"):
    devices = [Device(f"d{i}", memory) for i in range(m)]
    return Instance("t", devices, ops, [Edge(a, b, nb) for a, b, nb in edges], link=Link(latency, bandwidth), comm=comm)


def _valid(inst, res):
    assert res.instance is inst
    assert_valid_result(res)


# ------------------------------------------------------------------------------ random contract
@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("method", BAECHI + ("metis",))
def test_random_instances_valid_and_deterministic(method, seed):
    rng = random.Random(seed)
    inst = random_instance(rng, n_ops=rng.randint(1, 14), comm=("parallel", "sequential")[seed % 2])
    opts = {} if seed % 3 else (OFF if method != "metis" else {})
    res = dplace.solve(inst, method, **opts)
    if res.status == "infeasible":  # only when the core's memory check says nothing can fit
        return
    _valid(inst, res)
    if method != "metis":
        # memory is kept unless the method's own rule found no device with room (counted, flagged)
        if res.extra["fallbacks"] == 0:
            assert res.memory_ok
    again = dplace.solve(inst, method, **opts)
    assert again.placement == res.placement and again.makespan == res.makespan


@pytest.mark.parametrize("method", BAECHI + ("metis",))
def test_memory_kept_when_ample(method):
    for seed in range(15):
        inst = random_instance(random.Random(seed), n_ops=12, n_devices=3, memory_slack=3.0, colocation=False)
        res = dplace.solve(inst, method)
        assert res.memory_ok, (seed, res.schedule.memory)


def test_coadjust_reserves_whole_group_and_keeps_memory():
    # group g (40 + 40 bytes) cannot go to d0 once 'big' (30) is there: capacity 100
    ops = [Op("big", 5, 30), Op("g1", 1, 40, colocation="g"), Op("x", 1, 1), Op("g2", 1, 40, colocation="g")]
    inst = _inst(ops, [("big", "g1", 1), ("g1", "x", 1), ("x", "g2", 1)], memory=100)
    for method in BAECHI:
        res = dplace.solve(inst, method)
        _valid(inst, res)
        assert res.memory_ok


# ----------------------------------------------------------------------------------------- m-TOPO
def test_m_topo_fills_devices_in_order_up_to_cap():
    # 8 ops of 10 bytes, 2 devices: cap = 80/2 + 10 = 50 -> 5 ops on d0, 3 on d1, in BFS order
    ops = [Op(f"c{i}", 1, 10) for i in range(8)]
    inst = _inst(ops, [(f"c{i}", f"c{i+1}", 1) for i in range(7)], memory=1000)
    res = dplace.solve(inst, "m_topo", **OFF)
    assert res.placement == [0] * 5 + [1] * 3
    assert res.extra["cap_bytes"] == 50
    assert res.order == [[0, 1, 2, 3, 4], [5, 6, 7]]


def test_m_topo_without_fusion_follows_m_topo_order():
    from dplace.heuristics.orders import m_topo_order

    for seed in range(10):
        inst = random_instance(random.Random(seed), n_ops=12, colocation=False, pins=False, memory_slack=3.0)
        res = dplace.solve(inst, "m_topo", **OFF)
        pos = {o: i for i, o in enumerate(m_topo_order(inst))}
        for ops in res.order:
            assert [pos[o] for o in ops] == sorted(pos[o] for o in ops)
        # devices are filled in id order along the BFS order
        devs = [res.placement[o] for o in m_topo_order(inst)]
        assert devs == sorted(devs)


# ----------------------------------------------------------------------------------------- m-ETF
def test_m_etf_keeps_a_chain_together_and_spreads_independent_ops():
    chain = _inst([Op(f"c{i}", 10, 1) for i in range(4)], [(f"c{i}", f"c{i+1}", 500) for i in range(3)])
    res = dplace.solve(chain, "m_etf", **OFF)
    assert len(set(res.placement)) == 1 and res.makespan == 40
    indep = _inst([Op(f"i{i}", 10, 1) for i in range(4)], [], m=4)
    res = dplace.solve(indep, "m_etf", **OFF)
    assert sorted(res.placement) == [0, 1, 2, 3] and res.makespan == 10


def test_m_etf_drops_full_device():
    # d0 can hold only one op: the second independent op must go to d1 even though d0 is as early
    inst = _inst([Op("a", 10, 60), Op("b", 10, 60)], [], memory=100)
    res = dplace.solve(inst, "m_etf", **OFF)
    assert sorted(res.placement) == [0, 1] and res.memory_ok


# ----------------------------------------------------------------------------------------- m-SCT
def _sct_instance(rng: random.Random, memory: int = 10**9) -> Instance:
    """Identical devices, one link model, parallel transfers, and max transfer <= min op time."""
    n, m = rng.randint(2, 30), rng.randint(2, 5)
    ops = [Op(f"o{i}", rng.randint(20, 100), 10) for i in range(n)]
    mint = min(op.time for op in ops)
    lat = rng.uniform(0, mint / 2)
    maxb = (mint - lat) * 100.0
    p = rng.choice([0.05, 0.15, 0.4])
    edges = [(f"o{i}", f"o{j}", rng.uniform(0, maxb)) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return _inst(ops, edges, m=m, memory=memory, latency=lat)


def _rho(inst):
    tmax = max((inst.max_transfer_time(e) for e in range(len(inst.esrc))), default=0.0)
    return tmax / min(inst.min_dur(o) for o in range(inst.n))


@pytest.mark.parametrize("opts", [OFF, {}], ids=["plain", "baechi_options"])
def test_m_sct_within_sct_ratio_of_lower_bound(opts):
    """Hanen & Munier's finite-device SCT bound as quoted in Baechi §2.4 (and eq. (3)-(4) of §2.5):
    makespan <= ((4 + 3 rho) / (2 + rho) - (2 + 2 rho) / (m (2 + rho))) x OPT when rho <= 1, where rho is
    max transfer / min op time; 7/3 as rho -> 1, m -> inf. The bound is against OPT; we check it against
    the proven lower bound (<= OPT), which is stricter."""
    for seed in range(60):
        inst = _sct_instance(random.Random(seed))
        rho = _rho(inst)
        assert rho <= 1.0
        alpha = (4 + 3 * rho) / (2 + rho) - (2 + 2 * rho) / (inst.m * (2 + rho))
        res = dplace.solve(inst, "m_sct", **opts)
        _valid(inst, res)
        assert res.makespan <= alpha * res.lower_bound + 1e-6, (seed, res.makespan, res.lower_bound, alpha)


def test_m_sct_within_memory_constrained_ratio():
    """Baechi Corollary 1.1: with K = m M / sum(d_i) > 1 the ratio grows by (1 - (2+2rho)/((2+rho) m)) / (K - 1)."""
    for seed in range(30):
        rng = random.Random(100 + seed)
        base = _sct_instance(rng)
        k_ratio = rng.choice([2.0, 3.0])
        memory = int(k_ratio * sum(base.mem) / base.m)
        inst = base.replace(devices=[Device(d.name, memory) for d in base.devices])
        K = inst.m * memory / sum(inst.mem)
        rho = _rho(inst)
        alpha = (4 + 3 * rho) / (2 + rho) - (2 + 2 * rho) / (inst.m * (2 + rho))
        bound = alpha + (1 - (2 + 2 * rho) / ((2 + rho) * inst.m)) / (K - 1)
        res = dplace.solve(inst, "m_sct", **OFF)
        _valid(inst, res)
        assert res.memory_ok
        assert res.makespan <= bound * res.lower_bound + 1e-6


def test_sct_lp_favorite_child_and_objective():
    # fork r -> a, r -> b with k = 10 each; x_ra + x_rb >= 1 (one favorite at most), w = 20 + max(c x).
    # Transfers 5 and 5: x = 1/2 each, w = 22.5, nobody rounds to favorite.
    # Transfers 5 and 0.2: 5 x_ra = 0.2 x_rb -> x_ra = 1/26 < 0.1 -> a is r's favorite, w = 20 + 5/26.
    for solver in ("glop", "highs"):
        sol = solve_sct_lp([10.0, 10.0, 10.0], [(0, 1, 5.0), (0, 2, 5.0)], solver=solver)
        assert sol.status == "optimal"
        assert sol.objective == pytest.approx(22.5)
        assert favorite_children(3, [(0, 1, 5.0), (0, 2, 5.0)], sol.x, 0.1)[0] == [-1, -1, -1]
        edges = [(0, 1, 5.0), (0, 2, 0.2)]
        sol = solve_sct_lp([10.0, 10.0, 10.0], edges, solver=solver)
        assert sol.objective == pytest.approx(20 + 5 / 26)
        child, parent = favorite_children(3, edges, sol.x, 0.1)
        assert child == [1, -1, -1] and parent == [-1, 0, -1]


def test_m_sct_reports_lp_in_extra_not_lower_bound():
    inst = _sct_instance(random.Random(3))
    res = dplace.solve(inst, "m_sct", **OFF)
    assert res.extra["sct_lp_status"] == "optimal"
    assert res.extra["sct_lp_objective"] is not None
    assert res.lower_bound == pytest.approx(dplace.lower_bound(inst))


def test_m_sct_options_validated():
    inst = _sct_instance(random.Random(1))
    with pytest.raises(InvalidInstanceError, match="threshold"):
        dplace.solve(inst, "m_sct", threshold=1.5)
    with pytest.raises(InvalidInstanceError, match="lp_solver"):
        dplace.solve(inst, "m_sct", lp_solver="cplex")
    res = dplace.solve(inst, "m_sct", threshold="0.2", lp_solver="highs", fusion="false")
    _valid(inst, res)


# ------------------------------------------------------------------------------- units and fusion
def test_units_colocation_forward_and_coplacement():
    ops = [Op("f1", 5, 1), Op("f2", 5, 1), Op("loss", 1, 1), Op("b2", 5, 1, extra={"forward_of": "f2"}),
           Op("b1", 5, 1, extra={"forward_of": "f1"}), Op("v", 1, 1, colocation="g"), Op("u", 1, 1, colocation="g")]
    edges = [("f1", "f2", 1), ("f2", "loss", 1), ("loss", "b2", 1), ("b2", "b1", 1), ("f1", "b1", 1),
             ("v", "f1", 1), ("b1", "u", 1)]
    inst = _inst(ops, edges, m=2)
    ix = inst.op_index
    units = build_units(inst, BaechiOptions(coplacement=False))
    assert units[ix["v"]] == units[ix["u"]]
    assert units[ix["f1"]] == units[ix["b1"]] and units[ix["f2"]] == units[ix["b2"]]
    assert units[ix["f1"]] != units[ix["f2"]] or units[ix["f1"]] == units[ix["loss"]]
    none = build_units(inst, BaechiOptions(**OFF))
    assert none[ix["f1"]] != none[ix["b1"]] and none[ix["v"]] == none[ix["u"]]
    for method in BAECHI:
        res = dplace.solve(inst, method)
        _valid(inst, res)
        assert res.placement[ix["f1"]] == res.placement[ix["b1"]]
        assert res.placement[ix["f2"]] == res.placement[ix["b2"]]


def test_soft_units_never_join_two_pins():
    ops = [Op("a", 1, 1, device="d0"), Op("b", 1, 1, device="d1")]
    inst = _inst(ops, [("a", "b", 1)])
    units = build_units(inst)
    assert units[0] != units[1]
    for method in BAECHI:
        res = dplace.solve(inst, method)
        _valid(inst, res)


def _is_dag(nc, succ):
    indeg = [0] * nc
    for c in range(nc):
        for s in succ[c]:
            indeg[s] += 1
    q = [c for c in range(nc) if indeg[c] == 0]
    seen = 0
    while q:
        c = q.pop()
        seen += 1
        for s in succ[c]:
            indeg[s] -= 1
            if indeg[s] == 0:
                q.append(s)
    return seen == nc


@st.composite
def _dags(draw):
    n = draw(st.integers(1, 18))
    perm = draw(st.permutations(range(n)))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), max_size=40) if pairs else st.just([]))
    units = draw(st.one_of(st.none(), st.lists(st.integers(0, 2), min_size=n, max_size=n)))
    ops = [Op(f"o{k}", 1, 0) for k in range(n)]
    edges = [Edge(f"o{perm[i]}", f"o{perm[j]}", 1) for i, j in chosen]  # duplicates allowed
    return Instance("h", [Device("d0", 1)], ops, edges), units


@settings(max_examples=150, deadline=None)
@given(_dags())
def test_fusion_never_creates_a_cycle(case):
    inst, units = case
    cl = fuse(inst, units)
    assert _is_dag(cl.n, cl.succ)
    assert sorted(o for ops in cl.ops for o in ops) == list(range(inst.n))
    for c, ops in enumerate(cl.ops):
        assert all(cl.of[o] == c for o in ops)
        assert [inst.topo_pos[o] for o in ops] == sorted(inst.topo_pos[o] for o in ops)
        if units is not None:
            assert len({units[o] for o in ops}) == 1
    for s, d in zip(inst.esrc, inst.edst):  # quotient edges match the original ones
        a, b = cl.of[s], cl.of[d]
        assert a == b or b in cl.succ[a]


def test_fusion_fuses_chains_and_skips_unsafe_pair():
    # a -> b -> c chain fuses fully; in a -> x -> d, a -> d (Fig. 5a) a and d must not fuse directly
    inst = _inst([Op(k, 1, 0) for k in "abc"], [("a", "b", 1), ("b", "c", 1)])
    assert fuse(inst).n == 1
    inst = _inst([Op(k, 1, 0) for k in "axd"], [("a", "x", 1), ("x", "d", 1), ("a", "d", 1)])
    units = [0, 1, 0]  # a and d in one unit, x elsewhere: fusing a-d would make a cycle with x
    cl = fuse(inst, units)
    ix = inst.op_index
    assert cl.of[ix["a"]] != cl.of[ix["d"]]
    assert _is_dag(cl.n, cl.succ)


def test_m_sct_solves_the_papers_global_lp_by_default():
    from dplace.heuristics.baechi import GLOBAL_LP_MAX

    inst = _sct_instance(random.Random(11))
    res = dplace.solve(inst, "m_sct", **OFF)
    assert res.extra["clusters"] <= GLOBAL_LP_MAX
    assert res.extra["sct_lp_windows"] == 1 and res.extra["sct_lp_objective"] is not None
    glop = dplace.solve(inst, "m_sct", lp_solver="glop", lp_window=0, **OFF)
    assert res.extra["sct_lp_objective"] == pytest.approx(glop.extra["sct_lp_objective"], rel=1e-6)


def test_sct_lp_windows():
    from dplace.heuristics.sct_lp import solve_sct_lp_windows

    rng = random.Random(7)
    n = 40
    k = [float(rng.randint(5, 20)) for _ in range(n)]
    edges = sorted({(i, j, float(rng.randint(0, 5))) for i in range(n) for j in range(i + 1, min(n, i + 6))
                    if rng.random() < 0.4})
    whole = solve_sct_lp_windows(k, edges, window=0)
    assert whole.objective == pytest.approx(solve_sct_lp(k, edges).objective)
    win = solve_sct_lp_windows(k, edges, window=10)
    assert win.objective is None and len(win.window_objectives) == 4 and win.status == "optimal"
    for (a, b, _), x in zip(edges, win.x):
        assert 0.0 <= x <= 1.0
        if a // 10 != b // 10:
            assert x == 1.0
    child, parent = favorite_children(n, edges, win.x, 0.1)
    assert all(parent[c] == p for p, c in enumerate(child) if c >= 0)
    inst = _sct_instance(random.Random(11))
    res = dplace.solve(inst, "m_sct", lp_window=3, **OFF)
    _valid(inst, res)
    assert res.extra["sct_lp_windows"] >= 2 and res.extra["sct_lp_objective"] is None


@pytest.mark.parametrize("method", BAECHI + ("metis",))
def test_unpackable_memory_is_flagged(method):
    # 3 x 60 bytes on 2 x 100: total fits, packing does not -> a result, flagged, still a valid schedule
    inst = _inst([Op(f"a{i}", 5, 60) for i in range(3)], [("a0", "a1", 1)], memory=100)
    res = dplace.solve(inst, method)
    assert res.status == "heuristic" and res.memory_ok is False
    rep = dplace.check(inst, res)
    assert not rep.memory_ok
    if method != "metis":
        assert res.extra["fallbacks"] > 0


# ------------------------------------------------------------------------------ time limit
class _Ticks:
    """A clock that moves one tick per reading: a budget of k ticks expires after k readings."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        self.t += 1.0
        return self.t


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("method", ("m_etf", "m_sct"))
def test_list_schedule_cut_at_the_time_limit_is_complete_and_valid(method, seed, monkeypatch):
    """When the budget expires during the list schedule (checked every cluster here), the clusters not
    yet scheduled are placed by the deadline rule: every op placed, pins/colocation/memory kept where a
    device has room, the answer valid, and extra says how far the method got."""
    import dplace.heuristics.baechi as hb
    from dplace.budget import Budget

    monkeypatch.setattr(hb, "_CHECK_EVERY", 1)
    rng = random.Random(seed)
    inst = random_instance(rng, n_ops=rng.randint(12, 30), n_devices=rng.randint(2, 4))
    full = dplace.solve(inst, method, **OFF)
    if full.status == "infeasible":
        return
    cuts = 0
    for ticks in (3, 6, 10, 20, 60):
        res = dplace.solve(inst, method, budget=Budget(ticks, clock=_Ticks()), **OFF)
        _valid(inst, res)
        assert all(d >= 0 for d in res.placement)
        cut = res.extra.get("time_limit")
        if cut is None:  # the method ended first: its own answer
            assert res.placement == full.placement
        else:
            cuts += 1
            assert 0 <= cut["clusters_placed_by_method"] < cut["clusters"]
            assert res.memory_ok or not full.memory_ok or res.extra["fallbacks"] > 0
    assert cuts
    if method == "m_sct":  # expired before the LP: not solved, said so
        res = dplace.solve(inst, method, budget=Budget(0.0), **OFF)
        _valid(inst, res)
        assert res.extra["time_limit"]["clusters_placed_by_method"] == 0
        assert res.extra["sct_lp_status"].startswith("not solved")


@pytest.mark.parametrize("method", ("m_etf", "m_sct"))
def test_the_compiled_list_schedule_keeps_an_expired_budget(method, monkeypatch):
    """On the compiled list scheduler (as from 10k ops) a budget expired before the schedule: the kernel
    places nothing by the method's rule, its deadline twin places every cluster, the answer is valid and
    extra says so (m_sct: the LP not solved either)."""
    from dplace import kernels
    from dplace.budget import Budget

    if not kernels.enabled():
        pytest.skip("numba not importable")
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    seen = 0
    for seed in range(12):
        inst = random_instance(random.Random(seed), n_ops=40, n_devices=3)
        res = dplace.solve(inst, method, budget=Budget(0.0), **OFF)
        if res.status == "infeasible":  # more memory than the devices hold: no schedule to cut
            continue
        seen += 1
        _valid(inst, res)
        assert all(d >= 0 for d in res.placement)
        cut = res.extra["time_limit"]
        assert cut["clusters_placed_by_method"] == 0 and cut["clusters"] == res.extra["clusters"]
        if method == "m_sct":
            assert res.extra["sct_lp_status"].startswith("not solved")
        full = dplace.solve(inst, method, **OFF)
        assert "time_limit" not in full.extra
    assert seen >= 3
