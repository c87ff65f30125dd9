"""Theorem 4's k-periodic patterns (§5.2 of Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021): unroll a
pattern k+1 times and drop one batch in k+1, fewer live activations for a longer period."""
from __future__ import annotations

import time
from typing import Sequence

from dplace.errors import InfeasibleError, InvalidInstanceError

from .bounds import contiguous_lower_bound
from .chain import Chain
from .dp import _least_contiguous
from .pattern import Pattern, _tol, expand_communication, k_periodic, packed_pattern
from .solution import K_PERIODIC_GENERAL, PipelineSolution, _claim, _solution
from .star import one_f_one_b_star


def theorem4_pattern(chain: Chain, allocation: Sequence[int], processors: int, k: int) -> tuple[Pattern, list]:
    """Theorem 4's pattern for any allocation: :func:`k_periodic` of :func:`packed_pattern` (no idle
    time on the busiest processor). Returns (pattern, origin of each layer of its chain)."""
    base = packed_pattern(chain, allocation, processors)
    return k_periodic(base, k), expand_communication(chain, allocation, processors)[2]


def contiguous_theorem4(chain: Chain, processors: int | None = None, memory: float | None = None, k: int = 2, *,
                        use_chain_memory: bool = True) -> PipelineSolution:
    """The best pattern of Theorem 4's form over contiguous allocations, for one k (§5.2): unroll
    1F1B*(T) of a partition k+1 times and drop every (k+1)-th batch; a layer of group g then keeps
    :func:`theorem4_nca` (g, k) activations. The least T over every partition into ≤ P stages that fits
    with those NCAs comes from the contiguous DP with that NCA; at T = the stages' largest load
    (1F1B, no idle time) this is the paper's construction. Period (k+1)·T, normalised (1 + 1/k)·T.
    Raises InfeasibleError when no contiguous allocation fits."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInstanceError(f"k must be an integer >= 1, got {k!r}")
    t0 = time.perf_counter()
    P = processors or chain.processors
    M = memory if memory is not None else (chain.memory if use_chain_memory else None)
    T, stages = _least_contiguous(chain, P, M, k)
    star = one_f_one_b_star(chain, stages, T)
    alloc = [s for s, (a_, b_) in enumerate(stages) for _ in range(a_, b_)]
    sol = _solution(f"contiguous_theorem4(k={k})", chain, P, M, alloc, stages, k_periodic(star.pattern, k),
                    star.origin, unrolled_period=T, groups=len(star.groups))
    sol.claimed_period = (k + 1) * T
    sol.solve_time_s = time.perf_counter() - t0
    return _claim(sol, "contiguous")


def k_search(chain: Chain, base: PipelineSolution, allocation: str, max_k: int,
             only_k: int | None = None) -> PipelineSolution:
    """Theorem-4 patterns (§5.2) for k = 2..``max_k`` (or only ``only_k``), compared with ``base`` (a
    1-periodic solution of the same problem) on T/k. Contiguous: :func:`contiguous_theorem4`;
    general: also :func:`theorem4_pattern` of ``base``'s allocation. Returns the best valid solution
    (``base`` on ties; with ``only_k`` the best k-periodic one, flagged when worse than ``base``), with
    every candidate tried in ``extra["k_search"]``."""
    t0 = time.perf_counter()
    P, M = base.processors, base.memory
    rows = [dict(k=1, method=base.method, allocation=allocation, period=base.period,
                 normalised_period=base.normalised_period, valid=base.ok)]
    best = base if only_k is None else None
    groups_max = P if chain.bandwidth is None else 2 * P - 1  # 1F1B* never has more groups
    lb = contiguous_lower_bound(chain, P, M, use_chain_memory=False)
    rb = base.lower_bound if base.lower_bound_over == K_PERIODIC_GENERAL else None
    for k in ([only_k] if only_k is not None else range(2, max_k + 1)):
        target = base.normalised_period if best is None else best.normalised_period
        cands = []
        if lb is not None and (only_k is not None or (k < groups_max and (1 + 1 / k) * lb < target - _tol(target))):
            cands.append(("contiguous", contiguous_theorem4(chain, P, M, k, use_chain_memory=False)))
        if allocation == "general" and base.pattern is not None:
            pat, origin = theorem4_pattern(chain, base.allocation, P, k)
            if only_k is not None or pat.normalised_period < target - _tol(target):
                cands.append(("general", _solution(f"{base.method}+theorem4(k={k})", chain, P, M, base.allocation,
                                                   None, pat, origin)))
        for kind, c in cands:
            _claim(c, allocation, relaxation_bound=rb)
            rows.append(dict(k=k, method=c.method, allocation=kind, period=c.period,
                             normalised_period=c.normalised_period, valid=c.ok))
            if c.ok and (best is None or c.normalised_period < best.normalised_period - _tol(best.normalised_period)):
                best = c
    if best is None:
        raise InfeasibleError(f"chain {chain.name!r}: no valid {only_k}-periodic pattern of Theorem 4's form fits "
                              f"in memory {M}")
    best.extra["k_search"] = rows
    if best is not base:
        best.solve_time_s = base.solve_time_s + time.perf_counter() - t0
    if best is not base:
        best.extra["one_periodic"] = dict(method=base.method, period=base.period, status=base.status,
                                          optimal_over=base.optimal_over)
        if best.normalised_period > base.normalised_period + _tol(base.normalised_period):
            best.extra["worse_than_1_periodic"] = (
                f"T/k {best.normalised_period:.6g} with k = {best.k} is above the 1-periodic {base.normalised_period:.6g}")
    return best
