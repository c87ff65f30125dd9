"""Small graphs and random valid instances for tests of any method (like scikit-learn's estimator checks).

``contract_instances()`` gives the named small graphs every registered method must handle (chain,
diamond, fork, join, colocation, pinned, tight memory; both comm modes). ``random_instance(rng, ...)``
makes a random valid DAG instance; ``instances()`` is a hypothesis strategy of valid instances that
shrinks. ``stemmed_twins(seed, ...)`` makes two tied parts that begin with chains (the
shape :mod:`dplace.formulations.bounds_twins` bounds); ``cells(...)`` a forward chain of branchy cells tied op by op
to its backward mirror (a training graph's shape). ``assert_valid_result(res)`` asserts what every placed result must satisfy; the contract
itself, one named ``check_*`` per rule, is in :mod:`dplace.contract`. ``with_groups_and_pins`` and
``split_placement`` make hand-made placements valid for colocation and pins (runtime tests, benchmarks).
"""
from __future__ import annotations

import random
from typing import Any, Callable, Iterator, Sequence

from .instance.model import Device, Edge, Instance, Link, Op


def _inst(name: str, ops: list[Op], edges: list[tuple[str, str, float]], *, m: int = 2, memory: int = 10**9,
          comm: str = "parallel", latency: float = 2.0, bandwidth: float = 1.0, speeds: list[float] | None = None) -> Instance:
    devices = [Device(f"d{i}", memory, (speeds or [1.0] * m)[i]) for i in range(m)]
    return Instance(name, devices, ops, [Edge(a, b, nb) for a, b, nb in edges], link=Link(latency, bandwidth), comm=comm)


def chain(comm: str = "parallel") -> Instance:
    ops = [Op(f"c{i}", t, 10) for i, t in enumerate([3, 5, 2, 4])]
    return _inst(f"chain-{comm}", ops, [("c0", "c1", 2), ("c1", "c2", 3), ("c2", "c3", 1)], comm=comm)


def diamond(comm: str = "parallel") -> Instance:
    ops = [Op("a", 2, 10), Op("b", 6, 10), Op("c", 5, 10), Op("d", 1, 10)]
    edges = [("a", "b", 1), ("a", "c", 1), ("b", "d", 1), ("c", "d", 1)]
    return _inst(f"diamond-{comm}", ops, edges, comm=comm, latency=1.0)


def fork(comm: str = "parallel") -> Instance:
    ops = [Op("root", 1, 10)] + [Op(f"leaf{i}", 4 + i, 10) for i in range(4)]
    return _inst(f"fork-{comm}", ops, [("root", f"leaf{i}", 2) for i in range(4)], comm=comm, m=3, latency=1.0)


def join(comm: str = "parallel") -> Instance:
    ops = [Op(f"src{i}", 3 + i, 10) for i in range(4)] + [Op("sink", 2, 10)]
    return _inst(f"join-{comm}", ops, [(f"src{i}", "sink", 3) for i in range(4)], comm=comm, m=3, latency=0.5)


def colocated(comm: str = "parallel") -> Instance:
    ops = [Op("v", 1, 40, colocation="g"), Op("read", 3, 5, colocation="g"), Op("x", 4, 5),
           Op("y", 4, 5), Op("upd", 2, 5, colocation="g")]
    edges = [("v", "read", 1), ("read", "x", 2), ("read", "y", 2), ("x", "upd", 1), ("y", "upd", 1)]
    return _inst(f"colocated-{comm}", ops, edges, comm=comm, memory=100)


def pinned(comm: str = "parallel") -> Instance:
    ops = [Op("in", 2, 5, device="d1"), Op("p", 5, 5), Op("q", 5, 5), Op("out", 1, 5, device="d0")]
    edges = [("in", "p", 1), ("in", "q", 1), ("p", "out", 1), ("q", "out", 1)]
    return _inst(f"pinned-{comm}", ops, edges, comm=comm, latency=1.0)


def tight_memory(comm: str = "parallel") -> Instance:
    """Memory forces a split: each device holds about half the ops."""
    ops = [Op(f"t{i}", 2 + (i % 3), 30) for i in range(6)]
    edges = [("t0", "t1", 1), ("t1", "t2", 1), ("t0", "t3", 1), ("t3", "t4", 1), ("t2", "t5", 1), ("t4", "t5", 1)]
    return _inst(f"tight-{comm}", ops, edges, comm=comm, memory=100, latency=1.0)


def heterogeneous(comm: str = "parallel") -> Instance:
    ops = [Op("h0", {"d0": 2, "d1": 6}, 1), Op("h1", {"d0": 7, "d1": 3}, 1), Op("h2", {"d0": 4, "d1": 4}, 1)]
    inst = _inst(f"hetero-{comm}", ops, [("h0", "h1", 4), ("h1", "h2", 4)], comm=comm)
    return inst


CONTRACT_GRAPHS = (chain, diamond, fork, join, colocated, pinned, tight_memory, heterogeneous)


def contract_instances() -> Iterator[Instance]:
    for comm in ("parallel", "sequential"):
        for g in CONTRACT_GRAPHS:
            yield g(comm)


def assert_valid_result(res: Any) -> None:
    """Assert the contract on a placed Result: every op placed, ``dplace.check`` passes, memory kept
    or flagged, colocation and pins kept, makespan not below the proven bound when memory is kept (the
    bound holds for schedules that keep memory: the memory-path bound counts the moves memory forces)."""
    from .verify.check import check

    inst = res.instance
    assert res.placement is not None and len(res.placement) == inst.n
    rep = check(inst, res)
    assert rep.ok, rep.summary()
    assert res.memory_ok == rep.memory_ok
    for g in inst.groups:
        assert len({res.placement[o] for o in g}) == 1
    for o in range(inst.n):
        if inst.pinned[o] >= 0:
            assert res.placement[o] == inst.pinned[o]
    if res.memory_ok:
        assert res.makespan >= res.lower_bound - 1e-6


def random_instance(rng: random.Random, *, n_ops: int | None = None, n_devices: int | None = None,
                    comm: str | None = None, integer: bool = True, edge_prob: float = 0.3,
                    colocation: bool = True, pins: bool = True, hetero: bool = True,
                    memory_slack: float | None = None) -> Instance:
    """A random valid DAG instance (edges only from lower to higher index, so always acyclic)."""
    n = n_ops if n_ops is not None else rng.randint(1, 9)
    m = n_devices if n_devices is not None else rng.randint(1, 3)
    comm = comm or rng.choice(["parallel", "sequential"])
    num = (lambda lo, hi: rng.randint(lo, hi)) if integer else (lambda lo, hi: round(rng.uniform(lo, hi), 3))
    use_hetero = hetero and rng.random() < 0.3
    ops = []
    for i in range(n):
        if use_hetero:
            t: Any = {f"d{d}": num(0, 9) for d in range(m)}
        else:
            t = num(0, 9)
        ops.append(Op(f"o{i}", t, rng.randint(0, 5)))
    edges = []
    for j in range(n):
        for i in range(j):
            if rng.random() < edge_prob:
                edges.append(Edge(f"o{i}", f"o{j}", num(0, 6)))
    if colocation and n >= 2 and rng.random() < 0.3:
        a, b = rng.sample(range(n), 2)
        ops[a] = Op(ops[a].id, ops[a].time, ops[a].memory, colocation="g")
        ops[b] = Op(ops[b].id, ops[b].time, ops[b].memory, colocation="g")
    if pins and m >= 2 and rng.random() < 0.3:
        k = rng.randrange(n)
        if ops[k].colocation is None:
            ops[k] = Op(ops[k].id, ops[k].time, ops[k].memory, device=f"d{rng.randrange(m)}")
    total = sum(op.memory for op in ops)
    slack = memory_slack if memory_slack is not None else rng.choice([0.6, 1.0, 3.0])
    mem = max(10, int(slack * total / m) + 5)
    speeds = [1.0] * m if use_hetero else [rng.choice([1.0, 1.0, 2.0]) for _ in range(m)]
    devices = [Device(f"d{d}", mem, speeds[d]) for d in range(m)]
    link = Link(float(num(0, 3)), float(rng.choice([1, 2, 4])))
    pairs = {}
    if m >= 2 and rng.random() < 0.3:
        pairs[("d0", "d1")] = Link(float(num(0, 3)), float(rng.choice([1, 2])))
    return Instance(f"rand-{n}x{m}", devices, ops, edges, link=link, pairs=pairs, comm=comm)


def instances(*, n_ops: int | None = None, n_devices: int | None = None, comm: str | None = None,
              integer: bool = True, colocation: bool = True, pins: bool = True, hetero: bool = True,
              memory_slack: float | None = None, max_ops: int = 9):
    """Hypothesis strategy of valid instances, drawn piece by piece (sizes, each op's time and memory,
    each possible edge, colocation, pin, memory slack, links) so that a failing example shrinks: to fewer
    ops and edges, smaller numbers, no colocation or pin, roomy memory. The keywords fix a piece, as in
    :func:`random_instance`."""
    from hypothesis import strategies as st

    def num(hi: int):
        return st.integers(0, hi) if integer else st.floats(0, hi).map(lambda x: round(x, 3))

    @st.composite
    def draw_instance(draw) -> Instance:
        n = n_ops if n_ops is not None else draw(st.integers(1, max_ops))
        m = n_devices if n_devices is not None else draw(st.integers(1, 3))
        mode = comm or draw(st.sampled_from(["parallel", "sequential"]))
        het = hetero and draw(st.booleans())
        ops = []
        for i in range(n):
            t: Any = {f"d{d}": draw(num(9)) for d in range(m)} if het else draw(num(9))
            ops.append(Op(f"o{i}", t, draw(st.integers(0, 5))))
        edges = [Edge(f"o{i}", f"o{j}", draw(num(6))) for j in range(n) for i in range(j) if draw(st.booleans())]
        if colocation and n >= 2 and draw(st.booleans()):
            a, b = draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
            ops[a] = Op(ops[a].id, ops[a].time, ops[a].memory, colocation="g")
            ops[b] = Op(ops[b].id, ops[b].time, ops[b].memory, colocation="g")
        if pins and m >= 2 and draw(st.booleans()):
            k = draw(st.integers(0, n - 1))
            if ops[k].colocation is None:
                ops[k] = Op(ops[k].id, ops[k].time, ops[k].memory, device=f"d{draw(st.integers(0, m - 1))}")
        slack = memory_slack if memory_slack is not None else draw(st.sampled_from([3.0, 1.0, 0.6]))
        mem = max(10, int(slack * sum(op.memory for op in ops) / m) + 5)
        speeds = [1.0] * m if het else draw(st.lists(st.sampled_from([1.0, 2.0]), min_size=m, max_size=m))
        link = Link(float(draw(num(3))), float(draw(st.sampled_from([1, 2, 4]))))
        pairs = {}
        if m >= 2 and draw(st.booleans()):
            pairs[("d0", "d1")] = Link(float(draw(num(3))), float(draw(st.sampled_from([1, 2]))))
        devices = [Device(f"d{d}", mem, speeds[d]) for d in range(m)]
        return Instance(f"drawn-{n}x{m}", devices, ops, edges, link=link, pairs=pairs, comm=mode)

    return draw_instance()


def cells(k: int = 2, branches: int = 3, m: int = 2, comm: str = "parallel") -> Instance:
    """A forward chain of ``k`` cells (a long path op beside ``branches`` two-op branches) and its backward
    mirror, each forward op tied to its gradient by colocation (the gradient twice as long)."""
    fw = [(f"c{c}", 2.0) for c in range(k + 1)]
    edges = []
    for c in range(k):
        fw.append((f"p{c}", 12.0))
        edges += [(f"c{c}", f"p{c}", 4.0), (f"p{c}", f"c{c + 1}", 4.0)]
        for b in range(branches):
            x, y = f"b{c}_{b}a", f"b{c}_{b}b"
            fw += [(x, 3.0 + b), (y, 2.0)]
            edges += [(f"c{c}", x, 5.0), (x, y, 1.0), (y, f"c{c + 1}", 5.0)]
    ops = [Op(n, t, 10, colocation=n) for n, t in fw] + [Op(n + "/grad", 2 * t, 10, colocation=n) for n, t in fw]
    edges += [(v + "/grad", u + "/grad", b) for u, v, b in edges] + [(f"c{k}", f"c{k}/grad", 1.0)]
    return Instance("cells", [Device(f"d{i}", 10**6, 1.0) for i in range(m)], ops,
                    [Edge(u, v, b) for u, v, b in edges], link=Link(1.0, 1.0), comm=comm)


def stemmed_twins(seed: int, *, k: int = 2, r: int = 2, m: int = 2) -> Instance:
    """Two parts with the same edges and bytes and other times: a chain of k ops, then r ops fed by the
    chain's end or by earlier rest ops; op i of one part tied to op i of the other by colocation. Drawn:
    a magnitude (1e-3 .. 1e10), per-device times or not, zero times, a pin, memory from binding to
    ample, one link (latency zero or not), comm mode."""
    rng = random.Random(seed)
    scale = rng.choice([1e-3, 1.0, 1e3, 1e6, 1e10])
    n = k + r
    pairs = [(i, i + 1) for i in range(k - 1)]
    for j in range(k, n):
        pairs += [(i, j) for i in rng.sample(range(k - 1, j), min(j - k + 1, rng.randint(1, 2)))]
    names = [f"d{x}" for x in range(m)]
    hetero = rng.random() < 0.3
    pin = rng.randrange(n) if rng.random() < 0.3 else None
    ops = []
    for side in "ab":
        for i in range(n):
            t: Any = ({d: scale * rng.choice([0, 1, 2, 3, 5]) for d in names} if hetero
                      else scale * rng.choice([0, 1, 2, 3, 5, 8]))
            ops.append(Op(f"{side}{i}", t, rng.randint(0, 4), colocation=f"g{i}",
                          device=names[0] if (side == "a" and i == pin) else None))
    edges = []
    for u, v in pairs:
        b = scale * rng.choice([0, 1, 4])
        edges += [Edge(f"a{u}", f"a{v}", b), Edge(f"b{u}", f"b{v}", b)]
    mem = max(8, int(rng.choice([0.6, 1.0, 3.0]) * sum(o.memory for o in ops) / m) + 1)
    comm = rng.choice(["parallel", "sequential"])
    return Instance(f"stemmed{seed}", [Device(d, mem, 1.0) for d in names], ops, edges,
                    link=Link(scale * rng.choice([0, 1]), rng.choice([1.0, 2.0])), comm=comm)


def series_block(rng: random.Random, k: int, tag: str) -> tuple[list[str], list[int], dict[tuple[int, int], int]]:
    """A random DAG on ops s, b1..bk, t with every op reachable from s and reaching t: (names, times,
    bytes per edge (i, j) of name indices)."""
    names = [f"{tag}s"] + [f"{tag}b{i}" for i in range(k)] + [f"{tag}t"]
    times = [rng.randint(1, 9) for _ in names]
    edges = set()
    for i in range(1, k + 1):
        edges.add((rng.randrange(0, i), i))
        edges.add((i, rng.randint(i + 1, k + 1)))
    for _ in range(k // 2):
        a = rng.randrange(0, k + 1)
        b = rng.randrange(a + 1, k + 2)
        edges.add((a, b))
    nbytes = {e: rng.randint(0, 6) for e in sorted(edges)}
    return names, times, nbytes


def block_instance(names: list[str], times: list[int], nbytes: dict[tuple[int, int], int], m: int,
                   lat: float) -> Instance:
    """One :func:`series_block` alone, on ``m`` identical devices with unlimited memory."""
    ops = [Op(nm, t, 0) for nm, t in zip(names, times)]
    edges = [Edge(names[a], names[b], float(nb)) for (a, b), nb in nbytes.items()]
    return Instance("block", [Device(f"d{d}", 1 << 30) for d in range(m)], ops, edges, link=Link(lat, 1.0))


def block_optimum(inst: Instance) -> float:
    """The optimum of a small instance by :func:`dplace.verify.oracle.brute_force` (independent of the simulator)."""
    from .verify.oracle import brute_force

    res = brute_force(inst)
    assert res.complete and res.optimum is not None, inst.name
    return res.optimum


def series_composition(rng: random.Random, blocks: list[int], m: int = 2, lat: float = 2.0) -> tuple[Instance, float]:
    """Blocks chained through shared ops (block i's sink is block i+1's source) and the optimum.

    Identical devices, unlimited memory, parallel transfers. Every op of block i+1 is a descendant of the
    shared op x and every op of block i an ancestor, so in any schedule block i occupies
    [start(s_i), end(t_i)] and consecutive blocks overlap exactly on x's run: makespan = sum of block
    spans - sum of the shared ops' times >= sum OPT(B_i) - sum p(x). Conversely, optimal block schedules,
    devices renamed so x sits on one device in both and shifted to meet at x, form one schedule
    (nothing of block i+1 starts before x ends, nothing of block i ends after x starts). So
    OPT = sum OPT(B_i) - sum p(x), each OPT(B_i) by brute force (:func:`block_optimum`)."""
    ops, edges, opt = [], [], 0.0
    prev_sink = None
    for i, k in enumerate(blocks):
        names, times, nbytes = series_block(rng, k, f"B{i}")
        if prev_sink is not None:  # share: this block's source is the previous sink
            names[0] = prev_sink[0]
            times[0] = prev_sink[1]
        opt += block_optimum(block_instance(names, times, nbytes, m, lat))
        if prev_sink is not None:
            opt -= prev_sink[1]
        ops.extend(Op(nm, t, 0) for j, (nm, t) in enumerate(zip(names, times)) if not (prev_sink and j == 0))
        edges.extend(Edge(names[a], names[b], float(nb)) for (a, b), nb in nbytes.items())
        prev_sink = (names[-1], times[-1])
    inst = Instance("series", [Device(f"d{d}", 1 << 30) for d in range(m)], ops, edges, link=Link(lat, 1.0))
    return inst, opt


def with_groups_and_pins(inst: Instance, placement: Sequence[int],
                         group_device: Callable[[list[int]], int] | None = None) -> list[int]:
    """``placement`` with every colocation group on one device, ``group_device(members)`` (default: the
    device of its member first in topological order), and every pinned op on its pin."""
    pl = list(placement)
    for members in inst.groups:
        d = group_device(members) if group_device else pl[min(members, key=lambda o: inst.topo_pos[o])]
        for o in members:
            pl[o] = d
    for o in range(inst.n):
        if inst.pinned[o] >= 0:
            pl[o] = inst.pinned[o]
    return pl


def split_placement(inst: Instance) -> list[int]:
    """The first half of the topological order on device 0, the rest on device 1; a colocation group
    follows its first member, pins kept."""
    half = set(inst.topo[: inst.n // 2])
    return with_groups_and_pins(inst, [0 if o in half else 1 for o in range(inst.n)])


def chain_with_skips(seed: int, comm: str | None = None) -> Instance:
    """A chain c0 -> ... -> c_{K-1} (4-7 ops: the critical path) with skip edges c_i -> c_j (j >= i + 2) and
    tensors long beside the ops, and device memory that forces the chain to change device (the forced-cut
    bounds' case, :mod:`dplace.bounds.memory`). Drawn: a magnitude (1e-3 .. 1e10), per-device times or not,
    zero times, the first and last op colocated or not, a pin, 2-3 devices, latency zero or not, comm mode
    (unless given). May raise InvalidInstanceError (a group larger than a device)."""
    rng = random.Random(seed)
    scale = rng.choice([1e-3, 1.0, 1e3, 1e6, 1e10])
    K, m = rng.randint(4, 7), rng.choice([2, 3])
    names = [f"d{x}" for x in range(m)]
    mem = [rng.randint(1, 5) for _ in range(K)]
    cap = max(max(mem), int(sum(mem) * rng.uniform(0.3, 0.7)))
    groups = rng.random() < 0.3
    hetero = rng.random() < 0.25
    pin = rng.randrange(1, K - 1) if rng.random() < 0.2 else None
    ops = []
    for i in range(K):
        t: Any = ({d: scale * rng.choice([0, 1, 2, 3, 5, 8]) for d in names} if hetero
                  else scale * rng.choice([0, 1, 2, 3, 5, 8]))
        ops.append(Op(f"c{i}", t, mem[i], colocation=("g" if groups and i in (0, K - 1) else None),
                      device=names[rng.randrange(m)] if i == pin else None))
    edges = [Edge(f"c{i}", f"c{i + 1}", scale * rng.randint(0, 8)) for i in range(K - 1)]
    edges += [Edge(f"c{i}", f"c{j}", scale * rng.randint(0, 14)) for i in range(K) for j in range(i + 2, K)
              if rng.random() < 0.35]
    return Instance(f"skips{seed}", [Device(d, cap, 1.0) for d in names], ops, edges,
                    link=Link(scale * rng.randint(0, 2), 1.0), comm=comm or rng.choice(["parallel", "sequential"]))


def audit_bound(instances: Iterator[Instance], bound: Callable[[Instance], float], name: str,
                tol: float = 1e-6) -> tuple[int, int, int]:
    """A cheap bound against the brute force (:func:`dplace.verify.oracle.brute_force`): asserts it is at
    most the optimum of each instance that has one (the instance in the message) and returns (instances
    checked, where it is above every other part of :func:`dplace.bounds.lower_bound_parts`, where it is
    positive). ``name``: its part's name there."""
    import json

    from .bounds import lower_bound_parts
    from .instance.io import instance_to_dict
    from .verify.oracle import brute_force

    checked = sees = positive = 0
    for inst in instances:
        orc = brute_force(inst)
        if orc.optimum is None:
            continue
        assert orc.complete
        b = bound(inst)
        assert b <= orc.optimum + tol * max(1.0, orc.optimum), (json.dumps(instance_to_dict(inst)), b, orc.optimum)
        others = {k: v for k, v in lower_bound_parts(inst).items() if k != name}
        sees += b > max(others.values()) + 1e-9
        positive += b > 0
        checked += 1
    return checked, sees, positive

