"""The sequential-comm annealing's judge with insertion, compiled: ``placement_order(inst, pl)`` (the
placement's own upward rank, each op committed at its earliest start, into an idle gap when one is long
enough) on the compiled sequential state (:mod:`dplace.kernels.seqstate`), reset and refilled in compiled
code for each placement. Its value is the state's makespan, which is ``dplace.simulate`` of the placement
and the state's device orders (the state keeps the simulator's times, sends re-timed on their links when
an insertion puts a producer earlier in its device's order: ``tests/kernels/test_seqjudge.py`` compares
them op by op on random instances, both feature sets).

Why: the judge without insertion (:func:`dplace.kernels.anneal._seq_schedule`, the rank order run as is)
costs O(E + n log n) but is 2-6k µs worse than the same placement in ``placement_order``'s order on
NASNet-Mobile (session 16); the annealing kept placements for a judge its answer is not timed by.
"""
from __future__ import annotations

import numpy as np

from . import njit
from . import seqstate as sq
from .orders import _INF, BUDGET
from .placerank import sorted_ops
from .state import makespan


@njit
def reset(S, L, budget):
    """``new_state`` / ``new_links`` again, in place (the arrays they leave ``np.empty`` are written
    before they are read)."""
    S.placement[:] = -1
    S.start[:] = 0.0
    S.end[:] = 0.0
    S.ready[:] = 0.0
    S.dprev[:] = -1
    S.dnext[:] = -1
    S.bn[:] = 0
    S.dnb[:] = 0
    S.tail[:] = -1
    S.seqn[:] = 0
    S.gn[:] = 0
    S.free[:] = 0.0
    S.stale[:] = _INF
    S.mem_used[:] = 0
    S.cnt[:] = 0
    S.cnt[BUDGET] = budget
    S.moved[:] = _INF
    S.pending[:] = False
    L.pos[:] = 0.0
    L.tx_s[:] = 0.0
    L.tx_f[:] = 0.0
    L.tx_b[:] = 0.0
    L.lprev[:] = 0
    L.lnext[:] = 0
    L.has[:] = 0
    L.pend[:] = 0
    L.ln[:] = 0
    L.need_b[:] = -1.0
    L.cnt[:] = 0
    L.harm[:] = 0.0
    L.dmask[:] = 0


@njit
def seq_insert_schedule(I, S, L, pl, rank, topo, budget):
    """Commits every op of placement ``pl`` in decreasing ``rank`` (ties: topological position; a
    topological order, since an op's rank is at least each successor's) with insertion; returns the
    makespan. ``S`` / ``L`` are reset first."""
    reset(S, L, budget)
    for o in sorted_ops(topo, rank, -1.0):
        sq.commit(I, S, L, o, pl[o], 0.0, False, True)
    return makespan(S) if len(topo) else 0.0


class SeqInsertJudge:
    """:func:`seq_insert_schedule` on one instance, its state allocated once."""

    def __init__(self, inst) -> None:
        from . import CASCADE_BUDGET, inst_arrays
        from .seqlinks import new_links
        from .state import inst_tuple, new_state

        a = self.a = inst_arrays(inst)
        self.I, self.S, self.L = inst_tuple(a), new_state(a.n, a.m), new_links(a.n, a.m)
        self.budget = CASCADE_BUDGET
        self.rank = np.empty(a.n)

    def __call__(self, placement) -> tuple[float, list[list[int]]]:
        """(makespan, per-device order) of ``placement`` judged with insertion."""
        from .placerank import placement_rank
        from .orders import order_lists

        a = self.a
        pl = np.asarray(placement, dtype=np.int64)
        placement_rank(pl, a.dur, a.lat, a.bw, a.topo, a.esrc, a.edst, a.ebytes, a.succ_ptr, a.succ_edge, self.rank)
        mk = seq_insert_schedule(self.I, self.S, self.L, pl, self.rank, a.topo, self.budget)
        return float(mk), order_lists(self.S)
