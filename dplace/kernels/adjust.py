"""Celeritas' Adjusting Placement (Alg. 2, eqs. 7-9) compiled for parallel comm, the same placement and
schedule as :func:`dplace.heuristics.celeritas.adjusting_placement` (the reference).

Times come from the compiled ScheduleState of :mod:`dplace.kernels.state` (est / commit with insertion,
as the reference's); the placement rules are :class:`~dplace.heuristics.celeritas.PinFirstRules`' (pins
and pinned groups reserve their memory up front, a pinned op needs nothing more; a group's first op
reserves the whole group).
"""
from __future__ import annotations

import numpy as np

from . import inst_arrays, njit
from .state import ArrayState, commit, est, inst_tuple, new_rules, new_state

__all__ = ["adjusting_placement"]


@njit
def _need(I, used, group_dev, group_mem, o):
    if I.pinned[o] >= 0:
        return 0
    g = I.group_of[o]
    if g >= 0:
        return 0 if group_dev[g] >= 0 else group_mem[g]
    return I.mem[o]


@njit
def _adjust(I, S, order, used, group_dev, group_mem):
    m = len(used)
    inf = np.inf
    estv = np.empty(m)
    for o in range(len(I.pinned)):  # PinFirstRules: pinned memory reserved first
        d = I.pinned[o]
        if d < 0:
            continue
        g = I.group_of[o]
        if g < 0:
            used[d] += I.mem[o]
        elif group_dev[g] < 0:
            used[d] += group_mem[g]
            group_dev[g] = d
    prev = -1
    for v in order:
        need = _need(I, used, group_dev, group_mem, v)
        g = I.group_of[v]
        f = I.pinned[v]
        if f < 0 and g >= 0:
            f = group_dev[g]
        ncand = 0
        for d in range(m):
            estv[d] = inf
            ok = (d == f and (need == 0 or used[d] + need <= I.capacity[d])) if f >= 0 else \
                used[d] + need <= I.capacity[d]
            if ok:
                estv[d] = est(I, S, v, d, True)
                ncand += 1
        if ncand == 0:  # every allowed device is full: best effort
            d = f
            if d < 0:
                d = 0
                for x in range(1, m):
                    if used[x] < used[d]:
                        d = x
        else:
            d1 = 0
            for x in range(1, m):
                if estv[x] < estv[d1]:
                    d1 = x
            dk = prev if prev >= 0 else d1
            if estv[dk] < inf:
                back = 0.0  # eq. (8): the longest transfer of v's outputs from d1 back to dk
                if d1 != dk:
                    for k in range(I.succ_ptr[v], I.succ_ptr[v + 1]):
                        e = I.succ_edge[k]
                        t = I.lat[d1, dk] + I.ebytes[e] / I.bw[d1, dk]
                        if t > back:
                            back = t
                d = d1 if estv[dk] - estv[d1] > back else dk  # eq. (9)
            else:
                d = d1
        commit(I, S, v, d, 0.0, False, True)
        used[d] += need
        if g >= 0 and group_dev[g] < 0:
            group_dev[g] = d
        prev = d


def adjusting_placement(inst, order: list[int]) -> tuple[list[int], ArrayState]:
    """Alg. 2 on ``inst`` (parallel comm) in ``order``: (placement, the schedule's read side)."""
    I = inst_tuple(inst_arrays(inst))
    S = new_state(inst.n, inst.m)
    R = new_rules(I, inst.n, inst.m)
    _adjust(I, S, np.asarray(order, dtype=np.int64), R.used, R.group_dev, R.group_mem)
    st = ArrayState(I, S)
    return st.placement, st
