"""``fan_in``: a join's inputs either run on the join's device or queue on the links into it (sequential comm).

**The claim.** Take an op v and a set S of its direct predecessors (distinct producers u, each with an edge
(u, v)). In every schedule, let d be v's device and ``W = start(v) - r`` with ``r = min_{u in S} head(u)``
(head: the longest path to u with smallest times and no transfers, :func:`dplace.bounds.shared.heads_tails`,
so no u starts before r). Each u in S either

* runs on d: it occupies d for at least ``p_u`` (its smallest time) inside ``[r, start(v)]`` (it starts
  at or after ``head(u) >= r`` and ends before v starts on the same device), or
* runs on another device: its tensor then crosses a link *into d* before v starts, after u ends
  (``>= r``). The simulator sends one tensor per (producer, destination device), carrying the largest of
  the producer's edges into that device (:mod:`dplace.schedule.simulate`), so distinct producers make
  distinct sends, each lasting at least ``c_u``: the cheapest ``latency + bytes(u, v) / bandwidth`` over
  the device pairs u and v may use (their pins, or any two distinct devices).

In sequential comm a device runs one op at a time and a directed link carries one send at a time; at most
``k = m - 1`` links lead into d. With ``x_u = 1`` for u on d: ``sum x_u p_u <= W`` and
``sum (1 - x_u) c_u <= k W``. So W is at least ``W*(S)``, the least W for which some ``x in [0, 1]^S``
meets both (a relaxation: x fractional; u in v's colocation group has ``x_u = 1``). v then runs and its
longest path after it follows: ``makespan >= r + W*(S) + p_v + tail(v)``. The bound is the largest such
value over the joins v and the sets ``S_t = {u : head(u) >= t}`` (thresholds t on the heads, as in the
one-machine head-body-tail bound).

``W*(S)``: with device time W, the link load left is smallest when d keeps the producers with the largest
``c_u / p_u`` (a fractional knapsack); it decreases in W while ``k W`` grows, so ``W*`` is where they meet,
found on the segment between two prefix sums of that order.

**Parallel comm**: sends do not wait for each other, so the rule does not apply and the bound is 0.
Segments of a sequential instance (:mod:`dplace.formulations.bounds_segments`) are restrictions of a
sequential schedule: their sends keep every property used above, so the rule applies to them with
``sequential=True``; edges that stand only for precedence through dropped ops carry no tensor and are left
out (``real_edges``).
"""
from __future__ import annotations

from ..instance.model import Instance
from .shared import heads_tails

__all__ = ["fan_in_bound", "least_window"]

MAX_THRESHOLDS = 16  # per join: the sets S_t for at most this many thresholds t (every one is a bound)


def least_window(p: list[float], c: list[float], k: int, fixed: float = 0.0) -> float:
    """``W*``: the least W with ``fixed + sum x p <= W`` and ``sum (1 - x) c <= k W`` for some x in [0, 1]
    (module docstring); ``fixed``: the device time of the producers that must share v's device."""
    if len(p) > 32:  # the same steps on arrays
        return _least_window_arrays(p, c, k, fixed)
    c_total = float(sum(c))
    if c_total <= k * fixed:
        return fixed
    # d keeps the largest c / p first (free ones, p = 0, before all)
    items = sorted(zip(p, c), key=lambda pc: -(pc[1] / pc[0]) if pc[0] > 0 else -float("inf"))
    dev, saved = fixed, 0.0
    for pj, cj in items:
        if pj <= 0:
            saved += cj
            if c_total - saved <= k * dev:
                return dev
            continue
        ratio = cj / pj
        # on [dev, dev + pj]: link load c_total - saved - (W - dev) * ratio, meets k W where
        w = (c_total - saved + dev * ratio) / (k + ratio)
        if w <= dev + pj:
            return max(w, dev)
        dev += pj
        saved += cj
    return dev  # everything on d (cannot happen before: the link load is 0 then)


def _least_window_arrays(p, c, k: int, fixed: float) -> float:
    """:func:`least_window` on numpy arrays (one sort, prefix sums; the same segment test)."""
    import numpy as np

    p, c = np.asarray(p, dtype=float), np.asarray(c, dtype=float)
    c_total = float(c.sum())
    if c_total <= k * fixed:
        return fixed
    with np.errstate(divide="ignore", invalid="ignore"):
        key = np.where(p > 0, c / np.where(p > 0, p, 1.0), np.inf)
    order = np.argsort(-key, kind="stable")
    p, c, key = p[order], c[order], key[order]
    dev_after = fixed + np.cumsum(p)  # device time once items 0..j are on d
    saved_after = np.cumsum(c)
    dev_before, saved_before = dev_after - p, saved_after - c
    free = p <= 0
    done_free = free & (c_total - saved_after <= k * dev_before)  # a free item closes it
    with np.errstate(divide="ignore", invalid="ignore"):
        w = (c_total - saved_before + dev_before * key) / (k + key)
    inside = ~free & (w <= dev_after)
    hit = np.flatnonzero(done_free | inside)
    if not len(hit):
        return float(dev_after[-1])
    j = hit[0]
    return float(dev_before[j]) if free[j] else float(max(w[j], dev_before[j]))


def fan_in_bound(inst: Instance, *, sequential: bool | None = None, real_edges: int | None = None,
                 floor: float | None = None) -> float:
    """Proven lower bound from the joins whose inputs must queue on v's device or on the links into it
    (module docstring). 0 in parallel comm (``sequential``: the rule's comm, by default the instance's) or
    with one device. ``real_edges``: only edges ``0 .. real_edges - 1`` carry tensors (the rest: precedence).

    Only joins that may exceed ``floor`` (default: the critical path, which every schedule reaches anyway)
    are examined (:func:`_upper_estimates`, one vectorised pass): the result is exact where it exceeds
    ``floor``, and may miss values at or below it."""
    import numpy as np

    seq = inst.comm == "sequential" if sequential is None else sequential
    if not seq or inst.m < 2 or inst.n_edges < 2:
        return 0.0
    p, head, tail = heads_tails(inst)
    k = inst.m - 1
    n_real = inst.n_edges if real_edges is None else real_edges
    es, ed = inst._esrc_a[:n_real], inst._edst_a[:n_real]
    if floor is None:
        floor = float((head + p).max()) if inst.n else 0.0
    reach = _upper_estimates(inst, es, ed, p, head, k) + p + tail
    fan = np.bincount(ed, minlength=inst.n)
    cand = np.flatnonzero((fan >= 2) & (reach > floor))
    if not len(cand):
        return 0.0
    cost = _cheapest(inst, n_real)
    g = inst._group_of_a
    ptr, by_dst = inst._pred_csr
    best = 0.0
    for v in cand[np.argsort(-reach[cand], kind="stable")].tolist():  # the most promising first
        if reach[v] <= best:  # neither this join nor any after it can do better
            break
        e_v = by_dst[ptr[v]:ptr[v + 1]]
        e_v = e_v[e_v < n_real]
        us, first = np.unique(inst._esrc_a[e_v], return_index=True)
        if len(us) < 2:
            continue
        c_u = np.zeros(len(us))
        np.maximum.at(c_u, np.searchsorted(us, inst._esrc_a[e_v]), cost[e_v])  # u's costliest edge into v
        same = (g[us] >= 0) & (g[us] == g[v])  # colocated with v: on v's device
        order = np.argsort(-head[us], kind="stable")
        hs, ps, cs, fx = head[us][order].tolist(), p[us][order].tolist(), c_u[order].tolist(), same[order].tolist()
        cuts = range(1, len(us) + 1)
        if len(us) > MAX_THRESHOLDS:
            step = len(us) / MAX_THRESHOLDS
            cuts = sorted({max(1, round(step * (i + 1))) for i in range(MAX_THRESHOLDS)} | {len(us)})
        tail_v = float(p[v] + tail[v])
        for j in cuts:
            fixed = sum(ps[i] for i in range(j) if fx[i])
            free = [i for i in range(j) if not fx[i]]
            w = least_window([ps[i] for i in free], [cs[i] for i in free], k, fixed)
            best = max(best, hs[j - 1] + w + tail_v)
    return best


def _upper_estimates(inst: Instance, es, ed, p, head, k: int):
    """Per op v, at least ``max_t r_t + W*(S_t)`` over its joins' sets (0 without inputs), on arrays: the
    edges into v by decreasing head of their source, and at each ``S_t`` (the prefix) ``W* <= sum p`` (all
    on v's device) and ``W* <= sum c / k + sum p`` of the inputs colocated with v (the others all sent)."""
    import numpy as np

    out = np.zeros(inst.n)
    if not len(es):
        return out
    g = inst._group_of_a
    order = np.lexsort((-head[es], ed))
    s, d = es[order], ed[order]
    first = np.r_[True, d[1:] != d[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(d)), 0))

    def prefix(w):  # sums over each group's prefix, inclusive
        c = np.cumsum(w)
        return c - (c[start] - w[start])

    bound_to_v = (g[s] >= 0) & (g[s] == g[d])
    w_most = np.minimum(prefix(p[s]), prefix(_costliest_pair(inst, order)) / k + prefix(np.where(bound_to_v, p[s], 0.0)))
    np.maximum.at(out, d, head[s] + w_most)  # r_t <= the prefix's last head (ties: the longest prefix is in)
    return out


def _costliest_pair(inst: Instance, edges):
    """Per edge (indices ``edges``) its transfer between the two distinct devices where it costs most: at
    least what the rule charges it (the cheapest over the pairs its ends may use)."""
    import numpy as np

    b = inst._ebytes_a[edges]
    if not inst.pairs:  # one link for every pair
        return inst.link.latency + b / inst.link.bandwidth
    pairs = [(a, c) for a in range(inst.m) for c in range(inst.m) if a != c]
    lat = np.array([inst.lat[a][c] for a, c in pairs])
    bw = np.array([inst.bw[a][c] for a, c in pairs])
    return (lat[None, :] + b[:, None] / bw[None, :]).max(axis=1)


def _cheapest(inst: Instance, n_real: int):
    """Per edge (the first ``n_real``) its cheapest transfer between two distinct devices its ends may
    use (their pins; 0 when both are pinned to one device)."""
    import numpy as np

    es, ed = inst._esrc_a[:n_real], inst._edst_a[:n_real]
    b = inst._ebytes_a[:n_real]
    pin = inst._pinned_a
    if not inst.pairs and not (pin >= 0).any():  # one link for every pair, nothing pinned
        return inst.link.latency + b / inst.link.bandwidth
    out = np.full(n_real, np.inf)
    for a in range(inst.m):
        for c in range(inst.m):
            if a == c:
                continue
            ok = ((pin[es] < 0) | (pin[es] == a)) & ((pin[ed] < 0) | (pin[ed] == c))
            out = np.where(ok, np.minimum(out, inst.lat[a][c] + b / inst.bw[a][c]), out)
    return np.where(np.isinf(out), 0.0, out)
