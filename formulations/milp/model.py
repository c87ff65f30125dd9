"""The MILP itself: variables, constraint families (eq. names in the package docstring), big-M and its time unit,
the warm start's values."""
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

from ..cpsat import (  # noqa: I001 — OR-Tools before PuLP (see below)
    Ticks, build_model, confirm_bound, energetic_bound, horizon_ticks, reachability, receive_count, tick_schedule,
)
from ..decode import choice_sequence
from ..frame import OutOfTime, check_time, fallback, homogeneous_links, possible_sends, run_guarded  # noqa: I001

import pulp  # noqa: E402

from dplace.verify import claims
from dplace import interrupt
from dplace.budget import Budget
from dplace.errors import InfeasibleError, SolverError, bad_option
from dplace.instance.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result, no_solution


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


RESOLUTION = 1e-7  # times below this fraction of big-M are left out of the model (MilpModel.coef)
# Not below CLP's primal and dual tolerances (1e-7, CBC's defaults): CLP scales each row to about unit
# size, so in a big-M row that also holds ~M they act at about 1e-7 x M. At 1e-8, times of 1e-8..1e-7 x M
# stayed in such rows and reduced-cost fixing pruned the subtree holding the optimum: CBC called its warm
# start optimal 16 % above the optimum (tests/fixtures/claims/side-1006988.json; every wrong re-solve
# logged "Cbc0044I Reduced cost fixing ... restarting search").
# CBC's integer tolerance (its default 1e-7): a binary within it of 0 or 1 counts as integral, so an LP
# answer it accepts may break a big-M row by this x M once rounded. At 1e-7 that swallowed the times just
# above RESOLUTION (then 1e-8): CBC took such node answers as integral, its exact check then rejected them
# (cyclic orders of tiny ops) and the nodes stayed pruned: its warm start "optimal" 15 % above the
# optimum, "proven infeasible" without presolve (tests/fixtures/claims/series-1000424.json).
# Kept a factor 10 below RESOLUTION.
INTEGRALITY = RESOLUTION / 10


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
        self.pay: dict[tuple[int, int, int], Any] = {}  # (p, c, d) -> c pays p's receive on d (_add_receives)
        self.seen: dict[tuple[int, int, int], Any] = {}  # (p, c, d) -> some consumer of p up to c is on d
        self.recv: list[Any] = [0] * inst.n  # per op: the receive cost it pays (model units, an expression)
        self.r: dict[int, Any] = {}  # op -> rank among ops that may take no time (ties: _add_tie_ranks)
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
        simulated optimum). Below the resolution: times under what a big-M row resolves (CLP's tolerances
        act at about 1e-7 x M in a row scaled to unit size) broke CBC: op times of 5e-10 x M (10 µs beside
        transfers of 1e10 µs) and its preprocessing lost its own optimum (mapped back, its solution broke
        the original rows: it still said optimal and wrote a vector of zeros); op times of 1e-9 x M and it
        called the hint optimal at the root, 3e5 times the optimum; times of 1e-8..1e-7 x M and reduced-cost
        fixing pruned the optimum (``RESOLUTION``'s comment). These cuts only lower the model's values: its
        bounds stay proven, its schedules are simulated (the times left out cost at most n x RESOLUTION x M
        on them)."""
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
        return self.s[o] + self.dur(o) + self.recv[o]


def serial_us(inst: Instance) -> float:
    """Everything one after the other with every transfer and receive paid, plus 1 µs: a big-M without a
    heuristic's schedule."""
    return (sum(max(r) for r in inst.dur) + sum(inst.max_transfer_time(k) for k in range(len(inst.esrc)))
            + inst.transfer_cpu * receive_count(inst) + 1.0)


def _add_ops(P: MilpModel) -> None:
    inst, prob = P.inst, P.prob
    for o in range(inst.n):
        P.s.append(P.prob.add_variable(f"s{o}", lowBound=0, upBound=P.M))
        al = P.allowed[o]
        if len(al) > 1:
            for d in al:
                P.x[o, d] = P.prob.add_variable(f"x{o}_{d}", cat="Binary")
            prob += pulp.lpSum(P.x[o, d] for d in al) == 1, f"one_{o}"
        if not inst.transfer_cpu:  # rows in the order they always had (CBC's preprocessing is sensitive to it)
            prob += P.mk >= P.end(o), f"mk_{o}"
    if inst.transfer_cpu:  # the end times need the receives, which need every x
        _add_receives(P)
        for o in range(inst.n):
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


def _add_receives(P: MilpModel) -> None:
    """The receive cost (``transfer_cpu``): per (producer p, device d) the first consumer of p on d in
    topological order pays it when p is not on d. With p's consumers c_1, c_2, ...:
    seen[p, c_i, d] <= seen[p, c_(i-1), d] + x[c_i, d] (at most the prefix OR) and
    pay[p, c_i, d] >= x[c_i, d] - x[p, d] - seen[p, c_(i-1), d], both in [0, 1]; c pays r x its pays (e[c]).
    At integral x the smallest pays are the simulator's (:meth:`Instance.receive_times`) and nothing gains
    from larger ones: the optimum and the bounds are those of the exact rule."""
    inst, prob = P.inst, P.prob
    r = P.coef(inst.transfer_cpu / P.unit) if inst.m > 1 else 0.0
    if not r:
        return
    tp = inst.topo_pos
    pays: list[list[Any]] = [[] for _ in range(inst.n)]
    for p in range(inst.n):
        check_time(P.budget)
        cons = sorted({inst.edst[k] for k in inst.succ[p]}, key=lambda c: tp[c])
        for d in range(inst.m):
            xp = P.X(p, d)
            if isinstance(xp, int) and xp == 1:
                continue
            seen: Any = 0
            for c in cons:
                xc = P.X(c, d)
                if isinstance(xc, int) and xc == 0:
                    continue
                pv = prob.add_variable(f"rp{p}_{c}_{d}", lowBound=0, upBound=1)
                P.pay[p, c, d] = pv
                prob += pv >= xc - xp - seen, f"pay_{p}_{c}_{d}"
                pays[c].append(pv)
                sv = prob.add_variable(f"rs{p}_{c}_{d}", lowBound=0, upBound=1)
                P.seen[p, c, d] = sv
                prob += sv <= seen + xc, f"seen_{p}_{c}_{d}"
                seen = sv
    P.recv = [r * pulp.lpSum(v) if v else 0 for v in pays]


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
    r = P.coef(inst.transfer_cpu / P.unit) if P.pay else 0.0
    for d in range(inst.m):
        terms = [(P.p(o, d), P.X(o, d)) for o in range(inst.n) if d in P.allowed[o] and P.p(o, d) > 0]
        terms += [(r, v) for (_, _, dd), v in P.pay.items() if dd == d and r > 0]  # the receives d pays
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


def _free_ops(P: MilpModel) -> tuple[list[bool], list[bool]]:
    """(zero: op takes no time on any device it may use, loose: zero and without edges). No
    disjunction is needed between two zero ops (one of ``s_b >= s_a``, ``s_a >= s_b`` always holds: they
    may share an instant, then the list puts either first) nor with a loose op (it may run at time 0 first
    on its device: nothing waits for it). Both keep the model's optimum, and its schedules read back by
    start times simulate to their model values; a graph padded with independent zero ops (the
    composed instances of dplace.verify.oracle) or a TF graph's NoOps would otherwise need O(n^2) binaries."""
    inst = P.inst
    zero = [all(inst.dur[o][d] == 0.0 for d in P.allowed[o]) and isinstance(P.recv[o], int)  # no receive
            for o in range(inst.n)]  # to pay; not merely below the model's resolution: with those left out
    # as well CBC lost its optimum on fuzz seed 44809 again
    touched = [False] * inst.n
    for k in range(len(inst.esrc)):
        touched[int(inst.esrc[k])] = touched[int(inst.edst[k])] = True
    return zero, [zero[o] and not touched[o] for o in range(inst.n)]


def _add_ordering(P: MilpModel, reach: list[int]) -> None:
    """Disjunctions for pairs with no path between them that may share a device (none for pairs of ops
    that take no time, nor with an op that takes none and has no edge: :func:`_free_ops`)."""
    inst, M = P.inst, P.M
    zero, loose = _free_ops(P)
    for a in range(inst.n):
        check_time(P.budget)
        for b in range(a + 1, inst.n):
            if reach[a] >> b & 1 or reach[b] >> a & 1:
                continue
            if (zero[a] and zero[b]) or loose[a] or loose[b]:
                continue
            qv = _same_device(P, a, b)
            if isinstance(qv, int) and qv == 0:
                continue
            y = _order_var(P, a, b)
            P.prob += P.s[b] >= P.end(a) - M * (1 - y) - M * (1 - qv), f"ord_{a}_{b}"
            P.prob += P.s[a] >= P.end(b) - M * y - M * (1 - qv), f"ord_{b}_{a}"


def _add_precedence(P: MilpModel) -> None:
    inst, prob = P.inst, P.prob
    homog = homogeneous_links(inst)
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
    fifo: set[tuple[int, int]] = set()  # pairs ordered by a y on some link
    for p, d1, d2, cons in possible_sends(inst, P.allowed):
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
                    fifo.add((min(p, q), max(p, q)))
                    prob += tsq >= tep - off - M * (1 - y), f"fifo_{p}_{q}_{d1}_{d2}"
                    prob += tsp >= teq - off - M * y, f"fifo_{q}_{p}_{d1}_{d2}"
    _add_tie_ranks(P, fifo)


def _add_tie_ranks(P: MilpModel, fifo: set[tuple[int, int]]) -> None:
    """The CP-SAT model's tie ranks (:func:`..cpsat.model._add_tie_ranks`): ops that take no time may share
    an instant on one device, where their ordering binaries ``y`` (which tensor leaves first on a link)
    are tied to no time and can form a cycle no device order runs (the model proved 11 where the
    simulator's optimum is 12). A rank per op that may take no time, increasing along the graph's edges
    between such ops and along every ``y`` between two of them on one device. Two ops that take no time on
    any device have no disjunction (:func:`_add_ordering`): for them ``y`` also orders their starts, as
    the simulator runs them in device order (without it ``y`` ordered their tensors against their starts)."""
    inst, prob, M = P.inst, P.prob, P.M
    zero = [any(P.p(o, d) == 0 for d in P.allowed[o]) for o in range(inst.n)]
    pairs = [(key, y) for key, y in P.y.items() if zero[key[0]] and zero[key[1]]]
    if not pairs:
        return
    all_zero, _ = _free_ops(P)
    nz = sum(zero)
    R = nz + 1
    P.r = {o: P.prob.add_variable(f"r{o}", lowBound=0, upBound=nz) for o in range(inst.n) if zero[o]}
    for k in range(len(inst.esrc)):
        u, v = int(inst.esrc[k]), int(inst.edst[k])
        if zero[u] and zero[v] and u != v:
            prob += P.r[v] >= P.r[u] + 1, f"rank_{k}"
    for (a, b), y in pairs:
        check_time(P.budget)
        qv = _same_device(P, a, b)
        if isinstance(qv, int) and qv == 0:
            continue
        prob += P.r[b] >= P.r[a] + 1 - R * (1 - y) - R * (1 - qv), f"rk_{a}_{b}"
        prob += P.r[a] >= P.r[b] + 1 - R * y - R * (1 - qv), f"rk_{b}_{a}"
        if (a, b) in fifo and all_zero[a] and all_zero[b]:
            prob += P.s[b] >= P.s[a] - M * (1 - y) - M * (1 - qv), f"zord_{a}_{b}"
            prob += P.s[a] >= P.s[b] - M * y - M * (1 - qv), f"zord_{b}_{a}"


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
    seen: set[tuple[int, int]] = set()  # (p, d): a consumer of p on d so far (P.pay's keys come in p's order)
    for (p, c, d), pv in P.pay.items():
        val[pv.name] = float(pl[c] == d and pl[p] != d and (p, d) not in seen)
        if pl[c] == d:
            seen.add((p, d))
        val[P.seen[p, c, d].name] = float((p, d) in seen)
    if P.r:  # ranks: the simulator's order of start, ties in device order
        tp = inst.topo_pos
        seq = choice_sequence(inst, pl, [(sch.start[o], tp[o]) for o in range(inst.n)],
                              [(a, b) for ops in order for a, b in zip(ops, ops[1:])])
        i = 0
        for o in seq or []:
            if o in P.r:
                val[P.r[o].name] = float(i)
                i += 1
    sent = {(p, perm[a], perm[b]): (st, en) for (p, a, b, st, en, _) in sch.transfers}
    for (p, d1, d2), (ts, te, w) in P.tr.items():
        if (p, d1, d2) in sent and pl[p] == d1:
            st, en = sent[p, d1, d2]
            val[ts.name], val[te.name], val[w.name] = st / u, en / u, 1.0
        else:
            val[ts.name] = val[te.name] = sch.end[p] / u
            val[w.name] = 0.0
    return val
