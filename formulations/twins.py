"""Placements for graphs made of two copies tied by colocation ("twins").

Some training graphs come as two parts that share no edge, each colocation group holding one op of each
part: InceptionV3's converted layer graph is a forward DAG and a backward DAG with the same edges, tied
op by op. One placement then serves both parts, and what keeps schedules long is not either part's own
critical path but the two parts competing for the same devices at the same time (the part that runs
second on the device of the shared first ops waits for the other). The list schedulers and the
group-move LNS judge a placement by one simulated order, which ties the search to that order's quirks.

Here a placement is judged by a *relaxation of its schedules* instead (:func:`placement_bound`): for a
fixed placement every schedule is at least

* the longest path, op times on their devices and transfer times on edges between devices (heads
  ``H[o]``: the longest path ending at o's start; tails ``Q[o]``: the longest path from o's end);
* for each device, the one-machine bound with release dates ``H``, processing times and delivery
  times ``Q`` (Jackson's preemptive schedule, Carlier 1982): the device runs its ops one at a time, no
  op starts before its head, and after op o ends at least ``Q[o]`` must still pass.

Proof: in a schedule of the placement, op o starts at or after ``H[o]`` (induction along the path: an
input from another device arrives at least a transfer time after its producer ends, in both comm
modes, since link queues only delay) and the makespan is at least o's end + ``Q[o]`` (same induction
backwards). The ops of one device form a single-machine schedule with those heads and tails; the
preemptive Jackson schedule is optimal for the preemptive relaxation of that problem, so its value is
at most the makespan.

:func:`search` lowers this bound by moving whole units (colocation groups, single ops) between devices
with memory kept (first improvement, random sweeps; ties broken by the sum of the three largest terms),
then :func:`schedule` turns the placement into per-device orders by list scheduling with a few
priorities (the tail; the tail plus a head start for the part with the longer critical path; then, in
its time, random head starts and small random changes of the priorities) and keeps the best by
:func:`dplace.simulate`. ``portfolio`` runs it as one more start on twin-structured graphs where its
annealing (:mod:`.anneal`, which judges placements by a list schedule and does better on InceptionV3) does
not apply: sequential comm, or more than :data:`.anneal.MAX_OPS` ops.
"""
from __future__ import annotations

import heapq
import random
from typing import Sequence

from dplace.budget import Budget
from dplace.instance.model import Instance
from dplace.schedule.simulate import Schedule, simulate

__all__ = ["heads_tails", "jackson_bound", "placement_bound", "schedule", "search", "twin_sides"]


def twin_sides(inst: Instance) -> list[int] | None:
    """Side 0 or 1 of every op when the graph is two parts tied by colocation: every colocation group
    has exactly two ops, on different sides, and no edge joins the sides (ungrouped ops go with the ops
    they are connected to). None when the graph is not so (or has no colocation)."""
    n = inst.n
    if not inst.groups or any(len(g) != 2 for g in inst.groups):
        return None
    parent = list(range(n))
    parity = [0] * n  # side of o relative to parent[o]
    size = [1] * n

    def find(x: int) -> tuple[int, int]:  # root and side relative to it; paths compressed
        path = []
        while parent[x] != x:
            path.append(x)
            x = parent[x]
        acc = 0
        for y in reversed(path):  # nearest the root first: its parity is already to the root
            acc ^= parity[y]
            parity[y], parent[y] = acc, x
        return x, acc

    def join(a: int, b: int, differ: int) -> bool:
        ra, pa = find(a)
        rb, pb = find(b)
        if ra == rb:
            return (pa ^ pb) == differ
        if size[ra] > size[rb]:  # union by size: trees stay shallow (a chain made 36k ops take 40 s)
            ra, rb = rb, ra
        parent[ra] = rb
        parity[ra] = pa ^ pb ^ differ
        size[rb] += size[ra]
        return True

    for g in inst.groups:
        if not join(g[0], g[1], 1):
            return None
    for k in range(len(inst.esrc)):
        if not join(inst.esrc[k], inst.edst[k], 0):
            return None
    return [find(o)[1] for o in range(n)]


class _Graph:
    """Per-op (neighbour, edge) lists for the longest-path passes; with one link for every device pair,
    each edge's transfer time once (``cost``), else None."""

    def __init__(self, inst: Instance) -> None:
        self.topo = list(inst.topo)
        self.pred = [[(inst.esrc[k], k) for k in inst.pred[o]] for o in range(inst.n)]
        self.succ = [[(inst.edst[k], k) for k in inst.succ[o]] for o in range(inst.n)]
        links = {(inst.lat[a][b], inst.bw[a][b]) for a in range(inst.m) for b in range(inst.m) if a != b}
        self.cost = None
        if len(links) == 1:
            lat, bw = links.pop()
            self.cost = [lat + b / bw for b in inst.ebytes]


def heads_tails(inst: Instance, placement: Sequence[int], graph: _Graph | None = None
                ) -> tuple[list[float], list[float]]:
    """(H, Q): for each op the longest path ending at its start and the longest path from its end, with
    op times on their devices and transfer times on edges between devices."""
    G = graph or _Graph(inst)
    n = inst.n
    pl = placement
    p = [inst.dur[o][pl[o]] for o in range(n)]
    H = _longest(G.topo, G.pred, pl, p, inst, G.cost, inward=True)
    Q = _longest(reversed(G.topo), G.succ, pl, p, inst, G.cost, inward=False)
    return H, Q


def _longest(order, nbrs, pl: Sequence[int], p: list[float], inst: Instance, cost: list[float] | None,
             inward: bool) -> list[float]:
    """Per op (visited in ``order``) the longest path over its neighbours ``nbrs[o]`` (pairs (op, edge)) that
    ends at it: a neighbour's value plus its time ``p``, plus the edge's transfer where the two devices differ
    (from the neighbour when ``inward``, to it otherwise; ``cost[edge]`` when all links are one)."""
    lat, bw, nb = inst.lat, inst.bw, inst.ebytes
    out = [0.0] * len(pl)
    for o in order:
        d = pl[o]
        b = 0.0
        for u, k in nbrs[o]:
            du = pl[u]
            v = out[u] + p[u]
            if du != d:
                src, dst = (du, d) if inward else (d, du)
                v += cost[k] if cost is not None else lat[src][dst] + nb[k] / bw[src][dst]
            if v > b:
                b = v
        out[o] = b
    return out


def jackson_bound(items: Sequence[tuple[float, float, float]]) -> float:
    """Preemptive one-machine bound: ``items`` = (release, processing, delivery) per job; the largest
    completion + delivery of Jackson's preemptive schedule (at every moment the released job with the
    largest delivery time runs), which is optimal for 1|r_j, pmtn|max(C_j + q_j)."""
    jobs = sorted(items)
    i, t, best, n = 0, 0.0, 0.0, len(jobs)
    heap: list[list[float]] = []  # [-delivery, remaining processing]
    while i < n or heap:
        if not heap and t < jobs[i][0]:
            t = jobs[i][0]
        while i < n and jobs[i][0] <= t:
            heapq.heappush(heap, [-jobs[i][2], jobs[i][1]])
            i += 1
        nq, p = heap[0]
        nxt = jobs[i][0] if i < n else float("inf")
        if t + p <= nxt:
            heapq.heappop(heap)
            t += p
            if t - nq > best:
                best = t - nq
        else:
            heap[0][1] = p - (nxt - t)
            t = nxt
    return best


def placement_bound(inst: Instance, placement: Sequence[int], graph: _Graph | None = None
                    ) -> tuple[float, float, list[float]]:
    """(bound, longest path, one-machine bound per device) of every schedule of ``placement`` (module
    docstring): the bound is the largest of the others."""
    H, Q = heads_tails(inst, placement, graph)
    dur = inst.dur
    per: list[list[tuple[float, float, float]]] = [[] for _ in range(inst.m)]
    cp = 0.0
    for o in range(inst.n):
        p = dur[o][placement[o]]
        per[placement[o]].append((H[o], p, Q[o]))
        if H[o] + p + Q[o] > cp:
            cp = H[o] + p + Q[o]
    js = [jackson_bound(x) if x else 0.0 for x in per]
    return max([cp] + js), cp, js


def _score(inst: Instance, placement: Sequence[int], graph: _Graph) -> tuple[float, float]:
    v, cp, js = placement_bound(inst, placement, graph)
    return v, sum(sorted(js + [cp])[-3:])


def search(inst: Instance, placement: Sequence[int], *, time_limit_s: float | None = None, seed: int = 0,
           should_stop=None, budget: Budget | None = None) -> tuple[list[int], float]:
    """Unit moves (a colocation group or an ungrouped op to another allowed device with room) that lower
    :func:`placement_bound` (ties: the sum of its three largest terms), first improvement over random
    sweeps, until no move helps or ``budget`` (or ``time_limit_s`` from now) is spent. Returns (placement, its bound). Memory: a move is
    only made when the unit fits; a start over memory stays over only where it was."""
    from .units import Units

    budget = Budget.resolve(budget, time_limit_s)
    rng = random.Random(seed)
    U = Units(inst)
    pl = list(placement)
    used = [0] * inst.m
    for u, ms in enumerate(U.members):
        used[pl[ms[0]]] += U.mem[u]
    G = _Graph(inst)
    cur = _score(inst, pl, G)
    units = list(range(len(U.members)))
    improved = True
    while improved:
        improved = False
        rng.shuffle(units)
        for u in units:
            if budget.expired() or (should_stop is not None and should_stop()):
                return pl, cur[0]
            d0 = pl[U.members[u][0]]
            for d in rng.sample(U.allowed[u], len(U.allowed[u])):
                if d == d0 or used[d] + U.mem[u] > inst.capacity[d]:
                    continue
                for o in U.members[u]:
                    pl[o] = d
                s = _score(inst, pl, G)
                if s < cur:
                    cur = s
                    used[d0] -= U.mem[u]
                    used[d] += U.mem[u]
                    d0 = d
                    improved = True
                else:
                    for o in U.members[u]:
                        pl[o] = d0
    return pl, cur[0]


def schedule(inst: Instance, placement: Sequence[int], sides: Sequence[int] | None = None, *,
             time_limit_s: float = 0.0, seed: int = 0, should_stop=None, budget: Budget | None = None,
             ) -> tuple[list[list[int]], Schedule]:
    """Per-device orders for ``placement``: list scheduling (insertion) by the tail ``Q[o]`` + op time,
    and, with ``sides``, the same with a head start of 5, 10 or 20 % of the longest path for the side
    whose longest path is longer (it runs first where both want a device); then, within ``budget`` (or
    ``time_limit_s`` from now),
    the same with a random head start (0-30 %) and priorities scaled by random factors within 2-10 %.
    Returns the order with the shortest simulated makespan (memory is the placement's) and its
    schedule."""
    from .units import list_schedule

    budget = Budget.resolve(budget, time_limit_s)
    H, Q = heads_tails(inst, placement)
    rank = [Q[o] + inst.dur[o][placement[o]] for o in range(inst.n)]
    cp = [0.0, 0.0]
    lead = 0
    if sides is not None:
        for o in range(inst.n):
            cp[sides[o]] = max(cp[sides[o]], H[o] + rank[o])
        lead = 0 if cp[0] >= cp[1] else 1

    def ranks(f: float, noise: list[float] | None) -> list[float]:
        bonus = f * max(cp)
        return [(r + (bonus if sides is not None and sides[o] == lead else 0.0)) * (1.0 if noise is None else noise[o])
                for o, r in enumerate(rank)]

    best = None

    def attempt(r: list[float]) -> None:
        nonlocal best
        od = list_schedule(inst, placement, r, True)
        s = simulate(inst, placement, od)
        if best is None or s.makespan < best[1].makespan:
            best = (od, s)

    for f in ((0.0, 0.05, 0.1, 0.2) if sides is not None else (0.0,)):
        attempt(ranks(f, None))
    rng = random.Random(seed)
    while not budget.expired() and not (should_stop is not None and should_stop()):
        eps = rng.choice((0.02, 0.05, 0.1))
        attempt(ranks(rng.uniform(0.0, 0.3) if sides is not None else 0.0,
                      [1.0 + rng.uniform(-eps, eps) for _ in range(inst.n)]))
    return best

