"""Pesto-style MILP for placement and scheduling, solved with CBC or HiGHS through PuLP.

Source: Pesto (Hafeez et al., Middleware'21, §4): placement binaries, start times, ordering binaries only
for pairs of ops with no path between them, big-M disjunctions; with memory limits per device as in its
K-device generalisation (Moirai). Times are continuous µs (no rounding).

  x[o, d]   op o on device d (binary)           s[o]  start (µs), e[o] = s[o] + sum_d dur[o][d] x[o, d]
  q[a, b]   a and b on one device: q >= x[a, d] + x[b, d] - 1                    -> _add_same_device
  y[a, b]   a before b if on one device (only pairs with no path between them)   -> _add_ordering
            s[b] >= e[a] - M (1 - y) - M (1 - q),  s[a] >= e[b] - M y - M (1 - q)
  z_uv >= x[u, d] - x[v, d],  s[v] >= e[u] + c_uv z_uv  (per device pair when links differ): exact for
            parallel comm; for sequential comm a valid row (a transfer takes at least c_uv), and
  sequential: transfer (p, d1, d2) with start ts >= e[p], end te >= ts + len_pv (x[p,d1] + x[v,d2] - 1),
            s[v] >= te - M (2 - x[p,d1] - x[v,d2]); transfers of one link in the order of their
            producers on d1 (y), the simulator's FIFO rule                         -> _add_transfers
  sum_o mem[o] x[o, d] <= capacity[d];  mk >= e[o];  mk >= sum_o dur[o][d] x[o, d] (device load);
  M = heuristic makespan, every duration and transfer coefficient capped at M, and left out below 1e-8 M;
  interchangeable devices (:func:`device_classes`) used in first-use order      -> _add_symmetry
  mk >= max(lower_bound, energetic-reasoning bound of cpsat.energetic_bound).

Times are in units of a power of ten (:func:`time_unit`) that keeps the big-M at most 1e4: with times
of 1e8 µs and more HiGHS answered wrong optima and even INFEASIBLE. The solver's bound (or INFEASIBLE)
is a claim: it counts only as far as a re-solve without presolve confirms it (:mod:`dplace.claims`).

Warm start: every variable gets the value of the best heuristic's simulated schedule (CBC: PuLP's mst
file, checked in CBC's log; HiGHS: ``Highs.setSolution`` before ``run``). Status and bound are read from
the solver itself (CBC's log, HiGHS's ``mip_dual_bound``): PuLP says "Optimal" after a time limit.
"""
from __future__ import annotations

import functools
import math
import os
import re
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Any

from .cpsat import (  # noqa: I001 — OR-Tools before PuLP (see below)
    OutOfTime, Ticks, _check_time, _homogeneous, build_model, confirm_bound, energetic_bound, fallback,
    horizon_ticks, reachability, run_guarded, tick_schedule,
)

import pulp  # noqa: E402

from dplace import claims, interrupt
from dplace.budget import Budget
from dplace.errors import InfeasibleError, SolverError, bad_option
from dplace.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result, no_solution

__all__ = ["MilpOptions", "MilpModel", "build_milp", "cross_check", "milp"]



@dataclass(frozen=True)
class MilpOptions:
    solver: str = "highs"  # "cbc" or "highs"
    hint: str = "best"  # warm start from: "best" heuristic, "heft", or "none"
    threads: int | None = None  # None: solver default
    log: bool = False  # solver output on stdout
    default_time_limit_s: float = 60.0  # used when time_limit_s is None
    max_ops: int = 300  # larger graphs: the O(n^2) ordering model is not built; the warm start is returned

    def __post_init__(self) -> None:
        if self.max_ops < 1:
            raise bad_option("max_ops", ">= 1", self.max_ops)
        if self.solver not in ("cbc", "highs"):
            raise bad_option("solver", "cbc or highs", self.solver)
        if self.hint not in ("best", "heft", "none"):
            raise bad_option("hint", "best, heft or none", self.hint)


RESOLUTION = 1e-8  # times below this fraction of big-M are left out of the model (MilpModel.coef)


class MilpModel:
    """Variables of the MILP and how to read a solution back."""

    def __init__(self, inst: Instance, big_m: float, lb: float, unit: float = 1.0) -> None:
        self.inst = inst
        self.unit = unit  # µs per model time unit (times are scaled into a range solvers handle well)
        big_m, lb = big_m / unit, lb / unit
        self.M = big_m
        self.prob = pulp.LpProblem("dplace", pulp.LpMinimize)
        self.allowed = [inst.allowed_devices(o) for o in range(inst.n)]
        self.x: dict[tuple[int, int], Any] = {}
        self.s: list[Any] = []
        self.q: dict[tuple[int, int], Any] = {}
        self.y: dict[tuple[int, int], Any] = {}
        self.z: dict[int, Any] = {}
        self.tr: dict[tuple[int, int, int], tuple[Any, Any]] = {}  # (p, d1, d2) -> (ts, te)
        self.classes: list[list[int]] = []  # interchangeable devices (symmetry broken: hints relabelled)
        self.mk = self.prob.add_variable("makespan", lowBound=lb, upBound=big_m)
        self.budget: Budget | None = None  # building raises OutOfTime once it expired

    def X(self, o: int, d: int) -> Any:
        if d not in self.allowed[o]:
            return 0
        return self.x.get((o, d), 1)

    def coef(self, t: float) -> float:
        """A time of ``t`` model units as a coefficient: at most M, and 0 below ``RESOLUTION`` x M.

        Above M: a longer time cannot occur in a schedule below M either way, and coefficients of 1e10
        beside a big-M of 30 left CBC's rows wrong by 1e-3 (it answered infeasible, and optima above the
        simulated optimum). Below the resolution: times under what a big-M row resolves (CBC's integer
        tolerance 1e-7 x M) broke CBC: op times of 5e-10 x M (10 µs beside transfers of 1e10 µs) and its
        preprocessing lost its own optimum (mapped back, its solution broke the original rows: it still said
        optimal and wrote a vector of zeros); op times of 1e-9 x M and it called the hint optimal at the
        root, 3e5 times the optimum. Both only lower the model's values: its bounds stay proven, its
        schedules are simulated (the times left out cost at most n x RESOLUTION x M on them)."""
        return 0.0 if t < RESOLUTION * self.M else min(t, self.M)

    def p(self, o: int, d: int) -> float:
        """Duration of o on d (model units) as a coefficient (:meth:`coef`)."""
        return self.coef(self.inst.dur[o][d] / self.unit)

    def c(self, k: int, a: int, b: int) -> float:
        """Transfer time of edge k from a to b (model units) as a coefficient (:meth:`coef`)."""
        return self.coef(self.inst.transfer_time(k, a, b) / self.unit)

    def dur(self, o: int) -> Any:
        return pulp.lpSum(self.p(o, d) * self.X(o, d) for d in self.allowed[o])

    def end(self, o: int) -> Any:
        return self.s[o] + self.dur(o)


def _add_ops(P: MilpModel) -> None:
    inst, prob = P.inst, P.prob
    for o in range(inst.n):
        P.s.append(P.prob.add_variable(f"s{o}", lowBound=0, upBound=P.M))
        al = P.allowed[o]
        if len(al) > 1:
            for d in al:
                P.x[o, d] = P.prob.add_variable(f"x{o}_{d}", cat="Binary")
            prob += pulp.lpSum(P.x[o, d] for d in al) == 1, f"one_{o}"
        prob += P.mk >= P.end(o), f"mk_{o}"
    for g, members in enumerate(inst.groups):
        for o in members[1:]:
            for d in range(inst.m):
                a, b = P.X(members[0], d), P.X(o, d)
                if isinstance(a, int) and isinstance(b, int):
                    if a != b:
                        raise InfeasibleError(f"colocation {inst.group_names[g]!r}: members pinned apart")
                    continue
                prob += a == b, f"coloc_{o}_{d}"


def _add_memory(P: MilpModel) -> None:
    inst = P.inst
    for d in range(inst.m):
        terms = [(inst.mem[o], P.X(o, d)) for o in range(inst.n) if inst.mem[o] > 0 and d in P.allowed[o]]
        if sum(w for w, _ in terms) > inst.capacity[d]:
            P.prob += pulp.lpSum(w * x for w, x in terms) <= inst.capacity[d], f"mem_{d}"


def _add_device_load(P: MilpModel) -> None:
    """mk >= the work placed on each device (one op at a time there): the valid inequality that the big-M
    disjunctions leave out of the LP (without it CBC could not close a 0.1 % gap on 6 independent ops)."""
    inst = P.inst
    for d in range(inst.m):
        terms = [(P.p(o, d), P.X(o, d)) for o in range(inst.n) if d in P.allowed[o] and P.p(o, d) > 0]
        if len(terms) > 1:
            P.prob += P.mk >= pulp.lpSum(w * x for w, x in terms), f"load_{d}"


def device_classes(inst: Instance) -> list[list[int]]:
    """Devices that any relabelling among them maps onto themselves (same memory, op times and links to
    every other device, no op pinned there), in classes of increasing index; singletons left out."""
    pinned = {d for d in inst.pinned if d >= 0}
    cols = [tuple(inst.dur[o][d] for o in range(inst.n)) for d in range(inst.m)]

    def swappable(a: int, b: int) -> bool:
        if a in pinned or b in pinned or inst.capacity[a] != inst.capacity[b] or cols[a] != cols[b]:
            return False
        if (inst.lat[a][b], inst.bw[a][b]) != (inst.lat[b][a], inst.bw[b][a]):
            return False
        return all((inst.lat[a][k], inst.bw[a][k], inst.lat[k][a], inst.bw[k][a])
                   == (inst.lat[b][k], inst.bw[b][k], inst.lat[k][b], inst.bw[k][b])
                   for k in range(inst.m) if k not in (a, b))

    classes: list[list[int]] = []
    for d in range(inst.m):  # a swap is an automorphism and swaps compose: one member decides
        for c in classes:
            if swappable(c[0], d):
                c.append(d)
                break
        else:
            classes.append([d])
    return [c for c in classes if len(c) > 1]


def _add_symmetry(P: MilpModel) -> None:
    """Interchangeable devices c[0] < c[1] < ... (:func:`device_classes`): c[j] holds an op only when
    c[j - 1] holds an earlier one (op index order). Every schedule has a relabelling of this form with the
    same makespan and memory, so an optimum is kept. ``u[i, d]`` <= x[0, d] + ... + x[i, d] (prefix)."""
    inst = P.inst
    P.classes = device_classes(inst)
    for c in P.classes:
        for j in range(1, len(c)):
            a, b = c[j - 1], c[j]
            prev: Any = 0
            for o in range(inst.n):
                if not (isinstance(P.X(o, b), int) and P.X(o, b) == 0):
                    P.prob += P.X(o, b) <= prev, f"sym_{o}_{b}"
                if o + 1 < inst.n:
                    u = P.prob.add_variable(f"u{o}_{a}", lowBound=0, upBound=1)
                    P.prob += u <= prev + P.X(o, a), f"pre_{o}_{a}"
                    prev = u


def _canonical_labels(P: MilpModel, placement: list[int]) -> list[int]:
    """Device map putting ``placement`` in the form :func:`_add_symmetry` asks for (identity without it)."""
    perm = list(range(P.inst.m))
    for c in P.classes:
        used = list(dict.fromkeys(d for d in placement if d in c))
        for new, old in zip(c, used + [d for d in c if d not in used]):
            perm[old] = new
    return perm


def _same_device(P: MilpModel, a: int, b: int) -> Any:
    """q[a, b] (a < b): 1 when both are on one device (forced up by x); may be the constant 0 or 1."""
    inst = P.inst
    common = set(P.allowed[a]) & set(P.allowed[b])
    if not common:
        return 0
    ga, gb = inst.group_of[a], inst.group_of[b]
    if ga >= 0 and ga == gb:
        return 1
    if len(P.allowed[a]) == 1 and len(P.allowed[b]) == 1:
        return 1
    key = (a, b)
    if key not in P.q:
        qv = P.prob.add_variable(f"q{a}_{b}", cat="Binary")
        P.q[key] = qv
        for d in common:
            P.prob += qv >= P.X(a, d) + P.X(b, d) - 1, f"same_{a}_{b}_{d}"
    return P.q[key]


def _order_var(P: MilpModel, a: int, b: int) -> Any:
    key = (min(a, b), max(a, b))
    if key not in P.y:
        P.y[key] = P.prob.add_variable(f"y{key[0]}_{key[1]}", cat="Binary")
    return P.y[key] if key == (a, b) else 1 - P.y[key]


def _add_ordering(P: MilpModel, reach: list[int]) -> None:
    """Disjunctions for pairs with no path between them that may share a device."""
    inst, M = P.inst, P.M
    for a in range(inst.n):
        _check_time(P.budget)
        for b in range(a + 1, inst.n):
            if reach[a] >> b & 1 or reach[b] >> a & 1:
                continue
            qv = _same_device(P, a, b)
            if isinstance(qv, int) and qv == 0:
                continue
            y = _order_var(P, a, b)
            P.prob += P.s[b] >= P.end(a) - M * (1 - y) - M * (1 - qv), f"ord_{a}_{b}"
            P.prob += P.s[a] >= P.end(b) - M * y - M * (1 - qv), f"ord_{b}_{a}"


def _add_precedence(P: MilpModel) -> None:
    inst, prob = P.inst, P.prob
    homog = _homogeneous(inst)
    for k in range(len(inst.esrc)):
        u, v = inst.esrc[k], inst.edst[k]
        pairs = [(a, b) for a in P.allowed[u] for b in P.allowed[v] if a != b and inst.transfer_time(k, a, b) > 0]
        if not pairs:
            prob += P.s[v] >= P.end(u), f"prec_{k}"
        elif homog:
            c = P.c(k, *pairs[0])
            z = P.prob.add_variable(f"z{k}", lowBound=0, upBound=1)  # 0/1 wherever x is: no branching on it
            P.z[k] = z
            for d in P.allowed[u]:
                prob += z >= P.X(u, d) - P.X(v, d), f"diff_{k}_{d}"
            prob += P.s[v] >= P.end(u) + c * z, f"prec_{k}"
        else:
            prob += P.s[v] >= P.end(u), f"prec_{k}"
            for a, b in pairs:
                prob += P.s[v] >= P.end(u) + P.c(k, a, b) * (P.X(u, a) + P.X(v, b) - 1), f"prec_{k}_{a}_{b}"


def _add_transfers(P: MilpModel, reach: list[int]) -> None:
    """Sequential comm: one transfer per (producer, src, dst); FIFO per link in producer order."""
    inst, prob, M = P.inst, P.prob, P.M
    links: dict[tuple[int, int], list[tuple[int, Any, Any, Any]]] = {}
    for p in range(inst.n):
        for d1 in P.allowed[p]:
            for d2 in range(inst.m):
                if d2 == d1:
                    continue
                cons = [k for k in inst.succ[p] if d2 in P.allowed[inst.edst[k]]]
                if not cons:
                    continue
                ts = P.prob.add_variable(f"ts{p}_{d1}_{d2}", lowBound=0, upBound=M)
                te = P.prob.add_variable(f"te{p}_{d1}_{d2}", lowBound=0, upBound=M)
                w = P.prob.add_variable(f"w{p}_{d1}_{d2}", cat="Binary")
                P.tr[p, d1, d2] = (ts, te, w)
                prob += ts >= P.end(p), f"tstart_{p}_{d1}_{d2}"
                for k in cons:
                    v = inst.edst[k]
                    both = P.X(p, d1) + P.X(v, d2) - 1
                    prob += te >= ts + P.c(k, d1, d2) * both, f"tlen_{k}_{d1}_{d2}"
                    prob += P.s[v] >= te - M * (1 - both), f"tarr_{k}_{d1}_{d2}"
                    prob += w >= both, f"tpres_{k}_{d1}_{d2}"
                prob += w <= P.X(p, d1), f"tonly_{p}_{d1}_{d2}"
                links.setdefault((d1, d2), []).append((p, ts, te, w))
    for (d1, d2), items in links.items():
        for i in range(len(items)):
            p, tsp, tep, wp = items[i]
            for j in range(i + 1, len(items)):
                q, tsq, teq, wq = items[j]
                off = M * (2 - wp - wq)
                if reach[p] >> q & 1:
                    prob += tsq >= tep - off, f"fifo_{p}_{q}_{d1}_{d2}"
                elif reach[q] >> p & 1:
                    prob += tsp >= teq - off, f"fifo_{q}_{p}_{d1}_{d2}"
                else:
                    y = _order_var(P, p, q)
                    _same_device(P, min(p, q), max(p, q))
                    prob += tsq >= tep - off - M * (1 - y), f"fifo_{p}_{q}_{d1}_{d2}"
                    prob += tsp >= teq - off - M * y, f"fifo_{q}_{p}_{d1}_{d2}"


def time_unit(big_m: float) -> float:
    """µs per model time unit: a power of ten that brings ``big_m`` into [10, 1e4] (the solvers'
    tolerances are absolute: with times of 1e8 µs and more in big-M rows HiGHS answered wrong optima and
    INFEASIBLE; with times of 1e-2 µs CBC called a makespan 1e-6 relative above the optimum optimal)."""
    k = 0
    while big_m / 10.0**k > 1e4:
        k += 1
    while k > -15 and 0 < big_m / 10.0**k < 10:
        k -= 1
    return 10.0**k


def build_milp(inst: Instance, big_m: float, lb: float, unit: float = 1.0, budget: Budget | None = None) -> MilpModel:
    """The MILP with times in units of ``unit`` µs (``big_m`` and ``lb`` are given in µs); ``budget``:
    :class:`OutOfTime` when it is not built before it expires."""
    P = MilpModel(inst, big_m, lb, unit)
    P.budget = budget
    reach = reachability(inst)
    P.prob += P.mk
    _add_ops(P)
    _add_memory(P)
    _add_device_load(P)
    _add_symmetry(P)
    _add_ordering(P, reach)
    _add_precedence(P)
    if inst.comm == "sequential":
        _add_transfers(P, reach)
    return P


def warm_values(P: MilpModel, res: Result) -> dict[str, float]:
    """Initial value of every variable from a heuristic's simulated schedule."""
    inst, sch = P.inst, res.schedule
    perm = _canonical_labels(P, res.placement)  # the same schedule on interchangeable devices relabelled
    pl = [perm[d] for d in res.placement]
    order = res.order if res.order is not None else sch.order
    pos = {o: i for ops in order for i, o in enumerate(ops)}
    u = P.unit
    val: dict[str, float] = {P.mk.name: max(sch.makespan / u, P.mk.lowBound or 0.0)}
    for (o, d), x in P.x.items():
        val[x.name] = float(pl[o] == d)
    for v in P.prob.variables():  # symmetry prefixes: the devices used up to each op
        if v.name.startswith("u") and "_" in v.name:
            o, d = map(int, v.name[1:].split("_"))
            val[v.name] = float(any(pl[k] == d for k in range(o + 1)))
    for o in range(inst.n):
        val[P.s[o].name] = sch.start[o] / u
    for (a, b), qv in P.q.items():
        val[qv.name] = float(pl[a] == pl[b])
    for (a, b), y in P.y.items():
        if pl[a] == pl[b]:
            val[y.name] = float(pos[a] < pos[b])
        else:
            val[y.name] = float(sch.start[a] <= sch.start[b])
    for k, z in P.z.items():
        val[z.name] = float(pl[inst.esrc[k]] != pl[inst.edst[k]])
    sent = {(p, perm[a], perm[b]): (st, en) for (p, a, b, st, en, _) in sch.transfers}
    for (p, d1, d2), (ts, te, w) in P.tr.items():
        if (p, d1, d2) in sent and pl[p] == d1:
            st, en = sent[p, d1, d2]
            val[ts.name], val[te.name], val[w.name] = st / u, en / u, 1.0
        else:
            val[ts.name] = val[te.name] = sch.end[p] / u
            val[w.name] = 0.0
    return val


def _assessed_feasible(text: str) -> bool:
    """HiGHS's check of the user's solution (before presolve): zero infeasibilities of every kind."""
    rows = re.findall(r"^(Col|Integer|Row)\s+infeasibilities\s+(\d+)", text, flags=re.M)
    return bool(rows) and all(int(k) == 0 for _, k in rows[:3])


def _solve_highs(P: MilpModel, opts: MilpOptions, limit: float, warm: bool, seed: int,
                 presolve: bool = True) -> dict[str, Any]:
    """HiGHS in its child Python (:mod:`highs_worker`; highspy cannot share a process with OR-Tools)."""
    from . import highs_worker

    prob = P.prob
    with tempfile.TemporaryDirectory(prefix="dplace_highs_") as tmp:
        mps = os.path.join(tmp, "model.mps")
        prob.writeMPS(mps)
        args = {"mps": mps, "deadline": time.time() + limit, "threads": opts.threads, "seed": seed,
                "presolve": presolve, "stop": os.path.join(tmp, "stop"),
                "log_file": os.path.join(tmp, "highs.log"), "out": os.path.join(tmp, "out.json"),
                "hint": {v.name: float(v.varValue) for v in prob.variables() if v.varValue is not None} if warm else None}
        try:
            out, interrupted = highs_worker.solve(args, limit, interrupt.on_request)
        except highs_worker.SolverFailed as exc:
            raise SolverError(f"milp: HiGHS child failed: {exc}") from None
        interrupted = interrupted or interrupt.requested()
        if out is None:  # no answer within the limit: nothing to read back
            for v in prob.variables():
                v.varValue = None
            prob.status, prob.sol_status = pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
            return {"solver_result": "HiGHS gave no answer within the time limit", "proven_optimal": False,
                    "interrupted": interrupted, "warm_start_used": None, "warm_start_feasible": None,
                    "bound": None}
        with open(args["log_file"], encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    if opts.log:
        print(text)
    values = out.get("values")
    for v in prob.variables():
        v.varValue = None if values is None else values.get(v.name)
    st = out["status"]
    info: dict[str, Any] = {"solver_result": st, "proven_optimal": st == "Optimal", "interrupted": interrupted,
                            "warm_start_used": "MIP start solution is feasible" in text,
                            "warm_start_feasible": _assessed_feasible(text) if warm else None}
    b = out.get("bound")
    info["bound"] = float(b) if b is not None and math.isfinite(b) else None
    if st == "Optimal" and not any(v.cat == pulp.LpInteger for v in prob.variables()):
        # an LP (every placement and order fixed): HiGHS reports a MIP dual bound of 0; its optimum is the bound
        obj = out.get("objective")
        info["bound"] = float(obj) if obj is not None and math.isfinite(obj) else None
    if values is not None:
        prob.status = pulp.LpStatusOptimal if st == "Optimal" else pulp.LpStatusNotSolved
        prob.sol_status = pulp.LpSolutionOptimal if st == "Optimal" else pulp.LpSolutionIntegerFeasible
    else:
        infeasible = st == "Infeasible"
        prob.status = pulp.LpStatusInfeasible if infeasible else pulp.LpStatusNotSolved
        prob.sol_status = pulp.LpSolutionInfeasible if infeasible else pulp.LpSolutionNoSolutionFound
    return info


def _printed_floor(text: str, digits: int | None = None) -> float:
    """The least value a number CBC printed rounded may stand for: its lower bound comes with 3 decimals
    (``4965.637``), its objective with 8, an LP's optimum with ``digits`` = 10 significant digits (``90``);
    a bound read as printed could exceed the solver's own by half a unit in the last place."""
    v = float(text)
    if digits is not None:
        return v - (0.5 * 10.0 ** (math.floor(math.log10(abs(v))) - digits + 1) if v else 0.0)
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return v - 0.5 * 10.0 ** (int(exp or 0) - decimals)


def cbc_increment(P: MilpModel) -> float:
    """CBC's cutoff increment (model units): it looks only for solutions better than its incumbent by this
    much, so its "optimal" objective may lie this much above the model's optimum (default 1e-5: with an
    objective of 1-10 units up to 1e-5 relative, above the claims' tolerance). Set to 1e-8 x M (at most
    the default) and read off every bound it gives (:func:`_solve`)."""
    return min(1e-5, 1e-8 * P.M)


def _run_cbc(P: MilpModel, opts: MilpOptions, limit: float, warm: bool, presolve: bool,
             stop_by: Budget | None = None, cbc_sec: float | None = None, preprocess: bool = True,
             ) -> tuple[str, bool]:
    """CBC (PuLP's bundled binary, PuLP's own files and parsers) with ``limit`` seconds and gone by
    the end of ``stop_by`` (a Budget; default: the limit). CBC checks its own ``-sec`` only
    between nodes and cut passes (on a loaded machine it answered 1-5 s late, and a kill then loses its
    answer: its log and solution are written at the end), so it gets ``-sec`` = the limit (less two graces
    when ``stop_by`` leaves no room: grace = 2.5 % of the limit, 0.1 s at least, a quarter of it at most),
    SIGINT a grace later (CBC stops at its next check and writes its incumbent), and is killed at
    ``stop_by`` (no answer: the caller keeps its warm start). A user's Ctrl-C asks it to stop the same way.
    ``cbc_sec``: CBC's own limit instead (tests). ``presolve`` False: neither presolve nor preprocessing;
    ``preprocess`` False: no preprocessing (Cgl). Sets the variables' values and the problem's status as
    ``prob.solve`` would; returns (CBC's log, interrupted)."""
    import signal
    import subprocess
    import threading

    t_call = time.perf_counter()
    prob = P.prob
    grace = min(max(0.1, 0.025 * limit), 0.25 * limit)
    t_kill = t_call + limit if stop_by is None else t_call + max(stop_by.left(), 2 * grace)
    sec = max(0.01, min(limit, t_kill - t_call - 2 * grace)) if cbc_sec is None else cbc_sec
    t_int = min(t_call + limit + grace, t_kill - grace)
    with warnings.catch_warnings():  # PuLP 3 marks its bundled CBC as deprecated (still shipped)
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=sec, gapRel=0.0, gapAbs=1e-9, warmStart=warm,
                                   threads=opts.threads, presolve=None if presolve else False,
                                   options=[f"increment {cbc_increment(P):.3g}"]
                                   + ([] if presolve and preprocess else ["preprocess off"]))
    if not solver.available():
        raise SolverError(f"milp: CBC is not available at {solver.path}")
    with tempfile.TemporaryDirectory(prefix="dplace_cbc_") as tmp:
        mps, mst, sol, logp = (os.path.join(tmp, f) for f in ("model.mps", "start.mst", "out.sol", "cbc.log"))
        vs, vnames, cnames, _ = prob.writeMPS(mps, rename=1)
        cmd = [solver.path, mps]
        if warm:
            solver.writesol(mst, prob, vs, vnames, cnames)
            cmd += ["-mips", mst]
        cmd += ["-sec", f"{sec:.6f}"]
        if not presolve:
            cmd += ["-presolve", "off"]
        for option in solver.options + solver.getOptions():
            cmd += ("-" + option).split()
        cmd += ["-solve", "-printingOptions", "all", "-solution", sol]
        interrupted = stopped = False
        asked = threading.Event()  # a user's Ctrl-C (from the interrupt watcher thread)
        with open(logp, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            end = t_int
            with interrupt.on_request(asked.set):
                while True:
                    try:
                        proc.wait(timeout=max(0.0, min(0.05, end - time.perf_counter())))
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    except KeyboardInterrupt:  # library use: Ctrl-C raises here; CBC got it too
                        asked.set()
                    if asked.is_set():
                        interrupted = True
                    if stopped and time.perf_counter() >= end:  # no answer by stop_by: killed
                        proc.kill()
                        proc.wait()
                        break
                    if not stopped and (asked.is_set() or time.perf_counter() >= end):
                        proc.send_signal(signal.SIGINT)  # CBC stops at its next check and writes its answer
                        stopped = True
                        end = t_kill if not asked.is_set() else min(t_kill, time.perf_counter() + grace)
        interrupted = interrupted or interrupt.requested()
        with open(logp, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if proc.returncode == 0 and os.path.exists(sol):
            status, values, _, _, _, sol_status = solver.readsol_MPS(sol, prob, vs, vnames, cnames)
            prob.assignVarsVals(values)
            prob.assignStatus(status, sol_status)
        else:
            for v in prob.variables():
                v.varValue = None
            prob.status, prob.sol_status = pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
            if not stopped and not interrupted:
                raise SolverError(f"milp: CBC exited with code {proc.returncode}: {text[-300:].strip()}")
            text += "\nResult - Stopped by dplace (no answer by the end of its time)\n"
    return text, interrupted


def _cbc_bound(text: str, increment: float) -> tuple[str, float | None, bool]:
    """From CBC's log: (its result line, the bound it proves in model units or None, proven optimal).
    Printed numbers are read down to the least value they may stand for (:func:`_printed_floor`), less
    what CBC's search leaves open: its cutoff ``increment`` (:func:`cbc_increment`) and the absolute gap."""
    m = re.search(r"Result - (.*)", text)
    lp = None if m else re.search(r"^Optimal objective\s+([-+0-9.eE]+)", text, flags=re.M)
    result = m.group(1).strip() if m else "Optimal (an LP: no integer variable)" if lp else "?"
    bound = None
    if m and m.group(1).startswith("Optimal solution found"):
        mo = re.search(r"Objective value:\s*([-+0-9.eE]+)", text)
        bound = _printed_floor(mo.group(1)) - max(increment, 1e-9) if mo else None
    elif m:
        mb = re.search(r"Lower bound:\s*([-+0-9.eE]+)", text)
        bound = _printed_floor(mb.group(1)) - increment if mb else None
    elif lp:  # every placement and order fixed: CBC solved the LP and prints no "Result" line
        bound = _printed_floor(lp.group(1), digits=10)
    proven = bool(m and m.group(1).startswith("Optimal solution found")) or bool(lp)
    return result, bound, proven


def _has_solution(P: MilpModel) -> bool:
    return P.prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)


def _placed(P: MilpModel) -> bool:
    """The solver's vector places every op (one placement binary at 1 for each op with a choice)."""
    return all(max(P.x[o, d].varValue or 0.0 for d in P.allowed[o]) > 0.5
               for o in range(P.inst.n) if len(P.allowed[o]) > 1)


def _solve(P: MilpModel, opts: MilpOptions, limit: float, warm: bool, seed: int = 0,
           presolve: bool = True, stop_by: Budget | None = None) -> dict[str, Any]:
    """Solve ``P`` with the chosen solver; the bound in ``info["bound"]`` is in model units. ``stop_by``:
    CBC may run past ``limit`` (it answers late on a loaded machine) until then (:func:`_run_cbc`)."""
    prob = P.prob
    info: dict[str, Any] = {}
    budget = Budget(limit)
    if opts.solver == "cbc":
        start = {v.name: v.varValue for v in prob.variables()}  # the warm start (a run overwrites it)
        text, interrupted = _run_cbc(P, opts, limit, warm, presolve, stop_by)
        inc = cbc_increment(P)
        result, bound, proven = _cbc_bound(text, inc)
        if (presolve and not interrupted and _has_solution(P) and not _placed(P)
                and budget.left() > 0.05):
            # CBC's preprocessing lost its answer ("Postprocessed model is infeasible": mapped back, its
            # solution broke the original rows at tolerance): CBC still said optimal and wrote a vector that
            # places no op. Its claim stands (confirmed like any); the schedule is asked for again
            # without preprocessing, from the same warm start.
            for v in prob.variables():
                v.varValue = start[v.name]
            text2, interrupted = _run_cbc(P, opts, budget.left(), warm, presolve, stop_by,
                                          preprocess=False)
            info["cbc_again"] = (f"CBC's answer ({result}) placed no op (its preprocessing lost it): solved again "
                                 "without preprocessing")
            result2, bound2, proven2 = _cbc_bound(text2, inc)
            result = f"{result2} (again without preprocessing; first: {result})"
            bound = max((b for b in (bound, bound2) if b is not None), default=None)  # claims on one model
            proven = proven or proven2
            text += "\n" + text2
        if opts.log:
            print(text)
        info["interrupted"] = interrupted
        info["warm_start_used"] = "MIPStart provided solution" in text
        info["warm_start_feasible"] = info["warm_start_used"] if warm else None
        info["solver_result"] = result
        info["bound"] = None if interrupted else bound
        info["proven_optimal"] = proven
    else:
        info = _solve_highs(P, opts, limit, warm, seed, presolve)
        left = budget.left()
        if presolve and info["solver_result"] == "Optimal" and info["bound"] is None and left > 0.3:
            # HiGHS's presolve called the model infeasible (it is not: seed 41257, the same model without
            # presolve is solved) and HiGHS kept the warm start as "Optimal" with a dual bound of -inf:
            # asked again without presolve, from its answer
            info = dict(_solve_highs(P, opts, left, True, seed, presolve=False),
                        highs_again="HiGHS said Optimal without a dual bound (presolve): solved again without presolve")
    info["pulp_status"] = pulp.LpStatus[prob.status]
    info["sol_status"] = prob.sol_status
    return info


@register("milp", options=MilpOptions, kind="exact", max_ops=300,
          summary="Pesto-style MILP (PuLP; CBC or HiGHS), big-M from the heuristic, warm start, proven gap.")
def milp(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
         **options) -> Result:
    """Pesto (Middleware'21, §4) MILP with memory limits; see the module docstring. Everything counts
    against the time limit; when it runs out before the solver starts, or on Ctrl-C, the best answer so
    far (the heuristic's) is returned, labelled."""
    opts = MilpOptions(**options)
    return run_guarded(inst, "milp", opts, Budget.resolve(budget, time_limit_s, opts.default_time_limit_s), seed,
                       lambda base, hint, bud: _milp_search(inst, opts, seed, base, hint, bud))


def _read_solution(P: MilpModel, info: dict[str, Any], optd: dict[str, Any], extra: dict[str, Any]) -> Result | None:
    """The solver's placement and per-device order (by start, end, topological position), simulated."""
    inst = P.inst
    if not _has_solution(P) or not _placed(P):  # a vector that places no op is not an answer (see _solve)
        return None
    pl = []
    for o in range(inst.n):
        al = P.allowed[o]
        pl.append(al[0] if len(al) == 1 else max(al, key=lambda d: P.x[o, d].varValue or 0.0))
    st = [(P.s[o].varValue or 0.0) * P.unit for o in range(inst.n)]
    tp = inst.topo_pos
    order: list[list[int]] = [[] for _ in range(inst.m)]
    en = [st[o] + inst.dur[o][pl[o]] for o in range(inst.n)]
    for o in sorted(range(inst.n), key=lambda o: (round(st[o], 9), round(en[o], 9), tp[o])):
        order[pl[o]].append(o)
    claimed = None if P.mk.varValue is None else P.mk.varValue * P.unit
    best: Result | None = None
    for cand in (order, _order_by_choices(P, order)):
        if cand is None:
            continue
        try:
            r = make_result(inst, "milp", pl, cand, status="feasible", options=optd, claimed_makespan=claimed,
                            extra=dict(extra))
        except Exception:  # noqa: BLE001 — an order broken by solver tolerances
            continue
        if best is None or r.makespan < best.makespan:
            best = r
    if best is not None:
        return best
    return make_result(inst, "milp", pl, None, status="feasible", options=optd, claimed_makespan=claimed,
                       extra=dict(extra, order_dropped=True))


def _order_by_choices(P: MilpModel, order: list[list[int]]) -> list[list[int]] | None:
    """The per-device order the model chose: its ordering binaries ``y`` where two ops share a device
    with no path between them, the graph's order where there is a path. Start times alone lose these
    choices when the solver's tolerance puts a zero-time op a hair after the op it precedes (seen with
    HiGHS: starts 1e-6 apart, ``y`` saying the other way round). None when the choices do not form one
    order (tolerances again) or agree with ``order`` already."""
    tp = P.inst.topo_pos

    def before(a: int, b: int) -> bool:
        key = (min(a, b), max(a, b))
        if key in P.y:
            y = (P.y[key].varValue or 0.0) > 0.5
            return y if key == (a, b) else not y
        return tp[a] < tp[b]

    out = [sorted(ops, key=functools.cmp_to_key(lambda a, b: -1 if before(a, b) else 1)) for ops in order]
    for ops in out:
        if any(not before(ops[i], ops[j]) for i in range(len(ops)) for j in range(i + 1, len(ops))):
            return None
    return None if out == order else out


def _confirm_with_cpsat(inst: Instance, T: Ticks, claim: float, budget: Budget, seed: int,
                       optd: dict[str, Any], extra: dict[str, Any]) -> tuple[float | None, Result | None]:
    """Independent check of the MILP solver's bound ``claim`` (µs; ``inf`` for INFEASIBLE) by the CP-SAT
    model on exact integer ticks, searched without presolve (:func:`cpsat.confirm_bound`): (the bound it
    proves in µs, or None; a Result when it found a schedule below the claim)."""
    if budget.left() < 0.05:
        return None, None
    claim_t = claim / T.tick if math.isfinite(claim) else math.inf
    horizon = horizon_ticks(inst, T) if not math.isfinite(claim_t) else max(1, int(math.ceil(claim_t - 1e-9)))
    V = build_model(inst, T, horizon=horizon, symmetry=True, budget=budget.share(0.5))
    got, out = confirm_bound(V, claim_t, workers=1, seed=seed, budget=budget.child(reserve=0.01))
    res = None
    if out is not None and out.placement is not None:
        res = make_result(inst, "milp", out.placement, out.order, status="feasible", options=optd,
                          claimed_makespan=T.to_us(out.objective_ticks), extra=dict(extra, returned="cpsat check"))
    if got is None:
        return None, res
    return (math.inf if got == math.inf else T.real_bound(got)), res


def cross_check(inst: Instance, incumbent: Result | None, floor: float, time_limit_s: float | None = None,
                seed: int = 0, budget: Budget | None = None) -> tuple[float | None, Result | None]:
    """The other formulation's word on a CP-SAT claim: this MILP, solved by HiGHS without presolve, times
    rescaled (:func:`time_unit`), warm-started from ``incumbent`` (a memory-feasible Result, or None when
    CP-SAT claims infeasibility), ``floor``: a proven bound (µs) of dplace's own. Returns (the bound it
    proves in µs, ``inf`` when it proves that no placement fits, None when it proves nothing or has no
    time; a Result when it found a schedule). Within ``budget`` (or ``time_limit_s`` from now)."""
    budget = Budget.resolve(budget, time_limit_s)
    if budget.left() < 0.3:
        return None, None
    if incumbent is not None:
        big_m = incumbent.makespan * (1 + 1e-6) + 1e-9
    else:
        big_m = sum(max(r) for r in inst.dur) + sum(inst.max_transfer_time(k) for k in range(len(inst.esrc))) + 1.0
    floor = min(floor, incumbent.makespan) if incumbent is not None else floor
    opts = MilpOptions(solver="highs", threads=1)
    try:
        P = build_milp(inst, big_m, floor, time_unit(big_m), budget=budget.share(0.3))
    except (OutOfTime, InfeasibleError):
        return None, None
    if incumbent is not None:
        vals = warm_values(P, incumbent)
        for v in P.prob.variables():
            if v.name in vals:
                v.setInitialValue(vals[v.name])
    left = budget.left()
    if left < 0.2:
        return None, None
    info = _solve(P, opts, left, incumbent is not None, seed, presolve=False)
    if info.get("interrupted"):
        return None, None
    res = _read_solution(P, info, {"solver": "highs"}, {"returned": "milp check"})
    if P.prob.status == pulp.LpStatusInfeasible:
        # no schedule below big_m: with an incumbent that is HiGHS contradicting a simulated schedule
        return (math.inf, None) if incumbent is None else (None, None)
    b = info.get("bound")
    return (None if b is None else b * P.unit), res


def _model(inst: Instance, big_m: float, floor: float, start: Result | None, budget: Budget
           ) -> tuple[MilpModel, float, bool]:
    """The MILP below ``big_m`` (µs) in its :func:`time_unit`, warm-started from ``start`` (a memory-feasible
    Result) when given: (model, unit, warm)."""
    unit = time_unit(big_m)
    P = build_milp(inst, big_m, floor, unit, budget=budget)
    if start is None:
        return P, unit, False
    vals = warm_values(P, start)
    for v in P.prob.variables():
        if v.name in vals:
            v.setInitialValue(vals[v.name])
    return P, unit, True


def _milp_search(inst: Instance, opts: MilpOptions, seed: int, base: claims.Bound,
                 hint: tuple[str, Result] | None, budget: Budget) -> Result:
    hres = hint[1] if hint and hint[1].memory_ok else None
    if inst.n > opts.max_ops:  # the model would need O(n^2) ordering binaries: do not build it
        why = (f"milp: {inst.n} ops > max_ops {opts.max_ops}; the ordering model was not built "
               f"(use cpsat or refine for large graphs)")
        if hint is None:
            raise SolverError(why)
        res = fallback(inst, "milp", hint, base, opts, why=why)
        return replace(res, extra={**res.extra, "skipped": why})
    if hres is not None:
        big_m = hres.makespan * (1 + 1e-6) + 1e-6
    else:  # everything one after the other with every transfer paid
        big_m = sum(max(r) for r in inst.dur) + sum(inst.max_transfer_time(k) for k in range(len(inst.esrc))) + 1.0
    own = [base]
    if hres is not None:  # energetic reasoning (cpsat.energetic_bound) on tick data, turned into real µs
        T = Ticks(inst, None, hres.makespan)
        sch = tick_schedule(inst, T, hres.placement, hres.order if hres.order is not None else hres.schedule.order)
        if sch is not None:
            eb = energetic_bound(inst, T, int(math.ceil(base.value / T.tick - 1e-9)), int(round(sch.makespan)))
            own.append(claims.Bound(T.real_bound(eb), "energetic"))
    mk_floor = max(b.value for b in own)
    if hres is not None:  # float noise: a bound computed elsewhere may exceed an optimal hint by an ulp
        mk_floor = min(mk_floor, hres.makespan)
    P, unit, warm = _model(inst, big_m, mk_floor, hres, budget)
    # the solver gets part of what is left; the rest re-solves without presolve to confirm its bound
    left = budget.left()
    if left < 0.05:
        raise OutOfTime("no time left for the solver")
    # CP-SAT (presolve off) confirms the bound where its ticks are exact or the graph is small (the other
    # formulation); else a re-solve without presolve does
    Tc = Ticks(inst, None, big_m)
    by_cpsat = Tc.exact or inst.n <= claims.CROSS_MAX_OPS
    solve_end = budget.share(0.8 if by_cpsat else 0.55)
    # a solver answering late may use the time of the check, which has little to confirm then
    stop_by = budget.child(reserve=max(0.3, 0.05 * left))
    if stop_by.deadline < solve_end.deadline:
        stop_by = solve_end
    info = _solve(P, opts, solve_end.seconds(0.05), warm, seed, stop_by=stop_by)
    optd = asdict(opts)
    extra: dict[str, Any] = {}
    cand: list[Result] = []
    claim: float | None = None
    interrupted = False
    notes: list[str] = []
    while True:  # again with a big-M from the solver's schedule while that is far below the last one
        extra = {k: v for k, v in info.items() if k != "bound"}
        extra.update(solver=opts.solver, big_m=big_m, time_unit_us=unit, hint_method=hint[0] if hint else None,
                     hint_makespan=hres.makespan if hres else None, n_order_binaries=len(P.y))
        interrupted = bool(info.get("interrupted"))
        cand += [r for r in [_read_solution(P, info, optd, extra)] if r is not None]
        infeasible = P.prob.status == pulp.LpStatusInfeasible
        got = None if info.get("bound") is None else info["bound"] * unit
        if infeasible and cand:
            notes.append(f"{opts.solver} said infeasible below {big_m:.9g}, where a simulated schedule lies: "
                         "not used")
            infeasible, got = False, None
        if got is not None:
            claim = got if claim is None else max(claim, got)  # each a claim of the solver on one model
        fits = [r for r in cand if r.memory_ok]
        best = min(fits, key=lambda r: r.makespan) if fits else None
        left = solve_end.left()
        if (interrupted or best is None or best.makespan * 10 > big_m or left < 0.1 or interrupt.requested()
                or claims.reaches(best.makespan, max(b.value for b in own))):
            break
        # the solver's schedule is far below big-M (a poor heuristic: M and the time unit were set by
        # times this answer never pays): the numbers were badly scaled for it; once more with M from it
        try:
            big_m = best.makespan * (1 + 1e-6) + 1e-12
            P, unit, warm = _model(inst, big_m, min(mk_floor, best.makespan), best, solve_end)
        except OutOfTime:
            break
        notes.append(f"solved again with big-M {big_m:.9g} from the solver's schedule (was {extra['big_m']:.9g})")
        info = _solve(P, opts, solve_end.seconds(0.05), warm, seed, stop_by=stop_by)
    fits = [r for r in cand if r.memory_ok]
    if fits and not Tc.exact:  # ticks fitted to the best schedule, not to big-M: a coarse tick proves less
        Tc = Ticks(inst, None, min(r.makespan for r in fits))
        by_cpsat = Tc.exact or inst.n <= claims.CROSS_MAX_OPS
    extra["solver_bound"] = claim
    certified: claims.Bound | None = None
    own_best = max(b.value for b in own)
    ex = None
    if not interrupted:  # small graph: brute force first (cheap there, the last word; also where the solver
        # proved nothing); the other checks only where it did not complete
        left = budget.child(reserve=0.02).left()
        ex = claims.exhaustive(inst, min(left, max(0.2, 0.5 * left)))
        if ex is not None and ex.optimum is not None:
            own.append(claims.Bound(ex.optimum, "brute force"))
            cand.append(make_result(inst, "milp", ex.placement, ex.order, status="feasible", options=optd,
                                    extra=dict(extra, returned="brute force")))
    if interrupted:
        notes.append("solver interrupted: its bound is not confirmed and not used")
    elif infeasible or (claim is not None and claim > own_best + claims.tol(own_best)):
        check = f"a re-solve without presolve (times in units of {unit:g} µs)"
        got: float | None = None
        if ex is not None:
            if ex.optimum is not None:
                check, got = "brute force", ex.optimum
            elif infeasible:
                got = math.inf
        checks = budget.child(reserve=0.02)
        left = checks.left()
        if ex is None and by_cpsat:
            check = "CP-SAT without presolve"
            got, r2 = _confirm_with_cpsat(inst, Tc, math.inf if infeasible else claim, checks, seed, optd, extra)
            if r2 is not None:
                cand.append(r2)
        elif ex is None and left >= 0.3:
            info2 = _solve(P, opts, left, bool(cand) or warm, seed + 1, presolve=False)
            interrupted = bool(info2.get("interrupted"))
            r2 = _read_solution(P, info2, optd, extra)
            if r2 is not None:
                cand.append(r2)
            got = None if info2.get("bound") is None or interrupted else info2["bound"] * unit
            if infeasible and P.prob.status == pulp.LpStatusInfeasible and not interrupted:
                got = math.inf
        if infeasible and not cand:
            return claims.no_placement(inst, "milp", "milp: no placement keeps pins, colocation and memory",
                                       solver_says_infeasible=True, confirmed=got == math.inf, heuristic=hres,
                                       bound=max(own, key=lambda b: b.value), options=optd, extra=extra)
        if infeasible:
            notes.append(f"{opts.solver} said infeasible; {check} found a schedule: the solver was wrong here")
        elif claim is not None:
            certified, cn = claims.confirm(claims.Bound(claim, f"milp ({opts.solver})"), [(check, got)])
            notes += cn
    elif claim is not None:
        certified = claims.Bound(claim, f"milp ({opts.solver})")  # no stronger than dplace's own bounds
    if hres is not None:
        order = hres.order if hres.order is not None else hres.schedule.order
        cand.append(make_result(inst, "milp", hres.placement, order, status="feasible", options=optd,
                                claimed_makespan=hres.makespan, extra=dict(extra, returned="hint")))
    if not cand:
        res = no_solution(inst, "milp", "no_solution", f"milp: no solution ({info.get('solver_result')})",
                          options=optd, extra=extra, interrupted=interrupted)
        return claims.settle(res, own + [certified], notes=notes)
    best = min(cand, key=lambda r: (not r.memory_ok, r.makespan))
    return claims.settle(replace(best, interrupted=interrupted), own + [certified], notes=notes)
