"""Exact refinement of large graphs: ``refine`` and ``portfolio`` (issue #6).

``refine``: start from the best heuristic; coarsen the graph to at most K nodes with Celeritas' Optimal
Operation Fusion (:func:`dplace.heuristics.coarsen.coarsen`, Celeritas §5.1.3), solve the coarse graph
with CP-SAT hinted by the heuristic's placement, map back and simulate; then large-neighbourhood search
on the original graph (each step frees the ops of a window of the current critical path, keeps every
other op on its device and in its order, and re-solves with CP-SAT) until the time limit. Every
candidate is judged by :func:`dplace.simulate`; the answer is never worse than the starting heuristic.
Graphs of at most K ops are solved by CP-SAT directly (with its proven bound).

The coarse answer is mapped back with the best of three orders (the clusters' order, the executor's order,
and a HEFT-style insertion order for the placement: :func:`list_order`).

``portfolio``: run every registered heuristic, keep the best by simulated makespan, refine it within the
remaining budget; ``extra["winner"]`` names the heuristic that won.

Both are registered with kind "exact" (they run CP-SAT under a time limit with parallel workers, so a
seed does not fix their placement; they report ``optimal`` only with a proof), which also keeps them out
of the heuristics that hint the exact methods.
"""
from __future__ import annotations

import math
import os
import random
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

from dplace.bounds import lower_bound
from dplace.errors import InfeasibleError
from dplace.model import Instance
from dplace.registry import method_info, methods, register
from dplace.result import Result, make_result

from .cpsat import (
    _SKIP_HINT, Ticks, best_heuristic, finish, hinted_model, memory_fits, reachability, solve_model, tick_schedule,
)

__all__ = ["PortfolioOptions", "RefineOptions", "critical_ops", "list_order", "portfolio", "refine"]


@dataclass(frozen=True)
class RefineOptions:
    K: int = 60  # most nodes of the coarse graph solved exactly
    start: str = "best"  # starting heuristic: "best" of the registered ones, or a method name
    window: int = 24  # ops freed per large-neighbourhood step
    step_time_s: float = 3.0  # CP-SAT time per neighbourhood step
    coarse_share: float = 0.25  # share of the budget for the coarse solve
    workers: int | None = None  # CP-SAT workers; None: os.cpu_count()
    default_time_limit_s: float = 60.0  # used when time_limit_s is None
    progress: bool = False  # CP-SAT progress lines on stderr

    def __post_init__(self) -> None:
        if self.K < 1:
            raise ValueError(f"K must be >= 1, got {self.K!r}")
        if self.window < 1:
            raise ValueError(f"window must be >= 1, got {self.window!r}")
        if not 0.0 <= self.coarse_share <= 1.0:
            raise ValueError(f"coarse_share must be in [0, 1], got {self.coarse_share!r}")


@dataclass(frozen=True)
class PortfolioOptions(RefineOptions):
    pass


def _order_of(res: Result) -> list[list[int]]:
    return [list(x) for x in (res.order if res.order is not None else res.schedule.order)]


def critical_ops(inst: Instance, res: Result) -> list[int]:
    """Ops of one critical path of ``res``'s simulated schedule, first to last: from the op that ends
    last, step back to whatever fixed its start (an input's arrival or the previous op on its device)."""
    sch = res.schedule
    pl = sch.placement
    arrive = {(p, b): en for (p, a, b, st, en, nb) in sch.transfers}
    prev_on_dev: dict[int, int] = {}
    for ops in (res.order if res.order is not None else sch.order):
        for a, b in zip(ops, ops[1:]):
            prev_on_dev[b] = a
    o = max(range(inst.n), key=lambda x: (sch.end[x], -inst.topo_pos[x]))
    path = [o]
    seen = {o}
    tol = 1e-9 * max(1.0, sch.makespan)
    while sch.start[o] > tol:
        nxt = None
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
        if nxt is None:
            q = prev_on_dev.get(o)
            if q is not None and abs(sch.end[q] - sch.start[o]) <= tol:
                nxt = q
        if nxt is None or nxt in seen:
            break
        o = nxt
        path.append(o)
        seen.add(o)
    return path[::-1]


def list_order(inst: Instance, placement: Sequence[int]) -> list[list[int]]:
    """Per-device order for a fixed placement: ops by decreasing upward rank (a topological order),
    each inserted at its earliest start on its device (HEFT's insertion policy, ScheduleState)."""
    import heapq

    from dplace.ranks import upward_rank
    from dplace.simulate import ScheduleState

    rank = upward_rank(inst, "mean", "mean")
    indeg = [len(p) for p in inst.pred]
    heap = [(-rank[o], inst.topo_pos[o], o) for o in range(inst.n) if indeg[o] == 0]
    heapq.heapify(heap)
    st = ScheduleState(inst)
    while heap:
        _, _, o = heapq.heappop(heap)
        st.commit(o, placement[o], insertion=True)
        for k in inst.succ[o]:
            v = inst.edst[k]
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, (-rank[v], inst.topo_pos[v], v))
    return st.order()


def _coarse_step(inst: Instance, start: Result, K: int, limit: float, workers: int, seed: int,
                 progress: bool) -> tuple[Result | None, dict[str, Any]]:
    """Coarsen to <= K nodes, solve with CP-SAT hinted by the start placement, map back."""
    from dplace.heuristics.coarsen import coarsen

    info: dict[str, Any] = {}
    # exploration range n/K: clusters of at most n/K ops, so the DP leaves at least K and the merge pass
    # brings them down to K (with the default range the DP may stop at far fewer, coarser clusters)
    c = coarsen(inst, R=max(1, math.ceil(inst.n / K)), max_nodes=K)
    ci = c.coarse
    info["coarse_nodes"] = ci.n
    T = Ticks(ci, None, start.makespan)
    # hint candidates: the start placement by majority (time-weighted) per cluster, and heft on the coarse
    # graph; the one with the shorter tick schedule is the hint
    cands = []
    vote = []
    for k, mem in enumerate(c.members):
        w = [0.0] * inst.m
        for o in mem:
            w[start.placement[o]] += inst.dur[o][start.placement[o]] + 1e-9
        vote.append(max(range(inst.m), key=lambda d: (w[d], -d)))
    cands.append((vote, [[k for k in ci.topo if vote[k] == d] for d in range(ci.m)]))
    h = best_heuristic(ci, "heft")
    if h is not None:
        cands.append((h[1].placement, _order_of(h[1])))
    best = None
    for pl, od in cands:
        sch = tick_schedule(ci, T, pl, od)
        if memory_fits(ci, pl) and (best is None or (sch is not None and sch.makespan < best[0])):
            best = (sch.makespan if sch is not None else math.inf, (pl, od))
    V, _ = hinted_model(ci, T, best[1] if best else None, symmetry=True, hint_time_s=max(0.5, 0.1 * limit),
                        lb_ticks=int(math.ceil(lower_bound(ci) / T.tick - 1e-9)), windows=True)
    out = solve_model(V, time_limit_s=limit, workers=workers, seed=seed, progress=progress, label="refine coarse")
    info["coarse_status"] = out.status_name
    if out.placement is None:
        return None, info
    pl = c.expand(out.placement)
    od = c.expand_order(out.order, out.placement)
    res = make_result(inst, "refine", pl, od, status="feasible")
    for od2 in (make_result(inst, "refine", pl, None).schedule.order,  # the executor's order
                list_order(inst, pl)):  # HEFT-style insertion order for this placement
        alt = make_result(inst, "refine", pl, od2, status="feasible")
        if alt.makespan < res.makespan:
            res = alt
    info["coarse_makespan"] = res.makespan
    return res, info


def _lns_step(inst: Instance, cur: Result, window: Sequence[int], limit: float, workers: int, seed: int,
              reach: list[int], T: Ticks) -> Result | None:
    """Free the ops of ``window``; keep the others on their device and in their order; re-solve."""
    free = set(window)
    pl = cur.placement
    order = _order_of(cur)
    fixed = {o: pl[o] for o in range(inst.n) if o not in free}
    prec = []
    for ops in order:
        kept = [o for o in ops if o not in free]
        prec.extend(zip(kept, kept[1:]))
    V, vals = hinted_model(inst, T, (pl, order), fixed=fixed, prec=prec, reach=reach, hint_time_s=max(0.5, limit),
                           lb_ticks=int(math.ceil(lower_bound(inst) / T.tick - 1e-9)), windows=True)
    if vals is None:
        return None
    out = solve_model(V, time_limit_s=limit, workers=workers, seed=seed)
    if out.placement is None:
        return None
    return make_result(inst, "refine", out.placement, out.order, status="feasible",
                       claimed_makespan=T.to_us(out.objective_ticks))


def _refine_from(inst: Instance, start_name: str, start: Result, opts: RefineOptions, limit: float, seed: int,
                 t0: float, method: str, extra: dict[str, Any]) -> Result:
    workers = opts.workers or os.cpu_count() or 1
    extra = dict(extra, start_method=start_name, start_makespan=start.makespan)
    left = lambda: limit - (time.perf_counter() - t0)  # noqa: E731
    if inst.n <= opts.K:  # small enough: CP-SAT on the graph itself, with its proven bound
        from .cpsat import CpsatOptions

        lb = lower_bound(inst)
        T = Ticks(inst, None, start.makespan)
        V, _ = hinted_model(inst, T, (start.placement, _order_of(start)) if start.memory_ok else None,
                            lb_ticks=int(math.ceil(lb / T.tick - 1e-9)), symmetry=True,
                            hint_time_s=max(0.5, 0.1 * limit))
        out = solve_model(V, time_limit_s=max(0.05, left()), workers=workers, seed=seed, progress=opts.progress,
                          label=method)
        res = finish(inst, method, V, out, lb, start if start.memory_ok else None, CpsatOptions(workers=opts.workers),
                     dict(extra, tick_us=T.tick, stage="cpsat"))
        res.options = asdict(opts)
        return res
    best = start
    stage = "start"
    if opts.coarse_share > 0 and left() > 0.5:
        try:
            cres, cinfo = _coarse_step(inst, start, opts.K, max(0.2, opts.coarse_share * left()), workers, seed,
                                       opts.progress)
        except (InfeasibleError, ValueError) as exc:
            cres, cinfo = None, {"coarse_error": str(exc)}
        extra.update(cinfo)
        if cres is not None and cres.memory_ok and cres.makespan < best.makespan - 1e-9:
            best, stage = cres, "coarse"
    rng = random.Random(seed)
    reach = reachability(inst) if inst.comm == "sequential" else []
    T = Ticks(inst, None, best.makespan)
    iters = improved = 0
    while left() > 0.5:
        path = critical_ops(inst, best)
        w = min(opts.window, inst.n)
        if len(path) > w:
            i = rng.randrange(len(path) - w + 1)
            window = path[i:i + w]
        else:
            window = list(path)
            others = [o for o in range(inst.n) if o not in set(window)]
            rng.shuffle(others)
            window += others[: w - len(window)]
        iters += 1
        cand = _lns_step(inst, best, window, min(opts.step_time_s, max(0.1, left() - 0.3)), workers,
                         seed + iters, reach, T)
        if cand is not None and cand.memory_ok and cand.makespan < best.makespan - 1e-9:
            best, stage = cand, "lns"
            improved += 1
    extra.update(lns_steps=iters, lns_improvements=improved, stage=stage)
    order = _order_of(best)
    lb = lower_bound(inst)
    status = "optimal" if best.memory_ok and best.makespan <= lb + 1e-9 * max(1.0, lb) else "feasible"
    return make_result(inst, method, best.placement, order, status=status, lower_bound=lb,
                       claimed_makespan=best.makespan, options=asdict(opts), extra=extra)


def _start(inst: Instance, name: str, limit: float, seed: int) -> tuple[str, Result]:
    if name == "best":
        got = best_heuristic(inst, "best", time_limit_s=max(0.2, 0.1 * limit), seed=seed)
    else:
        res = method_info(name).func(inst, time_limit_s=max(0.2, 0.1 * limit), seed=seed)
        got = (name, res) if res.instance is inst and res.placement is not None else None
    if got is None:
        raise InfeasibleError(f"refine: the starting heuristic {name!r} gave no placement")
    return got


@register("refine", options=RefineOptions, kind="exact",
          summary="Coarsen to K nodes, CP-SAT on the coarse graph, then CP-SAT neighbourhood search.")
def refine(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Celeritas fusion (§5.1.3) + CP-SAT on the coarse graph + large-neighbourhood search; see module doc."""
    opts = RefineOptions(**options)
    t0 = time.perf_counter()
    limit = opts.default_time_limit_s if time_limit_s is None else float(time_limit_s)
    name, start = _start(inst, opts.start, limit, seed)
    return _refine_from(inst, name, start, opts, limit, seed, t0, "refine", {})


@register("portfolio", options=PortfolioOptions, kind="exact",
          summary="Every registered heuristic, the best one refined (refine) within the budget.")
def portfolio(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Run the registered heuristics, keep the best by simulated makespan, refine it."""
    opts = PortfolioOptions(**options)
    t0 = time.perf_counter()
    limit = opts.default_time_limit_s if time_limit_s is None else float(time_limit_s)
    scores: dict[str, Any] = {}
    best = None
    for nm in methods():
        if method_info(nm).kind not in ("heuristic", "baseline") or nm in _SKIP_HINT:
            continue
        ts = time.perf_counter()
        try:
            res = method_info(nm).func(inst, time_limit_s=max(0.2, 0.1 * limit), seed=seed)
        except Exception as exc:  # noqa: BLE001 — a failing heuristic is reported, not fatal
            scores[nm] = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
            continue
        if res.instance is not inst or res.placement is None:
            scores[nm] = {"skipped": "transformed graph or no placement"}
            continue
        scores[nm] = {"makespan": res.makespan, "memory_ok": res.memory_ok,
                      "time_s": round(time.perf_counter() - ts, 4)}
        key = (not res.memory_ok, res.makespan)
        if best is None or key < best[0]:
            best = (key, nm, res)
    if best is None:
        raise InfeasibleError("portfolio: no heuristic gave a placement")
    out = _refine_from(inst, best[1], best[2], RefineOptions(**asdict(opts)), limit, seed, t0, "portfolio",
                       {"winner": best[1], "heuristics": scores})
    out.options = asdict(opts)
    return out
