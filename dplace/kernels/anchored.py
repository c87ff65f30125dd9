"""The anchored bounds' recurrence compiled (:func:`dplace.kernels.bounds.away`; the reference is
:func:`dplace.bounds.anchored._away`, tests/test_bounds_arrays.py compares them)."""
from __future__ import annotations

import numpy as np

from . import njit


@njit
def away_times(order, ptr, edges, other, base, p, c, anchor):
    """The recurrence of :func:`dplace.bounds.anchored._away` (its ``away``): ``base`` (head or tail) where
    there is no anchor, else +inf at the anchor and, in ``order``, each op's largest over its ``edges`` of
    min(base[u] + p[u] + c[e], out[u] + p[u]) (0 without edges): the same float operations."""
    out = base.copy()
    if anchor < 0:
        return out
    out[anchor] = np.inf
    for i in range(len(order)):
        o = order[i]
        if o == anchor:
            continue
        best = 0.0
        seen = False
        for k in range(ptr[o], ptr[o + 1]):
            e = edges[k]
            u = other[e]
            x = base[u] + p[u] + c[e]
            y = out[u] + p[u]
            v = y if y < x else x
            if not seen or v > best:
                best = v
                seen = True
        out[o] = best
    return out

