"""Baechi's m-ETF / m-SCT list scheduling in sequential comm, compiled: ``_list_schedule`` of
:mod:`dplace.heuristics.baechi` (the reference, ``DPLACE_KERNEL=python``) with its loop over the compiled
sequential state (:mod:`dplace.kernels.seqstate`) in compiled code too, the same decisions.

The heaps and the choice of a step are :mod:`dplace.kernels.etf`'s (``pick``, ``push_ready``); what
differs from parallel comm is the state: a device is free when its last op ends in the state (commits
re-time committed work when a send delays it), data ready and commits are the state's (sends queued on
their links), and the reference's second look: the chosen cluster's start is asked again, and when link
contention has delayed it since it was keyed (beyond 1e-9 relative) it waits again on that device, keyed by
its new data-ready time, and the step is chosen anew.

A deliberate pair with :func:`dplace.kernels.etf.etf`: the loop's skeleton (seeding the ready clusters, the
stop check, the pick) is written in both, each over its own state (the parallel arrays, the sequential state
tuple), since numba compiles no loop generic over them; each twin is compared op by op with the reference.

tests/kernels/test_etf_kernels.py compares it with the reference (m_etf, m_sct, their options).
"""
from __future__ import annotations

import numpy as np

from . import njit
from .etf import _complete, _hpop, _hpush, book, fallback_next, new_lists, pick, push_ready
from .seqstate import commit, data_ready, est
from .state import device_free

__all__ = ["etf_seq"]


@njit
def _ready(I, S, L, c, m, H, size, dr, drmax, prio, ready_seq, cnt, ops_ptr, ops, cunit, unit_pin, unit_dev,
           unit_mem, cmem, reserve_whole, used, capacity):
    o = ops[ops_ptr[c]]
    for d in range(m):
        dr[d] = data_ready(I, S, L, o, d)
    return push_ready(c, m, H, size, dr, drmax, prio, ready_seq, cnt, cunit, unit_pin, unit_dev, unit_mem, cmem,
                      reserve_whole, used, capacity)


@njit
def _etf_seq(I, S, L, m, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, prio, cunit, unit_mem, unit_pin, cmem,
             capacity, reserve_whole, fav_child, sct, stop):
    nc = len(ops_ptr) - 1
    n = I.dur.shape[0]
    used, unit_dev, need, done, drmax, fav_dev, ready_seq, cnt, size, H, dr = new_lists(nc, m, len(unit_mem),
                                                                                         cpred_ptr)
    ready_ptr = 0
    free = np.zeros(m)
    for c in range(nc):
        if need[c] == 0:
            H = _ready(I, S, L, c, m, H, size, dr, drmax, prio, ready_seq, cnt, ops_ptr, ops, cunit, unit_pin,
                       unit_dev, unit_mem, cmem, reserve_whole, used, capacity)
    placed = 0
    fallbacks = 0
    while placed < nc:
        if placed >= stop[0]:  # the caller's budget expired (a timer thread lowers stop[0]; nogil)
            break
        for d in range(m):
            free[d] = device_free(S, d)
        found, bt, c, d, bsrc, H = pick(m, H, size, free, sct, fav_dev, drmax, done, cunit, unit_pin, unit_dev,
                                        unit_mem, cmem, reserve_whole, used, capacity)
        if found:
            _hpop(H, size, (m + d) if bsrc == 0 else d)
            o = ops[ops_ptr[c]]
            t = est(I, S, L, o, d, False)  # link contention may have delayed the data since it was keyed
            if t > bt + 1e-9 * max(1.0, abs(t)):
                H = _hpush(H, size, d, data_ready(I, S, L, o, d), prio[c], c)
                continue
        else:  # no ready cluster fits anywhere: best effort (the device with the most room), flagged
            c, d, ready_ptr = fallback_next(m, ready_seq, ready_ptr, done, cunit, unit_pin, unit_dev, capacity, used)
            fallbacks += 1
        for j in range(ops_ptr[c], ops_ptr[c + 1]):
            commit(I, S, L, ops[j], d, 0.0, False, False)
        book(c, d, used, unit_dev, done, fav_dev, fav_child, sct, cunit, unit_mem, cmem, reserve_whole)
        for j in range(csucc_ptr[c], csucc_ptr[c + 1]):
            s2 = csucc[j]
            need[s2] -= 1
            if need[s2] == 0:
                H = _ready(I, S, L, s2, m, H, size, dr, drmax, prio, ready_seq, cnt, ops_ptr, ops, cunit, unit_pin,
                           unit_dev, unit_mem, cmem, reserve_whole, used, capacity)
        placed += 1
    pl = S.placement.copy()
    seq = np.empty(n, dtype=np.int64)  # the ops placed by the deadline rule, in its order
    nseq = 0
    if placed < nc:
        more, nseq = _complete(m, nc, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, cunit, unit_mem, unit_pin,
                               cmem, capacity, reserve_whole, used, unit_dev, done, need, pl, seq, nseq)
        fallbacks += more
    return pl, seq[:nseq], fallbacks, placed


def etf_seq(inst, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, prio, cunit, unit_mem, unit_pin, cmem,
            reserve_whole, fav_child, sct, stop):
    """``_list_schedule`` in sequential comm on arrays: (placement, per-device order, makespan or None when
    cut, fallbacks, clusters placed by the method's rule). ``stop`` as :func:`dplace.kernels.etf.etf`'s; the
    clusters left after it are placed by the deadline rule and appended to their devices' orders."""
    from . import inst_arrays
    from .seqlinks import new_links
    from .state import inst_tuple, makespan, new_state, order_lists

    a = inst_arrays(inst)
    I, S, L = inst_tuple(a), new_state(a.n, a.m), new_links(a.n, a.m)
    i64 = np.int64
    pl, seq, fallbacks, placed = _etf_seq(
        I, S, L, int(inst.m), ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, np.asarray(prio, dtype=np.float64),
        np.asarray(cunit, dtype=i64), unit_mem, unit_pin, np.asarray(cmem, dtype=i64), a.capacity,
        bool(reserve_whole), np.asarray(fav_child, dtype=i64), bool(sct), stop)
    order = order_lists(S)
    for o in seq.tolist():
        order[int(pl[o])].append(o)
    span = float(makespan(S)) if inst.n else 0.0
    return pl.tolist(), order, (span if len(seq) == 0 and placed == len(ops_ptr) - 1 else None), int(fallbacks), \
        int(placed)
