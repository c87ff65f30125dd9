"""An independent brute-force oracle, written from the model text (README, "The model"), and a fuzzer.

Nothing here calls :mod:`dplace.simulate` or :mod:`dplace.check`: durations, links, pins, colocation
and the topological index are re-derived from the raw ``Op``/``Device``/``Edge``/``Link`` fields, so a
test comparing the two compares two implementations of the same text.

The rules, as the README states them:

* an op of scalar ``time`` t takes ``t / speed`` on a device, or ``time[device]`` when ``time`` is a
  mapping; one op at a time per device; each device runs its list in order, each op as early as its
  device (the previous op of the list has ended) and its inputs allow;
* an input from the same device arrives when its producer ends; from another device it arrives after a
  transfer of ``latency + bytes / bandwidth`` of that directed link (a ``pairs`` entry, else the default);
* ``parallel``: every transfer of edge (u, v) is a pure delay starting when u ends;
* ``transfer_cpu`` (both modes): each tensor sent to another device (one per (producer, destination
  device)) costs that device ``transfer_cpu`` µs, added to the time of the tensor's consumer there with
  the smallest topological index;
* ``sequential``: a tensor is sent once per (producer, destination device), with the largest ``bytes``
  among the producer's edges to that device; transfers on one directed link run one at a time, each
  starting at the later of its producer's end and the end of the link's previous transfer, in the order
  the producers finish. Producers finishing at the same instant: a zero-time op started at that instant
  by another op's finish (its device predecessor or an input that arrived then) finishes after it
  ("rounds"); within the same round, smaller topological index first. The topological index is Kahn's
  order taking the smallest op index among ready ops.

:func:`time_schedule` times one (placement, order) by finalising ops in that finish order (a
Dijkstra-style sweep, not an event simulation). :func:`brute_force` enumerates every placement that keeps
pins and colocation, and for the memory-feasible ones every per-device order consistent with precedence
(as the finish-ordered sequences of ops, each (placement, order) exactly once), pruned by lower bounds
and interchangeable-device symmetry; it returns the optimum, an argmin, and counts.
:func:`fuzz_instance` draws random instances that exercise every feature of the model.
"""
from __future__ import annotations

import itertools
import math
import random
import time as _time
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

import networkx as nx

from ..budget import Budget
from ..instance.model import Device, Edge, Instance, Link, Op

__all__ = ["OracleResult", "Timing", "brute_force", "exhaustive", "time_schedule"]


# ---------------------------------------------------------------------------------------------- the text
class _Model:
    """The instance re-read from its raw fields (not from ``Instance``'s precomputed views)."""

    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        devs = list(inst.devices)
        self.m = len(devs)
        self.n = len(inst.ops)
        dname = {d.name: i for i, d in enumerate(devs)}
        oid = {op.id: i for i, op in enumerate(inst.ops)}
        self.time = []  # time[o][d] in µs
        for op in inst.ops:
            if isinstance(op.time, Mapping):
                self.time.append([float(op.time[d.name]) for d in devs])
            else:
                self.time.append([float(op.time) / float(d.speed) for d in devs])
        self.mem = [int(op.memory) for op in inst.ops]
        self.cap = [int(d.memory) for d in devs]
        self.lat = [[float(inst.link.latency)] * self.m for _ in range(self.m)]
        self.bw = [[float(inst.link.bandwidth)] * self.m for _ in range(self.m)]
        for (a, b), lk in inst.pairs.items():
            self.lat[dname[a]][dname[b]] = float(lk.latency)
            self.bw[dname[a]][dname[b]] = float(lk.bandwidth)
        self.sequential = inst.comm == "sequential"
        self.transfer_cpu = float(inst.transfer_cpu)
        self.edges = [(oid[e.src], oid[e.dst], float(e.bytes)) for e in inst.edges]
        self.preds: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]
        self.succs: list[list[tuple[int, float]]] = [[] for _ in range(self.n)]
        for u, v, b in self.edges:
            self.preds[v].append((u, b))
            self.succs[u].append((v, b))
        self.pred_ops = [sorted({u for u, _ in p}) for p in self.preds]
        g = nx.DiGraph()
        g.add_nodes_from(range(self.n))
        g.add_edges_from((u, v) for u, v, _ in self.edges)
        topo = list(nx.lexicographical_topological_sort(g))
        self.topo = [0] * self.n
        for i, o in enumerate(topo):
            self.topo[o] = i
        self.graph = g
        # pins and colocation: a unit is a colocation group (or a lone op); a pin on any member pins it
        groups: dict[str, list[int]] = {}
        units: list[list[int]] = []
        for o, op in enumerate(inst.ops):
            if op.colocation is None:
                units.append([o])
            else:
                if op.colocation not in groups:
                    groups[op.colocation] = []
                    units.append(groups[op.colocation])
                groups[op.colocation].append(o)
        self.units = units
        self.unit_allowed = []
        for u in units:
            pins = {dname[inst.ops[o].device] for o in u if inst.ops[o].device is not None}
            self.unit_allowed.append(sorted(pins) if pins else list(range(self.m)))

    def fits(self, pl: Sequence[int]) -> bool:
        """Memory is additive per device: the ops on each device fit its memory."""
        used = [0] * self.m
        for o, d in enumerate(pl):
            used[d] += self.mem[o]
        return all(used[d] <= self.cap[d] for d in range(self.m))

    def transfer(self, nbytes: float, a: int, b: int) -> float:
        return self.lat[a][b] + nbytes / self.bw[a][b]

    def interchangeable(self, a: int, b: int) -> bool:
        """Swapping devices a and b maps the instance onto itself (times, memory, links, no pins)."""
        if self.cap[a] != self.cap[b] or any(t[a] != t[b] for t in self.time):
            return False
        if any(a in al or b in al for al in self.unit_allowed if len(al) < self.m):
            return False
        sw = {a: b, b: a}
        for x in range(self.m):
            for y in range(self.m):
                if x != y:
                    sx, sy = sw.get(x, x), sw.get(y, y)
                    if self.lat[x][y] != self.lat[sx][sy] or self.bw[x][y] != self.bw[sx][sy]:
                        return False
        return True


# ------------------------------------------------------------------------------------------ the timing
class _State:
    """A partial schedule on a fixed placement: the ops finalised so far, in finish order."""

    __slots__ = ("M", "pl", "end", "start", "rnd", "dev_free", "dev_last", "link_free", "arrive",
                 "last_key", "n_done", "makespan", "seq_bytes", "recv")

    def __init__(self, M: _Model, pl: Sequence[int]) -> None:
        self.M = M
        self.pl = list(pl)
        n, m = M.n, M.m
        self.end: list[float | None] = [None] * n
        self.start = [0.0] * n
        self.rnd = [0] * n
        self.dev_free = [0.0] * m
        self.dev_last = [-1] * m
        self.link_free = [0.0] * (m * m)
        self.arrive: list[dict[int, float]] = [dict() for _ in range(n)]
        self.last_key: tuple = (-math.inf, 0, -1)
        self.n_done = 0
        self.makespan = 0.0
        # sequential: bytes sent by producer p to device d = the largest of its edges to ops there
        self.seq_bytes: list[dict[int, float]] = [dict() for _ in range(n)]
        for p in range(n):
            for v, b in M.succs[p]:
                d = self.pl[v]
                if d != self.pl[p] and b >= self.seq_bytes[p].get(d, -1.0):
                    self.seq_bytes[p][d] = b
        # transfer_cpu: each tensor received from another device costs its device transfer_cpu, paid by
        # its consumer there with the smallest topological index
        self.recv = [0.0] * n
        if M.transfer_cpu:
            for p in range(n):
                first: dict[int, int] = {}
                for v, _ in M.succs[p]:
                    d = self.pl[v]
                    if d != self.pl[p] and (d not in first or M.topo[v] < M.topo[first[d]]):
                        first[d] = v
                for v in first.values():
                    self.recv[v] += M.transfer_cpu

    def candidate(self, o: int) -> tuple[float, float, int] | None:
        """(start, end, round) of op o appended to its device now, or None if an input is not final."""
        M, pl, end = self.M, self.pl, self.end
        d = pl[o]
        ready = 0.0
        for u, b in M.preds[o]:
            eu = end[u]
            if eu is None:
                return None
            du = pl[u]
            if du == d:
                a = eu
            elif M.sequential:
                a = self.arrive[u][d]
            else:
                a = eu + M.lat[du][d] + b / M.bw[du][d]
            if a > ready:
                ready = a
        s = self.dev_free[d] if self.dev_free[d] > ready else ready
        e = s + (M.time[o][d] + self.recv[o])
        r = 0
        if e == s:  # zero-time op: finishes one round after the latest op whose finish at s it waited for
            r = 1
            dl = self.dev_last[d]
            if dl >= 0 and end[dl] == s:
                r = self.rnd[dl] + 1
            for u in M.pred_ops[o]:
                if end[u] == s and self.rnd[u] + 1 > r:
                    r = self.rnd[u] + 1
        return s, e, r

    def commit(self, o: int, s: float, e: float, r: int) -> None:
        M, pl = self.M, self.pl
        d = pl[o]
        self.start[o] = s
        self.end[o] = e
        self.rnd[o] = r
        self.dev_free[d] = e
        self.dev_last[d] = o
        self.last_key = (e, r, M.topo[o])
        self.n_done += 1
        if e > self.makespan:
            self.makespan = e
        if M.sequential:
            for d2, nb in self.seq_bytes[o].items():
                k = d * M.m + d2
                st = e if e > self.link_free[k] else self.link_free[k]
                f = st + M.lat[d][d2] + nb / M.bw[d][d2]
                self.link_free[k] = f
                self.arrive[o][d2] = f

    def snapshot(self) -> tuple:
        return (list(self.dev_free), list(self.dev_last), list(self.link_free), self.last_key, self.makespan)

    def restore(self, o: int, snap: tuple) -> None:
        self.dev_free, self.dev_last, self.link_free, self.last_key, self.makespan = (
            list(snap[0]), list(snap[1]), list(snap[2]), snap[3], snap[4])
        self.end[o] = None
        self.arrive[o] = {}
        self.n_done -= 1


@dataclass
class Timing:
    """Per-op start/end (µs) and the makespan of one (placement, order), per the model text."""

    start: list[float]
    end: list[float]
    makespan: float
    memory_ok: bool
    finish_order: list[int]


def _as_lists(inst: Instance, placement: Sequence[int], order: Any) -> list[list[int]]:
    if isinstance(order, Mapping):
        dn = {d.name: i for i, d in enumerate(inst.devices)}
        oid = {op.id: i for i, op in enumerate(inst.ops)}
        lists = [[] for _ in inst.devices]
        for k, ops in order.items():
            lists[dn[k] if isinstance(k, str) else k] = [oid[x] if isinstance(x, str) else x for x in ops]
        return lists
    return [list(x) for x in order]


def time_schedule(inst: Instance, placement: Sequence[int], order: Any) -> Timing:
    """Time ``placement`` (device index per op) with per-device ``order`` (lists of op indices).

    Raises ``ValueError`` if the order lists an op on a device it is not placed on, misses an op, or
    contradicts precedence (some device waits forever).
    """
    M = _Model(inst)
    pl = [int(d) for d in placement]
    lists = _as_lists(inst, pl, order)
    if sorted(o for lst in lists for o in lst) != list(range(M.n)):
        raise ValueError("order must list every op exactly once")
    for d, lst in enumerate(lists):
        if any(pl[o] != d for o in lst):
            raise ValueError(f"order of device {d} lists an op placed elsewhere")
    st, seq = _time_lists(M, pl, lists)
    if st is None:
        raise ValueError("order contradicts precedence: every device waits for an input that never comes")
    return Timing(start=list(st.start), end=[float(x) for x in st.end], makespan=st.makespan,
                  memory_ok=M.fits(pl), finish_order=seq)


def _time_lists(M: _Model, pl: list[int], lists: list[list[int]]) -> tuple[_State | None, list[int]]:
    """Finalise ops in finish order, each device taking its list in turn; (None, ...) on deadlock."""
    st = _State(M, pl)
    pos = [0] * M.m
    seq: list[int] = []
    while st.n_done < M.n:
        best = None
        for d in range(M.m):
            if pos[d] < len(lists[d]):
                o = lists[d][pos[d]]
                c = st.candidate(o)
                if c is not None:
                    key = (c[1], c[2], M.topo[o])
                    if best is None or key < best[0]:
                        best = (key, o, d, c)
        if best is None:
            return None, seq
        _, o, d, c = best
        st.commit(o, *c)
        pos[d] += 1
        seq.append(o)
    return st, seq


# ----------------------------------------------------------------------------------------- brute force
@dataclass
class OracleResult:
    """Optimum over memory-feasible placements (None when no placement fits), an argmin, and counts."""

    optimum: float | None
    placement: list[int] | None
    order: list[list[int]] | None
    feasible: bool
    placements: int = 0  # placements keeping pins and colocation (after symmetry reduction)
    memory_feasible: int = 0
    searched: int = 0  # placements whose orders were searched (not cut by the placement bound)
    nodes: int = 0  # partial schedules visited
    schedules: int = 0  # complete schedules timed
    complete: bool = True  # False when stopped by the node or time limit (optimum then not proven)
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)


def _placements(M: _Model, symmetry: bool) -> Iterator[list[int]]:
    """Every placement keeping pins and colocation; interchangeable devices used in index order."""
    classes: list[int] = list(range(M.m))  # class representative of each device
    if symmetry:
        for b in range(M.m):
            for a in range(b):
                if classes[a] == a and M.interchangeable(a, b):
                    classes[b] = a
                    break
    pl = [-1] * M.n
    used = [False] * M.m

    def rec(k: int) -> Iterator[list[int]]:
        if k == len(M.units):
            yield list(pl)
            return
        seen_cls: set[int] = set()
        for d in M.unit_allowed[k]:
            if symmetry and not used[d]:
                if classes[d] in seen_cls:
                    continue  # an unused device interchangeable with one already tried here
                seen_cls.add(classes[d])
            was = used[d]
            used[d] = True
            for o in M.units[k]:
                pl[o] = d
            yield from rec(k + 1)
            used[d] = was

    yield from rec(0)


def _placement_bound(M: _Model, pl: list[int]) -> float:
    """Per-device load and longest path with each edge's smallest possible delay."""
    load = [0.0] * M.m
    for o, d in enumerate(pl):
        load[d] += M.time[o][d]
    head = [0.0] * M.n
    best = max(load)
    for o in sorted(range(M.n), key=M.topo.__getitem__):
        e = head[o] + M.time[o][pl[o]]
        if e > best:
            best = e
        for v, b in M.succs[o]:
            a = e if pl[v] == pl[o] else e + M.transfer(b, pl[o], pl[v])
            if a > head[v]:
                head[v] = a
    return best


def _tails(M: _Model, pl: list[int]) -> list[float]:
    """tail[o]: longest path after o ends (smallest delays, durations of the successors)."""
    tail = [0.0] * M.n
    for o in sorted(range(M.n), key=M.topo.__getitem__, reverse=True):
        t = 0.0
        for v, b in M.succs[o]:
            x = (0.0 if pl[v] == pl[o] else M.transfer(b, pl[o], pl[v])) + M.time[v][pl[v]] + tail[v]
            if x > t:
                t = x
        tail[o] = t
    return tail


class _Search:
    def __init__(self, M: _Model, budget: Budget, max_nodes: int | None) -> None:
        self.M = M
        self.best = math.inf
        self.best_pl: list[int] | None = None
        self.best_seq: list[int] | None = None
        self.nodes = 0
        self.schedules = 0
        self.budget = budget
        self.max_nodes = max_nodes
        self.stopped = False

    def orders(self, pl: list[int]) -> None:
        """Branch and bound over finish-ordered sequences of ops on placement ``pl``."""
        M = self.M
        st = _State(M, pl)
        tail = _tails(M, pl)
        left_work = [0.0] * M.m
        for o, d in enumerate(pl):
            left_work[d] += M.time[o][d]
        seq: list[int] = []

        def rec() -> None:
            if self.stopped:
                return
            self.nodes += 1
            if self.max_nodes is not None and self.nodes > self.max_nodes or (
                    self.nodes & 1023) == 0 and self.budget.expired():
                self.stopped = True
                return
            if st.n_done == M.n:
                self.schedules += 1
                if st.makespan < self.best:
                    self.best = st.makespan
                    self.best_pl = list(pl)
                    self.best_seq = list(seq)
                return
            lb = st.makespan
            for d in range(M.m):
                x = st.dev_free[d] + left_work[d]
                if x > lb:
                    lb = x
            last_end = st.last_key[0]
            cands = []
            for o in range(M.n):
                if st.end[o] is not None:
                    continue
                x = last_end + tail[o]  # keys increase: o ends no earlier
                if x > lb:
                    lb = x
                c = st.candidate(o)
                if c is None:
                    continue
                x = c[1] + tail[o]
                if x > lb:
                    lb = x
                key = (c[1], c[2], M.topo[o])
                if key > st.last_key:
                    cands.append((key, o, c))
            if lb >= self.best:
                return
            cands.sort()
            for _, o, c in cands:
                snap = st.snapshot()
                d = pl[o]
                st.commit(o, *c)
                left_work[d] -= M.time[o][d]
                seq.append(o)
                rec()
                seq.pop()
                left_work[d] += M.time[o][d]
                st.restore(o, snap)
                if self.stopped:
                    return

        rec()


def brute_force(inst: Instance, *, time_limit_s: float | None = None, max_nodes: int | None = None,
                symmetry: bool = True, budget: Budget | None = None) -> OracleResult:
    """The optimum of ``inst`` over every memory-feasible placement and every per-device order.

    ``complete`` is False (and the optimum only an upper bound, ``feasible`` False only meaning "none
    found yet") if ``budget`` (or ``time_limit_s`` from now) or ``max_nodes`` ran out first.
    """
    t0 = _time.perf_counter()
    budget = Budget.resolve(budget, time_limit_s)
    M = _Model(inst)
    search = _Search(M, budget, max_nodes)
    feasible: list[tuple[float, list[int]]] = []
    n_pl = 0
    for pl in _placements(M, symmetry):
        n_pl += 1
        if (n_pl & 1023) == 0 and budget.expired():
            search.stopped = True  # many devices: even listing the placements ran out of time
            break
        if not M.fits(pl):
            continue
        feasible.append((_placement_bound(M, pl), pl))
    feasible.sort(key=lambda x: x[0])
    searched = 0
    for lb, pl in feasible:
        if lb >= search.best or search.stopped:
            break
        searched += 1
        search.orders(pl)
    res = OracleResult(optimum=None, placement=None, order=None, feasible=bool(feasible), placements=n_pl,
                       memory_feasible=len(feasible), searched=searched, nodes=search.nodes,
                       schedules=search.schedules, complete=not search.stopped)
    if search.best_pl is not None:
        res.optimum = search.best
        res.placement = search.best_pl
        res.order = [[o for o in search.best_seq if search.best_pl[o] == d] for d in range(M.m)]
    res.seconds = _time.perf_counter() - t0
    res.counts = {"placements": n_pl, "memory_feasible": len(feasible), "searched": searched,
                  "nodes": search.nodes, "schedules": search.schedules}
    return res


def exhaustive(inst: Instance) -> OracleResult:
    """No bounds, no symmetry: every placement x every product of per-device permutations, each timed
    with the timing of :func:`time_schedule` (orders that deadlock are skipped). For checking :func:`brute_force` on
    tiny instances only."""
    M = _Model(inst)
    best = math.inf
    arg = None
    n_pl = n_feas = n_sched = 0
    for pl in _placements(M, symmetry=False):
        n_pl += 1
        if not M.fits(pl):
            continue
        n_feas += 1
        per_dev = [[o for o in range(M.n) if pl[o] == d] for d in range(M.m)]
        for lists in itertools.product(*[itertools.permutations(x) for x in per_dev]):
            st, _ = _time_lists(M, pl, [list(x) for x in lists])
            if st is None:
                continue  # the order deadlocks
            n_sched += 1
            if st.makespan < best:
                best, arg = st.makespan, (list(pl), [list(x) for x in lists])
    return OracleResult(optimum=None if arg is None else best, placement=None if arg is None else arg[0],
                        order=None if arg is None else arg[1], feasible=n_feas > 0, placements=n_pl,
                        memory_feasible=n_feas, schedules=n_sched)


# -------------------------------------------------------------------------------------- judging claims
def tolerance(opt: float) -> float:
    """Makespans within 1e-6 relative (1e-9 absolute) of the optimum count as equal."""
    return 1e-6 * abs(opt) + 1e-9


def judge(res: Any, orc: OracleResult) -> list[str]:
    """What ``res`` (a :class:`dplace.Result`) claims that the oracle refutes; empty when nothing.

    ``wrong_optimal``: status optimal but the makespan is not the optimum (or memory does not fit, or no
    placement fits at all); ``wrong_bound``: a lower bound above the optimum; ``wrong_infeasible``:
    status infeasible while a placement fits; ``below_optimum``: a memory-feasible makespan below the
    optimum (the oracle or the simulator is wrong); ``optimum_thrown_away``: a proven optimum not
    returned as one — status ``feasible`` with a lower bound that reaches the makespan, or the solver
    proved OPTIMAL with a right claim (cpsat on exact ticks: ``solver_status``, ``bound_ticks`` x
    ``tick_us``; milp: ``proven_optimal``, ``solver_bound``) yet the schedule returned is worse than the
    optimum (the order read back lost the model's choices).
    """
    out = []
    opt = orc.optimum
    if not orc.complete and opt is None:
        return out  # the oracle ran out of time before finding anything: nothing to judge
    if not orc.feasible:
        if res.status == "optimal":
            out.append("wrong_optimal")
        if res.status in ("optimal", "feasible", "heuristic") and res.memory_ok:
            out.append("below_optimum")  # a fitting placement the oracle did not find
        return out
    if opt is None:
        return out  # oracle incomplete with nothing found: nothing to judge
    tol = tolerance(opt)
    if res.status == "infeasible":
        out.append("wrong_infeasible")
    if res.status == "optimal" and orc.complete and (
            res.makespan is None or not res.memory_ok or abs(res.makespan - opt) > tol):
        out.append("wrong_optimal")
    if res.lower_bound is not None and orc.complete and res.lower_bound > opt + tol:
        out.append("wrong_bound")
    if res.makespan is not None and res.memory_ok and res.makespan < opt - tol:
        out.append("below_optimum")
    if _thrown_away(res, opt, tol):
        out.append("optimum_thrown_away")
    return out


def _thrown_away(res: Any, opt: float, tol: float) -> bool:
    if res.makespan is None or not res.memory_ok:
        return False
    if res.status == "feasible" and res.lower_bound is not None and res.makespan <= res.lower_bound + tol:
        return True
    ex = res.extra or {}
    claim = None
    if ex.get("solver_status") == "OPTIMAL" and ex.get("ticks_exact") and ex.get("bound_ticks") is not None:
        claim = ex["bound_ticks"] * ex["tick_us"]
    elif ex.get("proven_optimal") and ex.get("solver_bound") is not None:
        claim = ex["solver_bound"]
    return claim is not None and claim <= opt + tol and res.makespan > opt + tol


