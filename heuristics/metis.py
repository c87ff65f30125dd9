"""Metis baseline: a k-way graph partition (pymetis) used as a placement, run in the simulator's FIFO order.

As in Baechi's and Celeritas's evaluations (Baechi §5, Celeritas §6.2): vertex weight = op time, edge
weight = bytes, k = number of devices. dplace adds what the partitioner does not know: colocation
groups are contracted to one vertex, pinned ops go to their device, parts are mapped to devices so
that the largest parts meet the largest memories, and a repair pass moves vertices off devices whose
memory overflows. When memory still does not fit, the Result carries ``memory_ok = False``.
"""
from __future__ import annotations

from dataclasses import dataclass

from dplace import progress
from dplace.budget import Budget
from dplace.errors import SolverError, bad_option
from dplace.model import Instance
from dplace.ranks import op_costs
from dplace.registry import register
from dplace.result import Result, make_result

_MAX_WEIGHT = 1 << 20  # keep METIS's 32-bit weight sums far from overflow


@dataclass(frozen=True)
class MetisOptions:
    ufactor: int = 30  # METIS load imbalance, in 1/1000 (its default: 1.03)
    repair_memory: bool = True  # move vertices off over-full devices after partitioning

    def __post_init__(self) -> None:
        if not (1 <= int(self.ufactor) <= 10000):
            raise bad_option("ufactor", "in 1..10000", self.ufactor)


def _scale(values: list[float]) -> list[int]:
    top = max(values, default=0.0)
    if top <= 0:
        return [1] * len(values)
    k = _MAX_WEIGHT / top
    return [max(1, int(round(v * k))) for v in values]


@register("metis", options=MetisOptions, summary="Metis k-way partition (time/bytes weights), memory repaired or flagged, FIFO order.", kind="baseline")
def metis(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
          **options) -> Result:
    """k-way METIS partition (Karypis & Kumar 1998) via pymetis, as the Metis baseline of Baechi §5."""
    opts = MetisOptions(**options)
    try:
        import pymetis
    except ImportError as exc:  # optional extra "metis"
        raise SolverError("metis: pymetis is not installed (pip install 'dplace[metis]')") from exc
    n, m = inst.n, inst.m
    # vertices: one per colocation group, one per other op
    vert = [-1] * n
    nv = 0
    for g in inst.groups:
        for o in g:
            vert[o] = nv
        nv += 1
    for o in range(n):
        if vert[o] < 0:
            vert[o] = nv
            nv += 1
    w = op_costs(inst, "mean")
    vwork = [0.0] * nv
    vmem = [0] * nv
    vpin = [-1] * nv
    for o in range(n):
        v = vert[o]
        vwork[v] += w[o]
        vmem[v] += inst.mem[o]
        if inst.pinned[o] >= 0:
            vpin[v] = inst.pinned[o]
    adj: list[dict[int, float]] = [dict() for _ in range(nv)]
    for s, d, b in zip(inst.esrc, inst.edst, inst.ebytes):
        a, c = vert[s], vert[d]
        if a != c:
            adj[a][c] = adj[a].get(c, 0.0) + b
            adj[c][a] = adj[c].get(a, 0.0) + b
    if m == 1 or nv <= 1:
        part = [0] * nv
    else:
        starts, nbrs, wts = [0], [], []
        for v in range(nv):
            for u in sorted(adj[v]):
                nbrs.append(u)
                wts.append(adj[v][u])
            starts.append(len(nbrs))
        ew = _scale(wts) if wts else None
        mopts = pymetis.Options(seed=int(seed) & 0x7FFFFFFF, ufactor=int(opts.ufactor))
        with progress.silenced():  # METIS prints e.g. "***Cannot bisect a graph with 0 vertices!" on stdout
            res = pymetis.part_graph(m, pymetis.CSRAdjacency(starts, nbrs), vweights=_scale(vwork),
                                     eweights=ew, options=mopts)
        part = [int(p) for p in res.vertex_part]
    dev_of_part = _map_parts(inst, part, vmem, vpin, m)
    dev = [vpin[v] if vpin[v] >= 0 else dev_of_part[part[v]] for v in range(nv)]
    moved = _repair(inst, dev, vmem, vpin, adj) if opts.repair_memory else 0
    placement = [dev[vert[o]] for o in range(n)]
    return make_result(inst, "metis", placement, None, options=options,
                       extra={"vertices": nv, "moved_for_memory": moved})


def _map_parts(inst: Instance, part: list[int], vmem: list[int], vpin: list[int], m: int) -> list[int]:
    """Part -> device: first where most pinned memory/vertices already point, then big parts to big devices."""
    pmem = [0] * m
    votes = [[0] * m for _ in range(m)]
    for v, p in enumerate(part):
        pmem[p] += vmem[v]
        if vpin[v] >= 0:
            votes[p][vpin[v]] += 1
    out = [-1] * m
    taken = [False] * m
    pairs = sorted(((votes[p][d], p, d) for p in range(m) for d in range(m) if votes[p][d] > 0),
                   key=lambda t: (-t[0], t[1], t[2]))
    for _, p, d in pairs:
        if out[p] < 0 and not taken[d]:
            out[p], taken[d] = d, True
    free_parts = sorted((p for p in range(m) if out[p] < 0), key=lambda p: (-pmem[p], p))
    free_devs = sorted((d for d in range(m) if not taken[d]), key=lambda d: (-inst.capacity[d], d))
    for p, d in zip(free_parts, free_devs):
        out[p] = d
    return out


def _repair(inst: Instance, dev: list[int], vmem: list[int], vpin: list[int], adj) -> int:
    """Move unpinned vertices off over-full devices: the ones least tied (by bytes) to their device first,
    each to the device with room that it talks to most (then most free memory). Returns moves made."""
    m = inst.m
    used = [0] * m
    for v, d in enumerate(dev):
        used[d] += vmem[v]
    moved = 0
    for d in range(m):
        if used[d] <= inst.capacity[d]:
            continue

        def tie(v: int) -> float:
            return sum(b for u, b in adj[v].items() if dev[u] == d)

        cands = sorted((v for v in range(len(dev)) if dev[v] == d and vpin[v] < 0 and vmem[v] > 0),
                       key=lambda v: (tie(v) / vmem[v], v))
        for v in cands:
            if used[d] <= inst.capacity[d]:
                break
            room = [e for e in range(m) if e != d and used[e] + vmem[v] <= inst.capacity[e]]
            if not room:
                continue
            talk = {e: 0.0 for e in room}
            for u, b in adj[v].items():
                if dev[u] in talk:
                    talk[dev[u]] += b
            e = max(room, key=lambda e: (talk[e], inst.capacity[e] - used[e], -e))
            dev[v] = e
            used[d] -= vmem[v]
            used[e] += vmem[v]
            moved += 1
    return moved
