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
  candidate, the executor's order for the new placement;
* every candidate is timed by :func:`dplace.simulate`; a move is kept only if the makespan drops and memory
  holds (first improvement), so the answer is never worse than the start.

Cost per candidate: one simulation (O((V + E) log V)); the search stops at its deadline.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from dplace import claims, progress
from dplace.budget import Budget
from dplace.model import Instance
from dplace.simulate import Schedule, simulate

__all__ = ["LnsStats", "critical_path_of", "improve"]


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


_SIM_S_PER_ELEMENT = 3.2e-6  # CPU s per op + edge of one simulation (0.34 s on the 36k-op graph)


def sim_cost_s(inst: Instance) -> float:
    """Estimated wall seconds of one :func:`dplace.simulate` of ``inst`` (the machine's load included)."""
    from .cpsat.hint import slowdown_guess

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


def placement_order(inst: Instance, placement: Sequence[int], insertion: bool = True) -> list[list[int]]:
    """Per-device order for a fixed placement: ready ops by decreasing remaining path length *under this
    placement* (each op's time on its device, transfers only on edges between devices), each at its
    earliest start (with ``insertion``, into an idle gap): list scheduling with the placement's own
    critical-path priority."""
    rank = [0.0] * inst.n
    for o in reversed(inst.topo):
        best = 0.0
        d = placement[o]
        for e in inst.succ[o]:
            v = inst.edst[e]
            r = rank[v] + (inst.transfer_time(e, d, placement[v]) if placement[v] != d else 0.0)
            if r > best:
                best = r
        rank[o] = inst.dur[o][d] + best
    return list_schedule(inst, placement, rank, insertion)


def list_schedule(inst: Instance, placement: Sequence[int], rank: Sequence[float],
                  insertion: bool = True) -> list[list[int]]:
    """Per-device order for a fixed placement: ready ops by decreasing ``rank`` (ties: topological
    position), each committed at its earliest start (``ScheduleState``; ``insertion``: idle gaps too)."""
    from dplace.ranks import priority_order
    from dplace.simulate import ScheduleState

    tp = inst.topo_pos
    st = ScheduleState(inst)
    for o in priority_order(inst, lambda o: (-rank[o], tp[o])):
        st.commit(o, placement[o], insertion=insertion)
    return st.order()


def _order_by_start(inst: Instance, placement: Sequence[int], sch: Schedule) -> list[list[int]]:
    tp = inst.topo_pos
    lists: list[list[int]] = [[] for _ in range(inst.m)]
    for o in sorted(range(inst.n), key=lambda x: (sch.start[x], sch.end[x], tp[x])):
        lists[placement[o]].append(o)
    return lists


class _Units:
    """Colocation groups and ungrouped ops as movable units, with the devices each may use."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.of = [-1] * inst.n
        self.members: list[list[int]] = []
        for g in inst.groups:
            for o in g:
                self.of[o] = len(self.members)
            self.members.append(list(g))
        for o in range(inst.n):
            if self.of[o] < 0:
                self.of[o] = len(self.members)
                self.members.append([o])
        self.mem = [sum(inst.mem[o] for o in ms) for ms in self.members]
        self.allowed = []
        for ms in self.members:
            pins = {inst.pinned[o] for o in ms if inst.pinned[o] >= 0}
            self.allowed.append(sorted(pins) if pins else list(range(inst.m)))


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
    U = _Units(inst)
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
        for u, d in moves:
            used[unit_dev[u]] -= U.mem[u]
            used[d] += U.mem[u]
            unit_dev[u] = d
        pl, sch, od = new, best[0], [list(x) for x in best[1]]
        stats.moves_kept += 1
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


def portfolio_large(inst: Instance, starts: dict[str, Any], *, budget: Budget, seed: int = 0,
                    bound_share: float = 0.25, twins_share: float = 0.6, anneal_share: float = 0.8, options: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None, should_stop=None):
    """The large-graph stage of ``portfolio``: a proven bound and the group-move LNS in the budget.

    ``starts``: heuristic name -> Result (already run). Within ``budget``: the
    segment bound (:func:`dplace.bounds_segments.segment_bound`, at most ``bound_share`` of what is left),
    the segments' schedules put together (:func:`.stitch.stitch`, start "stitch"), then each start re-ordered by :func:`placement_order` (kept when faster), on graphs of two parts tied by
    colocation the best start's placement searched for ``twins_share`` of what is left by
    :func:`.twins.search` (start "twins") — or, where :func:`.anneal.applies` (parallel comm, up to
    :data:`.anneal.MAX_OPS` ops), annealed for ``anneal_share`` of what is left instead (start "anneal") —, then :func:`improve` from the best until the deadline. Returns a Result named "portfolio" whose bound names its source;
    ``extra["starts"]`` holds every start's makespan and ``extra["winner"]`` the one the LNS began from."""
    from dplace.bounds import lower_bound_with_source
    from dplace.bounds_segments import segment_bound
    from dplace.result import Result

    left = budget.left
    extra = dict(extra or {})
    lb, src = lower_bound_with_source(inst)
    best = None  # (makespan, name, placement, order, its simulated schedule)
    tried: dict[str, float] = {}  # every start's makespan (after re-ordering), by name
    if left() > 1.0 and bound_share > 0:
        progress.phase("segment bound")
        sols: list[dict[str, Any]] = []
        seg_cache: dict[Any, Any] = {}
        sb = segment_bound(inst, budget=budget.share(bound_share), should_stop=should_stop, solutions=sols,
                           cache=seg_cache)
        extra["segment_bound"] = {"value": sb.value, "segments": sb.n_segments, "proven_optimal": sb.proven_optimal,
                                  "memory_cuts": sb.memory_cuts, "time_s": round(sb.time_s, 3)}
        if sb.best[0] > lb:
            lb, src = sb.best
        from dplace.bounds_twins import twin_stem_bound, twin_stems

        if twin_stems(inst) is not None and left() > 1.0:  # two tied parts that begin with chains
            progress.phase("twin-stem bound")
            tb = twin_stem_bound(inst, budget=budget.share(bound_share), should_stop=should_stop,
                                 cache=seg_cache)
            if tb is not None:
                extra["twin_stem_bound"] = {"value": tb.value, "stem": tb.stem, "rests": list(tb.rest_bounds),
                                            "stems_optimal": tb.optimal, "time_s": round(tb.time_s, 3)}
                if tb.value > lb:
                    lb, src = tb.value, "twin_stems"
        progress.update(bound=lb)
        if sols and left() > 1.0 and inst.n <= 20000:  # the segments' schedules put together: one more start
            # (on a 36k-op Transformer it was 1 % worse than heft and cost ~10 s of the budget)
            from .stitch import stitch

            progress.phase("stitch the segments' schedules")
            spl, sod = stitch(inst, sols)
            cands = [(simulate(inst, spl, sod), sod)]
            if left() > 2.0 and inst.n <= 20000:
                alt = placement_order(inst, spl)
                cands.append((simulate(inst, spl, alt), alt))
            ok = [c for c in cands if c[0].memory_ok]
            if ok:
                s_best, s_od = min(ok, key=lambda c: c[0].makespan)
                best = (s_best.makespan, "stitch", spl, [list(x) for x in s_od], s_best)
                tried["stitch"] = s_best.makespan
    progress.phase("re-order the starts")
    for name, res in starts.items():
        if should_stop is not None and should_stop() and best is not None:
            break
        if res is None or res.placement is None or not res.memory_ok or res.transform is not None:
            continue
        order = [list(x) for x in (res.order if res.order is not None else res.schedule.order)]
        cands = [(res.makespan, order, res.schedule)]
        if left() > 2.0 and inst.n <= 20000:
            alt = placement_order(inst, res.placement)
            s_alt = simulate(inst, res.placement, alt)
            cands.append((s_alt.makespan, alt, s_alt))
        mk, od, sch = min(cands, key=lambda c: c[0])
        tried[name] = mk
        if best is None or mk < best[0]:
            best = (mk, name, list(res.placement), od, sch)
    if best is None:
        return None
    from . import anneal

    if anneal.applies(inst) and anneal_share > 0:
        if left() > 3.0 and not (should_stop is not None and should_stop()):
            best = _anneal_start(inst, best, tried, budget, anneal_share, seed, (options or {}).get("workers"),
                                 should_stop, extra)
    elif inst.n <= 20000 and left() > 2.0 and not (should_stop is not None and should_stop()):
        best = _twins_start(inst, best, tried, budget, twins_share, seed, should_stop)
    extra.update(winner=best[1], start_makespan=best[0], starts=tried)
    pl, od, st = improve(inst, best[2], best[3], budget=budget.child(reserve=0.2), seed=seed,
                         should_stop=should_stop, target=lb, schedule=best[4])
    extra["lns"] = {"moves_tried": st.moves_tried, "moves_kept": st.moves_kept, "repairs": st.repairs, "kicks": st.kicks,
                    "start_makespan": st.start_makespan, "makespan": st.makespan, "wall_s": round(st.wall_s, 3)}
    extra.update(lns_stopped=st.stopped, lns_steps=st.iterations, lns_improvements=st.moves_kept,
                 stage="lns" if st.makespan < best[0] else "start")
    # the LNS's own simulated schedule of (pl, od): no second simulation
    res = Result(instance=inst, method="portfolio", status="feasible", placement=list(pl), order=[list(x) for x in od],
                 schedule=st.schedule, options=dict(options or {}), extra=extra)
    return claims.settle(res, [claims.Bound(lb, src)])


def _anneal_start(inst: Instance, best: tuple, tried: dict[str, float], budget: Budget, share: float, seed: int,
                  workers: int | None, should_stop, extra: dict[str, Any]) -> tuple:
    """The best start's placement improved by :func:`.anneal.anneal_placement` for ``share`` of the time
    left (chains: ``workers``, default the CPU count, at most 4), ordered by :func:`placement_order`;
    the new best start when it is faster (recorded as "anneal" in ``tried``)."""
    import os

    from .anneal import anneal_placement, kernel_ready

    if not kernel_ready() and share * budget.left() < 30.0:  # compiling it would take most of the time
        extra["anneal"] = {"skipped": "the annealing kernel is not compiled yet (~10 s) and less than 30 s is left"}
        return best
    progress.phase("anneal: placements judged by their list schedules")
    k = max(1, min(4, workers or os.cpu_count() or 1))
    pl, st = anneal_placement(inst, best[2], budget=budget.share(share).child(reserve=0.5), seed=seed, workers=k,
                              should_stop=should_stop)
    extra["anneal"] = {"start_makespan": st.start_makespan, "makespan": st.makespan, "steps": st.steps,
                       "accepted": st.accepted, "chains": st.chains, "wall_s": round(st.wall_s, 3),
                       "stopped": st.stopped}
    od = placement_order(inst, pl)
    sch = simulate(inst, pl, od)
    if sch.memory_ok:
        tried["anneal"] = sch.makespan
        if sch.makespan < best[0]:
            return (sch.makespan, "anneal", pl, od, sch)
    return best


def _twins_start(inst: Instance, best: tuple, tried: dict[str, float], budget: Budget, share: float, seed: int,
                 should_stop) -> tuple:
    """On graphs of two parts tied by colocation (:func:`.twins.twin_sides`): the best start's placement
    improved by :func:`.twins.search` and ordered by :func:`.twins.schedule` (70 % and 30 % of ``share``
    of the time left); the new best start when it is faster (recorded as "twins" in ``tried``)."""
    from .twins import schedule, search, twin_sides

    sides = twin_sides(inst)
    if sides is None or share <= 0:
        return best
    progress.phase("twins: placement search on the two parts' bound")
    mine = budget.share(share)
    pl, _ = search(inst, best[2], budget=mine.share(0.7), seed=seed, should_stop=should_stop)
    progress.phase("twins: orders for the placement")
    od, sch = schedule(inst, pl, sides, budget=budget.child(None if mine.limit_s is None else 0.3 * mine.limit_s, reserve=1.0),
                       seed=seed,
                       should_stop=should_stop)
    if sch.memory_ok:
        tried["twins"] = sch.makespan
        if sch.makespan < best[0]:
            return (sch.makespan, "twins", pl, [list(x) for x in od], sch)
    return best
