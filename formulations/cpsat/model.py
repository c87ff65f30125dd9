"""The CP-SAT model of placement and scheduling, one function per constraint family.

Sources: OR-Tools scheduling guide (optional intervals + NoOverlap per machine); Pesto (Hafeez et al.,
Middleware'21, §4: placement binaries, transfers as extra work on links) and its K-device, memory-limited
generalisation (Moirai) for the placement part.

  x[o, d]  op o runs on device d (bool);  s[o], e[o]  start / end of o (ticks)
  I[o, d]  optional interval (s[o], p[o][d] + rc[o], e[o]) present iff x[o, d]  -> _add_ops
  rc[o] = r * (receives o pays): per (producer p, device d) the first consumer of p on d (topological
          order) pays r when p is not on d (receive cost ``transfer_cpu``)        -> receives.add_receives
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

Start windows and the energetic bound on tick data are in :mod:`.windows`.

One solve of it runs through :func:`.search.run_search`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from ortools.sat.python import cp_model as cp

from dplace.budget import Budget
from dplace.errors import InfeasibleError
from dplace.instance.model import Instance

from ..decode import choice_order
from ..frame import OutOfTime, check_time, homogeneous_links, possible_sends
from .literals import _neg
from .receives import add_receives
from .ticks import Ticks

__all__ = ["CpModelVars", "build_model", "model_cost_s", "reachability", "will_break_symmetry"]


# CPU seconds per variable + constraint of the model, building and hint completion together, and the
# model's size: about 9.9 per (op x device) and 3 per edge (fitted on generated transformers of 492 ops
# on 4 and 8 devices and BERT-12's 2,012 ops on 4: 0.8, 1.2 and 3.1 s CPU)
_BUILD_S_PER_ITEM = 36e-6


def model_cost_s(inst: Instance) -> float:
    """Estimated CPU seconds to build the CP-SAT model of ``inst`` and complete its hint (quiet machine).
    The receive cost's encoding (:func:`.receives.add_receives`) adds about 7 variables + constraints per edge and
    device (22.5k on a generated 402-op transformer on 4 devices, 791 edges, beside 10.6k without it)."""
    recv = 7.0 * inst.m * len(inst.esrc) if inst.transfer_cpu and inst.m > 1 else 0.0
    return _BUILD_S_PER_ITEM * (9.9 * inst.n * inst.m + 3.0 * len(inst.esrc) + recv)


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
    rc: list[Any] = field(default_factory=list)  # rc[o]: receive cost o pays (ticks; int var or constant)
    tr: dict[tuple[int, int, int], tuple[Any, Any]] = field(default_factory=dict)  # (p, d1, d2) -> (ts, te)
    symmetric: bool = False  # identical-device symmetry breaking is on (hints must be relabelled)
    ranks: dict[int, Any] = field(default_factory=dict)  # op -> rank among ops that take no time (ties)
    build_args: dict[str, Any] = field(default_factory=dict)  # how build_model made it (for complete_hint)
    budget: Budget | None = None  # building raises OutOfTime once it expired

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

    def tie_order(self, value, pl: list[int], order: list[list[int]]) -> list[list[int]] | None:
        """``order`` with ops of equal start and end on one device (zero-time ops at one instant) in the
        order the model's own literals chose (``order_lits``: in sequential comm they also order the
        producers' transfers on a link, which the simulator sends in device order): a topological order of
        the graph and the literals (:func:`~..decode.choice_order`), by (start, end, topological position)
        first. None when that is ``order`` itself, there are no such literals, or they form a cycle."""
        if not self.order_lits:
            return None
        st = [int(value(v)) for v in self.s]
        en = [int(value(v)) for v in self.e]
        tp = self.inst.topo_pos
        before = []
        for (a, c), b in self.order_lits.items():
            if pl[a] == pl[c] and not isinstance(b, bool):
                before.append((a, c) if value(b) else (c, a))
        out = choice_order(self.inst, pl, [(st[o], en[o], tp[o]) for o in range(self.inst.n)], before)
        return None if out is None or out == order else out


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
    """Start/end per op and one (optional) interval per allowed device; ``windows``: start bounds. An
    interval's size is the op's time there plus the receive cost it pays (:func:`.receives.add_receives`)."""
    md = V.model
    V.intervals = [[] for _ in range(V.inst.m)]
    for o in range(V.inst.n):
        if o % 512 == 0:
            check_time(V.budget)
        lo, hi = (0, horizon) if windows is None else (windows[0][o], max(windows[0][o], min(horizon, windows[1][o])))
        V.s.append(md.new_int_var(lo, hi, f"s{o}"))
        V.e.append(md.new_int_var(lo, horizon, f"e{o}"))
        al = V.allowed[o]
        if len(al) == 1:
            V.x[o, al[0]] = True
            continue
        for d in al:
            V.x[o, d] = md.new_bool_var(f"x{o}_{d}")
    add_receives(V)
    for o in range(V.inst.n):
        s, e, rc = V.s[o], V.e[o], V.rc[o]
        for d in V.allowed[o]:
            size = V.T.p[o][d] + rc
            x = V.x[o, d]
            if x is True:
                V.intervals[d].append(md.new_interval_var(s, size, e, f"I{o}_{d}"))
            else:
                V.intervals[d].append(md.new_optional_interval_var(s, size, e, x, f"I{o}_{d}"))


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
        ivs.append(md.new_interval_var(V.s[o], V.T.p[o][al[0]] + V.rc[o], V.e[o], f"C{o}"))
    if inst.m > 1 and ivs:
        md.add_cumulative(ivs, [1] * len(ivs), inst.m)


def _add_precedence(V: CpModelVars) -> None:
    """Parallel comm: s[v] >= e[u] + transfer delay when u, v are on different devices."""
    inst, md, T = V.inst, V.model, V.T
    homog = homogeneous_links(inst)
    for k in range(len(inst.esrc)):
        if k % 512 == 0:
            check_time(V.budget)
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


def _add_transfers(V: CpModelVars, horizon: int, reach: list[int], fifo_limit: int) -> None:
    """Sequential comm: one optional transfer interval per (producer, src, dst), NoOverlap per directed
    link, and FIFO in producer order (the simulator sends in the order producers finish)."""
    inst, md, T = V.inst, V.model, V.T
    links: dict[tuple[int, int], list[tuple[int, Any, Any, Any]]] = {}
    for p, d1, d2, cons in possible_sends(inst, V.allowed, V.budget):
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
            check_time(V.budget)
            p, _, tsp, tep, wp = items[i]
            for j in range(i + 1, len(items)):
                q, _, tsq, teq, wq = items[j]
                base = [wp, wq]
                if reach[p] >> q & 1:
                    _enforced(md, tep <= tsq, base)
                elif reach[q] >> p & 1:
                    _enforced(md, teq <= tsp, base)
                else:
                    b = _order_lit(V, p, q, d1)
                    if b is None:
                        continue
                    _enforced(md, tep <= tsq, base + [b])
                    _enforced(md, teq <= tsp, base + [_neg(b)])
    _add_tie_ranks(V)


def _add_tie_ranks(V: CpModelVars) -> None:
    """Ops that take no time may share an instant on one device; there the order literals ``b`` (which
    producer's tensor leaves first on a link) are tied to no time, and literals chosen on two links can
    form a cycle with each other or with the graph (p -> q, q's tensor before r's on one link, r's before
    p's on another) that no device order runs: the model was a relaxation (both exact models proved 11
    where the simulator's optimum is 12, tests/test_claims_composed.py). A rank per such op, increasing
    along the graph's edges between them and along every literal between two of them on one device,
    makes the literals one order. Only ops that take no time on some device can close such a cycle
    (every other link of it is a time ``e <= s``); a real schedule has ranks (its order of start, ties
    in device order)."""
    inst, md, T = V.inst, V.model, V.T
    zero = [any(T.p[o][d] == 0 for d in V.allowed[o]) for o in range(inst.n)]
    pairs = [(key, b) for key, b in V.order_lits.items() if zero[key[0]] and zero[key[1]] and not isinstance(b, bool)]
    if not pairs:
        return
    nz = sum(zero)
    rank = {o: md.new_int_var(0, nz - 1, f"r{o}") for o in range(inst.n) if zero[o]}
    V.ranks = rank
    for k in range(len(inst.esrc)):
        u, v = int(inst.esrc[k]), int(inst.edst[k])
        if zero[u] and zero[v] and u != v:
            md.add(rank[v] >= rank[u] + 1)
    for (a, c), b in pairs:
        check_time(V.budget)
        for dd in set(V.allowed[a]) & set(V.allowed[c]):
            base = [V.lit(a, dd), V.lit(c, dd)]
            _enforced(md, rank[c] >= rank[a] + 1, base + [b])
            _enforced(md, rank[a] >= rank[c] + 1, base + [_neg(b)])


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
            check_time(V.budget)
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
                windows: tuple[list[int], list[int]] | None = None, budget: Budget | None = None) -> CpModelVars:
    """The CP-SAT model of ``inst`` in ticks; ``fixed`` maps ops to a device they must use; ``prec`` adds
    e[a] <= s[b] for each pair (used to keep the order of fixed ops in large-neighbourhood search).
    ``hint_only``: the same variables without the device NoOverlap/cumulative constraints, for
    :func:`complete_hint` (a full device order makes them redundant, and their propagation over large
    horizons can be slow). ``budget``: :class:`OutOfTime` when the model is not built before it expires."""
    build_args = dict(horizon=horizon, lb_ticks=lb_ticks, fixed=fixed, symmetry=symmetry, reach=reach,
                      fifo_limit=fifo_limit, prec=prec, windows=windows)
    allowed = []
    for o in range(inst.n):
        if fixed and o in fixed:
            allowed.append([fixed[o]])
        else:
            allowed.append(inst.allowed_devices(o))
    V = CpModelVars(inst=inst, T=T, model=cp.CpModel(), allowed=allowed, budget=budget)
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


def will_break_symmetry(inst: Instance, symmetry: bool, fixed: dict[int, int] | None = None) -> bool:
    return bool(symmetry and inst.m > 1 and inst.has_identical_devices and not fixed)
