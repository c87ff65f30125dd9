"""A schedule of the whole instance put together from the segments the segment bound solved.

The segment bound (:mod:`dplace.formulations.bounds_segments`) cuts the critical path into segments and solves each
with CP-SAT. Its best schedules are placements of the segments' ops that are locally optimal or close,
which list schedulers do not find on graphs whose parallel branches cost transfers to use (InceptionV3's
modules, a Transformer layer's heads). :func:`stitch` makes a placement of the whole instance from them:

1. pieces: the widest solved segment for each span of the critical path (narrower ones where the wide one
   was not solved);
2. devices renamed per piece (only when the devices are interchangeable: same speed and memory, one link
   for every pair, no pins): first so that no device runs over memory (an op brings its whole colocation
   group's bytes), then where the inputs from earlier pieces are (the cut a piece shares with the one
   before it, above all: the transfers saved) and where colocation groups already sit;
3. a colocation group placed on several devices goes to the one holding most of its time;
4. devices over memory give back units (groups or single ops), largest bytes per µs first;
5. one list-scheduling pass in the order of *virtual starts* (the pieces' schedules one after another,
   :func:`_virtual_starts`): placed ops are committed on their device, the ops left (outside every piece,
   or given back) go by HEFT's rule (earliest finish with insertion, devices with room only). When
   every op is in a piece and the pieces agree on their cuts, this replays the pieces' schedules back to
   back, so the makespan is at most the sum of their spans.

It is a heuristic: the answer is judged by :func:`dplace.simulate` like any other, and ``portfolio`` uses it
as one more start for the group-move LNS.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

from dplace.instance.model import Instance

__all__ = ["stitch"]


def _interchangeable(inst: Instance) -> bool:
    devs = inst.devices
    if len({(d.speed, d.memory) for d in devs}) > 1 or any(p >= 0 for p in inst.pinned):
        return False
    if any(isinstance(op.time, dict) for op in inst.ops):
        return False
    links = {(inst.lat[a][b], inst.bw[a][b]) for a in range(inst.m) for b in range(inst.m) if a != b}
    return len(links) <= 1


def _pieces(solutions: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The widest solution for each span: solutions by level (widest first), each kept unless its span
    overlaps one already kept (sharing an end cut is fine), then in path order."""
    kept: list[dict[str, Any]] = []
    for s in sorted(solutions, key=lambda s: (s["level"], s["a"])):
        if all(s["b"] <= k["a"] or s["a"] >= k["b"] for k in kept):
            kept.append(s)
    return sorted(kept, key=lambda s: s["a"])


def _unit_bytes(inst: Instance, o: int, seen_groups: dict[int, Any]) -> int:
    """Memory an op brings to its device when placed: its whole group's the first time, else its own."""
    g = inst.group_of[o]
    if g < 0:
        return inst.mem[o]
    return 0 if g in seen_groups else sum(inst.mem[x] for x in inst.groups[g])


def _rename(inst: Instance, piece: dict[str, Any], pl: list[int], used: list[int], group_dev: dict[int, dict[int, float]],
            free: bool) -> list[int]:
    """Device map sub device -> device for one piece (identity when devices are not interchangeable):
    no device over memory if possible, then the most affinity (transfers saved with ops already placed,
    time of colocation groups already placed there), then the least memory on the fullest device."""
    m = inst.m
    if not free:
        return list(range(m))
    members, sub = piece["members"], piece["placement"]
    where = dict(zip(members, sub))
    add = [0] * m
    score = [[0.0] * m for _ in range(m)]  # score[j][r]: how much sub device j likes device r
    for o, j in zip(members, sub):
        if pl[o] >= 0:  # placed by an earlier piece (the cut they share): keep its piece-mates with it
            for e in inst.succ[o]:
                v = inst.edst[e]
                if where.get(v) == j and pl[v] < 0:
                    score[j][pl[o]] += inst.transfer_time(e, pl[o], (pl[o] + 1) % m)
            continue
        add[j] += _unit_bytes(inst, o, group_dev)
        for e in inst.pred[o]:  # inputs already placed: the transfer saved by joining them
            p = inst.esrc[e]
            if pl[p] >= 0:
                score[j][pl[p]] += inst.transfer_time(e, pl[p], (pl[p] + 1) % m)
        g = inst.group_of[o]
        if g >= 0:
            for r, t in group_dev.get(g, {}).items():
                score[j][r] += t + min(inst.dur[o])
    best, best_key = None, None
    perms = itertools.permutations(range(m)) if m <= 6 else [tuple(range(m))]
    for perm in perms:
        over = sum(max(0, used[perm[j]] + add[j] - inst.capacity[perm[j]]) for j in range(m))
        key = (over, -sum(score[j][perm[j]] for j in range(m)), max(used[perm[j]] + add[j] for j in range(m)))
        if best_key is None or key < best_key:
            best, best_key = perm, key
    return list(best) if best is not None else list(range(m))


def _virtual_starts(inst: Instance, pieces: Sequence[dict[str, Any]]) -> list[float]:
    """Where each op would start if the pieces' schedules ran one after another: a forward pass in
    topological order (each op at its smallest time after its predecessors), a piece's op no earlier
    than the virtual start of the piece's first op (its cut, an ancestor of all of them) plus its own
    start in the piece's schedule."""
    at: dict[int, tuple[int, float]] = {}
    for k, piece in enumerate(pieces):
        for i, (o, t) in enumerate(zip(piece["members"], piece["start"])):
            if o not in at or i == 0:  # a cut is the last op of one piece and the first of the next
                at[o] = (k, t)
    first = {k: piece["members"][0] if piece["a"] >= 0 else -1 for k, piece in enumerate(pieces)}
    vt = [0.0] * inst.n
    for o in inst.topo:
        if o in at:
            k, t = at[o]
            f = first[k]
            base = 0.0 if f < 0 or f == o else vt[f]
            if base + t > vt[o]:
                vt[o] = base + t
        end = vt[o] + min(inst.dur[o])
        for e in inst.succ[o]:
            v = inst.edst[e]
            if end > vt[v]:
                vt[v] = end
    return vt


def stitch(inst: Instance, solutions: Sequence[dict[str, Any]]) -> tuple[list[int], list[list[int]]]:
    """(placement, per-device order) of the whole instance from segment solutions (module docstring)."""
    from dplace.schedule.ranks import priority_order
    from dplace.schedule.state import ScheduleState

    n, m = inst.n, inst.m
    pl = [-1] * n
    used = [0] * m
    group_dev: dict[int, dict[int, float]] = {}
    free = _interchangeable(inst)
    pieces = _pieces(solutions)
    for piece in pieces:
        perm = _rename(inst, piece, pl, used, group_dev, free)
        for o, j in zip(piece["members"], piece["placement"]):
            if pl[o] >= 0:
                continue
            d = perm[j]
            pl[o] = d
            used[d] += _unit_bytes(inst, o, group_dev)
            g = inst.group_of[o]
            if g >= 0:
                gd = group_dev.setdefault(g, {})
                gd[d] = gd.get(d, 0.0) + min(inst.dur[o])
    for g, members in enumerate(inst.groups):  # one device per group: where most of its time is
        gd = group_dev.get(g)
        if gd:
            d = max(sorted(gd), key=lambda r: gd[r])
            for o in members:
                pl[o] = d
    used = [0] * m
    for o in range(n):
        if pl[o] >= 0:
            used[pl[o]] += inst.mem[o]
    units: dict[int, list[int]] = {}
    for o in range(n):
        if pl[o] >= 0:
            units.setdefault(inst.group_of[o] if inst.group_of[o] >= 0 else -1 - o, []).append(o)
    for d in range(m):  # give back units from devices over memory: most bytes per µs first
        if used[d] <= inst.capacity[d]:
            continue
        mine = [ms for ms in units.values() if pl[ms[0]] == d]
        mine.sort(key=lambda ms: -sum(inst.mem[o] for o in ms) / (1e-9 + sum(min(inst.dur[o]) for o in ms)))
        for ms in mine:
            if used[d] <= inst.capacity[d]:
                break
            for o in ms:
                used[d] -= inst.mem[o]
                pl[o] = -1
    reserved = list(used)  # memory of placed ops not yet committed
    tp = inst.topo_pos
    vt = _virtual_starts(inst, pieces)
    st = ScheduleState(inst)
    for o in priority_order(inst, lambda o: (vt[o], tp[o])):
        d = pl[o]
        if d >= 0:
            reserved[d] -= inst.mem[o]
        else:
            g = inst.group_of[o]
            ms = inst.groups[g] if g >= 0 else [o]
            need = sum(inst.mem[x] for x in ms)
            ok = [r for r in inst.allowed_devices(o)
                  if st.mem_used[r] + reserved[r] + need <= inst.capacity[r]]
            cands = ok or list(inst.allowed_devices(o))
            d = min(cands, key=lambda r: (st.eft(o, r, insertion=True), r))
            for x in ms:  # the group follows
                if x != o and pl[x] < 0:
                    pl[x] = d
                    reserved[d] += inst.mem[x]
            pl[o] = d
        st.commit(o, d, insertion=True)
    return pl, st.order()
