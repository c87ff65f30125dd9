"""The forced-cut bounds (dplace.bounds.memory) against optima worked out independently: brute force on
tiny memory-tight instances, and a 40-op series composition whose memory-bound head is enumerated."""
import itertools
import json
import math
import random

import pytest

from dplace.bounds import bound_portfolio, critical_path_length, memory_cuts_bound, memory_path_bound
from dplace.bounds.memory import forced_cut_cost, sequential_cut_cost
from dplace.formulations.bounds_segments import segment_bound
from dplace.instance.graph import critical_path_ops
from dplace.errors import InfeasibleError, InvalidInstanceError
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.testing import block_instance, random_instance, series_block
from dplace.instance.io import instance_to_dict
from formulations._brute import brute_force

pytestmark = pytest.mark.solver  # the segment bound runs CP-SAT

TOL = 1e-6


def test_forced_cuts_at_most_brute_force_on_memory_tight_instances():
    rng = random.Random(31)
    checked = bites = 0
    for _ in range(60):
        inst = random_instance(rng, n_ops=rng.randint(3, 6), n_devices=rng.choice([2, 3]), edge_prob=0.6,
                               integer=rng.random() < 0.5, memory_slack=rng.choice([1.0, 1.2, 1.5]))
        try:
            opt = brute_force(inst)[0]
        except InfeasibleError:
            continue
        v = memory_cuts_bound(inst)
        assert v <= opt + TOL * max(1.0, opt), json.dumps(instance_to_dict(inst))
        sb = segment_bound(inst, time_limit_s=2.0)
        assert sb.best[0] <= opt + TOL * max(1.0, opt), json.dumps(instance_to_dict(inst))
        bites += v > critical_path_length(inst) + 1e-9
        checked += 1
    assert checked >= 30
    assert bites >= 3  # memory forced a cut on the path in some of them


def _chain_optimum(times, mems, nbytes, cap, lat, m=2):
    """A chain runs one op after another: makespan = sum of times + the transfer (lat + bytes, bandwidth
    1) of every edge whose ends are on different devices. Minimum over every placement that fits."""
    best = None
    for pl in itertools.product(range(m), repeat=len(times)):
        if pl[0] != 0:  # identical devices: the first op on device 0
            continue
        if any(sum(x for x, d in zip(mems, pl) if d == dev) > cap for dev in range(m)):
            continue
        v = sum(times) + sum(lat + b for b, u, w in zip(nbytes, pl, pl[1:]) if u != w)
        best = v if best is None else min(best, v)
    return best


def test_forced_cuts_reach_the_optimum_of_a_memory_bound_series_composition():
    """A 10-op chain whose ops do not fit on one device (memory 15 each, devices of 100), then six
    memory-free blocks in series (as in dplace.testing.series_composition: the optimum is the sum of the parts' optima
    minus the shared ops' times; the chain's by enumeration, the blocks' by brute force). The devices are
    renamed per block only, which memory-free blocks allow."""
    rng = random.Random(7)
    k, cap, lat = 10, 100, 2.0
    times = [rng.randint(1, 9) for _ in range(k)]
    mems = [15] * k
    nbytes = [float(rng.randint(1, 12)) for _ in range(k - 1)]
    names = [f"h{i}" for i in range(k)]
    ops = [Op(nm, t, mm) for nm, t, mm in zip(names, times, mems)]
    edges = [Edge(names[i], names[i + 1], nbytes[i]) for i in range(k - 1)]
    opt = _chain_optimum(times, mems, nbytes, cap, lat)
    prev = (names[-1], times[-1])
    for i in range(6):
        bn, bt, bb = series_block(rng, 4, f"B{i}")
        bn[0], bt[0] = prev
        opt += brute_force(block_instance(bn, bt, bb, 2, lat))[0] - prev[1]
        ops.extend(Op(nm, t, 0) for nm, t in zip(bn[1:], bt[1:]))
        edges.extend(Edge(bn[a], bn[b], float(nb)) for (a, b), nb in bb.items())
        prev = (bn[-1], bt[-1])
    inst = Instance("heavy-series", [Device(f"d{d}", cap) for d in range(2)], ops, edges, link=Link(lat, 1.0))
    assert 30 <= inst.n <= 60
    assert critical_path_ops(inst)[:k] == list(range(k))  # the chain heads the critical path
    parts = {b.name: b.value for b in bound_portfolio(inst, segments=True, time_limit_s=20.0)}
    for name, v in parts.items():
        assert v <= opt + TOL * opt, (name, v, opt)
    # every block is a segment solved exactly and the one cut memory forces in the chain is counted
    # (CP-SAT's time per segment raised so that a loaded machine still proves each block)
    sb = segment_bound(inst, time_limit_s=120.0, segment_time_s=20.0)
    assert sb.best == (pytest.approx(opt, rel=1e-9), "segments_memory")
    assert sb.memory_cuts > 0 and "segments_memory" in parts
    assert parts["memory_cuts"] > max(parts["memory_path"], parts["critical_path"])


def _cuts_by_enumeration(inst, path, cost):
    """forced_cut_cost from its definition: every set of boundaries, each run's units (groups counted
    once) within the largest device, pins of a run all equal."""
    best = float("inf")
    K = len(path)
    for mask in range(1 << (K - 1)):
        bounds = [j for j in range(K - 1) if mask >> j & 1]
        ok = True
        for a, b in zip([0] + [j + 1 for j in bounds], [j + 1 for j in bounds] + [K]):
            ops = set()
            for o in path[a:b]:
                g = inst.group_of[o]
                ops |= set(inst.groups[g]) if g >= 0 else {o}
            pins = {inst.pinned[o] for o in ops if inst.pinned[o] >= 0}
            cap = inst.capacity[pins.pop()] if len(pins) == 1 else max(inst.capacity)
            ok &= len(pins) == 0 and sum(inst.mem[o] for o in ops) <= cap
        if ok:
            best = min(best, sum(cost[j] for j in bounds))
    return best


@pytest.mark.parametrize("seed", [1, 2])
def test_forced_cut_cost_is_the_cheapest_cut_whose_runs_fit(seed):
    rng = random.Random(seed)
    for trial in range(40):
        K = rng.randint(2, 9)
        groups = rng.random() < 0.5
        ops = [Op(f"c{i}", 1, rng.randint(0, 40), colocation=(f"g{rng.randrange(3)}" if groups and rng.random() < 0.4
                                                              else None)) for i in range(K)]
        if not groups and rng.random() < 0.3:
            k = rng.randrange(K)
            ops[k] = Op(ops[k].id, 1, ops[k].memory, device=f"d{rng.randrange(2)}")
        edges = [Edge(f"c{i}", f"c{i + 1}", 1.0) for i in range(K - 1)]
        try:
            inst = Instance("cuts", [Device(f"d{d}", 60) for d in range(2)], ops, edges, link=Link(1.0, 1.0))
        except InvalidInstanceError:  # a group larger than a device
            continue
        path = list(range(K))
        cost = [float(rng.randint(0, 9)) for _ in range(K - 1)]
        assert forced_cut_cost(inst, path, cost) == _cuts_by_enumeration(inst, path, cost), (trial, json.dumps(instance_to_dict(inst)), cost)


def test_forced_cut_cost_respects_colocation_and_pins():
    # four ops of 60 on devices of 100: every op its own run, three cuts
    ops = [Op(f"c{i}", 5, 60) for i in range(4)]
    edges = [Edge(f"c{i}", f"c{i + 1}", 4.0) for i in range(3)]
    inst = Instance("forced", [Device(f"d{d}", 100) for d in range(4)], ops, edges, link=Link(1.0, 2.0))
    path = critical_path_ops(inst)
    assert forced_cut_cost(inst, path, [1.0, 10.0, 100.0]) == 111.0
    assert memory_cuts_bound(inst) == pytest.approx(20 + 3 * 3) == pytest.approx(memory_path_bound(inst))
    small = [Op("a", 5, 30, device="d0"), Op("b", 5, 30, device="d1"), Op("c", 5, 30)]
    inst = Instance("pins", [Device(f"d{d}", 100) for d in range(2)], small,
                    [Edge("a", "b", 4.0), Edge("b", "c", 4.0)], link=Link(1.0, 2.0))
    # memory fits everywhere, but a and b are pinned apart: their edge is a forced cut, b-c is not
    assert forced_cut_cost(inst, critical_path_ops(inst), [7.0, 9.0]) == 7.0


def _with_optima(make, seeds):
    """(instance, its optimum by the model text's oracle) for each seed whose instance is valid and feasible."""
    from dplace.verify.oracle import brute_force as oracle

    for seed in seeds:
        try:
            inst = make(seed)  # (a group larger than a device is refused)
            res = oracle(inst, time_limit_s=20.0)
        except (InfeasibleError, InvalidInstanceError):
            continue
        if res.feasible:
            assert res.complete
            yield inst, res.optimum


def _queue_raises(inst, mc):
    """Whether memory_cuts ``mc`` is above the critical path's smallest times plus the parallel cut cost."""
    from dplace.bounds.memory import _guard, path_edge_costs

    path = critical_path_ops(inst)
    par = forced_cut_cost(inst, path, _guard(inst, path, path_edge_costs(inst, path)))
    return mc > sum(min(inst.dur[o]) for o in path) + (par if par < math.inf else 0.0) + 1e-9


@pytest.mark.parametrize("comm", ["sequential", "parallel"])
def test_cuts_with_the_link_queue_at_most_brute_force(comm):
    """memory_cuts (in sequential comm with the link's queue) and the segment bound plus its forced cuts (every
    segment, less its slack) never pass the optimum of the model text's oracle, on memory-tight chains with
    skip edges; and they bite: the queue raises memory_cuts above the parallel cut cost, the slack rule raises
    segments_memory above the trivial segments' cuts (the rule before)."""
    from dplace.bounds.memory import segment_cut_costs
    from dplace.testing import chain_with_skips

    checked = queue_bites = slack_bites = 0
    for inst, opt in _with_optima(lambda seed: chain_with_skips(seed, comm), range(25000, 25100)):
        path = critical_path_ops(inst)
        v = memory_cuts_bound(inst)
        assert v <= opt + TOL * max(1.0, opt), json.dumps(instance_to_dict(inst))
        queue_bites += _queue_raises(inst, v)
        sb = segment_bound(inst, time_limit_s=2.0)
        assert sb.best[0] <= opt + TOL * max(1.0, opt), json.dumps(instance_to_dict(inst))
        # the rule before: only trivial pieces (one path op and the cut after it) counted their edge
        widest = [p for p in sb.pieces if p["window"] == sb.window]
        old = [(p["a"], p["b"], p["bound_us"] if p["b"] == p["a"] + 1 and p["ops"] == 2 else math.inf, False)
               for p in widest]
        slack_bites += sb.memory_cuts > segment_cut_costs(inst.replace(comm="parallel"), path, old) + 1e-9
        checked += 1
    assert checked >= 60
    if comm == "sequential":
        assert queue_bites >= 3
    else:
        assert queue_bites == 0
    assert slack_bites >= 3


def _training_chain(seed: int, comm: str) -> Instance:
    """A training chain of 3-4 layers: forward ops f0 -> f1 -> ..., their gradients back (g_i -> g_{i-1}),
    each gradient colocated with its forward op and reading its activation, a skip edge or not, device memory
    that makes the chain change device (the forward and the backward pass both cross each cut)."""
    rnd = random.Random(seed)
    layers = rnd.randint(3, 4)
    ops, edges = [], []
    for i in range(layers):
        ops.append(Op(f"f{i}", rnd.choice([0, 1, 2, 4]), rnd.randint(1, 4), colocation=f"u{i}"))
        ops.append(Op(f"g{i}", rnd.choice([0, 1, 3]), 0, colocation=f"u{i}"))
        edges.append(Edge(f"f{i}", f"g{i}", float(rnd.randint(0, 9))))
        if i:
            edges.append(Edge(f"f{i - 1}", f"f{i}", float(rnd.randint(0, 9))))
            edges.append(Edge(f"g{i}", f"g{i - 1}", float(rnd.randint(0, 9))))
            edges.append(Edge(f"f{i - 1}", f"g{i}", float(rnd.randint(0, 9))))  # g_i reads its input
    if rnd.random() < 0.5:
        edges.append(Edge("f0", "f2", float(rnd.randint(0, 14))))
    mem = sum(o.memory for o in ops)
    cap = max(max(o.memory for o in ops), int(mem * rnd.uniform(0.35, 0.7)))
    return Instance(f"train{seed}", [Device(f"d{d}", cap) for d in range(rnd.choice([2, 3]))], ops, edges,
                    link=Link(float(rnd.randint(0, 2)), 1.0), comm=comm)


@pytest.mark.parametrize("comm", ["sequential", "parallel"])
def test_cuts_on_training_chains_at_most_brute_force(comm):
    """The forced-cut bounds on training chains (each cut crossed forward and backward, units of a forward op
    and its gradient) never pass the oracle's optimum, and they bite in some; in sequential comm the link's queue
    raises memory_cuts above the parallel cut cost in some."""
    checked = bites = queue = 0
    for inst, opt in _with_optima(lambda seed: _training_chain(seed, comm), range(4000, 4060)):
        mc = memory_cuts_bound(inst)
        v = max(mc, segment_bound(inst, time_limit_s=2.0).best[0])
        assert v <= opt + TOL * max(1.0, opt), json.dumps(instance_to_dict(inst))
        bites += v > critical_path_length(inst) + 1e-9
        queue += _queue_raises(inst, mc)
        checked += 1
    assert checked >= 30 and bites >= 5
    assert queue >= 10 if comm == "sequential" else queue == 0


def _cut_is_one_that_costs(inst, path, cost, value, cuts, seq):
    """``cuts`` (increasing boundaries) cut ``path`` into runs that each fit on a device, and cost ``value``: the
    sum of their costs (parallel), or the queue's programme allowed only those boundaries (sequential)."""
    from dplace.bounds.memory import _run_starts, sequential_cut_cost

    assert cuts == sorted(set(cuts)) and all(0 <= j < len(path) - 1 for j in cuts)
    lo = _run_starts(inst, path)
    begin = 0
    for end in cuts + [len(path) - 1]:
        assert lo[end] <= begin  # the run path[begin..end] fits
        begin = end + 1
    only = [c if j in cuts else math.inf for j, c in enumerate(cost)]
    got = sequential_cut_cost(inst, path, only) if seq else sum(cost[j] for j in cuts)
    assert got == pytest.approx(value, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("comm", ["sequential", "parallel"])
def test_the_cut_each_programme_returns_costs_its_value(comm):
    """forced_cuts and sequential_cuts return, beside the least cost, a cut whose runs fit and which costs it;
    on chains with skip edges and training chains (both cross cuts several times)."""
    from dplace.bounds.memory import _guard, forced_cuts, path_edge_costs, sequential_cuts
    from dplace.testing import chain_with_skips

    checked = with_cuts = 0
    for seed in range(300):
        try:
            inst = chain_with_skips(seed, comm) if seed % 2 else _training_chain(seed, comm)
        except InvalidInstanceError:
            continue
        path = critical_path_ops(inst)
        cost = _guard(inst, path, path_edge_costs(inst, path))
        for seq, programme in ((False, forced_cuts), (True, sequential_cuts)):
            value, cuts = programme(inst, path, cost)
            if value == math.inf:
                assert cuts == []
                continue
            assert value == (sequential_cut_cost(inst, path, cost) if seq else forced_cut_cost(inst, path, cost))
            _cut_is_one_that_costs(inst, path, cost, value, cuts, seq)
            checked += 1
            with_cuts += bool(cuts)
    assert checked >= 300 and with_cuts >= 100


def test_sequential_cuts_with_short_windows_cost_their_value():
    """The capped state (runs of ``window`` path ops or more, taken by the sliding-window minimum) walks back
    to a cut that costs the value too."""
    from dplace.bounds.memory import _guard, path_edge_costs, sequential_cuts
    from dplace.testing import chain_with_skips

    for window in (1, 2, 3):
        for seed in range(1, 120, 2):
            try:
                inst = chain_with_skips(seed, "sequential")
            except InvalidInstanceError:
                continue
            path = critical_path_ops(inst)
            cost = _guard(inst, path, path_edge_costs(inst, path))
            value, cuts = sequential_cuts(inst, path, cost, window=window)
            if value < math.inf:
                assert value == sequential_cut_cost(inst, path, cost, window=window)
                only = [c if j in cuts else math.inf for j, c in enumerate(cost)]
                assert sequential_cut_cost(inst, path, only, window=window) == pytest.approx(value, rel=1e-9, abs=1e-9)
