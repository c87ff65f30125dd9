"""Brute force for tiny instances (test oracle): every placement that keeps pins, colocation and memory,
times every distinct per-device order (restrictions of the graph's linear extensions), each evaluated by
:func:`dplace.simulate`. The minimum is the optimum of the problem the simulator defines.

Not registered (the leading underscore keeps the registry from importing it); refuses more than
``MAX_OPS`` ops.
"""
from __future__ import annotations

import itertools
from typing import Iterator

from dplace.instance import graph
from dplace.errors import InfeasibleError, InvalidInstanceError
from dplace.instance.model import Instance
from dplace.schedule.simulate import simulate

MAX_OPS = 8


def linear_extensions(inst: Instance) -> Iterator[tuple[int, ...]]:
    """Every topological order of the ops."""
    return graph.linear_extensions(inst.graph)


def placements(inst: Instance) -> Iterator[list[int]]:
    """Placements keeping pins, colocation and memory; identical devices up to renaming."""
    sym = inst.m > 1 and inst.has_identical_devices
    for pl in itertools.product(*[inst.allowed_devices(o) for o in range(inst.n)]):
        if any(len({pl[o] for o in g}) > 1 for g in inst.groups):
            continue
        used = [0] * inst.m
        for o, d in enumerate(pl):
            used[d] += inst.mem[o]
        if any(used[d] > inst.capacity[d] for d in range(inst.m)):
            continue
        if sym:  # canonical: devices first used in increasing index order (op index order)
            seen = -1
            ok = True
            for d in pl:
                if d > seen + 1:
                    ok = False
                    break
                seen = max(seen, d)
            if not ok:
                continue
        yield list(pl)


def brute_force(inst: Instance) -> tuple[float, list[int], list[list[int]]]:
    """(optimal makespan, placement, per-device order) by exhaustive enumeration."""
    if inst.n > MAX_OPS:
        raise InvalidInstanceError(f"brute force: at most {MAX_OPS} ops, got {inst.n}")
    exts = list(linear_extensions(inst))
    best: tuple[float, list[int], list[list[int]]] | None = None
    for pl in placements(inst):
        seen: set[tuple[tuple[int, ...], ...]] = set()
        for ext in exts:
            key = tuple(tuple(o for o in ext if pl[o] == d) for d in range(inst.m))
            if key in seen:
                continue
            seen.add(key)
            mk = simulate(inst, pl, [list(k) for k in key]).makespan
            if best is None or mk < best[0]:
                best = (mk, pl, [list(k) for k in key])
    if best is None:
        raise InfeasibleError("brute force: no placement keeps pins, colocation and memory")
    return best


def task_graph(n_tasks: int, n_procs: int, ccr: float = 1.0, *, seed: int = 0, comm: str = "parallel") -> Instance:
    """A classic task-graph scheduling benchmark (test and benchmark support): a random layered DAG of
    ``n_tasks`` tasks with integer computation costs 1..20 on ``n_procs`` identical processors, integer
    communication costs paid only between different processors (latency 0, bandwidth 1, bytes = cost),
    scaled so that total communication / total computation is about ``ccr``; unlimited memory."""
    import math
    import random

    from dplace.instance.model import Device, Edge, Link, Op

    rng = random.Random(seed)
    width = max(1, round(1.5 * math.sqrt(n_tasks)))
    layers: list[list[int]] = []
    t = 0
    while t < n_tasks:
        k = min(n_tasks - t, rng.randint(1, 2 * width - 1))
        layers.append(list(range(t, t + k)))
        t += k
    comp = [rng.randint(1, 20) for _ in range(n_tasks)]
    pairs: list[tuple[int, int]] = []
    for li in range(1, len(layers)):
        earlier = [u for lj in range(max(0, li - 2), li) for u in layers[lj]]
        for v in layers[li]:
            srcs = {rng.choice(layers[li - 1])}  # one input from the previous level keeps the levels
            srcs.update(rng.sample(earlier, min(len(earlier), rng.randint(0, 2))))
            pairs.extend((u, v) for u in sorted(srcs))
    weights = [rng.uniform(0.5, 1.5) for _ in pairs]
    scale = ccr * sum(comp) / max(1e-9, sum(weights)) if pairs else 0.0
    costs = [max(0, round(w * scale)) for w in weights]
    ops = [Op(f"t{i}", float(comp[i]), 0) for i in range(n_tasks)]
    edges = [Edge(f"t{u}", f"t{v}", float(c)) for (u, v), c in zip(pairs, costs)]
    devices = [Device(f"p{d}", 1 << 40, 1.0) for d in range(n_procs)]
    return Instance(f"tg{n_tasks}-p{n_procs}-ccr{ccr:g}-s{seed}", devices, ops, edges, link=Link(0.0, 1.0), comm=comm)
