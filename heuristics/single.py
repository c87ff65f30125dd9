"""``single``: every op on the one fastest device that holds them all (a baseline)."""
from __future__ import annotations

from dplace.budget import Budget
from dplace.errors import InfeasibleError
from dplace.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result


@register("single", summary="Every op on one device: the fastest single device that holds them all.", kind="baseline")
def single(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None) -> Result:
    """Single-device baseline (the "single GPU" placement Baechi, SoCC'20, §5 compares against).

    All ops on the one device that fits them and finishes first; infeasible if none holds them."""
    total = sum(inst.mem)
    pins = {d for d in inst.pinned if d >= 0}
    best = None
    for d in range(inst.m):
        if total > inst.capacity[d] or (pins and pins != {d}):
            continue
        work = sum(row[d] for row in inst.dur)
        if best is None or work < best[0]:
            best = (work, d)
    if best is None:
        raise InfeasibleError(f"single: no device holds all {total} bytes" + (" with the pins given" if pins else ""))
    return make_result(inst, "single", [best[1]] * inst.n)
