"""FastT (Yi et al., Middleware'20): DPOS (§5.1, Alg. 1) and OS-DPOS operation splitting (§5.2, Alg. 2).

``dpos``: a list scheduler. Priority = rank_u with each op's largest time and each edge's largest
transfer time (§5.1 eq. for rank_u). The critical path (entry op of largest rank, then repeatedly the
successor of largest rank) goes to a *critical-path device*: the device that, when as many of the
remaining critical-path ops as fit in its free memory are put on it, has the smallest average time
over them; when it cannot hold the next critical-path op another one is chosen the same way. Every other
op goes to the device of smallest EFT, with insertion into idle slots, among devices with room. The
execution order (ops per device sorted by start) is part of the Result and the simulator follows it.

``os_dpos``: run DPOS, take the critical path of the placed graph, walk its splittable ops by
decreasing compute time, try every split dimension and n in 2..m (re-running DPOS on the split graph),
keep the best split only if the makespan improves, stop at the first op that does not improve.
The split and data-parallel graphs are built in :mod:`.fastt_graphs`.

Compiled twin of DPOS: :mod:`dplace.kernels.lists` (``run_dpos``; tests/kernels/test_list_kernels.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from dplace import kernels
from dplace.budget import Budget
from dplace.errors import InvalidInstanceError, bad_option
from dplace.instance.graph import longest_path
from dplace.instance.model import Edge, Instance, Op
from dplace.schedule.ranks import priority_order, upward_rank
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.schedule.rules import Rules
from dplace.schedule.simulate import seq_kernel_wanted, simulate
from dplace.schedule.state import ScheduleState
from dplace.instance.transform import Transform, rewrite

from .fastt_graphs import (  # noqa: F401 - the rewrites, re-exported
    COPY_TYPES, DEFAULT_COPY_BYTES_PER_US, DP_KEY, SPLIT_KEY, batch_inputs, copy_bandwidth,
    data_parallel_instance, fastt_origin, fits_one_device, op_at, split_dims, split_instance, transformed_instance,
)

# ----------------------------------------------------------------------------------------------- DPOS


@dataclass(frozen=True)
class DposOptions:
    insertion: bool = True  # insert ops into idle slots (the paper); FastT's public code: False
    critical_path: bool = True  # critical-path ops on critical-path devices (the paper); False: EFT for all
    cp_one_device: bool = False  # FastT's public code: all critical-path ops on the first one, memory or not


def critical_path(inst: Instance, rank: Sequence[float]) -> list[int]:
    """FastT §5.1: the entry op of largest rank, then repeatedly the successor of largest rank
    (ties: topological position)."""
    if inst.n == 0:
        return []
    tp = inst.topo_pos
    entries = [o for o in range(inst.n) if not inst.pred[o]]
    o = min(entries, key=lambda x: (-rank[x], tp[x]))
    path = [o]
    while inst.succ[o]:
        o = min((inst.edst[e] for e in inst.succ[o]), key=lambda x: (-rank[x], tp[x]))
        path.append(o)
    return path


def _choose_cp_device(inst: Instance, rules: Rules, path: list[int], i: int) -> int:
    """Device of smallest average time over the prefix of remaining critical-path ops ``path[i:]`` that
    fits in its free memory (ops forced elsewhere are skipped). -1 if ``path[i]`` fits nowhere."""
    best: tuple[float, int, int] | None = None
    best_d = -1
    group_of = inst.group_of
    for d in range(inst.m):
        if not rules.fits(path[i], d):
            continue
        used = rules.used[d]
        cap = inst.capacity[d]
        reserved: set[int] = set()
        total, count = 0.0, 0
        for p in path[i:]:
            if rules.placed[p]:
                continue
            f = rules.forced(p)
            if f >= 0 and f != d:
                continue
            g = group_of[p]
            if g >= 0:
                need = 0 if (rules.group_dev[g] >= 0 or g in reserved) else rules.group_mem[g]
            else:
                need = inst.mem[p]
            if used + need > cap:
                break
            used += need
            if g >= 0:
                reserved.add(g)
            total += inst.dur[p][d]
            count += 1
        if count == 0:
            continue
        key = (total / count, -count, d)
        if best is None or key < best:
            best, best_d = key, d
    return best_d


def dpos_rest_device(inst: Instance, placement: Sequence[int], rules: Rules, o: int) -> int:
    """Where an op goes once DPOS's time limit has come (not the paper's rule: the Result's extra says how
    far DPOS got): of the devices that fit it (``Rules.choose_or_fallback``), its first predecessor's
    device (in ``placement``) when it is one of them, else the first; appended after what that device
    runs, untimed (:class:`CutSchedule`). Compiled twin: :func:`dplace.kernels.lists.dpos_rest_device`."""
    cand = rules.choose_or_fallback(o)
    if inst.pred[o]:
        d = placement[inst.esrc[inst.pred[o][0]]]
        if d in cand:
            return d
    return cand[0]


@dataclass(frozen=True)
class CutSchedule:
    """DPOS's schedule cut at its time limit: the ops DPOS's rule placed in their devices' orders, then the
    rest appended in DPOS's order, placed by :func:`dpos_rest_device` and not timed (in sequential comm the
    state's re-timing of those commits cost as much as DPOS's own ops, past the limit): no claimed
    makespan (``makespan`` None), the Result is simulated as always."""

    placement: list[int]
    lists: list[list[int]]
    makespan: None = None

    def order(self) -> list[list[int]]:
        return self.lists


def _cut(m: int, placement: list[int], timed: list[list[int]], rest: Iterable[int]) -> CutSchedule:
    lists = [list(x) for x in timed] + [[] for _ in range(m - len(timed))]
    for o in rest:
        lists[placement[o]].append(o)
    return CutSchedule(placement, lists)


def _dpos_schedule(inst: Instance, opts: DposOptions, budget: Budget | None = None, stop_after: int | None = None
                   ) -> tuple[ScheduleState | CutSchedule, list[int], list[int], int]:
    """Alg. 1. Returns the schedule state, the critical path, the critical-path devices used and how many
    ops DPOS's rule placed: all of them, unless ``budget`` expired first (or ``stop_after``, for tests,
    came): the rest then went, in DPOS's order, to :func:`dpos_rest_device`, untimed (a
    :class:`CutSchedule`, at once)."""
    if (inst.comm == "parallel" and kernels.use(inst.n, "list")) or seq_kernel_wanted(inst):  # compiled, the same schedule (tests compare)
        import contextlib

        import numpy as np

        from dplace.kernels.lists import run_dpos

        stop = np.full(1, inst.n if stop_after is None else min(inst.n, stop_after), dtype=np.int64)
        if budget is not None and budget.expired():
            stop[0] = 0
        # at the deadline a timer lowers the kernel's stop count (the kernel releases the GIL)
        with budget.on_expiry(lambda: stop.fill(0)) if budget is not None else contextlib.nullcontext():
            state, path, cp_devs, placed = run_dpos(inst, opts.insertion, opts.critical_path, opts.cp_one_device, stop)
        if placed < inst.n:  # the ops left: those not in the devices' orders, in DPOS's order
            from dplace.kernels import inst_arrays
            from dplace.kernels.levels import upward_rank as ranks
            from dplace.kernels.lists import rank_order

            a = inst_arrays(inst)
            timed = state.order()
            state = _cut(inst.m, state.placement, timed, rank_order(ranks(a, "max", "max"), a).tolist()[placed:])
        return state, path, cp_devs, placed
    rank = upward_rank(inst, "max", "max")
    tp = inst.topo_pos
    path = critical_path(inst, rank) if opts.critical_path else []
    cp_pos = {o: i for i, o in enumerate(path)}
    state = ScheduleState(inst)
    rules = Rules(inst)
    ins = opts.insertion
    parallel = inst.comm == "parallel"
    cp_dev = -1
    cp_devs: list[int] = []
    stop = inst.n if stop_after is None else stop_after
    placed = inst.n
    pl: list[int] = []
    # decreasing rank, made a valid topological order when zero costs tie ranks (Kahn on the priority)
    prio = priority_order(inst, lambda o: (-rank[o], tp[o]))
    for k, o in enumerate(prio):
        if placed == inst.n and (k >= stop or (budget is not None and budget.expired())):
            placed = k
            pl = list(state.placement)
        if k >= placed:  # the time limit came: the rest appended, each on its rest device, untimed
            d = pl[o] = dpos_rest_device(inst, pl, rules, o)
            rules.assign(o, d)
            continue
        d = -1
        if o in cp_pos:
            f = rules.forced(o)
            if f >= 0:
                d = f
            elif cp_dev >= 0 and (opts.cp_one_device or rules.fits(o, cp_dev)):
                d = cp_dev
            else:
                nd = _choose_cp_device(inst, rules, path, cp_pos[o])
                if nd >= 0:
                    cp_dev = d = nd
                    cp_devs.append(nd)
        if d < 0:
            best_f = float("inf")
            for c in rules.choose_or_fallback(o):
                st = state.est(o, c, ins)
                ft = st + inst.dur[o][c]
                if ft < best_f:
                    d, best_f, best_s = c, ft, st
            # sequential mode: commit books the links one transfer after another, so let it recompute
            state.commit(o, d, start=best_s if parallel else None, insertion=ins)
        else:
            state.commit(o, d, insertion=ins)
        rules.assign(o, d)
    if placed < inst.n:
        return _cut(inst.m, pl, state.order(), prio[placed:]), path, cp_devs, placed
    return state, path, cp_devs, placed


def _dpos_result(inst: Instance, method: str, opts: DposOptions, options: dict[str, Any],
                 run: tuple[ScheduleState, list[int], list[int], int] | None = None,
                 budget: Budget | None = None) -> Result:
    state, path, cp_devs, placed = run if run is not None else _dpos_schedule(inst, opts, budget)
    order = state.order()
    fifo = simulate(inst, state.placement).makespan
    res = make_result(inst, method, state.placement, order, options=options, claimed_makespan=state.makespan)
    extra = {
        "makespan_order": res.makespan,
        "makespan_fifo": fifo,
        "critical_path_ops": len(path),
        "critical_path_devices": [inst.devices[d].name for d in cp_devs],
    }
    if placed < inst.n:
        extra["time_limit"] = {"ops_placed_by_method": placed, "ops": inst.n,
                               "rest": "placed at the time limit in DPOS's order on the first predecessor's device "
                                       "when it fits (else the first device that fits), appended: not DPOS's rule"}
    return replace(res, extra=extra)


@register("dpos", options=DposOptions, paper="FastT §5.1 Alg. 1 (Middleware'20)",
          summary="FastT DPOS: critical-path devices + EFT with insertion, with execution order.")
def dpos(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
         **options) -> Result:
    """FastT DPOS (Yi et al., Middleware'20, §5.1 Alg. 1) with the paper's settings; deterministic, ``seed``
    unused. Ties (the paper is silent): equal ranks by topological position, equal finish times by
    device id, critical-path devices by (average time, more ops fitting, device id). Where the time limit
    comes before the last op, the ops left go to :func:`dpos_rest_device` at once (``extra.time_limit`` says
    how many DPOS's rule placed)."""
    opts = DposOptions(**options)
    return _dpos_result(inst, "dpos", opts, options, budget=Budget.resolve(budget, time_limit_s))


# ------------------------------------------------------------------------------------------ OS-DPOS


@dataclass(frozen=True)
class ModelGraphOsDposOptions:
    """Options of ``os_dpos_model_graph`` (and, with ``data_parallel``, of ``os_dpos``)."""

    insertion: bool = True  # DPOS's insertion into idle slots
    critical_path: bool = True  # DPOS's critical-path devices
    cp_one_device: bool = False  # DPOS's public-code variant (see DposOptions)
    split_overhead_us: float = 0.0  # added to each sub-op's time
    max_dpos_runs: int | None = None  # cap on DPOS re-runs on split graphs; None: the paper's whole loop
    copy_bytes_per_us: float | None = None  # split/concat/reduce copy speed; None: from the instance

    def __post_init__(self) -> None:
        if not 0 <= self.split_overhead_us < math.inf:  # NaN fails too
            raise bad_option("split_overhead_us", "a finite number >= 0", self.split_overhead_us)
        if self.max_dpos_runs is not None and self.max_dpos_runs < 0:
            raise bad_option("max_dpos_runs", ">= 0", self.max_dpos_runs)
        if self.copy_bytes_per_us is not None and not 0 < self.copy_bytes_per_us < math.inf:
            raise bad_option("copy_bytes_per_us", "> 0", self.copy_bytes_per_us)


@dataclass(frozen=True)
class OsDposOptions(ModelGraphOsDposOptions):
    # §5.2: start from the data-parallel graph (one replica per device) when the model fits one device
    # and the graph names its batch inputs; False: start from the graph given (os_dpos_model_graph)
    data_parallel: bool = True


# what the result says about the split pieces' times (FastT re-profiles each split shape, §4)
LINEAR_SHARE_NOTE = ("split pieces timed as a linear share of the op's time (plus split_overhead_us): FastT "
                     "profiles the split shapes, and this instance carries no measured times for them")


def split_timing(g: Instance) -> str:
    """How the split pieces of ``g`` were timed: all from measured split shapes, all by a linear share
    (:data:`LINEAR_SHARE_NOTE`), or how many of each."""
    timed = [op.extra.get("timed") for op in g.ops if op.extra.get("split_part") is not None]
    lin = sum(1 for t in timed if t != "measured")
    if lin == len(timed):
        return LINEAR_SHARE_NOTE
    head = (f"split pieces timed from measured split shapes ({len(timed) - lin} pieces: the op's time times its "
            "measured time at the piece's shape over its measured time at its own)")
    return head if not lin else head + f"; {lin} pieces by a linear share (no measured shape)"


def placed_critical_path(inst: Instance, placement: Sequence[int]) -> list[int]:
    """Longest path of the graph with each op's time on its device and the transfer times of the
    placement (device contention ignored): Alg. 2 line 4."""
    w = [inst.dur[o][placement[o]] for o in range(inst.n)]
    c = [inst.transfer_time(e, placement[u], placement[v]) for e, (u, v) in enumerate(zip(inst.esrc, inst.edst))]
    return longest_path(inst, inst.topo, w, c)[1]


def _splittable(inst: Instance, o: int) -> bool:
    return bool(split_dims(inst.ops[o])) and inst.pinned[o] < 0 and inst.group_of[o] < 0


@register("os_dpos", options=OsDposOptions, paper="FastT §5.2 Alg. 2 (Middleware'20)",
          summary="FastT §5.2 OS-DPOS: from the data-parallel graph when the model fits one device, DPOS plus "
                  "splitting of critical-path ops.")
def os_dpos(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
            **options) -> Result:
    """FastT OS-DPOS (Yi et al., Middleware'20, §5.2 Alg. 2); never worse than DPOS on its input graph.

    The input graph is the data-parallel one (:func:`data_parallel_instance`) when the model fits one
    device and the graph names its batch inputs (§5.2), else the graph given (``extra`` says why). Stops
    trying splits after ``max_dpos_runs`` DPOS re-runs or ``time_limit_s`` seconds (keeping the best
    graph so far). The Result is on the rewritten graph (``res.instance``, with its transform) when it
    is not the given one. A split whose graph breaks memory is never kept (unless DPOS's own placement
    already does). Split pieces are timed from the op's measured split shapes where ``dplace profile
    --split-shapes`` measured them, else by a linear share of the op's time (``extra["split_timing"]``).
    Where the paper is silent: ops are tried by decreasing time on their device (ties: topological
    position); dims in name order, n from 2 up; a split is kept only if it improves the makespan by
    more than 1e-9 relative.
    """
    return _os_dpos(inst, "os_dpos", OsDposOptions(**options), options, Budget.resolve(budget, time_limit_s))


@register("os_dpos_model_graph", options=ModelGraphOsDposOptions, paper="FastT §5.2 Alg. 2", variant_of="os_dpos",
          summary="os_dpos on the graph as given (no data-parallel input graph), so its placement is of the given ops.")
def os_dpos_model_graph(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0,
                        budget: Budget | None = None, **options) -> Result:
    """:func:`os_dpos` started from the graph given even when the model fits one device: its result is a
    placement of the given ops unless a split is kept (what ``portfolio`` and ``refine`` can use)."""
    return _os_dpos(inst, "os_dpos_model_graph", ModelGraphOsDposOptions(**options), options,
                    Budget.resolve(budget, time_limit_s))


def _os_dpos(inst: Instance, method: str, opts: ModelGraphOsDposOptions, options: dict[str, Any],
             budget: Budget) -> Result:
    given = inst
    dopts = DposOptions(insertion=opts.insertion, critical_path=opts.critical_path, cp_one_device=opts.cp_one_device)
    bw = copy_bandwidth(inst) if opts.copy_bytes_per_us is None else float(opts.copy_bytes_per_us)
    dp_info: dict[str, Any] = {}
    if getattr(opts, "data_parallel", False):
        if not fits_one_device(inst):
            dp_info["data_parallel_skipped"] = "the model does not fit one device: the model graph is the input"
        elif not batch_inputs(inst):
            dp_info["data_parallel_skipped"] = ("the graph names no batch inputs (extra.tf.inputs or ops with "
                                                "extra.batch_input = true): the model graph is the input")
        else:
            inst = data_parallel_instance(inst, copy_bytes_per_us=bw)
            dp_info[DP_KEY] = {k: v for k, v in inst.extra[DP_KEY].items() if k != "of"}
    t_run = budget.elapsed()
    best = _dpos_result(inst, method, dopts, options, budget=budget)  # cut at the limit: no split is tried
    run_s = budget.elapsed() - t_run  # a trial (split, DPOS, simulation) costs about one DPOS run
    dpos_makespan = best.makespan
    cap = math.inf if opts.max_dpos_runs is None else opts.max_dpos_runs
    cur = inst
    splits: list[list[Any]] = []
    runs = 0
    stopped = "no improving split"
    cp = placed_critical_path(inst, best.placement)
    cp_ids = [inst.ops[o].id for o in sorted((o for o in cp if _splittable(inst, o)),
                                             key=lambda o: (-inst.dur[o][best.placement[o]], inst.topo_pos[o]))]
    for op_id in cp_ids:
        o = cur.op_index[op_id]
        trial_best: tuple[float, Any, list[Any]] | None = None
        out_of_budget = False
        for dim, size in sorted(split_dims(op_at(cur, o)).items()):
            for n in range(2, min(cur.m, size) + 1):
                # a trial is begun only when it and what follows a kept split (its simulation, the split
                # graph's bound in dplace.solve: about one more run) end within the budget
                if runs >= cap or budget.left() < 2 * run_s:
                    out_of_budget = True
                    break
                runs += 1
                t_run = budget.elapsed()
                g = split_instance(cur, [[op_id, dim, n]], overhead_us=opts.split_overhead_us, copy_bytes_per_us=bw)
                if budget.left() < run_s:  # the split took what DPOS on it needs (a large graph, a busy machine)
                    out_of_budget = True
                    break
                if sum(g.mem) > sum(g.capacity):  # pieces of a partial sum each hold it whole
                    continue
                run = _dpos_schedule(g, dopts)
                sched = simulate(g, run[0].placement, run[0].order())
                if sched.memory_ok or not best.memory_ok:  # a split must not break memory
                    if trial_best is None or sched.makespan < trial_best[0] - 1e-9:
                        trial_best = (sched.makespan, (g, run), [op_id, dim, n])
                run_s = max(run_s, budget.elapsed() - t_run)
            if out_of_budget:
                break
        if trial_best is not None and trial_best[0] < best.makespan - 1e-9 * max(1.0, best.makespan):
            cur, run = trial_best[1]
            best = _dpos_result(cur, method, dopts, options, run)
            splits.append(trial_best[2])
        else:
            if out_of_budget:
                stopped = "max_dpos_runs" if runs >= cap else "time_limit_s"
            break
        if out_of_budget:
            stopped = "max_dpos_runs" if runs >= cap else "time_limit_s"
            break
    else:
        stopped = "critical path exhausted"
    extra = {
        **dp_info,
        "splits": splits,
        "base_instance": given.name,
        "split_overhead_us": opts.split_overhead_us,
        "split_copy_bytes_per_us": bw,
        "dpos_makespan": dpos_makespan,
        "dpos_runs": runs,
        "stopped": stopped,
    }
    if splits:
        extra["split_timing"] = split_timing(best.instance)
    transform = None
    if best.instance is not given:
        params = {k: extra[k] for k in (DP_KEY, "splits", "split_overhead_us", "split_copy_bytes_per_us") if k in extra}
        transform = Transform("fastt", params, given, tuple(fastt_origin(given, best.instance)))
    return replace(best, transform=transform, extra={**best.extra, **extra})
