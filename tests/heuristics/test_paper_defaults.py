"""A method named after a paper runs the paper (issue 27): each paper method's behaviour pinned on a
small graph worked by hand, beside its dplace variant; forward-only placement (Baechi §3.3 (ii)); the
m-SCT LP by interior point, independent of the LP's order."""
import random

import pytest

import dplace
from dplace.heuristics.sct_lp import favorite_children, solve_sct_lp
from dplace.heuristics.baechi import forward_graph
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.registry import method_info, paper_variants


def fork_join6(latency=10.0, memory=10**6):
    """A source, six independent 100 µs branches and a sink on two devices, transfers of ``latency`` µs.
    By hand: all on one device 1 + 600 + 1 = 602 µs; three branches per device 1 + 10 + 300 + 1 = 312;
    four and two 1 + 10 + 400 + 1 = 412; the source alone 1 + 10 + 600 + 1 = 612."""
    ops = [Op("s", 1, 1)] + [Op(f"b{i}", 100, 1) for i in range(6)] + [Op("t", 1, 1)]
    edges = [Edge("s", f"b{i}", 0) for i in range(6)] + [Edge(f"b{i}", "t", 0) for i in range(6)]
    return Instance("fj6", [Device(f"d{d}", memory) for d in range(2)], ops, edges, link=Link(latency, 1000.0))


@pytest.mark.parametrize("method", ["m_etf", "m_sct"])
def test_baechi_coplacement_is_uncapped_in_the_paper(method):
    """§3.2 (i): each branch's output feeds only the sink, so every branch is co-placed with it: one unit
    {b0..b5, t} on one device, 602 µs. The capped variant (units <= total/m of work) splits it: 412 µs."""
    inst = fork_join6()
    res = dplace.solve(inst, method)
    assert res.extra["units"] == 2 and len(set(res.placement)) == 1
    assert res.makespan == pytest.approx(602.0)
    assert dplace.solve(inst, method + "_capped").makespan == pytest.approx(412.0)


def test_m_topo_paper_fills_to_its_cap_with_the_uncapped_unit():
    """m-TOPO's cap is total/m + largest = 8/2 + 1 = 5 bytes: the source goes to d0, the 7-byte unit does
    not fit d0 under the cap and goes to d1: 1 + 10 + 600 + 1 = 612 µs."""
    res = dplace.solve(fork_join6(), "m_topo")
    assert res.placement == [0] + [1] * 7 and res.makespan == pytest.approx(612.0)
    assert res.extra["cap_bytes"] == pytest.approx(5.0)


@pytest.mark.parametrize("method", ["celeritas", "order_place", "standard_evaluation"])
def test_celeritas_paper_methods_fill_one_device_with_ample_memory(method):
    res = dplace.solve(fork_join6(), method)
    assert set(res.placement) == {0} and res.makespan == pytest.approx(602.0)


def test_dpos_is_the_papers_on_the_fork_join():
    """FastT §5.1 with insertion: the critical path s -> b0 -> t on one device, the other branches by EFT
    alternating devices (the second device's branches start after a 10 µs transfer): 1 + 10 + 300 + 10 + 1."""
    res = dplace.solve(fork_join6(), "dpos")
    assert res.makespan == pytest.approx(322.0)
    assert sorted(res.placement[1:7]).count(0) == 3


def _training(cap=10**6):
    """Forward f1 -> f2 -> loss, backward g2 -> g1 (g_i.forward_of = f_i), one update u of a variable."""
    ops = [Op("x", 1, 1), Op("f1", 10, 5), Op("f2", 10, 5), Op("loss", 1, 1),
           Op("g2", 20, 5, extra={"forward_of": "f2"}), Op("g1", 20, 5, extra={"forward_of": "f1"}),
           Op("u", 1, 1)]
    edges = [Edge("x", "f1", 100), Edge("f1", "f2", 100), Edge("f2", "loss", 100), Edge("loss", "g2", 100),
             Edge("f2", "g2", 100), Edge("g2", "g1", 100), Edge("f1", "g1", 100), Edge("g1", "u", 100)]
    return Instance("train", [Device(f"d{d}", cap) for d in range(2)], ops, edges, link=Link(1.0, 10.0))


@pytest.mark.parametrize("method", ["m_topo", "m_etf", "m_sct"])
def test_forward_only_placement_when_memory_suffices(method):
    inst = _training()
    fg = forward_graph(inst)
    assert [inst.ops[o].id for o in fg.kept] == ["x", "f1", "f2", "loss", "u"]
    assert fg.inst.mem[fg.kept.index(1)] == 10  # f1 holds its own 5 bytes and g1's
    res = dplace.solve(inst, method)
    assert res.extra["forward_only"] == {"placed_ops": 5, "followers": 2,
                                         "forward_makespan": res.extra["forward_only"]["forward_makespan"]}
    assert res.placement[4] == res.placement[2] and res.placement[5] == res.placement[1]
    assert res.order is None  # Baechi leaves the order to the executor
    assert dplace.check(inst, res).ok
    capped = dplace.solve(inst, method + "_capped")
    assert "forward_only" not in capped.extra


def test_pairs_are_forced_together_when_memory_is_short():
    """Memory short (27 bytes on devices of 16): no forward-only placement; each pair is one unit."""
    inst = _training(cap=16)
    assert forward_graph(inst) is None
    for method in ("m_etf", "m_sct", "m_topo"):
        res = dplace.solve(inst, method)
        assert "forward_only" not in res.extra
        assert res.placement[4] == res.placement[2] and res.placement[5] == res.placement[1], method


def test_variants_are_registered_beside_the_paper_methods():
    variants = paper_variants()
    assert variants == {"celeritas": "celeritas_balanced", "m_etf": "m_etf_capped", "m_sct": "m_sct_capped",
                        "m_topo": "m_topo_capped", "order_place": "order_place_balanced",
                        "os_dpos": "os_dpos_model_graph"}
    for paper in ("celeritas", "order_place", "standard_evaluation", "m_topo", "m_etf", "m_sct", "dpos", "os_dpos"):
        assert method_info(paper).paper and method_info(paper).variant_of is None
    from dplace.formulations.heuristic_start import hint_heuristics

    names = hint_heuristics()  # refine/portfolio start from the variants (and paper m_topo, m_etf)
    assert all(v in names for v in variants.values())
    assert {"m_topo", "m_etf"} <= set(names) and not {"celeritas", "order_place", "os_dpos", "m_sct"} & set(names)


def _random_lp(rng, n):
    """A random DAG LP with integer times and delays (degenerate: ties between favourites are common)."""
    k = [float(rng.randint(1, 3)) for _ in range(n)]
    edges = sorted({(a, b) for b in range(1, n) for a in rng.sample(range(b), min(b, rng.randint(1, 3)))})
    return k, [(a, b, float(rng.randint(1, 3))) for a, b in edges]


def test_sct_favourites_do_not_depend_on_the_lp_order():
    """The interior point without crossover ends in the middle of the optimal face: the rounded
    favourites are the same whatever the order of the LP's rows (tasks) and columns (edges)."""
    rng = random.Random(27)
    for _ in range(8):
        n = rng.randint(6, 10)
        k, edges = _random_lp(rng, n)
        fav, _ = favorite_children(n, edges, solve_sct_lp(k, edges, solver="ipm").x)
        perm = list(range(n))
        rng.shuffle(perm)  # task i becomes perm[i]
        inv = {p: i for i, p in enumerate(perm)}
        k2 = [k[inv[j]] for j in range(n)]
        e2 = [(perm[a], perm[b], c) for a, b, c in edges]
        rng.shuffle(e2)
        fav2, _ = favorite_children(n, e2, solve_sct_lp(k2, e2, solver="ipm").x)
        assert [fav2[perm[i]] for i in range(n)] == [perm[f] if f >= 0 else -1 for f in fav]


def test_sct_ipm_leaves_tied_children_unrounded():
    """Two identical children: the LP's optimal face holds both choices; a simplex picks a vertex (one
    favourite), the interior point shares x = 0.5 between them, so neither is a favourite (x < 0.1)."""
    k = [10.0] * 4
    edges = [(0, 1, 5.0), (0, 2, 5.0), (1, 3, 5.0), (2, 3, 5.0)]
    sol = solve_sct_lp(k, edges, solver="ipm")
    assert sol.status == "optimal" and sol.objective == pytest.approx(35.0)
    assert sol.x == pytest.approx([0.5] * 4, abs=1e-6)
    assert favorite_children(4, edges, sol.x)[0] == [-1] * 4
    assert sum(f >= 0 for f in favorite_children(4, edges, solve_sct_lp(k, edges, solver="highs").x)[0]) == 2


def test_the_balanced_celeritas_variants_are_never_worse_than_the_paper():
    """The balanced variants try the paper's own setting (memory-only fusion, first-placed anchor) among theirs."""
    from dplace.testing import random_instance

    rng = random.Random(6)
    for _ in range(25):
        inst = random_instance(rng, comm="parallel", n_ops=rng.randint(3, 12))
        for paper in ("celeritas", "order_place"):
            a, b = dplace.solve(inst, paper), dplace.solve(inst, paper + "_balanced")
            if a.status == "infeasible":
                continue
            assert (not b.memory_ok, b.makespan) <= (not a.memory_ok, a.makespan + 1e-9), (inst.name, paper)


def test_a_backward_op_colocated_with_its_forward_op_follows_it():
    """The bundled training graphs colocate each backward op with its forward op: it follows (same group);
    a backward op in another group stays in the placed graph."""
    ops = [Op("f", 10, 5, colocation="g"), Op("v", 1, 1, colocation="h"), Op("b", 20, 5, colocation="g", extra={"forward_of": "f"}),
           Op("c", 5, 5, colocation="h", extra={"forward_of": "f"})]
    edges = [Edge("f", "b", 10), Edge("v", "c", 10), Edge("b", "c", 10)]
    inst = Instance("coloc", [Device(f"d{d}", 100) for d in range(2)], ops, edges, link=Link(1.0, 10.0))
    fg = forward_graph(inst)
    assert fg.lead == [0, 1, 0, 3] and [inst.ops[o].id for o in fg.kept] == ["f", "v", "c"]
    res = dplace.solve(inst, "m_etf")
    assert res.placement[2] == res.placement[0] and res.placement[3] == res.placement[1]


def test_sct_ipm_is_solved_in_units_of_its_largest_time():
    """Times from 1 µs to 1e5 µs in one LP: the interior point (in units of the largest time) still finds
    the optimum and reports it in µs, as the simplex does."""
    rng = random.Random(3)
    n = 40
    k = [rng.choice([1.0, 1e5]) * rng.uniform(1, 2) for _ in range(n)]
    edges = [(a, b, rng.uniform(10, 1e4)) for b in range(1, n) for a in rng.sample(range(b), min(b, 2))]
    ipm, simplex = solve_sct_lp(k, edges, solver="ipm"), solve_sct_lp(k, edges, solver="highs")
    assert ipm.status == simplex.status == "optimal"
    assert ipm.objective == pytest.approx(simplex.objective, rel=1e-6)
