"""``fan_in`` (dplace/bounds/fanin.py) against the oracle's brute force: never above the optimum in
sequential comm, 0 in parallel comm, more than every other cheap bound on joins whose inputs are costly to
send; and the segment bound that uses it on each segment of a sequential instance, against the exact
optimum of series compositions."""
import random

import pytest

from dplace.bounds import lower_bound_parts
from dplace.bounds.fanin import fan_in_bound, least_window
from dplace.errors import InvalidInstanceError
from dplace.formulations.bounds_segments import segment_bound
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.testing import audit_bound, random_instance
from dplace.verify.oracle import brute_force as oracle

TOL = 1e-6


def _join(k: int, comm: str, m: int = 2, nbytes: float = 4.0) -> Instance:
    """k producers of time 1 feeding one sink of time 1 a tensor of ``nbytes`` (latency 0, bandwidth 1),
    beside a chain of two ops of time 1 (two sinks: the anchored bounds do not apply)."""
    ops = [Op(f"p{j}", 1.0, 1) for j in range(k)] + [Op("sink", 1.0, 1), Op("side", 1.0, 1), Op("s2", 1.0, 1)]
    edges = [Edge(f"p{j}", "sink", nbytes) for j in range(k)] + [Edge("side", "s2", 0.0)]
    return Instance(f"join{k}-{m}", [Device(f"d{d}", 100) for d in range(m)], ops, edges, link=Link(0.0, 1.0), comm=comm)


def test_a_join_whose_inputs_queue_on_one_link():
    """Four producers, two devices, sends of 4 on the one link into the sink's device: keeping x of the
    producers' time on the sink's device leaves 4 (4 - x) of sends, so W >= 3.2 and the bound is 4.2. The
    optimum is 5; every other cheap bound is 3.5 at most (work). Parallel comm: 0 (sends overlap there)."""
    seq = _join(4, "sequential")
    assert fan_in_bound(seq) == pytest.approx(4.2)
    assert oracle(seq).optimum == pytest.approx(5.0)
    others = {k: v for k, v in lower_bound_parts(seq).items() if k != "fan_in"}
    assert max(others.values()) < 4.2 - 1e-9
    assert fan_in_bound(_join(4, "parallel")) == 0.0


def test_least_window_is_the_fractional_split():
    """W* by hand: free producers on the sink's device first (p = 0), then the largest c / p; a producer
    that must share the sink's device counts in full."""
    assert least_window([1, 1, 1, 1], [4, 4, 4, 4], 1) == pytest.approx(3.2)
    # the free one sent, 10/11 of the costly one kept: its rest, 10 (1 - W), fits the link in W
    assert least_window([1, 1], [10, 0], 1) == pytest.approx(10 / 11)
    # p = 0 stays; 0.6 of the other kept (W = 1.2), its 0.4 sent: 2.4 on two links in 1.2
    assert least_window([0, 2], [6, 6], 2) == pytest.approx(1.2)
    assert least_window([1], [1], 3, fixed=5.0) == pytest.approx(5.0)


def test_least_window_on_arrays_equals_the_loop():
    """Past 32 producers :func:`least_window` runs on arrays: the same values as its loop (zero times, zero
    sends and producers bound to the join included)."""
    from dplace.bounds.fanin import _least_window_arrays

    rng = random.Random(3)
    for _ in range(300):
        n = rng.randint(1, 40)
        p = [rng.choice([0.0, rng.uniform(0, 5)]) for _ in range(n)]
        c = [rng.choice([0.0, rng.uniform(0, 40)]) for _ in range(n)]
        k, fixed = rng.randint(1, 3), rng.choice([0.0, rng.uniform(0, 10)])
        loop = least_window(p, c, k, fixed) if n <= 32 else None
        arr = _least_window_arrays(p, c, k, fixed)
        if loop is not None:
            assert arr == pytest.approx(loop, rel=1e-12, abs=1e-12), (p, c, k, fixed)
        if n <= 6:  # W* by its definition: feasible at W*, not below it
            assert _split_fits(p, c, k, fixed, arr + 1e-9)
            assert arr <= fixed + 1e-9 or not _split_fits(p, c, k, fixed, arr - 1e-6)


def _split_fits(p, c, k, fixed, w) -> bool:
    """Whether some x in [0, 1]^n has fixed + sum x p <= w and sum (1 - x) c <= k w, by enumeration: an
    optimal x of this fractional knapsack has at most one fractional item (every set on d, one item split)."""
    import itertools

    n = len(p)
    room = w - fixed
    if room < 0:
        return False
    for on in itertools.product((0, 1), repeat=n):
        dev = sum(pi for pi, x in zip(p, on) if x)
        if dev > room + 1e-12:
            continue
        sent = sum(ci for ci, x in zip(c, on) if not x)
        if sent <= k * w + 1e-9:
            return True
        for j in range(n):  # item j, not on d, split: as much of it on d as the room allows
            if not on[j] and p[j] > 0:
                part = min(1.0, (room - dev) / p[j])
                if sent - part * c[j] <= k * w + 1e-9:
                    return True
    return False


def _random_join(rng: random.Random, comm: str) -> Instance:
    """A join (sometimes behind a source, sometimes with a second layer) with costly inputs: 2-3 devices,
    some colocation and pins, hetero speeds or links now and then."""
    m = rng.choice([2, 2, 3])
    k = rng.randint(2, 4 if m == 2 else 3)
    ops = [Op(f"p{j}", float(rng.randint(0, 3)), 1) for j in range(k)] + [Op("sink", float(rng.randint(1, 3)), 1)]
    edges = [Edge(f"p{j}", "sink", float(rng.randint(2, 8))) for j in range(k)]
    if rng.random() < 0.5:
        ops.append(Op("src", float(rng.randint(1, 3)), 1))
        edges += [Edge("src", f"p{j}", float(rng.randint(0, 3))) for j in range(k) if rng.random() < 0.7]
    if rng.random() < 0.3:
        ops.append(Op("after", float(rng.randint(1, 3)), 1))
        edges.append(Edge("sink", "after", float(rng.randint(0, 3))))
    if rng.random() < 0.6:  # a chain beside (the anchored bounds need one source or one sink)
        ops += [Op("side", float(rng.randint(1, 3)), 1), Op("s2", float(rng.randint(0, 2)), 1)]
        edges.append(Edge("side", "s2", float(rng.randint(0, 2))))
    if rng.random() < 0.25:  # a producer colocated with the sink
        ops = [Op(o.id, o.time, o.memory, colocation="g" if o.id in ("p0", "sink") else None) for o in ops]
    elif rng.random() < 0.25:
        j = rng.randrange(len(ops))
        ops[j] = Op(ops[j].id, ops[j].time, ops[j].memory, device=f"d{rng.randrange(m)}")
    speeds = [rng.choice([1.0, 1.0, 2.0]) for _ in range(m)]
    pairs = {("d0", "d1"): Link(0.0, 2.0)} if rng.random() < 0.2 else {}
    return Instance(f"rjoin{m}-{k}", [Device(f"d{d}", rng.choice([3, 100]), speeds[d]) for d in range(m)], ops,
                    edges, link=Link(float(rng.randint(0, 2)), float(rng.choice([1, 2]))), pairs=pairs, comm=comm)


@pytest.mark.parametrize("comm", ["sequential", "parallel"])
def test_fan_in_at_most_the_oracle_optimum(comm):
    """Never above the brute force's optimum (random joins and plain random instances); in sequential comm
    above every other cheap bound on some; in parallel comm always 0."""
    rng = random.Random(61 if comm == "sequential" else 62)

    def made():
        for i in range(120):
            try:
                yield _random_join(rng, comm) if i % 3 else random_instance(rng, n_ops=rng.randint(2, 6), comm=comm)
            except InvalidInstanceError:
                continue

    checked, sees, positive = audit_bound(made(), fan_in_bound, "fan_in")
    assert checked >= 90
    if comm == "sequential":
        assert positive >= 40 and sees >= 8, (positive, sees)
    else:
        assert positive == 0


# a block s -> five branches -> t whose optimum in sequential comm (12) is above the parallel one (10), found
# by a search over such blocks; its fan-in bound (10.09: t's inputs queue on the one link) is above 10 too
BLOCK_TIMES = [1.0, 4.0, 2.0, 2.0, 4.0, 1.0, 1.0]
BLOCK_BYTES = [0.0, 0.0, 1.0, 0.0, 2.0, 7.0, 6.0, 3.0, 8.0, 4.0]  # s -> b0..b4, then b0..b4 -> t


def _fan_block(tag: str, source: Op | None) -> tuple[list[Op], list[Edge]]:
    """The block above, its s given (the previous block's t) or made."""
    s = source or Op(f"{tag}s", BLOCK_TIMES[0], 0)
    ops = [s] + [Op(f"{tag}b{j}", BLOCK_TIMES[1 + j], 0) for j in range(5)] + [Op(f"{tag}t", BLOCK_TIMES[6], 0)]
    edges = [Edge(s.id, f"{tag}b{j}", BLOCK_BYTES[j]) for j in range(5)]
    edges += [Edge(f"{tag}b{j}", f"{tag}t", BLOCK_BYTES[5 + j]) for j in range(5)]
    return ops, edges


def test_sequential_segments_with_fan_in_against_exact_series_optimum():
    """Three blocks chained through shared ops (block i's t is block i+1's s), sequential comm, two devices,
    unlimited memory. In every schedule block i lies in [start(s_i), end(t_i)] and consecutive blocks meet
    on the shared op, and optimal block schedules (devices renamed) join into one: the optimum is the sum
    of the blocks' optima (brute force, sequential) less the shared ops' times. The segment bound with each
    segment's fan-in never exceeds it, and is above the same bound on parallel segments."""
    devices = [Device("d0", 1 << 30), Device("d1", 1 << 30)]
    ops, edges, opt, prev = [], [], 0.0, None
    for i in range(3):
        bo, be = _fan_block(f"B{i}", prev)
        block = Instance(f"b{i}", devices, bo, be, link=Link(0.0, 1.0), comm="sequential")
        res = oracle(block)
        assert res.complete and res.optimum == pytest.approx(12.0)
        opt += res.optimum - (prev.time if prev is not None else 0.0)
        ops += bo[1:] if prev is not None else bo
        edges += be
        prev = bo[-1]
    inst = Instance("fan-series", devices, ops, edges, link=Link(0.0, 1.0), comm="sequential")
    seq = segment_bound(inst, time_limit_s=60.0, segment_time_s=10.0).value
    par = segment_bound(inst.replace(comm="parallel"), time_limit_s=60.0, segment_time_s=10.0).value
    assert seq <= opt + TOL * opt, (seq, opt)
    assert seq > par + 0.2, (seq, par, opt)
