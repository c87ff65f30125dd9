"""The brute-force oracle (dplace.verify.oracle): hand-worked examples from the model text, its search against
plain exhaustive enumeration, its fuzzer's coverage, and the simulator against the oracle's timing."""
import random

import pytest

from dplace import Device, Edge, Instance, Link, Op, simulate
from dplace.verify.oracle import brute_force, exhaustive, time_schedule
from dplace.verify.fuzz import fuzz_instance


def _inst(ops, edges, *, m=2, comm="parallel", lat=0.0, bw=1.0, memory=100, speeds=None, pairs=None):
    devs = [Device(f"d{i}", memory, (speeds or [1.0] * m)[i]) for i in range(m)]
    return Instance("t", devs, ops, [Edge(a, b, x) for a, b, x in edges], link=Link(lat, bw), comm=comm,
                    pairs=pairs or {})


def _both(inst, pl, order):
    """The oracle's makespan, after checking the simulator agrees on every start and end."""
    t = time_schedule(inst, pl, order)
    s = simulate(inst, pl, order)
    assert s.start == pytest.approx(t.start) and s.end == pytest.approx(t.end)
    return t.makespan


# ------------------------------------------------------------------------------------ hand-worked
def test_transfer_is_latency_plus_bytes_over_bandwidth():
    # a (1 µs) on d0, b (2 µs) on d1: 1 + (2 + 3/1) + 2 = 8
    inst = _inst([Op("a", 1), Op("b", 2)], [("a", "b", 3)], lat=2.0)
    assert _both(inst, [0, 1], [[0], [1]]) == 8.0
    assert _both(inst, [0, 0], [[0, 1], []]) == 3.0  # same device: no transfer


def test_sequential_sends_once_per_destination_with_the_largest_tensor():
    # p (1) on d0 feeds c1 (bytes 2) and c2 (bytes 5) on d1; latency 1, bandwidth 1
    ops = [Op("p", 1), Op("c1", 1), Op("c2", 1)]
    edges = [("p", "c1", 2), ("p", "c2", 5)]
    par = _inst(ops, edges, lat=1.0)
    seq = _inst(ops, edges, lat=1.0, comm="sequential")
    # parallel: c1 ready at 1+1+2 = 4 (4-5), c2 at 1+1+5 = 7 (7-8)
    assert _both(par, [0, 1, 1], [[0], [1, 2]]) == 8.0
    # sequential: one 5-byte send, arriving at 1+1+5 = 7: c1 7-8, c2 8-9
    assert _both(seq, [0, 1, 1], [[0], [1, 2]]) == 9.0


def test_sequential_link_serves_producers_in_finish_order():
    # p1 (1) then p2 (2) on d0, 4 bytes each to q1, q2 on d1; latency 0, bandwidth 1
    ops = [Op("p1", 1), Op("p2", 2), Op("q1", 1), Op("q2", 1)]
    edges = [("p1", "q1", 4), ("p2", "q2", 4)]
    seq = _inst(ops, edges, comm="sequential")
    # p1 0-1, p2 1-3; link: p1's 1-5, p2's waits: 5-9; q1 5-6, q2 9-10
    assert _both(seq, [0, 0, 1, 1], [[0, 1], [2, 3]]) == 10.0
    # parallel: p2's tensor arrives at 3+4 = 7: q2 7-8
    assert _both(_inst(ops, edges), [0, 0, 1, 1], [[0, 1], [2, 3]]) == 8.0


def test_zero_time_op_started_by_a_finish_finishes_after_it():
    # q (0 µs, topological index 0) runs on d0 right after r (2 µs, index 1); both send on d0->d1.
    # Both finish at 2; q could only start when r ended, so r's 1-byte send goes first (2-3), then q's
    # 3-byte send (3-6). x (r's consumer) 3-4, y (q's consumer) 6-7: makespan 7. Taking topological
    # index alone would send q's first (2-5, 5-6) and give 8.
    ops = [Op("q", 0), Op("r", 2), Op("x", 1), Op("y", 1)]
    edges = [("r", "x", 1), ("q", "y", 3)]
    inst = _inst(ops, edges, comm="sequential")
    assert _both(inst, [0, 0, 1, 1], [[1, 0], [2, 3]]) == 7.0


def test_zero_time_producers_send_in_device_order():
    # All producers on link d0->d1 run on d0, so they finish in d0's order (a zero-time op after
    # another); topological index never decides. d0 runs z1 then z0 (both 0 µs, both end at 0): z1's
    # 2-byte send 0-2, then z0's 2-4. d1 runs y (z1's consumer) 2-3, then x 4-5.
    ops = [Op("z0", 0), Op("z1", 0), Op("x", 1), Op("y", 1)]
    edges = [("z0", "x", 2), ("z1", "y", 2)]
    inst = _inst(ops, edges, comm="sequential")
    assert _both(inst, [0, 0, 1, 1], [[1, 0], [3, 2]]) == 5.0


def test_speeds_and_per_device_times():
    inst = _inst([Op("a", 6)], [], speeds=[1.0, 2.0])
    assert brute_force(inst).optimum == 3.0
    pairs = {("d0", "d1"): Link(0.0, 10.0)}  # d0->d1 fast (1 µs for 10 bytes), d1->d0 default (10 µs)
    ops = [Op("a", {"d0": 1, "d1": 5}), Op("b", {"d0": 5, "d1": 1})]
    inst = _inst(ops, [("a", "b", 10)], pairs=pairs)
    r = brute_force(inst)
    assert r.optimum == 3.0 and r.placement == [0, 1]


def test_pins_colocation_and_memory():
    ops = [Op("a", 4, 6), Op("b", 4, 6)]
    assert brute_force(_inst(ops, [])).optimum == 4.0
    assert brute_force(_inst([Op("a", 4, colocation="g"), Op("b", 4, colocation="g")], [])).optimum == 8.0
    assert brute_force(_inst([Op("a", 4, device="d1"), Op("b", 4, device="d1")], [])).optimum == 8.0
    # 6 + 6 bytes never share a 10-byte device: spread, 4 µs; three such ops fit nowhere
    assert brute_force(_inst(ops, [], memory=10)).optimum == 4.0
    r = brute_force(_inst(ops + [Op("c", 1, 6)], [], memory=10))
    assert not r.feasible and r.optimum is None and r.memory_feasible == 0


def test_time_schedule_rejects_orders_against_precedence():
    inst = _inst([Op("a", 1), Op("b", 1)], [("a", "b", 0)])
    with pytest.raises(ValueError):
        time_schedule(inst, [0, 0], [[1, 0], []])


# ---------------------------------------------------------------------------------- self-checks
def test_search_equals_exhaustive_enumeration():
    for seed in range(40):
        inst = fuzz_instance(seed, n_ops=(3, 5))
        a, b = brute_force(inst), exhaustive(inst)
        assert a.feasible == b.feasible, seed
        if b.optimum is None:
            assert a.optimum is None
        else:
            assert a.optimum == pytest.approx(b.optimum, rel=1e-12, abs=1e-15), seed
            assert time_schedule(inst, a.placement, a.order).makespan == a.optimum


def test_time_limit_holds_while_listing_placements():
    # 9 free ops on 8 devices: 8**9 placements would take minutes to list; the limit stops it
    inst = _inst([Op(f"o{i}", i + 1, device=None) for i in range(9)], [], m=8, speeds=[1 + d / 10 for d in range(8)])
    r = brute_force(inst, time_limit_s=0.5)
    assert not r.complete and r.seconds < 5


def test_fuzzer_covers_every_feature():
    seen = set()
    for seed in range(300):
        inst = fuzz_instance(seed)
        seen.add(inst.comm)
        seen.add(f"m{inst.m}")
        if any(isinstance(op.time, dict) for op in inst.ops):
            seen.add("per-device times")
        if len({d.speed for d in inst.devices}) > 1:
            seen.add("speeds")
        if any(op.device for op in inst.ops):
            seen.add("pins")
        if any(op.colocation for op in inst.ops):
            seen.add("colocation")
        if inst.pairs:
            seen.add("pairs")
        if any(min(row) == 0 for row in inst.dur):
            seen.add("zero time")
        if any(b == 0 for b in inst.ebytes):
            seen.add("zero bytes")
        if inst.link.latency == 0:
            seen.add("zero latency")
        if inst.topo != sorted(inst.topo):
            seen.add("non-topological indices")
        times = [t for row in inst.dur for t in row if t > 0]
        if times and max(times) < 1e-1:
            seen.add("tiny")
        if times and min(times) > 1e8:
            seen.add("huge")
        if sum(inst.mem) > min(inst.capacity):
            seen.add("memory binds")
        if sum(inst.capacity) < sum(inst.mem):
            seen.add("nothing fits")
        if len(times) != len(set(times)):
            seen.add("ties")
    want = {"parallel", "sequential", "m2", "m3", "per-device times", "speeds", "pins", "colocation", "pairs",
            "zero time", "zero bytes", "zero latency", "non-topological indices", "tiny", "huge",
            "memory binds", "nothing fits", "ties"}
    assert want <= seen, want - seen


# ------------------------------------------------------------------- the simulator against the text
def _random_schedule(inst, rng):
    """A random placement (pins and colocation ignored: timing does not need them) and a random
    per-device order that respects precedence (the restriction of a random linear extension)."""
    pl = [rng.randrange(inst.m) for _ in range(inst.n)]
    indeg = [len(p) for p in inst.pred]
    ready = [o for o in range(inst.n) if indeg[o] == 0]
    ext = []
    while ready:
        o = ready.pop(rng.randrange(len(ready)))
        ext.append(o)
        for e in inst.succ[o]:
            v = inst.edst[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return pl, [[o for o in ext if pl[o] == d] for d in range(inst.m)]


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_simulate_agrees_with_the_oracle(comm):
    n = 0
    for seed in range(400):
        inst = fuzz_instance(seed)
        if inst.comm != comm:
            continue
        rng = random.Random(seed)
        for _ in range(4):
            pl, order = _random_schedule(inst, rng)
            t = time_schedule(inst, pl, order)
            s = simulate(inst, pl, order)
            assert s.end == pytest.approx(t.end, rel=1e-9, abs=1e-12), (seed, pl, order)
            assert s.start == pytest.approx(t.start, rel=1e-9, abs=1e-12), (seed, pl, order)
            assert s.memory_ok == t.memory_ok
            n += 1
    assert n > 600
