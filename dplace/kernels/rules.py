"""The placement rules of :class:`dplace.schedule.rules.Rules` on arrays, compiled (pins, colocation groups
reserving their whole memory at their first op, fallback to the device with most free memory), for the
compiled list schedulers (``I`` a :class:`dplace.kernels.state.Inst`, ``R`` a ``RulesState``).

A deliberate kernel/reference pair with :mod:`dplace.schedule.rules` (the reference, ``DPLACE_KERNEL=python``):
the same decisions, compared through the list schedulers on instances with pins, colocation groups and
binding memory (``tests/kernels/test_list_kernels.py::test_heft_kernel_is_the_reference``,
``::test_dpos_kernel_is_the_reference``)."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from . import njit

RulesState = namedtuple("RulesState", "used group_dev group_mem placed")


def new_rules(I, n: int, m: int) -> RulesState:
    gp, gm = I.group_ptr, I.group_members
    ng = len(gp) - 1
    gsum = np.zeros(ng, dtype=np.int64)
    np.add.at(gsum, np.repeat(np.arange(ng), np.diff(gp)), I.mem[gm])
    return RulesState(used=np.zeros(m, dtype=np.int64), group_dev=np.full(ng, -1, dtype=np.int64),
                      group_mem=gsum, placed=np.zeros(n, dtype=np.bool_))


@njit(inline="always")
def rules_need(I, R, o):
    """Bytes that placing o now adds (its whole group's if it is the group's first op)."""
    g = I.group_of[o]
    if g >= 0:
        return 0 if R.group_dev[g] >= 0 else R.group_mem[g]
    return I.mem[o]


@njit(inline="always")
def rules_forced(I, R, o):
    if I.pinned[o] >= 0:
        return I.pinned[o]
    g = I.group_of[o]
    if g >= 0 and R.group_dev[g] >= 0:
        return R.group_dev[g]
    return -1


@njit(inline="always")
def rules_fits(I, R, o, d):
    return R.used[d] + rules_need(I, R, o) <= I.capacity[d]


@njit(borrow=True)
def rules_candidates(I, R, o, out):
    """``Rules.choose_or_fallback(o)`` into ``out[:k]``; returns k."""
    f = rules_forced(I, R, o)
    if f >= 0:  # a forced device is the fallback too
        out[0] = f
        return 1
    need = rules_need(I, R, o)
    k = 0
    m = len(I.capacity)
    for d in range(m):
        if R.used[d] + need <= I.capacity[d]:
            out[k] = d
            k += 1
    if k == 0:  # most free memory, ties to the lowest device
        best = 0
        for d in range(1, m):
            if I.capacity[d] - R.used[d] > I.capacity[best] - R.used[best]:
                best = d
        out[0] = best
        k = 1
    return k


@njit(borrow=True)
def rules_assign(I, R, o, d):
    R.used[d] += rules_need(I, R, o)
    g = I.group_of[o]
    if g >= 0 and R.group_dev[g] < 0:
        R.group_dev[g] = d
    R.placed[o] = True

