"""The large-neighbourhood model both of dplace's CP-SAT neighbourhood searches solve: refine's windows of the
critical path (:mod:`.refine`) and ranges of it with their colocation mates (:mod:`.ranges`)."""
from __future__ import annotations

from typing import Sequence

from dplace.budget import Budget
from dplace.instance.model import Instance

from .cpsat import Ticks, hinted_model

__all__ = ["neighbourhood_model"]


def neighbourhood_model(inst: Instance, placement: Sequence[int], order: Sequence[Sequence[int]], free: Sequence[int],
                        T: Ticks, reach: list[int], lb_ticks: int, hint_time_s: float, budget: Budget | None = None):
    """Free the ops of ``free``; keep the others on their device (``placement``) and in their device order
    (``order``), hinted by the answer (:func:`.cpsat.hinted_model`); :class:`~.frame.OutOfTime` when ``budget`` is
    spent first. Returns (model, hint values; None when the hint does not fit)."""
    free_set = set(free)
    fixed = {o: placement[o] for o in range(inst.n) if o not in free_set}
    prec = []
    for ops in order:
        kept = [o for o in ops if o not in free_set]
        prec.extend(zip(kept, kept[1:]))
    return hinted_model(inst, T, (list(placement), [list(x) for x in order]), fixed=fixed, prec=prec, reach=reach,
                        hint_time_s=hint_time_s, lb_ticks=lb_ticks, windows=True, budget=budget)
