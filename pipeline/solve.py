"""One entry point for pipelined chains: a 1-periodic allocation, then Theorem-4 patterns when memory binds."""
from __future__ import annotations

from dplace.errors import InvalidInstanceError

from .chain import Chain
from .cpsat import contiguous_cpsat, general_cpsat
from .dp import contiguous_dp
from .kperiodic import k_search
from .solution import K_PERIODIC_CONTIGUOUS, K_PERIODIC_GENERAL, PipelineSolution

METHOD_ALIASES = {"milp": "cpsat"}  # the name the CLI's --method has always accepted


def solve_pipeline(chain: Chain, *, processors: int | None = None, memory: float | None = None,
                   allocation: str = "contiguous", method: str | None = None, k: int | None = None,
                   max_k: int = 4, time_limit_s: float | None = 30.0, seed: int = 0) -> PipelineSolution:
    """One entry point: ``allocation`` contiguous (method ``dp`` or ``cpsat``) or general (``cpsat``)
    gives a 1-periodic solution; then, by ``k``:

    - None: when that solution is not proven optimal over every k-periodic pattern (memory binds),
      Theorem-4 patterns for k = 2..``max_k`` (:func:`k_search`); the least T/k is returned;
    - 1: the 1-periodic solution only;
    - K ≥ 2: the best Theorem-4 pattern for that K (the paper's construction from the no-idle pattern),
      with ``extra["worse_than_1_periodic"]`` when its T/k is above the 1-periodic solution's.

    ``milp`` is accepted as another name of ``cpsat`` (the CLI's ``--method milp``)."""
    for name, v in (("k", k), ("max_k", max_k)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InvalidInstanceError(f"{name} must be an integer >= 1, got {v!r}")
    meth = METHOD_ALIASES.get(method, method)
    if allocation == "contiguous":
        meth = meth or "dp"
        if meth == "dp":
            sol = contiguous_dp(chain, processors, memory)
        elif meth == "cpsat":
            sol = contiguous_cpsat(chain, processors, memory, time_limit_s=time_limit_s, seed=seed)
        else:
            raise InvalidInstanceError(f"method must be one of dp, cpsat for contiguous allocations, got {method!r}")
    elif allocation == "general":
        meth = meth or "cpsat"
        if meth != "cpsat":
            raise InvalidInstanceError(f"method must be cpsat for general allocations, got {method!r}")
        sol = general_cpsat(chain, processors, memory, time_limit_s=time_limit_s, seed=seed)
    else:
        raise InvalidInstanceError(f"allocation must be contiguous or general, got {allocation!r}")
    if k is not None and k > 1:
        return k_search(chain, sol, allocation, k, only_k=k)
    if k is None and max_k > 1 and sol.optimal_over not in (K_PERIODIC_CONTIGUOUS, K_PERIODIC_GENERAL):
        return k_search(chain, sol, allocation, max_k)
    return sol
