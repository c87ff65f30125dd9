"""When an op's inputs are on a device, parallel comm (each transfer on its own: a tensor produced at ``end``
on device ``a`` is on ``b`` at ``end + lat[a, b] + bytes / bw[a, b]``, at ``end`` on ``a`` itself), the
arithmetic of :meth:`dplace.schedule.state.ScheduleState.data_ready` on arrays. One rule for every compiled
list schedule: the schedule state (:mod:`dplace.kernels.state`), Baechi's m-ETF/m-SCT
(:mod:`dplace.kernels.etf`) and annealing's judge (:mod:`dplace.kernels.anneal`)."""
from __future__ import annotations

from . import njit

__all__ = ["placed_pred", "ready_at"]


@njit(inline="always")
def placed_pred(pl, pred_edge, esrc, k):
    """Entry ``k`` of the predecessor lists: (edge, producer, the producer's device); a producer not placed
    yet is an error."""
    e = pred_edge[k]
    p = esrc[e]
    dp = pl[p]
    if dp < 0:
        raise ValueError("ScheduleState: a predecessor is not committed")
    return e, p, dp


@njit(inline="always")
def ready_at(o, d, pl, end, pred_ptr, pred_edge, esrc, ebytes, lat, bw):
    """When every input of op ``o`` is on device ``d`` (its producers placed, ``end`` their end times)."""
    t = 0.0
    for k in range(pred_ptr[o], pred_ptr[o + 1]):
        e, p, dp = placed_pred(pl, pred_edge, esrc, k)
        a = end[p] if dp == d else end[p] + lat[dp, d] + ebytes[e] / bw[dp, d]
        if a > t:
            t = a
    return t
