"""Instances whose optimum is known without trusting a solver: random small ones for the brute force
(:func:`fuzz_instance`, magnitudes 1e-3..1e10, both comm modes, every feature), and compositions of them above
its size (:func:`composed_instance`: padded with independent zero ops, two blocks side by side on disjoint
devices, two blocks in series), their optima from the blocks' brute-forced optima."""
from __future__ import annotations

import math
import random
from typing import Any, Mapping, Sequence

from ..instance.model import Device, Edge, Instance, Link, Op
from .oracle import OracleResult, brute_force

__all__ = ["COMPOSITIONS", "composed_instance", "fuzz_instance", "in_series", "mixed_instance", "on_devices_of", "padded",
           "side_by_side", "without_latency"]


# --------------------------------------------------------------------------------------------- fuzzing
_SCALES = (1e-3, 1e-1, 1.0, 10.0, 1e3, 1e6, 1e10)

def fuzz_instance(seed: int, *, n_ops: tuple[int, int] = (3, 9), n_devices: tuple[int, int] = (2, 3),
                  comm: str | None = None, scales: tuple[float, float, float] | None = None,
                  receive_rate: float = 0.0) -> Instance:
    """A random valid instance that may use every feature of the model.

    Drawn per instance: comm mode; 2-3 devices with speeds or per-device time mappings; a time scale,
    a bytes scale and a bandwidth scale (1e-3 .. 1e10, together or independently); times from a small
    palette (ties) or continuous, some zero; zero bytes and zero latency; per-pair links (directed,
    asymmetric); pins; colocation groups; device memory from ample to binding to no fit at all; op
    indices not in topological order. ``comm`` and ``scales`` (time, bytes, bandwidth) replace the
    drawn ones (the rest of the draw stays that of ``seed``). ``receive_rate``: the share of instances
    with a non-zero ``transfer_cpu`` (receive cost, magnitudes 1e-3 .. 1e10; 0 by default, so each seed
    keeps the instance it had before the term existed).
    """
    rng = random.Random(seed)
    n = rng.randint(*n_ops)
    m = rng.randint(*n_devices)
    drawn = rng.choice(("parallel", "sequential"))
    comm = drawn if comm is None else comm
    if rng.random() < 0.5:  # one magnitude for everything: comm/compute ratio stays moderate
        ts = bs = rng.choice(_SCALES)
        bws = 1.0
    else:
        ts, bs, bws = rng.choice(_SCALES), rng.choice(_SCALES), rng.choice(_SCALES)
    if scales is not None:
        ts, bs, bws = scales
    palette = rng.random() < 0.5
    pal = [0.0, 1.0, 2.0, 3.0, 5.0] if palette else None

    def tval() -> float:
        r = rng.random()
        if r < 0.12:
            return 0.0
        if pal is not None:
            return rng.choice(pal) * ts
        return rng.uniform(0.05, 10.0) * ts

    def bval() -> float:
        if rng.random() < 0.15:
            return 0.0
        return (rng.choice([1.0, 2.0, 4.0]) if palette else rng.uniform(0.1, 8.0)) * bs

    def link() -> Link:
        lat = 0.0 if rng.random() < 0.3 else (rng.choice([1.0, 2.0]) if palette else rng.uniform(0.1, 4.0)) * ts
        bw = (rng.choice([1.0, 2.0, 4.0]) if palette else rng.uniform(0.5, 4.0)) * bws
        return Link(lat, bw)

    names = [f"d{d}" for d in range(m)]
    hetero = rng.random() < 0.3
    speeds = [1.0] * m if rng.random() < 0.4 else [rng.choice([0.5, 1.0, 1.5, 2.0, 3.0]) for _ in range(m)]
    perm = list(range(n))
    rng.shuffle(perm)  # op index k holds DAG position perm[k]: indices are not topological
    times: list[Any] = []
    mems = []
    for _ in range(n):
        if hetero:
            times.append({nm: tval() for nm in names})
        else:
            times.append(tval())
        mems.append(rng.choice([0, 1, 2, 3, 4, 5, 8]))
    density = rng.choice([0.15, 0.3, 0.5, 0.8])
    pos_to_idx = {perm[k]: k for k in range(n)}
    edges = []
    for j in range(n):
        for i in range(j):
            if rng.random() < density:
                edges.append(Edge(f"o{pos_to_idx[i]}", f"o{pos_to_idx[j]}", bval()))
    coloc: list[str | None] = [None] * n
    if rng.random() < 0.35 and n >= 2:
        for g in range(rng.randint(1, 2)):
            for k in rng.sample(range(n), rng.randint(2, min(3, n))):
                if coloc[k] is None:
                    coloc[k] = f"g{g}"
    pins: list[str | None] = [None] * n
    if rng.random() < 0.35:
        for k in rng.sample(range(n), rng.randint(1, 2)):
            pins[k] = rng.choice(names)
    # a group takes at most one pin (different pins on one group are invalid input)
    for g in {c for c in coloc if c is not None}:
        members = [k for k in range(n) if coloc[k] == g]
        pinned = [k for k in members if pins[k] is not None]
        for k in pinned[1:]:
            pins[k] = None
    total = sum(mems)
    biggest = max(mems)
    for g in {c for c in coloc if c is not None}:
        biggest = max(biggest, sum(mems[k] for k in range(n) if coloc[k] == g))
    r = rng.random()
    if r < 0.4:
        cap = [total + 10] * m  # memory never binds
    else:
        share = rng.choice([0.5, 0.7, 0.9, 1.1]) if r < 0.9 else rng.choice([0.3, 0.4])  # binds; may not fit
        cap = [max(biggest, int(share * total)) for _ in range(m)]
        if rng.random() < 0.3:
            cap = [max(biggest, int(c * rng.choice([0.6, 1.0, 1.4]))) for c in cap]
    pinned_to = [-1] * n  # a pin on any member pins its group; what is pinned to a device must fit it
    for k in range(n):
        if pins[k] is not None:
            for j in range(n):
                if j == k or coloc[k] is not None and coloc[j] == coloc[k]:
                    pinned_to[j] = names.index(pins[k])
    for d in range(m):
        cap[d] = max(cap[d], sum(mems[j] for j in range(n) if pinned_to[j] == d))
    devices = [Device(names[d], cap[d], speeds[d]) for d in range(m)]
    ops = [Op(f"o{k}", times[k], mems[k], colocation=coloc[k], device=pins[k]) for k in range(n)]
    pairs = {}
    if rng.random() < 0.5:
        for a in names:
            for b in names:
                if a != b and rng.random() < 0.5:
                    pairs[(a, b)] = link()
    lk = link()
    tc = 0.0
    if receive_rate and rng.random() < receive_rate:  # drawn last: the other fields stay those of the seed
        tc = 0.0 if rng.random() < 0.1 else rng.choice(_SCALES) * rng.uniform(0.05, 3.0)
    return Instance(f"fuzz-{seed}", devices, ops, edges, link=lk, pairs=pairs, comm=comm, transfer_cpu=tc)

# ------------------------------------------------------------ composed instances: known optima above 9 ops
COMPOSITIONS = ("padded", "side_by_side", "series")

def padded(inst: Instance, k: int, *, name: str | None = None) -> Instance:
    """``inst`` with ``k`` more ops of time 0 and memory 0 and no edges: its optimum, argmin and
    feasibility are ``inst``'s (such an op delays nothing on any device, sends and receives nothing)."""
    pads = [Op(f"pad{i}", 0.0, 0) for i in range(k)]
    return Instance(name or f"{inst.name}+pad{k}", list(inst.devices), list(inst.ops) + pads, list(inst.edges),
                    link=inst.link, pairs=dict(inst.pairs), comm=inst.comm)

def _renamed_ops(inst: Instance, prefix: str, dev: Mapping[str, str], time: Any = None,
                 memory: bool = True) -> list[Op]:
    """``inst``'s ops with ids, colocation groups and pins under ``prefix`` / device names ``dev``;
    ``time(op)``: a new time for each op (default: the mapping keys renamed)."""
    out = []
    for op in inst.ops:
        t = time(op) if time is not None else (
            {dev[d]: v for d, v in op.time.items()} if isinstance(op.time, Mapping) else op.time)
        out.append(Op(prefix + op.id, t, op.memory if memory else 0,
                      colocation=None if op.colocation is None else prefix + op.colocation,
                      device=None if op.device is None else dev[op.device]))
    return out

def _renamed_edges(inst: Instance, prefix: str) -> list[Edge]:
    return [Edge(prefix + e.src, prefix + e.dst, e.bytes) for e in inst.edges]

def side_by_side(a: Instance, b: Instance, far: float) -> Instance:
    """``a`` and ``b`` on disjoint device sets (``a.``/``b.`` prefixes), no edge between them: every op
    takes its own time on its own block's devices and ``far`` µs on the other block's (so with ``far``
    above both blocks' optima no optimal schedule crosses over, and the optimum is the larger of the two
    optima). Both must use the same comm mode; each keeps its links (``b``'s as explicit pairs)."""
    if a.comm != b.comm:
        raise ValueError(f"side_by_side: comm modes differ ({a.comm}, {b.comm})")
    da = {d.name: "a." + d.name for d in a.devices}
    db = {d.name: "b." + d.name for d in b.devices}

    def times(inst: Instance, own: Mapping[str, str], other: Mapping[str, str]) -> Any:
        speed = {d.name: float(d.speed) for d in inst.devices}

        def t(op: Op) -> dict[str, float]:
            mine = ({own[d]: float(v) for d, v in op.time.items()} if isinstance(op.time, Mapping)
                    else {own[d]: float(op.time) / s for d, s in speed.items()})
            return {**mine, **{x: far for x in other.values()}}
        return t

    devices = ([Device(da[d.name], d.memory, 1.0) for d in a.devices]
               + [Device(db[d.name], d.memory, 1.0) for d in b.devices])
    ops = _renamed_ops(a, "a.", da, times(a, da, db)) + _renamed_ops(b, "b.", db, times(b, db, da))
    pairs = {(da[x], da[y]): lk for (x, y), lk in a.pairs.items()}
    for x in b.devices:
        for y in b.devices:
            if x.name != y.name:
                pairs[(db[x.name], db[y.name])] = b.pairs.get((x.name, y.name), b.link)
    return Instance(f"{a.name}|{b.name}", devices, ops, _renamed_edges(a, "a.") + _renamed_edges(b, "b."),
                    link=a.link, pairs=pairs, comm=a.comm)

def without_latency(inst: Instance) -> Instance:
    """``inst`` with every link's latency 0 (a transfer of 0 bytes then takes no time)."""
    z = lambda lk: Link(0.0, lk.bandwidth)  # noqa: E731
    return Instance(inst.name, list(inst.devices), list(inst.ops), list(inst.edges), link=z(inst.link),
                    pairs={k: z(v) for k, v in inst.pairs.items()}, comm=inst.comm)

def on_devices_of(b: Instance, a: Instance) -> Instance:
    """``b``'s ops and edges, memory 0, on ``a``'s devices, links and comm mode (same device count)."""
    if a.m != b.m:
        raise ValueError(f"on_devices_of: device counts differ ({a.m}, {b.m})")
    ren = {x.name: y.name for x, y in zip(b.devices, a.devices)}
    return Instance(f"{b.name}@{a.name}", list(a.devices), _renamed_ops(b, "", ren, memory=False), list(b.edges),
                    link=a.link, pairs=dict(a.pairs), comm=a.comm)

def in_series(a: Instance, b: Instance) -> Instance:
    """``a`` then ``b`` on the same devices: a barrier op (time 0, memory 0) after every op of ``a``
    and before every op of ``b``, its edges of 0 bytes. Exact when ``a``'s links have no latency (the
    barrier's transfers take no time) and ``b`` is :func:`on_devices_of` ``a`` (memory 0: the blocks
    share no capacity): the optimum is then the sum of the two blocks' optima."""
    ops = [Op("a." + op.id, op.time, op.memory, colocation=None if op.colocation is None else "a." + op.colocation,
              device=op.device) for op in a.ops]
    ops.append(Op("barrier", 0.0, 0))
    ops += [Op("b." + op.id, op.time, op.memory, colocation=None if op.colocation is None else "b." + op.colocation,
               device=op.device) for op in b.ops]
    edges = _renamed_edges(a, "a.") + _renamed_edges(b, "b.")
    edges += [Edge("a." + op.id, "barrier", 0.0) for op in a.ops]
    edges += [Edge("barrier", "b." + op.id, 0.0) for op in b.ops]
    return Instance(f"{a.name};{b.name}", list(a.devices), ops, edges, link=a.link, pairs=dict(a.pairs),
                    comm=a.comm)

def _known(blocks: Sequence[OracleResult], combine: Any) -> OracleResult:
    """The oracle's word on a composed instance from its blocks' (``combine``: the blocks' optima -> the
    optimum; None when a block has none)."""
    complete = all(r.complete for r in blocks)
    feasible = all(r.feasible for r in blocks)
    opt = combine([r.optimum for r in blocks]) if all(r.optimum is not None for r in blocks) else None
    return OracleResult(optimum=opt, placement=None, order=None, feasible=feasible, complete=complete,
                        seconds=sum(r.seconds for r in blocks),
                        counts={k: sum(r.counts.get(k, 0) for r in blocks) for k in ("placements", "nodes")})

def composed_instance(seed: int, *, n_ops: tuple[int, int] = (10, 40), kind: str | None = None,
                      block_ops: tuple[int, int] = (3, 9), time_limit_s: float | None = 120.0,
                      ) -> tuple[Instance, OracleResult, dict[str, Any]]:
    """A random instance of ``n_ops`` ops whose optimum is known without trusting a solver: brute-forced
    :func:`fuzz_instance` blocks composed so the optimum follows from theirs — ``padded`` (one block and
    independent zero ops), ``side_by_side`` (two blocks on disjoint device sets: the larger optimum),
    ``series`` (two blocks one after the other: the sum) — then padded with zero ops to the size drawn.
    Returns (instance, the oracle's word on it, how it was made: kind and block seeds)."""
    rng = random.Random(f"composed-{seed}")
    kind = kind or rng.choice(COMPOSITIONS)
    if kind not in COMPOSITIONS:
        raise ValueError(f"kind must be one of {', '.join(COMPOSITIONS)}, got {kind!r}")
    sa = rng.randrange(1 << 30)
    a = fuzz_instance(sa, n_ops=block_ops)
    info: dict[str, Any] = {"kind": kind, "block_seeds": [sa]}
    if kind == "padded":
        orc = brute_force(a, time_limit_s=time_limit_s)
        inst = a
    elif kind == "side_by_side":
        ra = brute_force(a, time_limit_s=time_limit_s)
        for _ in range(50):  # a second block in the same comm mode
            sb = rng.randrange(1 << 30)
            b = fuzz_instance(sb, n_ops=block_ops)
            if b.comm == a.comm:
                break
        else:
            raise RuntimeError(f"composed_instance({seed}): no second block in {a.comm} comm")
        info["block_seeds"].append(sb)
        rb = brute_force(b, time_limit_s=time_limit_s)
        # with a block that has no placement its ops would cross over: the optimum is not known then
        if not (ra.feasible and rb.feasible and ra.complete and rb.complete):
            return composed_instance(seed, n_ops=n_ops, kind="padded", block_ops=block_ops,
                                     time_limit_s=time_limit_s)
        far = 4.0 * max(ra.optimum, rb.optimum) or 1.0
        info["far_us"] = far
        inst = side_by_side(a, b, far)
        orc = _known([ra, rb], max)
    else:
        sb = rng.randrange(1 << 30)
        info["block_seeds"].append(sb)
        a = without_latency(a)
        b = on_devices_of(fuzz_instance(sb, n_ops=block_ops, n_devices=(a.m, a.m)), a)
        inst = in_series(a, b)
        orc = _known([brute_force(a, time_limit_s=time_limit_s), brute_force(b, time_limit_s=time_limit_s)], sum)
    target = rng.randint(max(n_ops[0], inst.n), max(n_ops[1], inst.n))
    if target > inst.n:
        inst = padded(inst, target - inst.n)
    inst = Instance(f"composed-{seed}-{kind}", list(inst.devices), list(inst.ops), list(inst.edges),
                    link=inst.link, pairs=dict(inst.pairs), comm=inst.comm)
    return inst, orc, info

# ------------------------------------------------- magnitudes far apart: the two 10-op files of issue 29
_SMALL = (1e-3, 1e-2, 1e-1, 1.0)
_APART = (1e6, 1e7, 1e8, 1e9)  # large / small: big-M rows (M ~ the large times) resolve 1e-7 x M in CBC

def mixed_instance(seed: int, *, time_limit_s: float | None = 120.0,
                   ) -> tuple[Instance, OracleResult, dict[str, Any]]:
    """A graph of at least 10 ops, parallel comm, whose times lie orders of magnitude apart (the kind of
    the two files of issue 29: op times near 1e-2 µs beside transfers near 1e7 µs; times up to 1e9 µs),
    its optimum known by brute force: ``padded``, a 6-op :func:`fuzz_instance` block with op times at
    one end of the scale and transfers at the other, and 4 independent zero ops; ``series``, a 6-op block
    of large times then a 3-6-op block of small ones (:func:`in_series`), padded to 10 ops. Returns
    (instance, the oracle's word on it, how it was made)."""
    rng = random.Random(f"mixed-{seed}")
    kind = rng.choice(("padded", "series"))
    small = rng.choice(_SMALL)
    large = small * rng.choice(_APART)
    sa = rng.randrange(1 << 30)
    info: dict[str, Any] = {"kind": f"mixed-{kind}", "block_seeds": [sa], "scales": [small, large]}
    if kind == "padded":
        ts, bs = (small, large) if rng.random() < 0.5 else (large, small)
        a = fuzz_instance(sa, n_ops=(6, 6), comm="parallel", scales=(ts, bs, 1.0))
        if ts == large:  # latencies scale with the op times: small transfers only without them
            a = without_latency(a)
        inst, orc = padded(a, 4), brute_force(a, time_limit_s=time_limit_s)
    else:
        sb = rng.randrange(1 << 30)
        info["block_seeds"].append(sb)
        a = without_latency(fuzz_instance(sa, n_ops=(6, 6), comm="parallel", scales=(large, large, 1.0)))
        b = on_devices_of(fuzz_instance(sb, n_ops=(3, 6), n_devices=(a.m, a.m), comm="parallel",
                                        scales=(small, small, 1.0)), a)
        inst = in_series(a, b)
        orc = _known([brute_force(a, time_limit_s=time_limit_s), brute_force(b, time_limit_s=time_limit_s)], sum)
        if inst.n < 10:
            inst = padded(inst, 10 - inst.n)
    inst = Instance(f"mixed-{seed}-{kind}", list(inst.devices), list(inst.ops), list(inst.edges),
                    link=inst.link, pairs=dict(inst.pairs), comm=inst.comm)
    return inst, orc, info
