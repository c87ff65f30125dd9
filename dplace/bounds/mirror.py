"""Mirrored pieces: two pieces of one schedule whose anchors colocation ties crosswise, bounded together
(:func:`mirror_split_bound`; the segment bound pairs a forward stem with its backward stem with it)."""
from __future__ import annotations

import math

from ..instance.model import Instance
from .anchored import _away, _jps
from .shared import heads_tails

__all__ = ["MIRROR_MAX_JPS", "mirror_split_bound"]

MIRROR_MAX_JPS = 20000  # preemptive schedules tried per pair at most; then the least bound not yet refuted


class _Stopped(Exception):
    """The caller's ``stop`` became true inside :func:`mirror_split_bound`."""


def _roles(sub: Instance):
    """(s, t, p, head, tail, w1, w2, v, hx, tx) of :func:`dplace.bounds.anchored.anchored_split_bound` on a
    piece (s its one source, t its one sink; no colocation applied: the caller does; hx and tx with head and
    tail where they are +inf, on s and t), or None without both."""
    import numpy as np

    p, head, tail = heads_tails(sub)
    s, t, hx, tx = _away(sub)
    if s < 0 or t < 0 or s == t:
        return None
    hx, tx = np.asarray(hx, dtype=float), np.asarray(tx, dtype=float)
    inf = math.inf
    w1, w2, v = hx + p + tail, head + p + tx, hx + p + tx
    w1[s] = w2[t] = v[s] = v[t] = inf
    return s, t, p, head, tail, w1, w2, v, np.where(np.isfinite(hx), hx, head), np.where(np.isfinite(tx), tx, tail)


def _groups(sub: Instance, names: dict[str, int]):
    """Per op of the piece its colocation group as an index into ``names`` (shared by both pieces; -1:
    none)."""
    import numpy as np

    out = np.full(sub.n, -1, dtype=np.int64)
    for o in range(sub.n):
        c = sub.ops[o].colocation
        if c is not None:
            out[o] = names.setdefault(c, len(names))
    return out


def mirror_split_bound(a: Instance, b: Instance, lb_a: float, lb_b: float, stop=None) -> float:
    """A lower bound on L_a + L_b, the spans of two pieces A and B of one schedule whose anchors are tied
    crosswise: A's one source s_A shares its colocation group with B's one sink t_B, and A's one sink
    t_A with B's one source s_B (a forward stem and its backward stem). ``lb_a``, ``lb_b``: proven lower
    bounds of each span alone; returns ``lb_a + lb_b`` when the anchors are not tied so.

    Setting: ``a`` and ``b`` are the pieces as instances of their own (each the restriction of one
    schedule of a larger instance, shifted to start at 0, as the segment bound's pieces are,
    :mod:`dplace.formulations.bounds_segments`), ops of both that share a colocation name are on one
    device in that schedule. Relaxation: each op takes its smallest time, memory and pins are dropped.

    Proof. Let D1 be s_A's device (so t_B's) and D2 t_A's (so s_B's). On each piece take
    :func:`dplace.bounds.anchored.anchored_split_bound`'s weights (hx, tx, head, tail of that piece;
    p its smallest times): w1 = hx + p + tail (what an op away from its source's device costs),
    w2 = head + p + tx (away from its sink's device), v = hx + p + tx (away from both), each +inf on the
    anchor it is measured from. As proven there, in a piece of span L: an op with w1 > L is on its
    source's device, one with w2 > L on its sink's, one with v > L on a device holding source or sink.

    (i) D1 != D2. A's source is on D1 and B's on D2; A's sink on D2 and B's on D1. So an A-op with
        w1_A > L_A is on D1, one with w2_A > L_A on D2; a B-op with w1_B > L_B is on D2, one with
        w2_B > L_B on D1. A colocation group with a member forced onto D1 puts all its members, in both
        pieces, on D1 (likewise D2); a group forced onto both is impossible. Each device runs the ops of
        a piece on it one at a time within [0, L] of that piece, each after its head and ending at least
        its tail before L: so L_A is at least Jackson's preemptive schedule (:func:`dplace.bounds.anchored._jps`) of A's ops on
        D1, and of those on D2; likewise L_B. An op on its piece's source device is not on that piece's
        sink device (D1 != D2), so it ends at least its tx (>= tail) before L: its JPS takes tx as the
        tails; an op on its piece's sink device is not on the source's, so it starts at hx (>= head) or
        later: its JPS takes hx as the heads (A's ops on D1 and B's on D2 by tx; A's on D2 and B's on D1
        by hx; where tx or hx is +inf, on an anchor, tail or head stands in, a weaker value).
    (ii) D1 = D2 = D: all four anchors on D; an op with v > L is on D, and so is every member of its
        group, in both pieces; L_A and L_B at least the preemptive schedules of their ops on D.

    Thresholds: for a piece with weights W (the finite values above its proven bound lb, and lb itself,
    sorted: x_0 = lb < x_1 < ...), its span L lies in one [x_j, x_{j+1}); there {o : W(o) > L} =
    {o : W(o) > x_j}, so the forced sets are those of x_j, and L >= max(x_j, the preemptive schedules of
    the ops forced onto each device). So L_A + L_B is at least the least such sum over the threshold pairs
    (j, k) of both pieces and both cases, skipping pairs where a group is forced onto both devices. The
    pairs are tried in order of their bound from each piece's own forced ops alone (a lower bound of the
    pair's: the joint sets hold the own ones, and a preemptive schedule of fewer ops is no longer); once
    that order reaches the least value found (or :data:`MIRROR_MAX_JPS` schedules were tried), the rest
    cannot be lower than the pair it stops at. Never below ``lb_a + lb_b``.

    ``stop``: a callable read before each preemptive schedule (the caller's deadline): once it is true
    the search ends and ``lb_a + lb_b`` is returned (on NASNet-Mobile's pairs a call takes at most 0.08 s,
    but up to ``MIRROR_MAX_JPS`` schedules of a large piece could take seconds)."""
    import numpy as np

    base = lb_a + lb_b
    if a.m < 2 or a.n < 2 or b.n < 2:
        return base
    ra, rb = _roles(a), _roles(b)
    if ra is None or rb is None:
        return base
    names: dict[str, int] = {}
    ga, gb = _groups(a, names), _groups(b, names)
    sa, ta = ra[0], ra[1]
    sb, tb = rb[0], rb[1]
    if min(ga[sa], ga[ta], gb[sb], gb[tb]) < 0 or ga[sa] != gb[tb] or ga[ta] != gb[sb]:
        return base
    n_groups = len(names)
    budget = [MIRROR_MAX_JPS]

    def floor(r, mask, rel=3, due=4) -> float:  # rel, due: r's heads (3) or hx (8), tails (4) or tx (9)
        f = np.flatnonzero(mask)
        if len(f) == 0:
            return 0.0
        budget[0] -= 1
        if stop is not None and stop():
            raise _Stopped
        return _jps(r[rel][f], r[2][f], r[due][f])

    def points(vals, lb) -> list[float]:
        u = np.unique(vals[np.isfinite(vals)])
        return [lb] + [x for x in u.tolist() if x > lb]

    def grouped(g, mask):  # the groups of the ops in mask
        out = np.zeros(n_groups + 1, dtype=bool)
        out[g[mask]] = True
        out[-1] = False  # index -1: ops without a group
        return out

    def search(own_a, own_b, joint) -> float:
        pairs = sorted((own_a[i] + own_b[j], i, j) for i in range(len(own_a)) for j in range(len(own_b)))
        best = math.inf
        for c, i, j in pairs:
            if c >= best:
                break
            if budget[0] <= 0:
                return min(best, c)
            best = min(best, joint(i, j))
        return best

    try:
        # case (ii): one device
        xa, xb = points(ra[7], lb_a), points(rb[7], lb_b)
        own_a = [max(x, floor(ra, ra[7] > x)) for x in xa]
        own_b = [max(y, floor(rb, rb[7] > y)) for y in xb]

        def joint_ii(i, j):
            fa, fb = ra[7] > xa[i], rb[7] > xb[j]
            g = grouped(ga, fa) | grouped(gb, fb)
            return max(xa[i], floor(ra, fa | g[ga])) + max(xb[j], floor(rb, fb | g[gb]))

        best = search(own_a, own_b, joint_ii)
        # case (i): two devices (impossible when one group holds both anchors of a piece)
        if ga[sa] != ga[ta]:
            ya, yb = points(np.concatenate([ra[5], ra[6]]), lb_a), points(np.concatenate([rb[5], rb[6]]), lb_b)

            def own(r, x):
                m1, m2 = r[5] > x, r[6] > x
                if (m1 & m2).any():
                    return math.inf
                return max(x, floor(r, m1, due=9), floor(r, m2, rel=8))

            own_a = [own(ra, x) for x in ya]
            own_b = [own(rb, y) for y in yb]

            def joint_i(i, j):
                a1, a2 = ra[5] > ya[i], ra[6] > ya[i]  # A on D1 (its source's), on D2 (its sink's)
                b2, b1 = rb[5] > yb[j], rb[6] > yb[j]  # B on D2 (its source's), on D1 (its sink's)
                g1 = grouped(ga, a1) | grouped(gb, b1)
                g2 = grouped(ga, a2) | grouped(gb, b2)
                if (g1 & g2).any():
                    return math.inf
                on1a, on2a = a1 | g1[ga], a2 | g2[ga]
                on1b, on2b = b1 | g1[gb], b2 | g2[gb]
                if (on1a & on2a).any() or (on1b & on2b).any():
                    return math.inf
                return (max(ya[i], floor(ra, on1a, due=9), floor(ra, on2a, rel=8))
                        + max(yb[j], floor(rb, on1b, rel=8), floor(rb, on2b, due=9)))

            best = min(best, search(own_a, own_b, joint_i))
        return max(base, best) if math.isfinite(best) else base
    except _Stopped:  # the deadline: what is proven without the search
        return base
