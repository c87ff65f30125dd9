"""Every proven bound against optima worked out independently: brute force on tiny random instances,
and on 30-60-op series compositions whose optimum is the sum of brute-forced blocks (proof below)."""
import json
import random

import pytest

from dplace.bounds import (
    anchored_split_bound, anchored_work_bound, bound_portfolio, critical_path_length, energetic_bound, lower_bound_parts,
    lower_bound_with_source, memory_path_bound, work_bound,
)
from dplace.formulations.bounds_segments import segment_bound, segments
from dplace.errors import InfeasibleError
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.instance.io import instance_to_dict
from dplace.testing import random_instance, series_composition
from formulations._brute import brute_force

pytestmark = pytest.mark.solver  # the segment bound runs CP-SAT

TOL = 1e-6


def _opt(inst):
    try:
        return brute_force(inst)[0]
    except InfeasibleError:
        return None


@pytest.mark.parametrize("integer", [True, False])
def test_every_bound_at_most_brute_force_optimum(integer):
    rng = random.Random(11 if integer else 12)
    checked = stronger = 0
    for _ in range(40):
        inst = random_instance(rng, n_ops=rng.randint(3, 6), integer=integer, edge_prob=0.35)
        opt = _opt(inst)
        if opt is None:
            continue
        parts = bound_portfolio(inst, segments=True, time_limit_s=5.0)
        for b in parts:
            assert b.value <= opt + TOL * max(1.0, opt), (inst.name, b.name, b.value, opt, json.dumps(instance_to_dict(inst)))
        best = max(b.value for b in parts)
        stronger += best > max(critical_path_length(inst), work_bound(inst)) + 1e-9
        checked += 1
    assert checked >= 25
    assert stronger >= 1  # the new bounds do see something the old ones did not


@pytest.mark.parametrize("comm", ["sequential", "parallel"])
def test_pinned_links_at_most_brute_force_and_sees_link_contention(comm):
    """Pinned producers and consumers on different devices: the forced sends queue on their link in
    sequential comm. The bound never exceeds the brute-force optimum (both comm modes) and, in
    sequential comm, exceeds every other cheap bound on some instances."""
    from dplace.bounds import lower_bound_parts, pinned_links_bound

    rng = random.Random(31)
    checked = sees = 0
    for i in range(40):
        k = rng.randint(2, 3)  # k producers pinned on d0, each feeding a consumer pinned on d1
        ops = [Op(f"p{j}", rng.randint(1, 3), 0, device="d0") for j in range(k)]
        ops += [Op(f"c{j}", rng.randint(1, 3), 0, device="d1") for j in range(k)]
        ops += [Op(f"x{j}", rng.randint(1, 4), 0) for j in range(rng.randint(0, 2))]
        edges = [Edge(f"p{j}", f"c{j}", float(rng.randint(2, 8))) for j in range(k)]
        if len(ops) > 2 * k and rng.random() < 0.7:
            edges.append(Edge("p0", ops[-1].id, float(rng.randint(0, 3))))
        inst = Instance(f"pl{i}", [Device("d0", 1 << 30), Device("d1", 1 << 30)], ops, edges,
                        link=Link(float(rng.randint(0, 2)), 1.0), comm=comm)
        opt = _opt(inst)
        b = pinned_links_bound(inst)
        assert b <= opt + TOL * max(1.0, opt), (json.dumps(instance_to_dict(inst)), b, opt)
        # forced_links generalises pinned_links (it finds these sends too): the others without both
        others = {n: v for n, v in lower_bound_parts(inst).items() if n not in ("pinned_links", "forced_links")}
        sees += b > max(others.values()) + 1e-9
        checked += 1
    assert checked == 40
    if comm == "sequential":
        assert sees >= 5


@pytest.mark.parametrize("seed,blocks", [(1, [4] * 8), (2, [5, 3, 4, 5, 4, 3, 5, 4, 5, 4, 3])])
def test_bounds_against_exact_optimum_of_series_compositions(seed, blocks):
    inst, opt = series_composition(random.Random(seed), blocks)
    assert 30 <= inst.n <= 60
    parts = {b.name: b.value for b in bound_portfolio(inst, segments=True, time_limit_s=20.0)}
    for name, v in parts.items():
        assert v <= opt + TOL * opt, (name, v, opt)
    # every shared op is a cut, each block is solved exactly: the segment bound reaches the optimum
    # (CP-SAT's time per segment raised so that a loaded machine still proves each block)
    sb = segment_bound(inst, time_limit_s=120.0, segment_time_s=20.0)
    assert sb.value == pytest.approx(opt, rel=1e-9)
    assert sb.value > parts["critical_path"]


def test_segments_cut_only_where_every_kept_op_is_comparable():
    inst, _ = series_composition(random.Random(3), [4, 5, 4, 4, 5, 4, 4])
    for w in (0, 2, 8):
        path, segs = segments(inst, w)
        anc = {o: set() for o in range(inst.n)}
        for o in inst.topo:
            for e in inst.succ[o]:
                anc[inst.edst[e]] |= anc[o] | {o}
        kept = [o for s in segs for o in s.ops] + [s.first for s in segs if s.first is not None]
        for s in segs:
            for c in (s.first, s.last):
                if c is None:
                    continue
                for o in kept:
                    assert o == c or o in anc[c] or c in anc[o]
        assert len({o for s in segs for o in s.ops}) == sum(len(s.ops) for s in segs)


def test_memory_path_counts_forced_transfers():
    # a chain of 4 ops, each needing more than half a device: 4 devices, 3 transfers, all on the path
    ops = [Op(f"c{i}", 5, 60) for i in range(4)]
    edges = [Edge(f"c{i}", f"c{i + 1}", 4.0) for i in range(3)]
    inst = Instance("forced", [Device(f"d{d}", 100) for d in range(4)], ops, edges, link=Link(1.0, 2.0))
    opt = brute_force(inst)[0]
    assert opt == pytest.approx(20 + 3 * (1 + 2))
    assert memory_path_bound(inst) == pytest.approx(opt)
    assert critical_path_length(inst) == 20
    # colocation: c1 and c2 together cannot be split, and the group needs a device of its own
    ops = [Op("c0", 5, 40), Op("c1", 5, 40, colocation="g"), Op("c2", 5, 40, colocation="g"), Op("c3", 5, 40)]
    inst = Instance("coloc", [Device(f"d{d}", 100) for d in range(3)], ops, edges, link=Link(1.0, 2.0))
    assert memory_path_bound(inst) == pytest.approx(20 + 1 * 3)
    assert memory_path_bound(inst) <= brute_force(inst)[0] == pytest.approx(20 + 2 * 3)


def _fork_join():
    """src -> five ops -> snk on 3 devices, every edge dearer than most ops: spreading costs transfers."""
    ops = [Op("src", 1)] + [Op(f"b{i}", t) for i, t in enumerate([5, 4, 6, 3, 5])] + [Op("snk", 1)]
    edges = [Edge("src", f"b{i}", 4.0) for i in range(5)] + [Edge(f"b{i}", "snk", 2.0) for i in range(5)]
    return Instance("fork", [Device(f"d{d}", 100) for d in range(3)], ops, edges, link=Link(1.0, 1.0))


def test_anchored_work_sees_the_cost_of_spreading():
    inst = _fork_join()
    opt = brute_force(inst)[0]
    assert opt == pytest.approx(15.0)
    a = anchored_work_bound(inst)
    assert a <= opt + 1e-9
    assert a > max(critical_path_length(inst), work_bound(inst), energetic_bound(inst)) + 1.0


def _anchored_random(rng):
    """A random instance given one source and one sink (the case anchored_work is for)."""
    b = random_instance(rng, n_ops=rng.randint(2, 4), n_devices=3, integer=rng.random() < 0.5, edge_prob=0.3)
    ops = list(b.ops) + [Op("src", rng.randint(0, 3), 0), Op("snk", rng.randint(0, 3), 0)]
    edges = list(b.edges)
    for o in range(b.n):
        if not b.pred[o]:
            edges.append(Edge("src", b.ops[o].id, float(rng.randint(0, 8))))
        if not b.succ[o]:
            edges.append(Edge(b.ops[o].id, "snk", float(rng.randint(0, 8))))
    return Instance(b.name + "-anchored", b.devices, ops, edges, link=b.link, pairs=b.pairs, comm=b.comm)


def test_anchored_work_at_most_brute_force_with_one_source_and_sink():
    rng = random.Random(21)
    checked = 0
    for _ in range(30):
        inst = _anchored_random(rng)
        opt = _opt(inst)
        if opt is None:
            continue
        assert anchored_work_bound(inst) <= opt + TOL * max(1.0, opt), json.dumps(instance_to_dict(inst))
        checked += 1
    assert checked >= 20


def _branches(rng, comm):
    """src -> 1-3 branches of 1-2 ops -> snk (the shape of a NAS cell between two cuts), random times,
    edges often dearer than ops; memory, colocation and pins now and then."""
    ops, edges = [Op("src", rng.randint(0, 3), rng.randint(0, 3))], []
    for b in range(rng.randint(1, 3)):
        prev = "src"
        for j in range(rng.randint(1, 2)):
            name = f"b{b}_{j}"
            ops.append(Op(name, rng.randint(0, 6), rng.randint(0, 3)))
            edges.append(Edge(prev, name, float(rng.randint(0, 8))))
            prev = name
        edges.append(Edge(prev, "snk", float(rng.randint(0, 8))))
    ops.append(Op("snk", rng.randint(0, 3), rng.randint(0, 3)))
    if rng.random() < 0.3:  # colocation ties two ops (maybe src and snk)
        a, b = rng.sample(range(len(ops)), 2)
        ops[a] = Op(ops[a].id, ops[a].time, ops[a].memory, colocation="g")
        ops[b] = Op(ops[b].id, ops[b].time, ops[b].memory, colocation="g")
    if rng.random() < 0.2:
        k = rng.randrange(len(ops))
        if ops[k].colocation is None:
            ops[k] = Op(ops[k].id, ops[k].time, ops[k].memory, device=f"d{rng.randrange(2)}")
    total = sum(op.memory for op in ops)
    cap = max(max(op.memory for op in ops) + 3, int(total * rng.choice([0.5, 0.7, 1.0])))
    m = rng.randint(2, 3)
    return Instance("branches", [Device(f"d{d}", cap) for d in range(m)], ops, edges,
                    link=Link(float(rng.randint(0, 2)), float(rng.choice([1, 2]))), comm=comm)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_anchored_split_at_most_the_oracle_optimum(comm):
    """The bound against the oracle's brute force (written from the model's text, never calling the
    simulator), both comm modes: NAS-cell-like forks with one source and sink, and random instances (one
    source and sink added, or as they come); it sees more than every other cheap bound on some."""
    from dplace.verify.oracle import brute_force as oracle

    rng = random.Random(41 if comm == "parallel" else 42)
    checked = sees = 0
    for i in range(90):
        if i % 3 == 0:
            inst = _branches(rng, comm)
        elif i % 3 == 1:
            inst = _anchored_random(rng).replace(comm=comm)
        else:
            inst = random_instance(rng, n_ops=rng.randint(2, 6), comm=comm)
        orc = oracle(inst)
        if orc.optimum is None:
            continue
        assert orc.complete
        b = anchored_split_bound(inst)
        assert b <= orc.optimum + TOL * max(1.0, orc.optimum), json.dumps(instance_to_dict(inst))
        others = {k: v for k, v in lower_bound_parts(inst).items() if k != "anchored_split"}
        sees += b > max(others.values()) + 1e-9
        checked += 1
    assert checked >= 70
    assert sees >= 5


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_anchored_split_case_i_takes_tx_as_the_tail_on_the_source_device(comm):
    """Case (i) (source and sink apart): b1 (pinned with the source) is not on the sink's device, so it
    ends at least its transfer to the sink (8) before the makespan, not only its tail (3): 15, the
    brute-force optimum (heads and tails alone: 14; every other cheap bound 12 at most)."""
    from dplace.verify.oracle import brute_force as oracle

    ops = [Op("src", 3, 3), Op("b0", 2, 1), Op("b1", 6, 0, device="d0"), Op("snk", 3, 3)]
    edges = [Edge("src", "b0", 3.0), Edge("b0", "snk", 7.0), Edge("src", "b1", 2.0), Edge("b1", "snk", 8.0)]
    inst = Instance("tx", [Device(f"d{d}", 6) for d in range(2)], ops, edges, link=Link(0.0, 1.0), comm=comm)
    b = anchored_split_bound(inst)
    assert b == pytest.approx(15.0)
    assert b <= oracle(inst).optimum + TOL
    assert max(v for k, v in lower_bound_parts(inst).items() if k != "anchored_split") <= 12.0 + 1e-9


def test_anchored_split_is_the_optimum_of_a_fork_whose_branches_cost_a_round_trip():
    """Three branches of 3 between two ops that colocation ties (a layer's forward and backward op),
    transfers of 5: running one branch away costs a round trip of 10, more than the three in a row
    (1 + 9 + 1 = 11): the optimum is the serial one, which the bound proves, while every other cheap
    bound stays near the critical path, 5. Untied, the bound is 10 (src and snk on two devices: snk
    waits for a transfer, 1 + 3 + 5 + 1 at the earliest), below the optimum."""
    ops = [Op("src", 1, colocation="layer")] + [Op(f"b{i}", 3) for i in range(3)] + [Op("snk", 1, colocation="layer")]
    edges = [Edge("src", f"b{i}", 5.0) for i in range(3)] + [Edge(f"b{i}", "snk", 5.0) for i in range(3)]
    inst = Instance("fork3", [Device(f"d{d}", 100) for d in range(3)], ops, edges, link=Link(0.0, 1.0))
    opt = brute_force(inst)[0]
    assert opt == pytest.approx(11.0)
    assert anchored_split_bound(inst) == pytest.approx(11.0)
    others = {k: v for k, v in lower_bound_parts(inst).items() if k != "anchored_split"}
    assert max(others.values()) < 6.0


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_anchored_split_counts_the_ops_that_cannot_leave_the_source_device(comm):
    """src -> three branches of 3 -> snk, untied, tensors out of src of 10, into snk of 1 (NASNet-Mobile's
    stem: its tensors take 16.8 ms). With src and snk on two devices every branch stays on src's device
    (away it would start at 11), so that case costs 1 + 9 + 1 (src, the branches one at a time, snk after
    them: the one-device schedule with heads and tails) and the bound's case (i) is 11 where it was 6
    (snk's transfer alone): the brute-force optimum 11 (all on one device), which no other bound sees."""
    from dplace.verify.oracle import brute_force as oracle

    ops = [Op("src", 1)] + [Op(f"b{i}", 3) for i in range(3)] + [Op("snk", 1)]
    edges = [Edge("src", f"b{i}", 10.0) for i in range(3)] + [Edge(f"b{i}", "snk", 1.0) for i in range(3)]
    inst = Instance("stem3", [Device(f"d{d}", 100) for d in range(3)], ops, edges, link=Link(0.0, 1.0), comm=comm)
    orc = oracle(inst)
    assert orc.complete and orc.optimum == pytest.approx(11.0)
    assert anchored_split_bound(inst) == pytest.approx(11.0)
    others = {k: v for k, v in lower_bound_parts(inst).items() if k != "anchored_split"}
    assert max(others.values()) < 6.0


def test_jackson_preemptive_schedule_is_at_most_every_one_machine_order():
    """:func:`_jps` (the one-device floor of ``anchored_split``) against every order of 1-6 ops on one
    machine (each at or after its release, one at a time): never above the best order's max(end + tail),
    never below max(r + p + q) nor min r + sum p + min q, and equal to the best order without releases."""
    import itertools

    from dplace.bounds.anchored import _jps

    rng = random.Random(5)
    for _ in range(300):
        n = rng.randint(1, 6)
        r = [float(rng.randint(0, 8)) for _ in range(n)]
        p = [float(rng.randint(0, 5)) for _ in range(n)]
        q = [float(rng.randint(0, 8)) for _ in range(n)]
        if rng.random() < 0.2:
            r = [0.0] * n
        best = float("inf")
        for perm in itertools.permutations(range(n)):
            t = worst = 0.0
            for o in perm:
                t = max(t, r[o]) + p[o]
                worst = max(worst, t + q[o])
            best = min(best, worst)
        j = _jps(r, p, q)
        assert j <= best + 1e-9, (r, p, q)
        assert j >= max(a + b + c for a, b, c in zip(r, p, q)) - 1e-9
        assert j >= min(r) + sum(p) + min(q) - 1e-9
        if not any(r):
            assert j == pytest.approx(best)  # no releases: tails last-first is optimal, no preemption


def test_energetic_sees_what_path_and_work_miss():
    # m = 2: three independent chains of 4 + 4 and one op of 8 beside a 1-op chain: heads/tails overlap
    ops = [Op("a", 4), Op("b", 4), Op("c", 4), Op("d", 4), Op("e", 8), Op("f", 1)]
    edges = [Edge("a", "b"), Edge("c", "d")]
    inst = Instance("ener", [Device("d0", 10), Device("d1", 10)], ops, edges, link=Link(0.0, 1.0))
    opt = brute_force(inst)[0]
    e = energetic_bound(inst)
    assert e <= opt + 1e-9
    assert e > max(critical_path_length(inst), work_bound(inst)) - 1e-9


def test_energetic_at_scale_is_valid():
    from dplace.formats.generate import transformer_training
    from dplace.registry import solve

    inst = transformer_training(3000, 4, seed=0)
    e = energetic_bound(inst)
    assert critical_path_length(inst) - 1e-6 <= e <= solve(inst, "heft").makespan + 1e-6


def test_lower_bound_names_its_source_in_results_and_cli(tmp_path, capsys):
    from dplace.cli import main
    from dplace.registry import solve

    ops = [Op(f"c{i}", 5, 60) for i in range(4)]
    edges = [Edge(f"c{i}", f"c{i + 1}", 4.0) for i in range(3)]
    inst = Instance("forced", [Device(f"d{d}", 100) for d in range(4)], ops, edges, link=Link(1.0, 2.0))
    lb, src = lower_bound_with_source(inst)
    assert src == "memory_path" and lb == pytest.approx(29)
    res = solve(inst, "heft")
    assert res.bound_source == "memory_path" and res.to_dict()["bound_source"] == "memory_path"
    path = tmp_path / "i.json"
    path.write_text(json.dumps(instance_to_dict(inst)))
    assert main(["info", str(path), "--bounds", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {b["name"] for b in info["bounds"]} >= {"critical_path", "energetic", "memory_path", "segments"}
    assert all(b["time_s"] >= 0 for b in info["bounds"])
    assert main(["compare", str(path), "--methods", "heft,m_etf"]) == 0
    assert "source memory_path (from heft)" in capsys.readouterr().out


def test_cheap_parts_are_what_lower_bound_takes():
    inst = random_instance(random.Random(5), n_ops=8)
    parts = lower_bound_parts(inst)
    assert lower_bound_with_source(inst)[0] == max(parts.values())


def test_segment_bound_respects_its_time_limit_and_stays_a_bound():
    inst, opt = series_composition(random.Random(4), [5] * 8)
    sb = segment_bound(inst, time_limit_s=0.0)  # nothing solved: each segment counts its critical path
    assert critical_path_length(inst) - 1e-9 <= sb.value <= opt + 1e-9


def test_segment_bound_builds_no_narrower_decomposition_once_out_of_time(monkeypatch):
    # the narrower windows' decompositions are built when a segment is refined, never up front: with the
    # budget spent only the widest one is made (the rest of the phase was not stoppable); with time the
    # bound is the one every level gives
    import dplace.formulations.bounds_segments as bs

    inst, _ = series_composition(random.Random(6), [6, 5, 7, 5])
    made = []
    real = bs.segments
    monkeypatch.setattr(bs, "segments", lambda g, w: made.append(w) or real(g, w))
    cut = bs.segment_bound(inst, time_limit_s=0.0)
    assert made == [48]
    assert critical_path_length(inst) - 1e-9 <= cut.value
    made.clear()
    full = bs.segment_bound(inst, windows=(48, 24, 12, 6, 3, 0), time_limit_s=60.0, segment_time_s=0.01, max_segment_ops=4)
    assert made[0] == 48 and len(made) > 1  # refined: the narrower levels made on the way
    assert full.value >= cut.value - 1e-9


def test_segment_sub_instances_read_op_fields_without_building_ops(tmp_path):
    # id, colocation and own pin per op as inst.ops has them, for instances built, read from JSON and
    # from .npz; a freshly read instance's segment bound builds no Op
    from dplace.formulations.bounds_segments import _op_fields
    from dplace.instance.io import load_instance, save_instance
    from dplace.instance.npz import load_npz, save_npz

    rng = random.Random(11)
    seen = set()
    for k in range(12):
        inst = random_instance(rng, n_ops=rng.randint(2, 12))
        seen |= {"coloc" for op in inst.ops if op.colocation} | {"pin" for op in inst.ops if op.device}
        save_instance(inst, tmp_path / f"{k}.json")
        save_npz(inst, tmp_path / f"{k}.npz")
        for g in (inst, load_instance(tmp_path / f"{k}.json"), load_npz(tmp_path / f"{k}.npz")):
            ids, coloc, pin = _op_fields(g)
            assert list(zip(ids, coloc, pin)) == [(op.id, op.colocation, op.device) for op in inst.ops]
    assert seen == {"coloc", "pin"}
    fresh = load_instance(tmp_path / "0.json")
    segment_bound(fresh, time_limit_s=5.0)
    assert fresh._ops is None


def test_compare_sets_the_segment_bound_beside_the_methods(tmp_path, capsys):
    from dplace.cli import main

    inst, opt = series_composition(random.Random(6), [5] * 10)
    assert inst.n >= 50
    path = tmp_path / "s.json"
    path.write_text(json.dumps(instance_to_dict(inst)))
    assert main(["compare", str(path), "--methods", "heft,m_etf", "--bound-time", "20", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    # every block is a segment solved exactly: the bound is the optimum, and it is the best bound printed
    assert data["best_lower_bound"] == pytest.approx(opt, rel=1e-9)
    assert data["best_bound_source"].startswith("segments (bound portfolio")
    assert data["bound_portfolio"]["source"] == "segments"
    assert main(["compare", str(path), "--methods", "heft", "--bound-time", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["bound_portfolio"] is None and data["best_lower_bound"] < opt

