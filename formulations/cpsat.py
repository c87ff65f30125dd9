"""Exact placement and scheduling with OR-Tools CP-SAT (issue #6).

Sources: OR-Tools scheduling guide (optional intervals + NoOverlap per machine); Pesto (Hafeez et al.,
Middleware'21, §4: placement binaries, transfers as extra work on links) and its K-device, memory-limited
generalisation (Moirai) for the placement part.

Model (one function per constraint family):
  x[o, d]  op o runs on device d (bool);  s[o], e[o]  start / end of o (ticks)
  I[o, d]  optional interval (s[o], p[o][d], e[o]) present iff x[o, d]          -> _add_ops
  sum_d x[o, d] = 1, pins, colocation x[o, d] = x[g, d]                          -> _add_placement
  sum_o mem[o] x[o, d] <= capacity[d]                                            -> _add_memory
  NoOverlap(I[., d]) per device                                                  -> _add_device_no_overlap
  parallel comm:  s[v] >= e[u] + c_uv * z_uv, z_uv >= x[u, d] - x[v, d]  ("different devices" literal;
                  per device pair (d1, d2) with enforcement literals when links differ)  -> _add_precedence
  sequential comm: optional transfer interval per (producer p, src d1, dst d2), present when p is on d1
                  and a consumer on d2; length >= the largest tensor to d2; NoOverlap per directed link;
                  transfers of one link in the order their producers run on d1 (the simulator's FIFO rule,
                  since producers on one device finish in device order)            -> _add_transfers
  identical devices: device d > 0 only after d - 1 got an earlier op (topological order) -> _add_symmetry
  identical durations: redundant cumulative of capacity m over all ops        -> _add_redundant_cumulative
  mk = max e[o], mk >= ceil(lower_bound / tick)                                  -> objective

Hint (:func:`hinted_model`): the best registered heuristic's placement and order, relabelled for the
symmetry breaking, timed by :func:`dplace.simulate` on the tick data (:func:`tick_schedule`); its makespan is
the horizon, :func:`time_windows` bounds every start, and :func:`complete_hint` gives a value to every
variable (tested by fixing the model to it). If CP-SAT finds nothing better the heuristic answer is kept.

Integer time: every duration and transfer time is rounded *up* to whole ticks (values within 1e-6 tick
of an integer count as that integer: float noise), so every schedule of the model is a valid
(pessimistic) real schedule; with integer data and tick 1 it is exact. A bound proven in
ticks is turned into a bound of the real problem by subtracting the most that rounding can add along one
path of the schedule (zero when nothing was rounded).

Claims (:mod:`dplace.claims`): CP-SAT's bound, OPTIMAL or INFEASIBLE is a claim. It counts only as far as
a second search *without presolve* confirms it (:func:`confirm_bound`: is there a schedule below the
claimed bound?) — CP-SAT's presolve has returned OPTIMAL above the optimum of small models. Status
``optimal`` only when the *simulated* makespan reaches the certified bound (``claims.TOL``, 1e-6 relative).
Time: heuristics, model building and hint completion count against the limit (:class:`OutOfTime` ->
the heuristic answer, labelled); Ctrl-C stops the search (:func:`run_search`) and the best answer so far
comes back with ``interrupted=True``.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from ortools.sat.python import cp_model as cp

from dplace import claims, interrupt
from dplace.errors import InfeasibleError, InvalidInstanceError, SolverError
from dplace.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result, no_solution

__all__ = [
    "CpsatOptions", "CpModelVars", "Ticks", "best_heuristic", "build_model", "complete_hint", "cpsat",
    "finish", "hinted_model", "horizon_ticks", "memory_fits", "reachability", "relabel_symmetric",
    "solve_model", "tick_schedule", "time_windows",
]

MIN_TICK_EXP = -6  # automatic tick: the coarsest power of ten >= 1e-6 µs that represents every time...
MAX_HORIZON_TICKS = 1e9  # ...made coarser while the horizon would need more ticks than this
MAX_SERIAL_TICKS = 1e15  # ...and while the trivial horizon (all serial) would: int64 with room for sums
_SKIP_HINT = frozenset({"cpsat", "milp", "refine", "portfolio", "brute"})


@dataclass(frozen=True)
class CpsatOptions:
    workers: int | None = None  # CP-SAT search workers; None: os.cpu_count()
    tick: float | None = None  # µs per integer tick; None: automatic (exact for integer data)
    hint: str = "best"  # "best": best registered heuristic; "heft"; or "none"
    symmetry: bool = True  # symmetry breaking when devices are identical
    progress: bool = True  # progress line (incumbent, bound) on stderr
    log: bool = False  # CP-SAT's own search log
    default_time_limit_s: float = 60.0  # used when time_limit_s is None

    def __post_init__(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise ValueError(f"workers must be >= 1, got {self.workers!r}")
        if self.tick is not None and not (self.tick > 0 and math.isfinite(self.tick)):
            raise ValueError(f"tick must be > 0, got {self.tick!r}")
        if self.hint not in ("best", "heft", "none"):
            raise ValueError(f"hint must be best, heft or none, got {self.hint!r}")


# ---------------------------------------------------------------------------------------- ticks
_TICK_EPS = 1e-6  # a value within this many ticks of an integer counts as that integer (float noise)


def _is_multiple(v: float, t: float) -> bool:
    q = v / t
    return abs(q - round(q)) <= _TICK_EPS


def _ceil_ticks(v: float, t: float) -> int:
    q = v / t
    r = round(q)
    if abs(q - r) <= _TICK_EPS:
        return int(r)
    return int(math.ceil(q))


class Ticks:
    """Integer durations (``p[o][d]``) and transfer times (``c[e][d1][d2]``) of ``inst`` in ticks of
    ``tick`` µs, rounded up; ``slack`` is the most (in ticks) rounding can add along one schedule path."""

    def __init__(self, inst: Instance, tick: float | None = None, horizon_us: float | None = None) -> None:
        self.inst = inst
        n, m = inst.n, inst.m
        vals = [v for row in inst.dur for v in row]
        tt = [[[inst.transfer_time(e, a, b) for b in range(m)] for a in range(m)] for e in range(len(inst.esrc))]
        vals += [v for M in tt for row in M for v in row]
        # the model's horizon is the trivial one (horizon_ticks): every op and transfer one after another
        serial = sum(max(row) for row in inst.dur) + sum(max(v for row in M for v in row) for M in tt)
        if tick is None:
            k = MIN_TICK_EXP
            while k < 6 and all(_is_multiple(v, float(f"1e{k + 1}")) for v in vals):
                k += 1
            if horizon_us is not None and horizon_us > 0:
                while horizon_us / float(f"1e{k}") > MAX_HORIZON_TICKS:
                    k += 1
            while serial / float(f"1e{k}") > MAX_SERIAL_TICKS:
                k += 1
            tick = float(f"1e{k}")
        elif serial / tick > MAX_SERIAL_TICKS:
            raise InvalidInstanceError(f"cpsat: tick {tick:g} µs is too fine here: the serial horizon "
                                       f"{serial:.3g} µs would need more than {MAX_SERIAL_TICKS:g} ticks")
        self.tick = float(tick)
        t = self.tick
        self.p = [[_ceil_ticks(v, t) for v in row] for row in inst.dur]
        self.c = [[[_ceil_ticks(v, t) for v in row] for row in M] for M in tt]
        # rounding excess (ticks) per op / per edge, worst device (pair); a schedule path holds at most n ops
        # and n - 1 transfers (parallel) or n (m - 1) transfers (sequential: link queues)
        op_err = sorted((max(0.0, max(self.p[o][d] - inst.dur[o][d] / t for d in range(m))) for o in range(n)),
                        reverse=True)
        tr_err = sorted((max([0.0] + [self.c[e][a][b] - tt[e][a][b] / t for a in range(m) for b in range(m)])
                         for e in range(len(tt))), reverse=True)
        n_tr = (n - 1) if inst.comm == "parallel" else n * max(0, m - 1)
        self.exact = all(x <= _TICK_EPS for x in op_err[:1] + tr_err[:1])
        self.slack = 0.0 if self.exact else sum(op_err[:n]) + sum(tr_err[:max(0, n_tr)])

    def to_us(self, ticks: float) -> float:
        return ticks * self.tick

    def real_bound(self, bound_ticks: float) -> float:
        """A lower bound of the real problem from a proven bound of the tick model."""
        if self.exact:
            return bound_ticks * self.tick
        return max(0.0, (bound_ticks - self.slack) * self.tick)


def reachability(inst: Instance) -> list[int]:
    """``reach[o]``: bitset of the ops reachable from o (o excluded)."""
    reach = [0] * inst.n
    for o in reversed(inst.topo):
        r = 0
        for e in inst.succ[o]:
            v = inst.edst[e]
            r |= reach[v] | (1 << v)
        reach[o] = r
    return reach


# ---------------------------------------------------------------------------------------- model
@dataclass
class CpModelVars:
    """Variables of one CP-SAT model and how to read a solution back."""

    inst: Instance
    T: Ticks
    model: cp.CpModel
    allowed: list[list[int]]
    x: dict[tuple[int, int], Any] = field(default_factory=dict)  # x[o, d]: bool var or True
    s: list[Any] = field(default_factory=list)  # start (ticks)
    e: list[Any] = field(default_factory=list)  # end (ticks)
    mk: Any = None  # makespan (ticks)
    order_lits: dict[tuple[int, int], Any] = field(default_factory=dict)  # b[p, q]: p before q (sequential)
    relaxed_fifo: bool = False  # link FIFO left out (only NoOverlap): a relaxation, not exact
    intervals: list[list[Any]] = field(default_factory=list)  # per device: the (optional) op intervals
    tr: dict[tuple[int, int, int], tuple[Any, Any]] = field(default_factory=dict)  # (p, d1, d2) -> (ts, te)
    symmetric: bool = False  # identical-device symmetry breaking is on (hints must be relabelled)
    build_args: dict[str, Any] = field(default_factory=dict)  # how build_model made it (for complete_hint)
    deadline: float | None = None  # building raises OutOfTime after this time.perf_counter() value

    def lit(self, o: int, d: int) -> Any:
        return self.x.get((o, d), False)

    def device_of(self, value) -> list[int]:
        out = []
        for o in range(self.inst.n):
            al = self.allowed[o]
            if len(al) == 1:
                out.append(al[0])
                continue
            out.append(next(d for d in al if value(self.x[o, d])))
        return out

    def extract(self, value) -> tuple[list[int], list[list[int]], list[int]]:
        """(placement, per-device order by start, starts in ticks) from a solution."""
        pl = self.device_of(value)
        st = [int(value(v)) for v in self.s]
        en = [int(value(v)) for v in self.e]
        tp = self.inst.topo_pos
        order: list[list[int]] = [[] for _ in range(self.inst.m)]
        for o in sorted(range(self.inst.n), key=lambda o: (st[o], en[o], tp[o])):
            order[pl[o]].append(o)
        return pl, order, st


def _enf(lits: Sequence[Any]) -> list[Any] | None:
    """Enforcement list without constant True; None when a constant False makes it vacuous."""
    out = []
    for lit in lits:
        if lit is True:
            continue
        if lit is False:
            return None
        out.append(lit)
    return out


def _add_ops(V: CpModelVars, horizon: int, windows: tuple[list[int], list[int]] | None = None) -> None:
    """Start/end per op and one (optional) interval per allowed device; ``windows``: start bounds."""
    md = V.model
    V.intervals = [[] for _ in range(V.inst.m)]
    for o in range(V.inst.n):
        if o % 512 == 0:
            _check_time(V.deadline)
        lo, hi = (0, horizon) if windows is None else (windows[0][o], max(windows[0][o], min(horizon, windows[1][o])))
        s = md.new_int_var(lo, hi, f"s{o}")
        e = md.new_int_var(lo, horizon, f"e{o}")
        V.s.append(s)
        V.e.append(e)
        al = V.allowed[o]
        if len(al) == 1:
            d = al[0]
            V.x[o, d] = True
            V.intervals[d].append(md.new_interval_var(s, V.T.p[o][d], e, f"I{o}_{d}"))
            continue
        for d in al:
            x = md.new_bool_var(f"x{o}_{d}")
            V.x[o, d] = x
            V.intervals[d].append(md.new_optional_interval_var(s, V.T.p[o][d], e, x, f"I{o}_{d}"))


def _add_placement(V: CpModelVars) -> None:
    """Exactly one device per op; colocation groups on one device (pins come in through ``allowed``)."""
    md, inst = V.model, V.inst
    for o in range(inst.n):
        if len(V.allowed[o]) > 1:
            md.add_exactly_one([V.x[o, d] for d in V.allowed[o]])
    for members in inst.groups:
        lead = members[0]
        for o in members[1:]:
            for d in range(inst.m):
                a, b = V.lit(lead, d), V.lit(o, d)
                if a is b:
                    continue
                if isinstance(a, bool) or isinstance(b, bool):
                    const, var = (a, b) if isinstance(a, bool) else (b, a)
                    if isinstance(var, bool):
                        if var != const:
                            raise InfeasibleError(f"colocation {inst.group_names[inst.group_of[o]]!r}: fixed on two devices")
                        continue
                    md.add(var == int(const))
                else:
                    md.add(a == b)


def _add_memory(V: CpModelVars) -> None:
    """sum_o mem[o] x[o, d] <= capacity[d]."""
    inst, md = V.inst, V.model
    for d in range(inst.m):
        fixed = 0
        terms = []
        for o in range(inst.n):
            lit = V.lit(o, d)
            if lit is True:
                fixed += inst.mem[o]
            elif lit is not False and inst.mem[o] > 0:
                terms.append((inst.mem[o], lit))
        if fixed > inst.capacity[d]:
            raise InfeasibleError(f"device {inst.devices[d].name!r}: fixed ops need {fixed} bytes, it holds {inst.capacity[d]}")
        if terms and fixed + sum(w for w, _ in terms) > inst.capacity[d]:
            md.add(sum(w * x for w, x in terms) <= inst.capacity[d] - fixed)


def _add_device_no_overlap(V: CpModelVars) -> None:
    for d in range(V.inst.m):
        if len(V.intervals[d]) > 1:
            V.model.add_no_overlap(V.intervals[d])


def _add_redundant_cumulative(V: CpModelVars) -> None:
    """Redundant: when an op takes the same time on every device it may use and all devices are open
    to it, the ops form a cumulative of capacity m (energy reasoning strengthens the bound)."""
    inst, md = V.inst, V.model
    ivs = []
    for o in range(inst.n):
        al = V.allowed[o]
        if len(al) != inst.m or len({V.T.p[o][d] for d in al}) != 1:
            return
        ivs.append(md.new_interval_var(V.s[o], V.T.p[o][al[0]], V.e[o], f"C{o}"))
    if inst.m > 1 and ivs:
        md.add_cumulative(ivs, [1] * len(ivs), inst.m)


def _homogeneous(inst: Instance) -> bool:
    m = inst.m
    vals = {(inst.lat[a][b], inst.bw[a][b]) for a in range(m) for b in range(m) if a != b}
    return len(vals) <= 1


def _add_precedence(V: CpModelVars) -> None:
    """Parallel comm: s[v] >= e[u] + transfer delay when u, v are on different devices."""
    inst, md, T = V.inst, V.model, V.T
    homog = _homogeneous(inst)
    for k in range(len(inst.esrc)):
        if k % 512 == 0:
            _check_time(V.deadline)
        u, v = inst.esrc[k], inst.edst[k]
        md.add(V.s[v] >= V.e[u])
        if inst.comm != "parallel":
            continue
        pairs = [(a, b) for a in V.allowed[u] for b in V.allowed[v] if a != b and T.c[k][a][b] > 0]
        if not pairs:
            continue
        if homog:
            c = T.c[k][pairs[0][0]][pairs[0][1]]
            if len(V.allowed[u]) == 1 and len(V.allowed[v]) == 1:
                md.add(V.s[v] >= V.e[u] + c)
                continue
            z = md.new_bool_var(f"z{k}")  # u and v on different devices
            for d in V.allowed[u]:
                xu, xv = V.lit(u, d), V.lit(v, d)
                # z >= x[u,d] - x[v,d]
                enf = _enf([xu])
                if enf is None:
                    continue
                if xv is True:
                    continue
                if xv is False:
                    md.add_implication(xu, z) if enf else md.add(z == 1)
                else:
                    md.add_bool_or([z, xv] + [_neg(l) for l in enf])
            md.add(V.s[v] >= V.e[u] + c).only_enforce_if(z)
        else:
            for a, b in pairs:
                enf = _enf([V.lit(u, a), V.lit(v, b)])
                if enf is None:
                    continue
                ct = md.add(V.s[v] >= V.e[u] + T.c[k][a][b])
                if enf:
                    ct.only_enforce_if(enf)


def _neg(lit):
    return lit.Not() if hasattr(lit, "Not") else (not lit)


def _add_transfers(V: CpModelVars, horizon: int, reach: list[int], fifo_limit: int) -> None:
    """Sequential comm: one optional transfer interval per (producer, src, dst), NoOverlap per directed
    link, and FIFO in producer order (the simulator sends in the order producers finish)."""
    inst, md, T = V.inst, V.model, V.T
    links: dict[tuple[int, int], list[tuple[int, Any, Any, Any]]] = {}
    for p in range(inst.n):
        if p % 256 == 0:
            _check_time(V.deadline)
        if not inst.succ[p]:
            continue
        for d1 in V.allowed[p]:
            for d2 in range(inst.m):
                if d2 == d1:
                    continue
                cons = [k for k in inst.succ[p] if d2 in V.allowed[inst.edst[k]]]
                if not cons:
                    continue
                xp = V.lit(p, d1)
                lens = [(T.c[k][d1][d2], V.lit(inst.edst[k], d2)) for k in cons]
                maxlen = max(l for l, _ in lens)
                forced = [l for l, x in lens if x is True]
                if xp is True and forced:
                    w = True
                else:
                    w = md.new_bool_var(f"w{p}_{d1}_{d2}")
                if all(x is True for _, x in lens):
                    L = maxlen
                else:
                    L = md.new_int_var(max(forced, default=0), maxlen, f"L{p}_{d1}_{d2}")
                    for l, x in lens:
                        if x is not True and l > 0:
                            md.add(L >= l * x)
                ts = md.new_int_var(0, horizon, f"ts{p}_{d1}_{d2}")
                te = md.new_int_var(0, horizon, f"te{p}_{d1}_{d2}")
                if w is True:
                    iv = md.new_interval_var(ts, L, te, f"T{p}_{d1}_{d2}")
                else:
                    iv = md.new_optional_interval_var(ts, L, te, w, f"T{p}_{d1}_{d2}")
                    if xp is not True:
                        md.add_implication(w, xp)
                md.add(ts >= V.e[p])
                V.tr[p, d1, d2] = (ts, te)
                for k in cons:
                    v = inst.edst[k]
                    xv = V.lit(v, d2)
                    enf = _enf([xp, xv])
                    if enf is None:
                        continue
                    ct = md.add(V.s[v] >= te)
                    if enf:
                        ct.only_enforce_if(enf)
                        if w is not True:
                            md.add_bool_or([w] + [_neg(l) for l in enf])
                links.setdefault((d1, d2), []).append((p, iv, ts, te, w))
    for (d1, d2), items in links.items():
        if len(items) > 1:
            md.add_no_overlap([it[1] for it in items])
        if len(items) > fifo_limit:
            V.relaxed_fifo = True
            continue
        for i in range(len(items)):
            _check_time(V.deadline)
            p, _, tsp, tep, wp = items[i]
            for j in range(i + 1, len(items)):
                q, _, tsq, teq, wq = items[j]
                base = [wp, wq]
                if reach[p] >> q & 1:
                    _enforced(md, _le(tep, tsq), base)
                elif reach[q] >> p & 1:
                    _enforced(md, _le(teq, tsp), base)
                else:
                    b = _order_lit(V, p, q, d1)
                    if b is None:
                        continue
                    _enforced(md, _le(tep, tsq), base + [b])
                    _enforced(md, _le(teq, tsp), base + [_neg(b)])


def _le(a, b):
    return a <= b


def _enforced(md, expr, lits) -> None:
    enf = _enf(lits)
    if enf is None:
        return
    ct = md.add(expr)
    if enf:
        ct.only_enforce_if(enf)


def _order_lit(V: CpModelVars, p: int, q: int, d: int):
    """b[p, q] (p runs before q when both are on the same device), created once per pair."""
    key = (min(p, q), max(p, q))
    b = V.order_lits.get(key)
    if b is None:
        md = V.model
        a, c = key
        b = md.new_bool_var(f"b{a}_{c}")
        V.order_lits[key] = b
        for dd in range(V.inst.m):
            base = [V.lit(a, dd), V.lit(c, dd)]
            _enforced(md, V.e[a] <= V.s[c], base + [b])
            _enforced(md, V.e[c] <= V.s[a], base + [_neg(b)])
    return b if key == (p, q) else _neg(b)


def _add_symmetry(V: CpModelVars) -> None:
    """Identical devices: device d > 0 is used only after device d - 1 got an earlier op (topo order).

    ``u[i, d]`` = some op among the first i + 1 in topological order is on device d (prefix OR), so the
    rule is x[o_i, d] => u[i - 1, d - 1]: O(n·m) variables and clauses instead of O(n²·m) terms."""
    inst, md = V.inst, V.model
    topo = inst.topo
    prev: list[Any] | None = None
    for i, o in enumerate(topo):
        if i % 512 == 0:
            _check_time(V.deadline)
        for d in range(1, inst.m):
            if d > i:
                md.add(V.x[o, d] == 0)
            else:
                md.add_implication(V.x[o, d], prev[d - 1])
        cur = []
        for d in range(inst.m):
            u = md.new_bool_var(f"u{i}_{d}")
            lits = [V.x[o, d]] + ([prev[d]] if prev is not None else [])
            for lit in lits:
                md.add_implication(lit, u)
            md.add_bool_or([u.Not()] + lits)
            cur.append(u)
        prev = cur
    md.add(V.x[topo[0], 0] == 1)


def build_model(inst: Instance, T: Ticks, *, horizon: int, lb_ticks: int = 0,
                fixed: dict[int, int] | None = None, symmetry: bool = False,
                reach: list[int] | None = None, fifo_limit: int = 400,
                prec: Sequence[tuple[int, int]] = (), hint_only: bool = False,
                windows: tuple[list[int], list[int]] | None = None, deadline: float | None = None) -> CpModelVars:
    """The CP-SAT model of ``inst`` in ticks; ``fixed`` maps ops to a device they must use; ``prec`` adds
    e[a] <= s[b] for each pair (used to keep the order of fixed ops in large-neighbourhood search).
    ``hint_only``: the same variables without the device NoOverlap/cumulative constraints, for
    :func:`complete_hint` (a full device order makes them redundant, and their propagation over large
    horizons can be slow). ``deadline`` (a ``time.perf_counter()`` value): :class:`OutOfTime` when the
    model is not built by then."""
    build_args = dict(horizon=horizon, lb_ticks=lb_ticks, fixed=fixed, symmetry=symmetry, reach=reach,
                      fifo_limit=fifo_limit, prec=prec, windows=windows)
    allowed = []
    for o in range(inst.n):
        if fixed and o in fixed:
            allowed.append([fixed[o]])
        else:
            allowed.append(inst.allowed_devices(o))
    V = CpModelVars(inst=inst, T=T, model=cp.CpModel(), allowed=allowed, deadline=deadline)
    _add_ops(V, horizon, windows)
    _add_placement(V)
    _add_memory(V)
    V.build_args = build_args
    if not hint_only:
        _add_device_no_overlap(V)
        _add_redundant_cumulative(V)
    _add_precedence(V)
    if inst.comm == "sequential":
        _add_transfers(V, horizon, reach if reach is not None else reachability(inst), fifo_limit)
    if symmetry and inst.m > 1 and inst.has_identical_devices and not fixed and all(
            len(a) == inst.m for a in allowed):
        _add_symmetry(V)
        V.symmetric = True
    else:
        V.symmetric = False
    md = V.model
    for a, b in prec:
        md.add(V.e[a] <= V.s[b])
    V.mk = md.new_int_var(min(lb_ticks, horizon), horizon, "makespan")
    if inst.n:
        md.add_max_equality(V.mk, V.e)
    md.minimize(V.mk)
    return V


def time_windows(inst: Instance, T: Ticks, horizon: int, fixed: dict[int, int] | None = None,
                 prec: Sequence[tuple[int, int]] = ()) -> tuple[list[int], list[int]]:
    """Start windows valid for every schedule of makespan <= ``horizon`` (ticks): head = longest path
    to o, tail = longest path from o (its own time included), with the smallest durations, transfer
    delays only where both ends are fixed on different devices, and the extra arcs ``prec``. Tight
    domains spare CP-SAT long propagation chains on large graphs."""
    fixed = fixed or {}
    n = inst.n
    allowed = [[fixed[o]] if o in fixed else inst.allowed_devices(o) for o in range(n)]
    pmin = [min(T.p[o][d] for d in allowed[o]) for o in range(n)]
    arcs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    indeg = [0] * n
    for k in range(len(inst.esrc)):
        u, v = inst.esrc[k], inst.edst[k]
        if set(allowed[u]) & set(allowed[v]):
            c = 0
        else:
            c = min(T.c[k][a][b] for a in allowed[u] for b in allowed[v])
        arcs[u].append((v, c))
        indeg[v] += 1
    for a, b in prec:
        arcs[a].append((b, 0))
        indeg[b] += 1
    order = [o for o in range(n) if indeg[o] == 0]
    for o in order:
        for v, _ in arcs[o]:
            indeg[v] -= 1
            if indeg[v] == 0:
                order.append(v)
    if len(order) < n:
        raise InvalidInstanceError("time_windows: the extra precedences make a cycle")
    head = [0] * n
    for o in order:
        for v, c in arcs[o]:
            t = head[o] + pmin[o] + c
            if t > head[v]:
                head[v] = t
    tail = list(pmin)
    for o in reversed(order):
        for v, c in arcs[o]:
            t = pmin[o] + c + tail[v]
            if t > tail[o]:
                tail[o] = t
    return head, [horizon - tail[o] for o in range(n)]


def energetic_bound(inst: Instance, T: Ticks, lo: int, hi: int, max_ops: int = 200) -> int:
    """Smallest makespan L in [lo, hi] (ticks) that passes energetic reasoning (Lopez & Erschler; Baptiste,
    Le Pape & Nuijten, "Constraint-Based Scheduling", ch. 3): every op o runs p_o (its smallest time) inside
    [head_o, L - tail_o] (longest paths without transfers); for every interval [a, b] the work that must
    fall inside it, sum_o min(p_o, b - a, head_o + p_o - a, b - L + tail_o + p_o)^+, is at most m (b - a).
    A relaxation (one op per device at a time; memory, pins and transfers ignored), so L is a lower bound;
    ``lo`` when the graph has more than ``max_ops`` ops (cost O(n^3))."""
    import numpy as np

    n, m = inst.n, inst.m
    if n == 0 or n > max_ops or hi <= lo:
        return lo
    p = np.array([min(row) for row in T.p], dtype=np.int64)
    head = np.zeros(n, dtype=np.int64)
    for o in inst.topo:
        for k in inst.succ[o]:
            v = inst.edst[k]
            head[v] = max(head[v], head[o] + p[o])
    tail = np.zeros(n, dtype=np.int64)
    for o in reversed(inst.topo):
        for k in inst.succ[o]:
            v = inst.edst[k]
            tail[o] = max(tail[o], p[v] + tail[v])

    def passes(L: int) -> bool:
        d = L - tail
        if np.any(head + p > d):
            return False
        pts = np.unique(np.concatenate([head, head + p, d - p, d]))
        pts = pts[(pts >= 0) & (pts <= L)]
        a, b = pts[:, None], pts[None, :]
        width = b - a
        energy = np.zeros(width.shape, dtype=np.int64)
        for o in range(n):
            c = np.minimum(np.minimum(p[o], width), np.minimum(head[o] + p[o] - a, b - (d[o] - p[o])))
            energy += np.maximum(c, 0)
        return not np.any((width > 0) & (energy > m * width))

    if passes(lo):
        return lo
    bad, good = lo, hi  # invariant: bad fails, good passes (hi is a feasible makespan, so it passes)
    while good - bad > 1:
        mid = (bad + good) // 2
        if passes(mid):
            good = mid
        else:
            bad = mid
    return good


def will_break_symmetry(inst: Instance, symmetry: bool, fixed: dict[int, int] | None = None) -> bool:
    return bool(symmetry and inst.m > 1 and inst.has_identical_devices and not fixed)


def horizon_ticks(inst: Instance, T: Ticks) -> int:
    """Trivial upper bound: everything one after the other with every transfer paid."""
    tot = sum(max(row) for row in T.p)
    tot += sum(max((v for row in M for v in row), default=0) for M in T.c)
    return max(1, int(tot))


# ---------------------------------------------------------------------------------------- hints
def relabel_symmetric(inst: Instance, placement: Sequence[int], order: Sequence[Sequence[int]]):
    """Rename identical devices so they are used in order of their first op in ``inst.topo``."""
    new_of: dict[int, int] = {}
    for o in inst.topo:
        d = placement[o]
        if d not in new_of:
            new_of[d] = len(new_of)
    for d in range(inst.m):
        if d not in new_of:
            new_of[d] = len(new_of)
    pl = [new_of[d] for d in placement]
    od: list[list[int]] = [[] for _ in range(inst.m)]
    for d, ops in enumerate(order):
        od[new_of[d]] = list(ops)
    return pl, od


def complete_hint(V: CpModelVars, placement: Sequence[int], order: Sequence[Sequence[int]],
                  time_limit_s: float = 10.0) -> list[int] | None:
    """Values of every variable of ``V.model`` for the schedule of ``placement``/``order`` (the earliest
    one in ticks), found by solving a clone of the model with placement and order fixed; None if the
    schedule does not fit the model (memory). The variables are those of ``V.model`` (same indices)."""
    H = build_model(V.inst, V.T, hint_only=True, deadline=V.deadline, **V.build_args)
    md = H.model
    if len(md.proto.variables) != len(V.model.proto.variables):  # pragma: no cover — a build is deterministic
        raise SolverError("complete_hint: the hint model does not match the model")
    for (o, d), x in V.x.items():
        if x is True:
            if placement[o] != d:
                return None
            continue
        md.add(md.get_bool_var_from_proto_index(x.index) == int(placement[o] == d))
    for ops in order:
        for a, b in zip(ops, ops[1:]):
            md.add(md.get_int_var_from_proto_index(V.e[a].index) <= md.get_int_var_from_proto_index(V.s[b].index))
    pos = {}
    for ops in order:
        for i, o in enumerate(ops):
            pos[o] = i
    for (a, c), b in V.order_lits.items():
        if placement[a] == placement[c]:
            md.add(md.get_bool_var_from_proto_index(b.index) == int(pos[a] < pos[c]))
    sched = tick_schedule(V.inst, V.T, placement, order)
    if sched is not None:  # the earliest tick schedule, from the simulator: fix starts and transfers
        for o in range(V.inst.n):
            md.add(md.get_int_var_from_proto_index(V.s[o].index) == int(round(sched.start[o])))
        for (p, a, b, st, en, _) in sched.transfers:
            if (p, a, b) in V.tr:
                ts, te = V.tr[p, a, b]
                md.add(md.get_int_var_from_proto_index(ts.index) == int(round(st)))
                md.add(md.get_int_var_from_proto_index(te.index) == int(round(en)))
    # With placement and orders fixed every constraint left is a precedence, so taking each variable's
    # smallest value (booleans first, then starts in topological order, then the rest) gives the earliest
    # schedule at once: a fixed search without presolve, stopped at its first solution.
    md.clear_objective()
    nv = len(md.proto.variables)
    is_bool = [list(md.proto.variables[i].domain) == [0, 1] for i in range(nv)]
    starts = {V.s[o].index for o in range(V.inst.n)}
    get = md.get_int_var_from_proto_index
    md.add_decision_strategy([get(i) for i in range(nv) if is_bool[i]], cp.CHOOSE_FIRST, cp.SELECT_MIN_VALUE)
    md.add_decision_strategy([get(V.s[o].index) for o in V.inst.topo], cp.CHOOSE_FIRST, cp.SELECT_MIN_VALUE)
    md.add_decision_strategy([get(i) for i in range(nv) if not is_bool[i] and i not in starts], cp.CHOOSE_FIRST,
                             cp.SELECT_MIN_VALUE)
    sv = cp.CpSolver()
    prm = sv.parameters
    prm.num_workers = 1
    if V.deadline is not None:
        time_limit_s = min(time_limit_s, V.deadline - time.perf_counter())
        _check_time(V.deadline)
    prm.max_time_in_seconds = max(0.01, time_limit_s)
    prm.search_branching = cp.FIXED_SEARCH
    prm.cp_model_presolve = False
    prm.stop_after_first_solution = True
    st, _ = run_search(sv, md)
    if st not in (cp.OPTIMAL, cp.FEASIBLE):
        return None
    return [sv.value(get(i)) for i in range(nv)]


def tick_schedule(inst: Instance, T: Ticks, placement: Sequence[int], order: Sequence[Sequence[int]]):
    """:func:`dplace.simulate` of ``placement``/``order`` on the model's tick data (durations p, transfer
    times c as bytes over a link of latency 0 and bandwidth 1); None when links differ per device pair
    (then a transfer time is not bytes over one link) or the order is not valid."""
    from dplace.model import MAX_MEMORY, Device, Edge, Link, Op
    from dplace.simulate import simulate

    if not _homogeneous(inst):
        return None
    names = [d.name for d in inst.devices]
    a, b = (0, 1) if inst.m > 1 else (0, 0)
    try:
        ti = Instance(
            inst.name, [Device(nm, MAX_MEMORY, 1.0) for nm in names],
            [Op(op.id, {names[d]: float(T.p[o][d]) for d in range(inst.m)}, 0) for o, op in enumerate(inst.ops)],
            [Edge(inst.ops[inst.esrc[k]].id, inst.ops[inst.edst[k]].id, float(T.c[k][a][b]) if inst.m > 1 else 0.0)
             for k in range(len(inst.esrc))],
            link=Link(0.0, 1.0), comm=inst.comm)
        return simulate(ti, list(placement), [list(x) for x in order])
    except InvalidInstanceError:
        return None


class OutOfTime(SolverError):
    """The time budget ran out before the search could start (raised while building a model)."""


def _check_time(deadline: float | None) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise OutOfTime("the time limit was reached while building the model")


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while the heuristics ran: ``best`` is (name, Result) of the best one so far, or None."""

    def __init__(self, best: tuple[str, Result] | None) -> None:
        super().__init__()
        self.best = best


def best_heuristic(inst: Instance, which: str = "best", *, time_limit_s: float | None = None, seed: int = 0,
                   exclude: Sequence[str] = (), deadline: float | None = None) -> tuple[str, Result] | None:
    """Run ``heft`` (which="heft") or every registered heuristic and return the best by simulated
    makespan among those that keep memory on the same Instance (else the best of all).

    ``deadline`` (a ``time.perf_counter()`` value): no heuristic is started after it (the first always
    runs). Ctrl-C raises :class:`Interrupted` carrying the best answer so far."""
    from dplace.registry import method_info, methods

    names = ["heft"] if which == "heft" else [
        nm for nm in methods() if method_info(nm).kind in ("heuristic", "baseline") and nm not in _SKIP_HINT
        and nm not in exclude]
    if "heft" in names:  # the fast all-rounder first: the answer kept when the budget ends early
        names.remove("heft")
        names.insert(0, "heft")
    best = None
    try:
        for nm in names:
            if best is not None and deadline is not None and time.perf_counter() > deadline:
                break
            try:
                res = method_info(nm).func(inst, time_limit_s=time_limit_s, seed=seed)
            except Exception:  # noqa: BLE001 — a failing heuristic only loses its vote as a hint
                continue
            if res.instance is not inst or res.placement is None or res.makespan is None:
                continue
            key = (not res.memory_ok, res.makespan)
            if best is None or key < best[0]:
                best = (key, nm, res)
    except KeyboardInterrupt:
        raise Interrupted(None if best is None else (best[1], best[2])) from None
    return None if best is None else (best[1], best[2])


# ---------------------------------------------------------------------------------------- solve
class _Progress(cp.CpSolverSolutionCallback):
    def __init__(self, V: CpModelVars, show: bool, label: str) -> None:
        super().__init__()
        self.V, self.show, self.label = V, show, label
        self.t0 = time.perf_counter()
        self.n = 0

    def on_solution_callback(self) -> None:
        self.n += 1
        if self.show:
            tk = self.V.T.tick
            print(f"{self.label}: solution {self.n}: incumbent {self.objective_value * tk:.6g} µs, "
                  f"bound {self.best_objective_bound * tk:.6g} µs, {time.perf_counter() - self.t0:.2f} s",
                  file=sys.stderr, flush=True)


def run_search(sv: cp.CpSolver, model: cp.CpModel, cb: Any = None) -> tuple[int, bool]:
    """``sv.solve(model, cb)`` with Ctrl-C stopping the search: (status, interrupted).

    The search runs in a worker thread while this (main) thread waits; a KeyboardInterrupt here calls
    ``stop_search`` and the solver returns its best solution so far. Under the CLI's two-stage Ctrl-C
    (:mod:`dplace.interrupt`) the stop comes through its callback instead; both count as interrupted. CP-SAT's own SIGINT handler is
    turned off (``catch_sigint_signal``): with a Python solution callback it could abort the process
    (``std::bad_function_call``)."""
    import threading

    sv.parameters.catch_sigint_signal = False
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["st"] = sv.solve(model, cb) if cb is not None else sv.solve(model)
        except BaseException as exc:  # noqa: BLE001 — handed to the caller below
            box["exc"] = exc
        finally:
            done.set()

    th = threading.Thread(target=work, name="cpsat-search", daemon=True)
    interrupted = False
    th.start()
    # wait on an Event, not Thread.join(timeout): an interrupted join can mark a running thread as stopped
    while not done.is_set():
        try:
            done.wait(0.05)
        except KeyboardInterrupt:
            interrupted = True
            sv.stop_search()
    th.join()
    if "exc" in box:
        raise box["exc"]
    return box["st"], interrupted or interrupt.requested()


@dataclass
class SolveOutcome:
    status: int
    status_name: str
    placement: list[int] | None
    order: list[list[int]] | None
    objective_ticks: float | None
    bound_ticks: float | None
    wall_s: float
    interrupted: bool = False
    presolve: bool = True  # False: found by a search without presolve


def _params(sv: cp.CpSolver, time_limit_s: float, workers: int, seed: int, log: bool = False) -> None:
    prm = sv.parameters
    prm.max_time_in_seconds = max(0.01, float(time_limit_s))
    prm.num_workers = int(workers)
    prm.random_seed = int(seed)
    prm.log_search_progress = bool(log)
    prm.relative_gap_limit = 0.0
    prm.absolute_gap_limit = 0.0


def solve_model(V: CpModelVars, *, time_limit_s: float, workers: int, seed: int, progress: bool = False,
                log: bool = False, label: str = "cpsat", presolve: bool = True) -> SolveOutcome:
    """Solve ``V.model``. Its bound and status are the solver's claims: :func:`finish` confirms them."""
    sv = cp.CpSolver()
    _params(sv, time_limit_s, workers, seed, log)
    sv.parameters.cp_model_presolve = presolve
    cb = _Progress(V, progress, label)
    t0 = time.perf_counter()
    st, stopped = run_search(sv, V.model, cb)
    wall = time.perf_counter() - t0
    name = sv.status_name(st) + (" (interrupted)" if stopped else "")
    if st in (cp.OPTIMAL, cp.FEASIBLE):
        pl, order, _ = V.extract(sv.value)
        obj, bound = sv.objective_value, sv.best_objective_bound
    else:
        pl = order = obj = None
        bound = sv.best_objective_bound if st != cp.INFEASIBLE else math.inf
    return SolveOutcome(st, name, pl, order, obj, bound, wall, stopped, presolve)


def confirm_bound(V: CpModelVars, claim_ticks: float, *, time_limit_s: float, workers: int, seed: int,
                  ) -> tuple[float | None, SolveOutcome | None]:
    """Independent check of a CP-SAT bound (or infeasibility, ``claim_ticks = inf``): is there a solution
    of makespan below ``claim_ticks``? Asked of a search *without presolve* (CP-SAT's presolve is where
    its wrong OPTIMAL/INFEASIBLE answers came from). Returns (the bound this search proves, in ticks, or
    None when it proves nothing; its outcome, whose solution — if any — beats the claim)."""
    md = V.model.clone()
    md.clear_hints()
    mk = md.get_int_var_from_proto_index(V.mk.index)
    if math.isfinite(claim_ticks):
        md.add(mk <= int(math.ceil(claim_ticks - 1e-9)) - 1)
    W = CpModelVars(V.inst, V.T, md, V.allowed, x=V.x, s=V.s, e=V.e, mk=V.mk, order_lits=V.order_lits,
                    relaxed_fifo=V.relaxed_fifo, tr=V.tr, symmetric=V.symmetric)
    sv = cp.CpSolver()
    _params(sv, time_limit_s, workers, seed)
    sv.parameters.cp_model_presolve = False
    t0 = time.perf_counter()
    st, stopped = run_search(sv, md)
    wall = time.perf_counter() - t0
    if stopped:  # cut short: it proves nothing (a solution it found still counts)
        claim_ticks = -math.inf
    if st == cp.INFEASIBLE and not stopped:
        return claim_ticks, None
    if st in (cp.OPTIMAL, cp.FEASIBLE):
        pl, order, _ = W.extract(sv.value)
        out = SolveOutcome(st, sv.status_name(st) + " (presolve off)", pl, order, sv.objective_value,
                           sv.best_objective_bound, wall, False, False)
        return (None if stopped else min(claim_ticks, sv.best_objective_bound)), out
    b = sv.best_objective_bound
    return (min(claim_ticks, b) if math.isfinite(b) and not stopped else None), None


@register("cpsat", options=CpsatOptions, kind="exact",
          summary="CP-SAT: optional intervals per (op, device), NoOverlap, transfers, memory; proven gap.")
def cpsat(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, **options) -> Result:
    """Exact CP-SAT model (OR-Tools scheduling guide; Pesto/Moirai placement constraints), hinted by the
    best heuristic; see the module docstring for the model and the bound. Everything (heuristics, model
    building, hint completion, search, confirmation) counts against the time limit; when it runs out
    before the search, or on Ctrl-C, the best answer so far is returned (``interrupted`` on Ctrl-C)."""
    opts = CpsatOptions(**options)
    return run_guarded(inst, "cpsat", opts, time_limit_s, seed,
                       lambda base, hint, t0, deadline: _cpsat_search(inst, opts, seed, base, hint, t0, deadline))


def run_guarded(inst: Instance, method: str, opts: Any, time_limit_s: float | None, seed: int, search: Any) -> Result:
    """The frame of an exact method: dplace's own bound, the best heuristic (as hint and fallback,
    within a fifth of the limit), then ``search(base, hint, t_start, deadline)``. When the budget runs
    out before the solver starts (:class:`OutOfTime`), or on Ctrl-C, the best answer so far comes back
    labelled (:func:`fallback`; ``interrupted`` on Ctrl-C)."""
    t_start = time.perf_counter()
    limit = opts.default_time_limit_s if time_limit_s is None else float(time_limit_s)
    deadline = t_start + limit
    base = claims.base_bound(inst)
    hint: tuple[str, Result] | None = None
    try:
        if opts.hint != "none":
            hint = best_heuristic(inst, opts.hint, time_limit_s=max(0.2, 0.05 * limit), seed=seed,
                                  deadline=t_start + 0.2 * limit)
        return search(base, hint, t_start, deadline)
    except Interrupted as exc:
        return fallback(inst, method, exc.best or hint, base, opts, interrupted=True,
                        why="interrupted (Ctrl-C) before the search")
    except KeyboardInterrupt:
        return fallback(inst, method, hint, base, opts, interrupted=True, why="interrupted (Ctrl-C)")
    except OutOfTime:
        return fallback(inst, method, hint, base, opts, why=f"the time limit ({limit:g} s) ran out before the search")


def fallback(inst: Instance, method: str, hint: tuple[str, Result] | None, base: claims.Bound, opts: Any, *,
             why: str, interrupted: bool = False) -> Result:
    """The heuristic answer, labelled (status ``heuristic``, ``extra["returned"] = "hint"``), when the
    exact search did not run; re-raises KeyboardInterrupt when there is nothing to return."""
    if hint is None:
        if interrupted:
            raise KeyboardInterrupt
        res = no_solution(inst, method, "no_solution", f"{method}: {why}; no heuristic answer", options=_asdict(opts))
        return claims.settle(res, [base])
    nm, h = hint
    order = h.order if h.order is not None else h.schedule.order
    res = make_result(inst, method, h.placement, order, status="heuristic", options=_asdict(opts),
                      extra={"returned": "hint", "hint_method": nm, "stopped": why})
    res.message = f"{method}: {why}; returned heuristic {nm!r}'s answer"
    res.interrupted = interrupted
    return claims.settle(res, [base])


def _cpsat_search(inst: Instance, opts: CpsatOptions, seed: int, base: claims.Bound,
                  hint: tuple[str, Result] | None, t_start: float, deadline: float) -> Result:
    limit = deadline - t_start
    horizon_us = hint[1].makespan if hint else None
    T = Ticks(inst, opts.tick, horizon_us)
    lb_ticks = int(math.ceil(base.value / T.tick - 1e-9))
    extra: dict[str, Any] = {"tick_us": T.tick, "ticks_exact": T.exact}
    own = [base]
    start = None
    if hint is not None:
        hres = hint[1]
        start = (hres.placement, hres.order if hres.order is not None else hres.schedule.order)
    if start is not None and memory_fits(inst, start[0]):
        sch = tick_schedule(inst, T, *start)
        if sch is not None:
            eb = energetic_bound(inst, T, lb_ticks, int(round(sch.makespan)))
            extra["energetic_bound_ticks"] = eb
            if eb > lb_ticks:
                lb_ticks = eb
                own.append(claims.Bound(T.real_bound(eb), "energetic"))
    _check_time(deadline)
    V, hint_vals = hinted_model(inst, T, start, lb_ticks=lb_ticks, symmetry=opts.symmetry,
                                hint_time_s=max(0.05, min(0.1 * limit, deadline - time.perf_counter())),
                                deadline=deadline)
    if hint is not None:
        extra.update(hint_method=hint[0], hint_makespan=hint[1].makespan, hint_used=hint_vals is not None)
    left = deadline - time.perf_counter()
    if left < 0.02:
        raise OutOfTime("no time left for the search")
    workers = opts.workers or os.cpu_count() or 1
    # the search gets most of what is left; the rest confirms its bound (presolve off) and cleans up
    out = solve_model(V, time_limit_s=max(0.01, 0.8 * left), workers=workers, seed=seed, progress=opts.progress,
                      log=opts.log)
    return finish(inst, "cpsat", V, out, own, hint[1] if hint else None, opts, extra, deadline=deadline,
                  workers=workers, seed=seed)


def hinted_model(inst: Instance, T: Ticks, start: tuple[Sequence[int], Sequence[Sequence[int]]] | None, *,
                 lb_ticks: int = 0, symmetry: bool = False, fixed: dict[int, int] | None = None,
                 prec: Sequence[tuple[int, int]] = (), reach: list[int] | None = None,
                 hint_time_s: float = 10.0, windows: bool = False,
                 deadline: float | None = None) -> tuple[CpModelVars, list[int] | None]:
    """The model with a complete hint from ``start`` = (placement, order), if it fits the model.

    With a hint, the horizon is the hint's makespan in ticks (simulated on the tick data) and, with
    ``windows=True``, every start gets a time window (:func:`time_windows`); without a hint, or if it
    does not fit (memory), the horizon is the trivial serial one. Windows are off by default: with them
    OR-Tools 9.14/9.15 answered INFEASIBLE (and, without presolve, a wrong OPTIMAL) on a 7-op instance
    whose optimum satisfies every constraint of the windowed model (tests/test_cpsat.py keeps that
    instance); they are used only where no optimality or bound is claimed (refine's neighbourhoods)."""
    sym = will_break_symmetry(inst, symmetry, fixed)
    pl = od = None
    if start is not None:
        pl, od = start
        if sym:
            pl, od = relabel_symmetric(inst, pl, od)
    sched = tick_schedule(inst, T, pl, od) if pl is not None else None
    if sched is not None and memory_fits(inst, pl):
        U = int(round(sched.makespan))
        V = build_model(inst, T, horizon=U, lb_ticks=lb_ticks, symmetry=symmetry, fixed=fixed, prec=prec,
                        reach=reach, windows=time_windows(inst, T, U, fixed, prec) if windows else None,
                        deadline=deadline)
        vals = complete_hint(V, pl, od, time_limit_s=hint_time_s)
        if vals is not None:
            _add_hint(V, vals)
            return V, vals
    V = build_model(inst, T, horizon=horizon_ticks(inst, T), lb_ticks=lb_ticks, symmetry=symmetry, fixed=fixed,
                    prec=prec, reach=reach, deadline=deadline)
    vals = complete_hint(V, pl, od, time_limit_s=hint_time_s) if pl is not None else None
    if vals is not None:
        V.model.add(V.mk <= vals[V.mk.index])  # horizon from the hint
        _add_hint(V, vals)
    return V, vals


def _add_hint(V: CpModelVars, vals: Sequence[int]) -> None:
    get = V.model.get_int_var_from_proto_index
    for i, val in enumerate(vals):
        V.model.add_hint(get(i), val)


def memory_fits(inst: Instance, placement: Sequence[int]) -> bool:
    used = [0] * inst.m
    for o, d in enumerate(placement):
        used[d] += inst.mem[o]
    return all(used[d] <= inst.capacity[d] for d in range(inst.m))




def finish(inst: Instance, method: str, V: CpModelVars, out: SolveOutcome, lb: float | Sequence[claims.Bound],
           hint_res: Result | None, opts: Any, extra: dict[str, Any], *, deadline: float | None = None,
           workers: int = 1, seed: int = 0) -> Result:
    """Simulate the solver's answer, keep the hint if it is better, and make the claims through
    :mod:`dplace.claims`: CP-SAT's bound (or INFEASIBLE) counts only as far as a search without presolve
    confirms it (:func:`confirm_bound`, in the time left before ``deadline``; by default a short check).
    ``lb``: proven bounds of dplace's own (a number is taken as ``dplace.lower_bound``)."""
    T = V.T
    extra = dict(extra)
    own = [claims.Bound(lb, "lower_bound")] if isinstance(lb, (int, float)) else list(lb)
    own_ticks = max(math.ceil(b.value / T.tick - 1e-9) for b in own) if own else 0
    notes: list[str] = []
    if deadline is None:
        deadline = time.perf_counter() + max(0.2, min(2.0, out.wall_s))
    extra.update(solver_status=out.status_name, solve_wall_s=round(out.wall_s, 4))
    outs = [out]
    certified: claims.Bound | None = None
    infeasible_confirmed = False
    claim = out.bound_ticks
    if out.interrupted:
        notes.append("search interrupted: its bound is not confirmed and not used")
    elif claim is not None and (claim == math.inf or claim > own_ticks):
        left = deadline - time.perf_counter() - _cleanup_s(inst)
        t0 = time.perf_counter()
        got, better = (None, None) if left < 0.02 else confirm_bound(V, claim, time_limit_s=left, workers=workers,
                                                                      seed=seed)
        extra["confirm_wall_s"] = round(time.perf_counter() - t0, 4)
        if better is not None:
            outs.append(better)
            notes.append(f"a search without presolve found makespan {T.to_us(better.objective_ticks):.9g} below "
                         f"what CP-SAT claimed possible ({T.to_us(claim):.9g}): CP-SAT's presolve was wrong here")
        if claim == math.inf:
            infeasible_confirmed = got == math.inf
        if got != math.inf:
            certified, cn = claims.confirm(claims.Bound(T.real_bound(claim), method),
                                           [("a search without presolve", None if got is None else T.real_bound(got))])
            notes += cn
        else:
            certified = claims.Bound(T.real_bound(claim), f"{method}, confirmed by a search without presolve")
    elif claim is not None and math.isfinite(claim):
        certified = claims.Bound(T.real_bound(claim), method)  # no stronger than dplace's own bounds
    extra["bound_ticks"] = out.bound_ticks
    ex = None
    if not (out.interrupted or interrupt.requested()) and (certified is not None and certified.value > max(b.value for b in own)
                                or claim == math.inf):
        ex = claims.exhaustive(inst, deadline - time.perf_counter() - _cleanup_s(inst))
    if ex is not None:  # small graph: brute force is the last word on the claim
        if ex.optimum is None:
            infeasible_confirmed = infeasible_confirmed or claim == math.inf
        else:
            if ex.placement is not None and (claim == math.inf or ex.optimum < T.to_us(min(
                    o.objective_ticks for o in outs if o.objective_ticks is not None) if any(
                    o.objective_ticks is not None for o in outs) else math.inf)):
                outs.append(SolveOutcome(cp.FEASIBLE, "brute force", ex.placement, ex.order, ex.optimum / T.tick,
                                         None, 0.0, False, False))
            prev = certified if certified is not None and math.isfinite(certified.value) else claims.Bound(
                ex.optimum, method)
            certified, cn = claims.confirm(prev, [("brute force", ex.optimum)])
            notes += cn
    if out.status == cp.INFEASIBLE and len(outs) == 1:
        return claims.no_placement(inst, method, f"{method}: no placement keeps pins, colocation and memory",
                                   solver_says_infeasible=True, confirmed=infeasible_confirmed, heuristic=hint_res,
                                   bound=max(own, key=lambda b: b.value) if own else None,
                                   options=_asdict(opts), extra=dict(extra, claim_notes=notes))
    cand = []
    for o in outs:
        if o.placement is not None:
            cand.append(make_result(inst, method, o.placement, o.order, status="feasible", options=_asdict(opts),
                                    claimed_makespan=T.to_us(o.objective_ticks), extra=dict(extra)))
    if hint_res is not None and hint_res.memory_ok:
        order = hint_res.order if hint_res.order is not None else hint_res.schedule.order
        cand.append(make_result(inst, method, hint_res.placement, order, status="feasible", options=_asdict(opts),
                                claimed_makespan=hint_res.makespan, extra=dict(extra, returned="hint")))
    if not cand:
        res = no_solution(inst, method, "no_solution", f"{method}: no solution within the time limit "
                          f"({out.status_name})", options=_asdict(opts), extra=extra)
        res.interrupted = out.interrupted
        return claims.settle(res, own + [certified], notes=notes)
    best = min(cand, key=lambda r: (not r.memory_ok, r.makespan))
    best.interrupted = out.interrupted or interrupt.requested()
    return claims.settle(best, own + [certified], notes=notes)


def _cleanup_s(inst: Instance) -> float:
    """Time kept for reading the answer back and simulating it (grows with the graph)."""
    return 0.01 + 2e-5 * (inst.n + len(inst.esrc))


def _asdict(opts: Any) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(opts)
