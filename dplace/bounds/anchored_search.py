"""A search over which ops share the anchors' devices: :func:`anchored_search_bound`, the anchored split
(:func:`dplace.bounds.anchored.anchored_split_bound`) with the ops it leaves free decided one by one."""
from __future__ import annotations

import math

from ..instance.model import Instance
from .anchored import _away, _cheapest_transfers, _jps
from .shared import heads_tails

__all__ = ["SEARCH_MAX_NODES", "anchored_search_bound"]

SEARCH_MAX_NODES = 4000  # search nodes per tested value and case at most (then the value is not proven)

# an op's classes: on s's device; on t's device (case (i) only: in case (ii) t is on _D1); on neither
# anchor's device (two such ops may share a device)
_D1, _D2, _X = 1, 2, 3


class _Stopped(Exception):
    """The caller's ``stop`` became true."""


class _Search:
    """The data of one graph (relaxation: smallest times, no memory, no pins; colocation kept)."""

    def __init__(self, inst: Instance) -> None:
        p, head, tail = heads_tails(inst)
        s, t, hx, tx = _away(inst)
        self.n, self.s, self.t = inst.n, s, t
        self.p, self.head, self.tail = p.tolist(), head.tolist(), tail.tolist()
        self.hx = [h if math.isfinite(h) else float(head[o]) for o, h in enumerate(hx)]
        self.tx = [x if math.isfinite(x) else float(tail[o]) for o, x in enumerate(tx)]
        c = _cheapest_transfers(inst).tolist()
        self.topo = list(inst.topo)
        self.ins = [[(inst.esrc[e], c[e]) for e in inst.pred[o]] for o in range(inst.n)]
        self.outs = [[(inst.edst[e], c[e]) for e in inst.succ[o]] for o in range(inst.n)]
        g = inst.group_of
        groups: dict[int, list[int]] = {}
        for o in range(inst.n):
            if g[o] >= 0:
                groups.setdefault(g[o], []).append(o)
        self.tied = [groups[g[o]] if g[o] >= 0 else [o] for o in range(inst.n)]

    def times(self, dom: list[tuple[int, ...]], one: bool):
        """(early, late, ek, lk) for the domains ``dom`` (per op the classes still possible; one class:
        decided): per op and class k of its domain, ek[o][k] and lk[o][k] bound its start and the time
        after its end were it of class k, and early/late are their minima over its domain (module proof,
        (a))."""
        p, ins, outs, n = self.p, self.ins, self.outs, self.n
        tdev = _D1 if one else _D2  # t's device
        early, late = [0.0] * n, [0.0] * n
        ek: list[dict[int, float]] = [{} for _ in range(n)]
        lk: list[dict[int, float]] = [{} for _ in range(n)]
        for o in self.topo:
            best = math.inf
            for k in dom[o]:
                v = self.head[o] if k == _D1 else self.hx[o]
                for u, c in ins[o]:
                    w = early[u] + p[u] + (c if k not in dom[u] else 0.0)  # u surely elsewhere: a transfer
                    if w > v:
                        v = w
                ek[o][k] = v
                if v < best:
                    best = v
            early[o] = best
        for o in reversed(self.topo):
            best = math.inf
            for k in dom[o]:
                v = self.tail[o] if k == tdev else self.tx[o]
                for w_, c in outs[o]:
                    w = late[w_] + p[w_] + (c if k not in dom[w_] else 0.0)
                    if w > v:
                        v = w
                lk[o][k] = v
                if v < best:
                    best = v
            late[o] = best
        return early, late, ek, lk

    def jps_refutes(self, dom: list[tuple[int, ...]], one: bool, early: list[float], late: list[float],
                    x: float) -> bool:
        """Some anchor device's preemptive schedule of the ops decided on it reaches ``x``."""
        p = self.p
        for dev in ((_D1,) if one else (_D1, _D2)):
            f = [o for o in range(self.n) if dom[o] == (dev,)]
            if f and _jps([early[o] for o in f], [p[o] for o in f], [late[o] for o in f]) >= x:
                return True
        return False

    def refuted(self, one: bool, x: float, max_nodes: int, stop=None) -> bool | None:
        """True: no schedule of this case (``one``: s and t on one device) has span < ``x``; False: the
        search reached an assignment it cannot refute; None: not settled within ``max_nodes`` nodes."""
        s, t = self.s, self.t
        classes = (_D1, _X) if one else (_D1, _D2, _X)
        dom: list[tuple[int, ...]] | None = [classes] * self.n
        dom = _restrict(dom, self.tied[s], (_D1,))
        if dom is not None:
            dom = _restrict(dom, self.tied[t], (_D1,) if one else (_D2,))
        if dom is None:  # s and t tied, in case (i)
            return True
        nodes = [0]
        p = self.p

        def dfs(dom: list[tuple[int, ...]]) -> bool | None:
            nodes[0] += 1
            if nodes[0] > max_nodes:
                return None
            if stop is not None and stop():
                raise _Stopped
            while True:  # to a fixpoint: drop each class that alone reaches x (proof, (b))
                if stop is not None and stop():  # each pass: up to ~ms per 100 ops
                    raise _Stopped
                early, late, ek, lk = self.times(dom, one)
                changed = False
                for o in range(self.n):
                    keep = tuple(k for k in dom[o] if ek[o][k] + p[o] + lk[o][k] < x)
                    if keep != dom[o]:
                        changed = True
                        dom = _restrict(dom, self.tied[o], keep)
                        if dom is None:
                            return True
                if not changed:
                    break
            if self.jps_refutes(dom, one, early, late, x):
                return True
            best = None
            for o in range(self.n):
                if len(dom[o]) > 1:  # fewest classes left; then (measured on NASNet-Mobile's forward stem)
                    # case (ii): the widest spread of ek + lk over its classes; case (i): the largest
                    v = [ek[o][k] + lk[o][k] for k in dom[o]]
                    key = (len(dom[o]), min(v) - max(v) if one else -max(v) - p[o])
                    if best is None or key < best[0]:
                        best = (key, o)
            if best is None:  # every op decided and nothing refuted
                return False
            o = best[1]
            for k in dom[o]:
                child = _restrict(dom, self.tied[o], (k,))
                r = True if child is None else dfs(child)
                if r is not True:
                    return r
            return True

        return dfs(dom)


def _restrict(dom: list[tuple[int, ...]], ops: list[int], keep: tuple[int, ...]):
    """A copy of ``dom`` with each op of ``ops`` (a tied group) limited to the classes in ``keep``
    (None when one is left with none)."""
    out = list(dom)
    for o in ops:
        k = tuple(c for c in out[o] if c in keep)
        if not k:
            return None
        out[o] = k
    return out


def anchored_search_bound(inst: Instance, lo: float, hi: float, *, max_nodes: int = SEARCH_MAX_NODES,
                          stop=None) -> float:
    """A lower bound on the makespan L of a graph with one source s and one sink t, at least ``lo`` (a
    bound already proven) and below ``hi`` (the values tested lie between; e.g. a schedule's makespan).

    Relaxation: each op takes its smallest time p_o; memory and pins are dropped; colocation is kept
    (tied ops share a device). hx, tx, head, tail are :func:`dplace.bounds.anchored.anchored_work_bound`'s:
    an op not on s's device starts no earlier than hx(o), one not on t's device ends at least tx(o)
    before L (+inf on the anchor itself: there head and tail stand in, valid everywhere); c_e is an
    edge's cheapest transfer between two distinct devices.

    Proof. Take any schedule of span L < x (x a tested value). Either s and t are on one device D (case
    (ii)) or on two, D1 (s's) and D2 (t's) (case (i)). Each op has a class in that schedule: in case
    (ii) on D or off D; in case (i) on D1, on D2 or on neither. A *domain* gives each op a set of
    classes; it *admits* the schedule when each op's class is in its set.
    (a) For a domain that admits the schedule, each op o of class k starts no earlier than ek(o, k) and
        ends at least lk(o, k) before L, where, in topological order, ek(o, k) = max(base, max over
        inputs u of early(u) + p_u + [k not in u's set] c_e), base = head(o) when k is s's device, else
        hx(o) (o not on s's device), and early(u) = min over u's set of ek(u, .) (u's own class is in
        it). Induction: u starts at early(u) or later and takes at least p_u; when o's class is not in
        u's set they are on different devices (the class "neither" is in "neither"'s set, so two such
        ops, which may share a device, never count a transfer), and the tensor takes at least c_e.
        Symmetrically lk(o, k) from the outputs, with tail(o) when k is t's device, else tx(o).
    (b) So an op's class k has ek(o, k) + p_o + lk(o, k) <= L < x: a class where this reaches x is not
        the op's, and removing it from the set (with the ops colocation ties to o: one device, so one
        class) still admits the schedule; a set left empty admits none. And each anchor device runs the
        ops whose set is that device alone one at a time inside [0, L], each after its early and ending
        at least its late before L: Jackson's preemptive schedule of them (:func:`dplace.bounds.anchored._jps`,
        a lower bound on every one-machine schedule) is at most L < x; where it reaches x the domain
        admits no schedule.
    The search starts from every class for every op, s (and the ops tied to it) on D1 and t on D2 (on
    D in case (ii)), removes classes by (b) to a fixpoint, and branches on an op with several classes
    left: one child per class. A schedule of span < x is admitted by the root and by one child at each
    branching, so if every leaf admits none, no schedule of either case has span < x, and L >= x.

    The tested x are found by bisection between ``lo`` and ``hi``; a value not refuted within
    ``max_nodes`` search nodes per case counts as not proven (only what the search refuted is claimed).
    Never below ``lo``. ``stop``: read at each node; once true, the best value proven so far is returned.
    On NASNet-Mobile's forward stem (54 ops, source tensors of 16.8 ms) it raises the anchored split's
    15,878 µs towards CP-SAT's best answer of 17,366 (benchmarks/RESULTS.md, "Branchy (NAS-style) graphs")."""
    if inst.n < 3 or inst.m < 2 or not hi > lo:
        return lo
    S = _Search(inst)
    s, t = S.s, S.t
    if s < 0 or t < 0 or s == t:
        return lo
    cases = (True,) if t in S.tied[s] else (True, False)

    def proven(x: float) -> bool:
        return all(S.refuted(one, x, max_nodes, stop) is True for one in cases)

    best = lo
    a, b = lo, hi  # L >= a proven; b not proven
    try:
        while b - a > max(1e-6 * b, 0.5):
            mid = 0.5 * (a + b)
            if proven(mid):
                a = best = mid
            else:
                b = mid
    except _Stopped:
        pass
    return best

