"""Optimal Operation Fusion and the coarse graph (issue #4): properties, DP optimality, mapping back."""
import itertools
import random

import pytest
from hypothesis import given, settings

import dplace
from dplace.errors import InvalidInstanceError
from dplace.heuristics.coarsen import ccr, coarsen, coarsen_report, fusion_breakpoints
from dplace.heuristics.orders import cpd_topo_order, is_topological_order
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.schedule.ranks import edge_costs
from dplace.schedule.simulate import simulate
from dplace.testing import colocated, contract_instances, instances, random_instance


def _is_acyclic(inst: Instance) -> bool:
    # Instance validation already rejects cycles; check the cluster indices are a topological order too
    return all(a < b for a, b in zip(inst.esrc, inst.edst))


def _check_coarsening(inst: Instance, cz, R: int) -> None:
    cg = cz.coarse
    assert _is_acyclic(cg)
    assert sorted(o for ms in cz.members for o in ms) == list(range(inst.n))
    assert all(cz.cluster_of[o] == k for k, ms in enumerate(cz.members) for o in ms)
    assert is_topological_order(inst, [o for ms in cz.members for o in ms])
    for k, ms in enumerate(cz.members):
        assert 1 <= len(ms) <= R
        plain = sum(inst.mem[o] for o in ms)
        if len(ms) > 1:
            assert plain <= cz.mem_limit
        else:
            assert (k in cz.oversize) == (plain > cz.mem_limit)
        for d in range(inst.m):  # summed time per device
            assert cg.dur[k][d] == pytest.approx(sum(inst.dur[o][d] for o in ms))
        pins = {inst.pinned[o] for o in ms if inst.pinned[o] >= 0}
        assert len(pins) <= 1 and cg.pinned[k] == (pins.pop() if pins else -1)
    # memory: each group's whole memory sits at its anchor; totals agree
    assert sum(cg.mem) == sum(inst.mem)
    # edges: summed bytes between clusters, and the DP's cut cost is their mean transfer time
    c = edge_costs(inst, "mean")
    cut = sum(c[e] for e in range(len(inst.esrc)) if cz.cluster_of[inst.esrc[e]] != cz.cluster_of[inst.edst[e]])
    assert cz.cut_cost == pytest.approx(cut)
    assert sum(cg.ebytes) == pytest.approx(sum(b for e, b in enumerate(inst.ebytes)
                                               if cz.cluster_of[inst.esrc[e]] != cz.cluster_of[inst.edst[e]]))


@settings(max_examples=150, deadline=None)
@given(instances())
def test_coarsening_properties(inst):
    for R, M in ((1, 0.25), (3, 0.1), (200, 0.25), (200, 5.0)):
        cz = coarsen(inst, R=R, M=M)
        _check_coarsening(inst, cz, R)
        # mapping back places every original op, keeps colocation and pins, and memory is exact
        cpl = [p if p >= 0 else k % inst.m for k, p in enumerate(cz.coarse.pinned)]
        pl = cz.expand(cpl)
        assert len(pl) == inst.n and all(0 <= d < inst.m for d in pl)
        for ms in inst.groups:
            assert len({pl[o] for o in ms}) == 1
        for o in range(inst.n):
            if inst.pinned[o] >= 0:
                assert pl[o] == inst.pinned[o]
        assert simulate(inst, pl).memory == simulate(cz.coarse, cpl).memory


def _brute_force_cut(inst, order, R, lim, work=None, pins_alone=False):
    """Min cut cost over all segmentations of ``order`` that the DP allows (tiny n only)."""
    n = len(order)
    c = edge_costs(inst, "mean")
    pos = {o: i for i, o in enumerate(order)}
    best = None
    for mask in range(1 << (n - 1)):
        bps = [0] + [i + 1 for i in range(n - 1) if mask >> i & 1] + [n]
        ok = True
        for a, b in zip(bps, bps[1:]):
            seg = order[a:b]
            pins = {inst.pinned[o] for o in seg if inst.pinned[o] >= 0 or pins_alone}
            heavy = work is not None and sum(sum(inst.dur[o]) / inst.m for o in seg) > work * (1 + 1e-9)
            if b - a > R or (b - a > 1 and (sum(inst.mem[o] for o in seg) > lim or heavy)) or len(pins) > 1:
                ok = False
                break
        if not ok:
            continue
        seg_of = {}
        for k, (a, b) in enumerate(zip(bps, bps[1:])):
            for i in range(a, b):
                seg_of[i] = k
        cut = sum(c[e] for e in range(len(inst.esrc)) if seg_of[pos[inst.esrc[e]]] != seg_of[pos[inst.edst[e]]])
        best = cut if best is None else min(best, cut)
    return best


def test_dp_is_optimal_against_brute_force():
    rng = random.Random(7)
    for _ in range(120):
        inst = random_instance(rng, n_ops=rng.randint(1, 8), colocation=False)
        order = cpd_topo_order(inst)
        for R in (1, 2, 3, 8):
            lim = rng.choice([3, 6, 10, 100])
            _, got = fusion_breakpoints(inst, order, R, lim)
            assert got == pytest.approx(_brute_force_cut(inst, order, R, lim), abs=1e-9)


def test_dp_with_work_limit_and_lone_pins_is_optimal_against_brute_force():
    rng = random.Random(8)
    for _ in range(80):
        inst = random_instance(rng, n_ops=rng.randint(1, 8), colocation=False)
        order = cpd_topo_order(inst)
        tot = sum(sum(r) for r in inst.dur) / inst.m
        for R in (2, 8):
            lim = rng.choice([6, 100])
            work = rng.choice([None, tot / 4, tot / 2])
            bps, got = fusion_breakpoints(inst, order, R, lim, work_limit=work, pins_alone=True)
            assert got == pytest.approx(_brute_force_cut(inst, order, R, lim, work, True), abs=1e-9)
            for a, b in zip(bps, bps[1:]):  # each cluster is all pinned to one device or all unpinned
                assert len({inst.pinned[o] for o in order[a:b]}) == 1


def test_chain_with_room_is_one_cluster_and_R_cuts_it():
    inst = next(i for i in contract_instances() if i.name == "chain-parallel")
    assert coarsen(inst).members == [[0, 1, 2, 3]]
    assert coarsen(inst, R=2).members == [[0, 1], [2, 3]]
    # M in bytes: 10 bytes per op, 25 bytes => at most two ops per cluster
    assert [len(ms) for ms in coarsen(inst, mem_limit=25).members] == [2, 2]


def test_single_op_over_M_is_reported():
    ops = [Op("a", 1, 5), Op("big", 1, 80), Op("b", 1, 5)]
    inst = Instance("o", [Device("d0", 100), Device("d1", 100)], ops, [Edge("a", "big", 1), Edge("big", "b", 1)])
    cz = coarsen(inst, M=0.25)
    big = cz.cluster_of[1]
    assert cz.members[big] == [1] and cz.oversize == [big]
    assert coarsen_report(inst)["oversize_ops"] == 1


def test_colocation_group_follows_its_anchor():
    inst = colocated()
    cz = coarsen(inst, R=2)
    g = 0
    anchor = cz.anchor[g]
    assert 0 in cz.members[anchor]  # 'v' (40 bytes) is the group's largest member
    cg = cz.coarse
    assert cg.mem[anchor] >= sum(inst.mem[o] for o in inst.groups[g])
    assert all(op.colocation is None for op in cg.ops)
    for d in range(inst.m):
        pl = cz.expand([d if k == anchor else 1 - d for k in range(cg.n)])
        assert {pl[o] for o in inst.groups[g]} == {d}


def test_max_nodes_merges_adjacent_clusters():
    rng = random.Random(3)
    inst = random_instance(rng, n_ops=30, n_devices=2, colocation=False, pins=False, memory_slack=3.0)
    full = coarsen(inst, R=1)
    assert full.n_clusters == 30
    for K in (1, 4, 10, 29):
        cz = coarsen(inst, R=1, max_nodes=K)
        assert cz.n_clusters <= K
        assert _is_acyclic(cz.coarse)
        assert sorted(o for ms in cz.members for o in ms) == list(range(inst.n))


def test_expand_order_is_valid_for_the_simulator():
    from dplace.heuristics.celeritas import adjusting_placement

    rng = random.Random(11)
    for _ in range(40):
        inst = random_instance(rng, n_ops=rng.randint(2, 12))
        cz = coarsen(inst, R=rng.choice([1, 2, 3]))
        cpl, state = adjusting_placement(cz.coarse)
        od = cz.expand_order(state.order(), cpl)
        pl = cz.expand(cpl)
        sched = simulate(inst, pl, od)  # raises on a deadlocking order
        assert sorted(o for lst in od for o in lst) == list(range(inst.n))
        res = dplace.make_result(inst, "x", pl, od)
        assert dplace.check(inst, res).ok
        assert sched.makespan == res.makespan


def test_ccr_and_report():
    ops = [Op("a", 10, 1), Op("b", 30, 1), Op("c", 20, 1)]
    inst = Instance("r", [Device("d0", 10), Device("d1", 10)], ops, [Edge("a", "b", 40), Edge("b", "c", 80)],
                    link=Link(2.0, 4.0))
    # mean transfer (2 + 10 + 2 + 20) / 2 = 17 over mean op time 20
    assert ccr(inst) == pytest.approx(17 / 20)
    rep = coarsen_report(inst, R=200, M=1.0)
    assert rep["nodes_before"] == 3 and rep["nodes_after"] == 1
    assert rep["ccr_before"] == pytest.approx(0.85) and rep["ccr_after"] == 0.0
    for key in ("edges_before", "edges_after", "mem_limit_bytes", "cut_cost_us", "moved_colocated_ops"):
        assert key in rep


def test_bad_arguments_are_one_line_errors():
    inst = colocated()
    with pytest.raises(InvalidInstanceError, match="R must be"):
        coarsen(inst, R=0)
    with pytest.raises(InvalidInstanceError, match="M must be"):
        coarsen(inst, M=0)
    with pytest.raises(InvalidInstanceError, match="not topological"):
        coarsen(inst, order=list(reversed(inst.topo)))
    with pytest.raises(InvalidInstanceError, match="must list all"):
        coarsen(inst, order=[0])
    with pytest.raises(InvalidInstanceError, match="max_nodes"):
        coarsen(inst, max_nodes=0)


def test_contract_graphs_coarsen():
    for inst in contract_instances():
        for R in (1, 2, 200):
            _check_coarsening(inst, coarsen(inst, R=R), R)


def test_all_segmentations_small():
    # the DP never does worse than any allowed segmentation on a dense 6-op graph
    ops = [Op(f"o{i}", 1, 1) for i in range(6)]
    edges = [Edge(f"o{i}", f"o{j}", (i * 7 + j * 3) % 5) for i, j in itertools.combinations(range(6), 2)]
    inst = Instance("dense", [Device("d0", 100), Device("d1", 100)], ops, edges, link=Link(1.0, 1.0))
    order = inst.topo
    for R in (1, 2, 3, 6):
        _, got = fusion_breakpoints(inst, order, R, 100)
        assert got == pytest.approx(_brute_force_cut(inst, order, R, 100))


def test_max_nodes_with_colocation_groups_stays_small_and_fits():
    from dplace.formats.generate import transformer_training

    inst = transformer_training(600, 4)
    assert inst.groups
    fine = coarsen(inst, M=0.02)
    for K in (8, 20):
        cz = coarsen(inst, M=0.02, max_nodes=K)
        assert fine.n_clusters > K >= cz.n_clusters
        assert max(cz.coarse.mem) <= min(inst.capacity) and sum(cz.coarse.mem) == sum(inst.mem)
        pl = cz.expand([k % inst.m for k in range(cz.coarse.n)])
        assert all(len({pl[o] for o in ms}) == 1 for ms in inst.groups)
