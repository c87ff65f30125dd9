"""Ranges of the critical path re-solved by CP-SAT inside a whole answer (a large-neighbourhood search).

A *range* is the stretch of the graph between two cuts of the segment decomposition
(:func:`dplace.formulations.bounds_segments.segments`, window :data:`WINDOW`): the path ops c_a+1 .. c_b-1 and
every op that must run between c_a's end and c_b's start (A(o) >= a and D(o) <= b), with every op colocated with
one of them (on a training graph: their gradients in the backward pass, so the range's placement is free, not
pinned by its twins). Ranges are grown from one cut to the next while they hold at most ``max_ops`` ops (one
piece at least).

One step frees a range's ops and keeps every other op on its device and in its device order: refine's
neighbourhood model (:func:`.neighbourhood.neighbourhood_model`, the whole instance in CP-SAT, hinted by the answer), solved for
``step_s``; the step's answer is timed by :func:`dplace.simulate` and kept only when its makespan is lower and
memory holds. Ranges are taken largest excess first (their span in the current answer less their path ops'
smallest times), each once a round, round after round until the budget is spent. Nothing here is claimed: the
answer is what the simulator gives, never above the start's.

Why ranges and not refine's windows of 24 critical-path ops: a range holds whole pieces of the segment bound with the
ops beside them, and its ops' colocation mates are freed too (freed alone, the forward ops of a range stay pinned by
their fixed gradients). Not on by default (``large.RANGE_LNS``): in ``portfolio`` the time it takes from the
annealing cost about what it gained (benchmarks/RESULTS.md, "Which method when: branchy graphs", session 28).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Sequence

from dplace.budget import Budget
from dplace.instance.model import Instance
from dplace.schedule.simulate import Schedule, simulate

__all__ = ["RangeStats", "WINDOW", "range_lns", "ranges"]

WINDOW = 24  # the segment decomposition whose cuts bound the ranges (the segment bound's second window)


@dataclass
class RangeStats:
    ranges: int = 0  # ranges of the instance
    steps: int = 0  # CP-SAT solves
    kept: int = 0  # steps whose answer was kept
    start_makespan: float = 0.0
    makespan: float = 0.0
    wall_s: float = 0.0
    stopped: str = ""  # "time limit", "interrupted", "no ranges"
    gains: list[tuple[int, int, float]] = field(default_factory=list)  # (a, b, µs gained) per kept step


def ranges(inst: Instance, max_ops: int = 200, window: int = WINDOW) -> tuple[list[int], list[tuple[int, int, list[int]]]]:
    """(critical path, ranges): each range as (a, b, its ops), path indices of its cuts (module docstring). The
    path's ends before its first cut and after its last are in no range."""
    from .bounds_segments import _path_windows, segments

    path, segs = segments(inst, window)
    if len(path) < 2:
        return path, []
    A, D = _path_windows(inst, path)
    on = set(path)
    cuts = sorted({s.a for s in segs if s.a >= 0} | {len(path) - 1})
    by_a: dict[int, list[int]] = {}
    for o in range(inst.n):
        if o not in on:
            by_a.setdefault(A[o], []).append(o)

    def ops_of(a: int, b: int) -> list[int]:
        got = {o for j in range(a, b) for o in by_a.get(j, ()) if D[o] <= b}
        got.update(path[a + 1:b])
        for o in list(got):
            g = inst.group_of[o]
            if g >= 0:
                got.update(inst.groups[g])
        return sorted(got)

    out: list[tuple[int, int, list[int]]] = []
    i = 0
    while i < len(cuts) - 1:
        j, best = i + 1, None
        while j < len(cuts):
            got = ops_of(cuts[i], cuts[j])
            if best is not None and len(got) > max_ops:
                break
            best = (cuts[i], cuts[j], got)
            j += 1
        if best[2]:
            out.append(best)
        i = max(i + 1, j - 1)
    return path, out


def range_lns(inst: Instance, placement: Sequence[int], order: Sequence[Sequence[int]], *, budget: Budget,
              step_s: float = 5.0, max_ops: int = 200, workers: int = 1, seed: int = 0, lower_bound: float = 0.0,
              should_stop=None, schedule: Schedule | None = None) -> tuple[list[int], list[list[int]], Schedule, RangeStats]:
    """(placement, order, its simulated schedule, stats) after range steps from ``placement``/``order`` within
    ``budget`` (module docstring); ``lower_bound`` (µs, proven) lets CP-SAT stop a step that reaches it."""
    from dplace import interrupt

    from .cpsat import Ticks, reachability, solve_model
    from .frame import OutOfTime
    from .neighbourhood import neighbourhood_model

    t0 = time.perf_counter()
    pl, od = list(placement), [list(x) for x in order]
    sch = schedule if schedule is not None else simulate(inst, pl, od)
    st = RangeStats(start_makespan=sch.makespan, makespan=sch.makespan)

    def stop() -> bool:
        return interrupt.requested() or (should_stop is not None and should_stop())

    path, rs = ranges(inst, max_ops)
    st.ranges = len(rs)
    if not rs:
        st.stopped, st.wall_s = "no ranges", time.perf_counter() - t0
        return pl, od, sch, st
    T = Ticks(inst, None, sch.makespan)
    lb_ticks = int(math.ceil(lower_bound / T.tick - 1e-9)) if lower_bound > 0 else 0
    reach = reachability(inst) if inst.comm == "sequential" else []
    light = [sum(min(inst.dur[path[j]]) for j in range(a, b)) for a, b, _ in rs]
    st.stopped = "time limit"
    while budget.left() > 1.0 and sch.memory_ok:
        at = [sch.start[c] for c in path]
        todo = sorted(range(len(rs)), key=lambda k: -(at[rs[k][1]] - at[rs[k][0]] - light[k]))
        for k in todo:
            if stop():
                st.stopped = "interrupted"
                break
            if budget.left() < 1.0:
                break
            a, b, free = rs[k]
            try:
                V, vals = neighbourhood_model(inst, pl, od, free, T, reach, lb_ticks,
                                              hint_time_s=min(2.0, 0.3 * budget.left()), budget=budget.child(reserve=0.5))
            except OutOfTime:
                break
            if vals is None:
                continue
            out = solve_model(V, workers=workers, seed=seed + st.steps, budget=budget.child(step_s, reserve=0.3))
            st.steps += 1
            if out.placement is None:
                continue
            got = simulate(inst, list(out.placement), [list(x) for x in out.order])
            if got.memory_ok and got.makespan < sch.makespan * (1 - 1e-12):
                st.gains.append((a, b, sch.makespan - got.makespan))
                st.kept += 1
                pl, od, sch = list(out.placement), [list(x) for x in out.order], got
        else:
            continue
        break
    st.makespan, st.wall_s = sch.makespan, time.perf_counter() - t0
    return pl, od, sch, st
