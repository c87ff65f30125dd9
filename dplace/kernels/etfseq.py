"""Baechi's m-ETF / m-SCT list scheduling in sequential comm, compiled: ``_list_schedule`` of
:mod:`dplace.heuristics.baechi` (the reference, ``DPLACE_KERNEL=python``) with its loop over the compiled
sequential state (:mod:`dplace.kernels.seqstate`) in compiled code too, the same decisions.

The loop is :func:`dplace.kernels.etf.list_loop`, the parallel one's, given the sequential state: what
differs from parallel comm is the state (a device is free when its last op ends in the state; data ready
and commits are the state's, sends queued on their links) and the reference's second look (the chosen
cluster's start asked again; delayed by link contention since it was keyed, it waits again).

tests/kernels/test_etf_kernels.py compares it with the reference (m_etf, m_sct, their options).
"""
from __future__ import annotations

import numpy as np

from .etf import list_loop

__all__ = ["etf_seq"]


def etf_seq(inst, ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, prio, cunit, unit_mem, unit_pin, cmem,
            reserve_whole, fav_child, sct, stop):
    """``_list_schedule`` in sequential comm on arrays: (placement, per-device order, makespan or None when
    cut, fallbacks, clusters placed by the method's rule). ``stop`` as :func:`dplace.kernels.etf.etf`'s; the
    clusters left after it are placed by the deadline rule and appended to their devices' orders."""
    from . import inst_arrays
    from .seqlinks import new_links, set_link_policy
    from .state import inst_tuple, makespan, new_state, order_lists

    a = inst_arrays(inst)
    I, S, L = inst_tuple(a), new_state(a.n, a.m), set_link_policy(new_links(a.n, a.m), a.n)
    i64 = np.int64
    pl, seq, nseq, fallbacks, placed = list_loop(
        I, S, L, None, int(inst.m), ops_ptr, ops, csucc_ptr, csucc, cpred_ptr, cpred, np.asarray(prio, dtype=np.float64),
        np.asarray(cunit, dtype=i64), unit_mem, unit_pin, np.asarray(cmem, dtype=i64), a.capacity,
        bool(reserve_whole), np.asarray(fav_child, dtype=i64), bool(sct), stop)
    order = order_lists(S)
    for o in seq[:nseq].tolist():
        order[int(pl[o])].append(o)
    span = float(makespan(S)) if inst.n else 0.0
    return pl.tolist(), order, (span if nseq == 0 and placed == len(ops_ptr) - 1 else None), int(fallbacks), \
        int(placed)
