"""``forced_links``: the transfers every placement must make, and in sequential comm the link time they share.

**Forced apart.** Ops u and v joined by an edge are *apart* in every placement that keeps pins,
colocation and memory when their units (each op's colocation group, or the op alone; a group is placed
whole, with its group's pin) cannot share a device:

* both are pinned, to devices d1 != d2;
* or, on every device d they could share (their common pin, or any device when neither is pinned), their
  two units do not fit beside what is pinned there: ``mem(unit u) + mem(unit v) + pinned(d) > capacity(d)``
  (``pinned(d)``: the memory of the ops pinned to d, the pinned unit among the two included once).

Units in one group are never apart. An edge whose ends are apart makes u's tensor cross a link into v's
device: a *send*. The simulator sends once per (producer, destination device) the largest tensor of the
producer's edges to that device (``dplace.schedule.simulate``), so distinct sends are counted so:

* for each u, one send per pinned destination d2 of its apart consumers (these are distinct: one per
  (u, d2)), carrying the largest of u's apart edges into d2;
* when u has no apart consumer that is pinned, one send, of the apart edge whose cheapest transfer is the
  largest (its consumer's device is unknown: any other send of u might go there too, so only one counts).

A send s has a release ``r_s = head(u) + p(u)`` (u cannot end earlier), a length ``c_s`` at least the cheapest
``latency + bytes / bandwidth`` between the devices it may go between (u's pin or any device, v's pin or
any other), and a tail ``q_s = min p(v) + tail(v)`` over the consumers it feeds (each one still runs, then
its longest path after it; p: smallest time, head / tail: longest paths of smallest times, no transfers:
:func:`dplace.bounds.shared.heads_tails`). Every schedule has ``makespan >= r_s + c_s + q_s`` for each send
(both comm modes: it is the path u -> send -> v).

**Link contention (sequential comm only).** A directed link carries one send at a time. Take a set S of
sends that can only use k links (S: the sends whose source is pinned to d1, k = the devices they may
reach; whose destination is pinned to d2, k = the devices they may come from; from d1 to d2, k = 1; all of
them, k = the links any of them may use). Some link carries at least sum_S c / k of their time, none of it
before min_S r, and the last send it carries is followed by its consumer's tail, at least min_S q. So
``makespan >= min_S r + sum_S c / k + min_S q``, and this holds for every subset of S: it is taken over the
subsets {s in S: r_s >= t} and {s in S: q_s >= t} for every threshold t (the one-machine head-body-tail
bound, relaxed to k machines). In parallel comm transfers do not wait for each other and only the single
sends count.

0 where nothing is forced apart (e.g. no pins and every pair of units fits on a device). ``pinned_links``
(:func:`dplace.bounds.pinned_links_bound`) is the case both ends pinned and k = 1 of this.
"""
from __future__ import annotations

from ..instance.model import Instance
from .shared import heads_tails

__all__ = ["forced_links_bound", "forced_sends"]


def _unit_memory(inst: Instance):
    """Per op the memory of its unit (its colocation group's total, or its own)."""
    import numpy as np

    mem = inst._mem_a.astype(np.float64)
    g = inst._group_of_a
    inside = g >= 0
    if not inside.any():
        return mem
    totals = np.bincount(g[inside], weights=mem[inside], minlength=len(inst.group_names))
    out = mem.copy()
    out[inside] = totals[g[inside]]
    return out


def _apart_edges(inst: Instance):
    """Indices of the edges whose two ends are apart in every placement (module docstring)."""
    import numpy as np

    es, ed = inst._esrc_a, inst._edst_a
    pin, g = inst._pinned_a, inst._group_of_a
    cap = np.asarray(inst.capacity, dtype=np.float64)
    load = np.bincount(pin[pin >= 0], weights=inst._mem_a.astype(np.float64)[pin >= 0], minlength=inst.m)
    unit = _unit_memory(inst)
    pu, pv = pin[es], pin[ed]
    same_group = (g[es] >= 0) & (g[es] == g[ed])
    both = (pu >= 0) & (pv >= 0)
    one = (pu >= 0) != (pv >= 0)
    shared = np.where(pu >= 0, pu, pv)  # the one pin (or u's) where one or both are pinned
    room_one = cap[np.maximum(shared, 0)] - load[np.maximum(shared, 0)]  # beside what is pinned there
    free_any = float((cap - load).max())  # neither pinned: the best device for the pair
    the_unpinned = np.where(pu >= 0, unit[ed], unit[es])
    apart = both & (pu != pv)
    apart |= one & (the_unpinned > room_one)  # the pinned unit is in load already
    apart |= ~both & ~one & (unit[es] + unit[ed] > free_any)
    return np.flatnonzero(apart & ~same_group)


def _cheapest(inst: Instance, e: int, srcs, dsts) -> float:
    return min((inst.transfer_time(e, a, b) for a in srcs for b in dsts if a != b), default=0.0)


def forced_sends(inst: Instance) -> list[tuple[float, float, float, int, int]]:
    """The distinct sends every placement makes (module docstring): ``(r, c, q, src, dst)`` each, src / dst
    the pinned device (-1: not known)."""
    if inst.m < 2 or not inst.n or not inst.n_edges:
        return []
    apart = _apart_edges(inst)
    if not len(apart):
        return []
    p, head, tail = heads_tails(inst)
    pin = inst.pinned
    everyone = list(range(inst.m))
    known: dict[tuple[int, int], list] = {}  # (u, d2) -> [largest bytes edge, q]
    unknown: dict[int, list] = {}  # u -> [c, q] of its costliest apart edge
    for e in apart.tolist():
        u, v = inst.esrc[e], inst.edst[e]
        q = float(p[v] + tail[v])
        if pin[v] >= 0:
            got = known.setdefault((u, pin[v]), [e, q])
            if inst.ebytes[e] > inst.ebytes[got[0]]:
                got[0] = e
            got[1] = min(got[1], q)
        else:
            srcs = [pin[u]] if pin[u] >= 0 else everyone
            c = _cheapest(inst, e, srcs, everyone)
            got = unknown.get(u)
            if got is None or (c, q) > (got[0], got[1]):
                unknown[u] = [c, q]
    out = []
    with_known = set()
    for (u, d2), (e, q) in known.items():
        with_known.add(u)
        srcs = [pin[u]] if pin[u] >= 0 else everyone
        out.append((float(head[u] + p[u]), _cheapest(inst, e, srcs, [d2]), q, pin[u], d2))
    for u, (c, q) in unknown.items():
        if u not in with_known:
            out.append((float(head[u] + p[u]), c, q, pin[u], -1))
    return out


def _shared_links(items: list[tuple[float, float, float]], k: int) -> float:
    """max over the subsets {r >= t} and {q >= t} of min r + sum c / k + min q."""
    best = 0.0
    for key in (0, 2):  # thresholds on r, then on q
        total, rmin, qmin = 0.0, float("inf"), float("inf")
        for r, c, q in sorted(items, key=lambda s: s[key], reverse=True):
            total += c
            rmin, qmin = min(rmin, r), min(qmin, q)
            best = max(best, rmin + total / k + qmin)
    return best


def forced_links_bound(inst: Instance) -> float:
    """Proven lower bound from the sends every placement makes (module docstring): each send's path, and in
    sequential comm the link time the sends that share few links need. 0 when nothing is forced apart."""
    sends = forced_sends(inst)
    if not sends:
        return 0.0
    best = max(r + c + q for r, c, q, _, _ in sends)
    if inst.comm != "sequential":
        return best
    m = inst.m
    groups: dict[tuple[int, int], list] = {}  # (src, dst), (src, -1), (-1, dst), (-1, -1): -1 any
    for s in sends:
        a, b = s[3], s[4]
        for key in {(a, b), (a, -1), (-1, b), (-1, -1)}:
            groups.setdefault(key, []).append(s)
    for (a, b), items in groups.items():
        if a >= 0 and b >= 0:
            k = 1
        elif a >= 0:  # from a: to the known destinations, or to any other device
            k = m - 1 if any(x[4] < 0 for x in items) else len({x[4] for x in items})
        elif b >= 0:
            k = m - 1 if any(x[3] < 0 for x in items) else len({x[3] for x in items})
        else:
            k = _links_used(items, m)
        best = max(best, _shared_links([(r, c, q) for r, c, q, _, _ in items], k))
    return best


def _links_used(items, m: int) -> int:
    """How many directed links the sends may use in all (a pinned end fixes one side of a send's link)."""
    links = set()
    for *_, a, b in items:
        srcs = [a] if a >= 0 else range(m)
        dsts = [b] if b >= 0 else range(m)
        links.update((x, y) for x in srcs for y in dsts if x != y)
        if len(links) == m * (m - 1):
            break
    return max(1, len(links))
