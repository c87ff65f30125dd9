"""Large-neighbourhood search on whole colocation groups, for graphs of thousands of ops.

On real training graphs almost every op is in a colocation group (BERT-12: 1,973 of 2,012 ops in 417
groups, each tying forward ops to their backward ops), so a neighbourhood that frees single ops and keeps
their group-mates fixed cannot move anything. Here a *unit* is a whole group (or one ungrouped op) and a
move takes a unit to another device:

* candidates come from the current schedule's critical path: a path op whose start waits for an input
  from another device suggests moving its unit to that producer's device (the transfer disappears), and
  its producer's unit to its device; then other path units to every other device;
* memory-aware repair: when the unit does not fit on the target device, the units there that are off
  the critical path are moved out, smallest first, to devices with room, until it fits;
* the order after a move keeps everyone's current start times (each device's ops sorted by start, the
  moved ops at their old starts; a valid order since starts respect every edge) and, as a second
  candidate, the executor's order for the new placement; in sequential comm a kept move's placement
  is timed once more in its own critical-path order (:func:`.units.placement_order`), kept when faster;
* every candidate is timed by :func:`dplace.simulate`; a move is kept only if the makespan drops and memory
  holds (first improvement), so the answer is never worse than the start.

Cost per candidate: one simulation (O((V + E) log V)); the search stops at its deadline.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Sequence

from dplace import progress
from dplace.budget import Budget
from dplace.instance.model import Instance
from dplace.schedule.simulate import Schedule, simulate

from .units import Units, placement_order

__all__ = ["LnsStats", "critical_path_of", "improve", "sim_cost_s"]


@dataclass
class LnsStats:
    moves_tried: int = 0
    moves_kept: int = 0
    repairs: int = 0
    kicks: int = 0
    iterations: int = 0  # critical paths searched
    stopped: str = ""  # why the search ended: "time limit", "interrupted", "reached the bound", "local optimum"
    start_makespan: float = 0.0
    makespan: float = 0.0
    wall_s: float = 0.0
    history: list[tuple[float, float]] = field(default_factory=list)  # (seconds, makespan) at each gain
    schedule: Schedule | None = None  # the answer's simulated schedule


# sequential comm: up to this many ops a kept move is also timed in placement_order's order (a list
# schedule on the sequential state: 10-23 CPU ms on NASNet-Mobile's 1,842 ops, a simulation 3 ms; on the
# 36k-op Transformer such a schedule costs seconds, more than a 5-s budget can pay)
_REORDER_MAX_OPS = 5000
_SIM_S_PER_ELEMENT = 3.2e-6  # CPU s per op + edge of one simulation (0.34 s on the 36k-op graph)


def sim_cost_s(inst: Instance) -> float:
    """Estimated wall seconds of one :func:`dplace.simulate` of ``inst`` (the machine's load included)."""
    from .heuristic_start import slowdown_guess

    return _SIM_S_PER_ELEMENT * (inst.n + len(inst.esrc)) * slowdown_guess()


def critical_path_of(inst: Instance, sch: Schedule, order: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """One critical path of a simulated schedule, last op first: (op, the op that fixed its start or -1).
    The reason is a producer on another device (a transfer), a producer on the same device, or the
    previous op on the device."""
    pl = sch.placement
    arrive = {(p, b): en for (p, a, b, st, en, nb) in sch.transfers}
    prev = {}
    for ops in order:
        for a, b in zip(ops, ops[1:]):
            prev[b] = a
    o = max(range(inst.n), key=lambda x: (sch.end[x], -inst.topo_pos[x]))
    out = []
    seen = set()
    tol = 1e-9 * max(1.0, sch.makespan)
    while o not in seen:
        seen.add(o)
        nxt = -1
        if sch.start[o] > tol:
            for k in inst.pred[o]:
                p = inst.esrc[k]
                if pl[p] == pl[o]:
                    a = sch.end[p]
                elif inst.comm == "sequential":
                    a = arrive.get((p, pl[o]), sch.end[p])
                else:
                    a = sch.end[p] + inst.transfer_time(k, pl[p], pl[o])
                if abs(a - sch.start[o]) <= tol:
                    nxt = p
                    break
            if nxt < 0:
                q = prev.get(o)
                if q is not None and abs(sch.end[q] - sch.start[o]) <= tol:
                    nxt = q
        out.append((o, nxt))
        if nxt < 0:
            break
        o = nxt
    return out


def _order_by_start(inst: Instance, placement: Sequence[int], sch: Schedule) -> list[list[int]]:
    tp = inst.topo_pos
    lists: list[list[int]] = [[] for _ in range(inst.m)]
    for o in sorted(range(inst.n), key=lambda x: (sch.start[x], sch.end[x], tp[x])):
        lists[placement[o]].append(o)
    return lists


def improve(inst: Instance, placement: Sequence[int], order: Sequence[Sequence[int]] | None, *,
            time_limit_s: float | None = None, seed: int = 0, should_stop=None, target: float | None = None,
            schedule: Schedule | None = None, budget: Budget | None = None,
            ) -> tuple[list[int], list[list[int]], LnsStats]:
    """Group-move LNS from ``placement``/``order`` (module docstring) until ``budget`` (or ``time_limit_s``
    from now) is spent,
    ``should_stop()`` is true or the makespan reaches ``target`` (a proven lower bound). Returns (placement,
    order, stats; ``stats.schedule`` is the answer's simulated schedule); the answer's simulated makespan is
    never above the start's (when the start keeps memory). ``schedule``: the start's, when already
    simulated. Nothing past that is started when the time left cannot pay for a few simulations."""
    t0 = time.perf_counter()
    budget = Budget.resolve(budget, time_limit_s)
    sim_s = sim_cost_s(inst)
    pl = list(placement)
    sch = schedule if schedule is not None else simulate(inst, pl, [list(x) for x in order] if order is not None else None)
    od = [list(x) for x in (order if order is not None else sch.order)]
    stats = LnsStats(start_makespan=sch.makespan, makespan=sch.makespan, schedule=sch)
    if budget.left() < 3 * sim_s or (should_stop is not None and should_stop()):
        stats.stopped = "interrupted" if should_stop is not None and should_stop() else "time limit"
        stats.wall_s = time.perf_counter() - t0
        return pl, od, stats
    rng = random.Random(seed)
    U = Units(inst)
    alt_order = placement_order(inst, pl)  # the placement's own critical-path order may be better
    alt = simulate(inst, pl, alt_order)
    if alt.makespan < sch.makespan:
        sch, od = alt, alt_order
    stats.start_makespan = stats.makespan = sch.makespan
    used = [0] * inst.m
    for o, d in enumerate(pl):
        used[d] += inst.mem[o]
    unit_dev = [pl[ms[0]] for ms in U.members]
    tabu: dict[tuple[int, int], int] = {}  # (unit, device) tried without gain -> iteration
    shown = [sch.makespan]  # the best makespan reported to progress: after a kick, kept moves can be above it

    def stop() -> bool:
        if target is not None and sch.makespan <= target * (1 + 1e-9):
            stats.stopped = "reached the bound"
        elif should_stop is not None and should_stop():
            stats.stopped = "interrupted"
        elif budget.expired():
            stats.stopped = "time limit"
        else:
            return False
        return True

    def try_move(moves: list[tuple[int, int]]) -> bool:
        """Apply unit moves (unit, new device) tentatively; keep them if the makespan drops."""
        nonlocal pl, od, sch
        new = list(pl)
        for u, d in moves:
            for o in U.members[u]:
                new[o] = d
        best = None
        for cand_order in (_order_by_start(inst, new, sch), None):
            if stop():
                break
            stats.moves_tried += 1
            s = simulate(inst, new, cand_order)
            if s.memory_ok and s.makespan < sch.makespan * (1 - 1e-12) and (best is None or s.makespan < best[0].makespan):
                best = (s, cand_order if cand_order is not None else s.order)
        if best is None:
            return False
        if inst.comm == "sequential" and inst.n <= _REORDER_MAX_OPS and budget.left() > 10 * sim_s and not stop():
            # a kept move's order is its old starts (or the executor's); in sequential comm the placement's
            # own critical-path order is often faster (NASNet-Mobile, portfolio 60 s, session 16: the LNS's
            # answer 271,289 µs, that order 269,265) and, once found, the next moves start from it. One more
            # list schedule and simulation per kept move (kept moves are few: 5 of 2,113 tried there).
            po = placement_order(inst, new)
            stats.moves_tried += 1
            s = simulate(inst, new, po)
            if s.memory_ok and s.makespan < best[0].makespan * (1 - 1e-12):
                best = (s, po)
        for u, d in moves:
            used[unit_dev[u]] -= U.mem[u]
            used[d] += U.mem[u]
            unit_dev[u] = d
        pl, sch, od = new, best[0], [list(x) for x in best[1]]
        stats.moves_kept += 1
        if sch.makespan < shown[0]:
            shown[0] = sch.makespan
            progress.update(incumbent=sch.makespan)
        stats.history.append((round(time.perf_counter() - t0, 3), sch.makespan))
        return True

    def repair(u: int, d: int, on_path: set[int]) -> list[tuple[int, int]] | None:
        """Moves that make room for unit u on device d by moving units off the critical path away."""
        need = used[d] + U.mem[u] - inst.capacity[d]
        if need <= 0:
            return [(u, d)]
        moves = [(u, d)]
        free = [inst.capacity[x] - used[x] for x in range(inst.m)]
        free[d] += 0
        cands = [v for v in range(len(U.members)) if unit_dev[v] == d and v not in on_path and U.mem[v] > 0]
        cands.sort(key=lambda v: U.mem[v])
        for v in cands:
            if need <= 0:
                break
            tgt = [x for x in U.allowed[v] if x != d and free[x] >= U.mem[v]]
            if not tgt:
                continue
            x = max(tgt, key=lambda x: free[x])
            free[x] -= U.mem[v]
            moves.append((v, x))
            need -= U.mem[v]
        if need > 0:
            return None
        stats.repairs += 1
        return moves

    def kick(on_path: set[int]) -> bool:
        """Move a few critical-path units to random devices with room (accepted even if slower)."""
        nonlocal pl, od, sch
        units = sorted(on_path)
        rng.shuffle(units)
        new = list(pl)
        done = 0
        for u in units:
            if done >= 3:
                break
            tgt = [d for d in U.allowed[u] if d != unit_dev[u] and used[d] + U.mem[u] <= inst.capacity[d]]
            if not tgt:
                continue
            d = rng.choice(tgt)
            used[unit_dev[u]] -= U.mem[u]
            used[d] += U.mem[u]
            unit_dev[u] = d
            for o in U.members[u]:
                new[o] = d
            done += 1
        if not done or stop():
            return False
        od = placement_order(inst, new)
        pl, sch = new, simulate(inst, new, od)
        stats.kicks += 1
        tabu.clear()
        return True

    best = None
    it = 0
    while not stop():
        it += 1
        stats.iterations = it
        progress.phase(f"LNS step {it}: group moves on the critical path")
        path = critical_path_of(inst, sch, od)
        on_path = {U.of[o] for o, _ in path}
        cands: list[tuple[int, int]] = []
        for o, why in path:  # transfers on the path: bring the two ends together
            if why >= 0 and pl[why] != pl[o]:
                cands.append((U.of[o], pl[why]))
                cands.append((U.of[why], pl[o]))
        others = [(U.of[o], d) for o, _ in path for d in range(inst.m) if d != pl[o]]
        rng.shuffle(others)
        cands += others
        improved = False
        seen = set()
        for u, d in cands:
            if stop():
                break
            if (u, d) in seen or d not in U.allowed[u] or unit_dev[u] == d or tabu.get((u, d), -1) >= stats.moves_kept:
                continue
            seen.add((u, d))
            moves = repair(u, d, on_path)
            if moves is None:
                continue
            if try_move(moves):
                improved = True
                break
            tabu[(u, d)] = stats.moves_kept  # nothing changed since: no need to try it again
        if not improved:  # a local optimum: remember it, kick from the best one found so far
            if best is None or sch.makespan < best[0].makespan:
                best = (sch, list(pl), [list(x) for x in od], list(unit_dev), list(used))
            elif best[0].makespan < sch.makespan:
                sch, pl, od = best[0], list(best[1]), [list(x) for x in best[2]]
                unit_dev[:], used[:] = best[3], best[4]
            if not kick(on_path):
                stats.stopped = stats.stopped or "local optimum"
                break
    if best is not None and best[0].makespan < sch.makespan:
        sch, pl, od = best[0], best[1], best[2]
    stats.makespan = sch.makespan
    stats.schedule = sch
    stats.wall_s = time.perf_counter() - t0
    return pl, od, stats
