"""Bounds anchored at the graph's one source or one sink: what running work away from their devices
costs in transfers (:func:`anchored_work_bound`), and the split between sharing their device and paying a
transfer (:func:`anchored_split_bound`). Re-exported by :mod:`dplace.bounds`; proofs in the docstrings."""
from __future__ import annotations

from ..instance.model import Instance
from ..kernels import bounds as kb
from .shared import critical_path_length, heads_tails, memo

__all__ = ["anchored_split_bound", "anchored_work_bound"]


def _cheapest_transfers(inst: Instance):
    """Per edge, its cheapest transfer time between two distinct devices (numpy array; zeros with one
    device)."""
    import numpy as np

    E = len(inst.esrc)
    if inst.m < 2 or E == 0:
        return np.zeros(E)
    pairs = {(inst.lat[a][b], inst.bw[a][b]) for a in range(inst.m) for b in range(inst.m) if a != b}
    nb = np.asarray(inst.ebytes, dtype=float)
    return np.min([lat + nb / bw for lat, bw in pairs], axis=0)


def _away(inst: Instance) -> tuple[int, int, list[float], list[float]]:
    """(s, t, hx, tx) of :func:`anchored_work_bound`: the only op without predecessors (-1 if there are
    several) and the only one without successors, and per op hx (a bound on its start when it is not on
    s's device; head without s) and tx (a bound on the time after its end when it is not on t's device;
    tail without t). Kept on the instance."""
    def make():
        p, head, tail = heads_tails(inst)
        if kb.use_arrays(inst):  # the same values, compiled
            s, t, hx, tx = kb.away(inst, p, head, tail, _cheapest_transfers(inst))
            return s, t, hx.tolist(), tx.tolist()
        srcs = [o for o in range(inst.n) if not inst.pred[o]]
        sinks = [o for o in range(inst.n) if not inst.succ[o]]
        s = srcs[0] if len(srcs) == 1 else -1
        t = sinks[0] if len(sinks) == 1 else -1
        c = _cheapest_transfers(inst).tolist()
        pl = p.tolist()

        def away(anchor, order, edges, other, base):
            """hx (edges = pred, other = esrc, base = head) or tx (succ, edst, tail); base without an anchor."""
            out = list(base)
            if anchor < 0:
                return out
            out[anchor] = float("inf")
            for o in order:
                if o != anchor:
                    out[o] = max((min(base[u] + pl[u] + c[e], out[u] + pl[u]) for e in edges[o] for u in (other[e],)),
                                 default=0.0)
            return out

        return (s, t, away(s, inst.topo, inst.pred, inst.esrc, head.tolist()),
                away(t, reversed(inst.topo), inst.succ, inst.edst, tail.tolist()))

    return memo(inst, "_away", make)


def anchored_work_bound(inst: Instance, grid: int = 48) -> float:
    """Work that cannot start early on a device away from the graph's one source (or end late away from
    its one sink): what spreading work over the devices costs in transfers.

    Relaxation: each op takes its smallest time p_o; memory, colocation and pins are dropped. Let s be
    the only op without predecessors, if there is one (then every op descends from s), and t the only op
    without successors, if there is one. *Away* ops are those on a device other than s's and t's; at
    most k = [s exists] + [t exists] devices are not away. Claim: an op o not on s's device starts no
    earlier than hx(o), where hx(s) = +inf and, over o's input edges e = (u, o),

        hx(o) = max_e min(head(u) + p_u + c_e, hx(u) + p_u)      (c_e: e's cheapest transfer time)

    Proof, in topological order: for an input u on o's device, u is not on s's device either, so
    start(o) >= end(u) >= hx(u) + p_u; for an input u on another device, start(o) >= end(u) + c_e >=
    head(u) + p_u + c_e; so start(o) is at least the smaller of the two, for every input. Symmetrically
    an op not on t's device ends at least tx(o) before the makespan L (tx(t) = +inf; over output edges
    e = (o, v): tx(o) = max_e min(c_e + p_v + tail(v), p_v + tx(v))). Without s, hx = head; without t,
    tx = tail (both always hold).

    For thresholds (a, b), call o *cheap* when hx(o) < a or tx(o) < b. An away device runs its other ops
    inside [a, L - b], so it is busy at most W_cheap(d) + (L - a - b)^+; the k other devices at most L
    each. All the work W = sum p_o is done: W <= k L + W_cheap + (m - k)(L - a - b)^+, and L is at least
    the smallest value that satisfies this. Any (a, b) gives a bound: a and b range over ``grid``
    quantiles of hx and tx; the best is returned (never below the critical path)."""
    import numpy as np

    n, m = inst.n, inst.m
    cp = critical_path_length(inst)
    if n == 0 or m < 2:
        return cp
    p, head, tail = heads_tails(inst)
    s, t, hx, tx = _away(inst)
    k = (s >= 0) + (t >= 0)
    if m - k <= 0:
        return cp
    hx_a, tx_a = np.array(hx), np.array(tx)

    def points(x):
        u = np.unique(x[np.isfinite(x)])
        if len(u) > grid:
            u = np.unique(np.quantile(u, np.linspace(0.0, 1.0, grid), method="lower"))
        return u

    A, B = points(hx_a), points(tx_a)
    order = np.argsort(tx_a, kind="stable")
    tx_sorted = tx_a[order]
    best = cp
    hx_o, p_o = hx_a[order], p[order]
    for a in A.tolist():
        pk = np.where(hx_o >= a, p_o, 0.0)  # ops not cheap by hx, in tx order
        suffix = np.concatenate((np.cumsum(pk[::-1])[::-1], [0.0]))
        rest = suffix[np.searchsorted(tx_sorted, B, side="left")]  # their work with tx >= b: W - W_cheap
        theta = a + B
        if k == 0:
            L = np.where(rest > 0, theta + rest / m, 0.0)
        else:
            L = np.where(k * theta >= rest, rest / k, (rest + (m - k) * theta) / m)
        v = float(L.max())
        if v > best:
            best = v
    return best if best == cp else best * (1.0 - 1e-12)


JPS_MAX_OPS = 3000  # above this many ops the one-device floor sums the forced work (Python heap: ~1 ms per 300 ops)


def _jps(r, p, q) -> float:
    """Jackson's preemptive schedule: the least max(C_o + q_o) over preemptive schedules of the ops on one
    machine, op o released at r_o with work p_o (a lower bound on every non-preemptive one: ops in an
    order, each at or after its release, one at a time)."""
    import heapq

    order = sorted(range(len(r)), key=lambda i: r[i])
    rest = [float(x) for x in p]
    heap: list = []  # (-q, op): the largest delivery time first
    t, i, n, best = 0.0, 0, len(order), 0.0
    while i < n or heap:
        if not heap:
            t = max(t, float(r[order[i]]))
        while i < n and r[order[i]] <= t:
            heapq.heappush(heap, (-float(q[order[i]]), order[i]))
            i += 1
        nq, j = heapq.heappop(heap)
        nxt = float(r[order[i]]) if i < n else float("inf")
        run = min(rest[j], nxt - t)  # until it ends or the next release (which may preempt it)
        t += run
        rest[j] -= run
        if rest[j] > 0.0:
            heapq.heappush(heap, (nq, j))
        else:
            best = max(best, t - nq)
    return best


def _one_device_floor(w, p, mem, cap: float, head=None, tail=None) -> float:
    """min over k of max(J_k, w_(k+1)): ops sorted by ``w`` largest first (ties by op index), J_k the
    least time the first k take on one device, w_(n+1) = 0; the k whose first k ops' memory exceeds
    ``cap`` excluded (then so is every larger k). The least L for which the ops with w > L, all on one
    device of capacity ``cap``, fit there one at a time within [0, L] (:func:`anchored_split_bound`).
    J_k is the sum of their ``p``; with ``head`` and ``tail`` (each op starts no earlier than its head and
    ends at least its tail before L) and at most :data:`JPS_MAX_OPS` ops, Jackson's preemptive schedule
    of them (:func:`_jps`, at least that sum): J_k grows with k and w_(k+1) falls, so the k where they
    cross is found by bisection."""
    import numpy as np

    order = np.argsort(-w, kind="stable")  # largest w first, ties by op index (Python's sorted)
    # the first k ops of the order go to one device while their memory fits (sums taken one op after
    # another, as Python's loop: the int64 sums cannot overflow before the first one above cap)
    work = np.cumsum(p[order])
    over = np.cumsum(mem[order]) > cap
    fit = int(np.argmax(over)) if over.any() else len(order)
    nxt = np.append(w[order[1:]], 0.0)[:fit]
    if head is None or len(order) > JPS_MAX_OPS or fit == 0:  # nothing forced, or k
        return float(min(w[order[0]], np.maximum(work[:fit], nxt).min(initial=float("inf"))))
    cache: dict[int, float] = {}

    def value(k: int) -> float:  # max(J_k, w_(k+1)) for k = 1..fit
        if k not in cache:
            f = order[:k]
            cache[k] = max(_jps(head[f], p[f], tail[f]), float(nxt[k - 1]))
        return cache[k]

    lo, hi = 1, fit  # the least k with J_k >= w_(k+1) (if any): the minimum is there or just before
    while lo < hi:
        mid = (lo + hi) // 2
        f = order[:mid]
        if _jps(head[f], p[f], tail[f]) >= nxt[mid - 1]:
            hi = mid
        else:
            lo = mid + 1
    return min([float(w[order[0]])] + [value(k) for k in (lo - 1, lo) if 1 <= k <= fit])


def anchored_split_bound(inst: Instance) -> float:
    """One device, or a transfer: where the graph has one source s or one sink t, a schedule either keeps
    s and t on one device D, and every op whose trip away from D and back cannot fit runs on D, or it
    pays a transfer between s and t, and every op that cannot afford a transfer from s's device (or to
    t's) runs on that device.

    Relaxation: each op takes its smallest time p_o; pins are dropped (only more placements), colocation
    and memory are kept. hx and tx are :func:`anchored_work_bound`'s: an op not on s's device starts no
    earlier than hx(o), and an op not on t's device ends at least tx(o) before the makespan L (hx = head
    without s, tx = tail without t); head and tail (longest paths of smallest times before and after an
    op, no transfers) bound every op's start and the time after its end. For a weight w over the ops, let
    F_w(L) = {o : w(o) > L}, and sort the ops by w, largest first (w_1 >= w_2 >= ...; J_k the least
    max(end(o) + tail(o)) of the first k on one machine, each started no earlier than its head, one at a
    time: at least Jackson's preemptive schedule of them, :func:`_jps`, itself at least their summed p).
    If every op of F_w(L) runs on one device, one at a time within [0, L] (each after its head, each
    ending at least its tail before L), then with k = |F_w(L)| (F_w(L) is the first k, and
    w_(k+1) <= L) L >= max(J_k, w_(k+1)) >= min over k of max(J_k, w_(k+1)) =: floor(w), the k whose
    first k ops' memory exceeds the largest device excluded (then so is every larger k);
    :func:`_one_device_floor` (J_k: the preemptive schedule up to :data:`JPS_MAX_OPS` ops, else the sum).
    Two cases for any schedule:

    (i) s and t (both exist) on different devices D1 and D2 (impossible when colocation ties s to t). An
        op o not on D1 starts no earlier than hx(o), so L >= w1(o) = hx(o) + p_o + tail(o); an op not
        on D2 ends at least tx(o) before L, so L >= w2(o) = head(o) + p_o + tx(o) (w1 = +inf on s and
        the ops colocation ties to it, w2 = +inf on t and its group). No op is on both devices, so L >=
        min(w1(o), w2(o)) for every o; the ops of F_w1(L) are all on D1 and those of F_w2(L) all on D2,
        so L >= floor(w1) and L >= floor(w2). On D1 each op is not on t's device, so it ends at least
        tx(o) (>= tail(o)) before L, and on D2 each op is not on s's device, so it starts no earlier than
        hx(o) (>= head(o)): J_k of floor(w1) takes tx as the ops' tails, J_k of floor(w2) hx as their
        heads (where tx or hx is +inf, on t or s, the op would be on both devices, no such schedule: tail
        or head stands in). (On NASNet-Mobile's backward stem this raises case (i) from 25,512 to 26,897
        µs, CP-SAT's best answer of that piece.) (This case was max(hx(t) + p_t, p_s + tx(s)) alone, which
        w1(t) and w2(s) already hold; on NASNet-Mobile's last backward segment, where the stem's tensors
        take 16.8 ms, the forced ops raise it from 17,545 to 25,512 µs, CP-SAT's best answer 26,897.)
    (ii) one device D holds s and t (those that exist). An op o not on D is on neither's device, so
        L >= v(o) = hx(o) + p_o + tx(o). So every op with v(o) > L is on D (as are s, t and the ops
        colocation ties to them: v = +inf), and L >= floor(v).

    L is at least the smaller of the two cases, and never below the critical path. On a segment of
    NASNet-Mobile (one first op, a few branches, one last op, transfers of 1.5 ms against ops of 0.3 ms)
    it is the optimum CP-SAT proves in 5-8 s: the branches either run one after another on D or pay a
    transfer there and back."""
    n, m = inst.n, inst.m
    cp = critical_path_length(inst)
    if n == 0 or m < 2:
        return cp
    import numpy as np

    p, head, tail = heads_tails(inst)
    s, t, hx, tx = _away(inst)
    if s < 0 and t < 0:
        return cp
    inf = float("inf")
    g = inst._group_of_a
    ptr, members = inst._group_ptr, inst._group_members
    mem, cap = inst._mem_a, max(inst.capacity)
    hx_a, tx_a = np.asarray(hx), np.asarray(tx)

    def tied(a):  # a and the ops colocation ties to it
        return members[ptr[g[a]]:ptr[g[a] + 1]] if g[a] >= 0 else a

    case_i = inf
    if s >= 0 and t >= 0 and (g[s] < 0 or g[s] != g[t]):
        w1 = hx_a + p + tail  # not on s's device
        w2 = head + p + tx_a  # not on t's device
        w1[tied(s)] = inf
        w2[tied(t)] = inf
        # on D1 (not t's device) an op ends at least tx before L; on D2 (not s's) it starts at hx or later
        q1 = np.where(np.isfinite(tx_a), tx_a, tail)
        r2 = np.where(np.isfinite(hx_a), hx_a, head)
        case_i = max(float(np.minimum(w1, w2).max()), _one_device_floor(w1, p, mem, cap, head, q1),
                     _one_device_floor(w2, p, mem, cap, r2, tail))
    v = hx_a + p + tx_a  # hx[o] + p[o] + tx[o]
    for a in (s, t):
        if a >= 0:
            v[tied(a)] = inf
    best = min(case_i, _one_device_floor(v, p, mem, cap, head, tail))
    return best * (1.0 - 1e-12) if best > cp else cp
