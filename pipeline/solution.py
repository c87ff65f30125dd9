"""The answer of every pipeline method and the one place that sets its status and bound.

Every solution says over which patterns its T/k is proven least (``optimal_over``, one of SCOPES) and
carries a lower bound on T/k with its scope; :func:`_claim` sets both through :mod:`dplace.verify.claims`.
The contiguous DP (and a proven contiguous CP-SAT run) is exact over 1-periodic contiguous patterns
only: when memory binds, a k-periodic pattern can do better (Theorem 4 of Beaumont, Eyraud-Dubois,
Shilova, Euro-Par 2021), so ``optimal`` over k-periodic patterns needs T/k to reach a bound valid for
all of them (the load bounds of :mod:`.bounds`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from dplace.verify import claims

from .bounds import contiguous_lower_bound, general_lower_bound
from .chain import Chain
from .pattern import Pattern, PatternReport, validate_pattern


@dataclass
class PipelineSolution:
    method: str
    chain: Chain
    processors: int
    memory: float | None
    status: str  # "optimal" (over ``optimal_over`` only) | "feasible" | "infeasible" | "unknown"
    allocation: list[int] = field(default_factory=list)  # processor of each layer
    stages: list[tuple[int, int]] | None = None  # contiguous allocations only
    pattern: Pattern | None = None
    report: PatternReport | None = None
    nca: list[int] = field(default_factory=list)  # per layer of the chain
    memory_used: list[float] = field(default_factory=list)  # per processor
    claimed_period: float | None = None  # the model's objective
    solve_time_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    optimal_over: str | None = None  # the patterns among which T/k is proven least (SCOPES), with "optimal"
    lower_bound: float | None = None  # proven least T/k over ``lower_bound_over`` (µs)
    lower_bound_over: str | None = None
    lower_bound_source: str | None = None  # what proves ``lower_bound``

    @property
    def period(self) -> float | None:
        return self.pattern.period if self.pattern else None

    @property
    def normalised_period(self) -> float | None:
        return self.pattern.normalised_period if self.pattern else None

    @property
    def k(self) -> int:
        return self.pattern.k if self.pattern else 1

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    def to_dict(self) -> dict[str, Any]:
        return {"format": "dplace-pipeline/1", "chain": self.chain.name, "method": self.method,
                "status": self.status, "optimal_over": self.optimal_over, "lower_bound": self.lower_bound,
                "lower_bound_over": self.lower_bound_over, "lower_bound_source": self.lower_bound_source,
                "processors": self.processors, "memory": self.memory,
                "period": self.period, "k": self.k, "normalised_period": self.normalised_period,
                "claimed_period": self.claimed_period, "valid": self.ok,
                "errors": list(self.report.errors) if self.report else [],
                "allocation": {ly.id: a for ly, a in zip(self.chain.layers, self.allocation)},
                "stages": self.stages, "nca": {ly.id: n for ly, n in zip(self.chain.layers, self.nca)},
                "memory_used": self.memory_used, "solve_time_s": self.solve_time_s, "extra": self.extra,
                "pattern": self.pattern.to_dict() if self.pattern else None}


def _finish(sol: PipelineSolution, pattern: Pattern, origin: Sequence[int | None]) -> PipelineSolution:
    rep = validate_pattern(pattern, sol.memory)
    sol.pattern = pattern
    sol.report = rep
    sol.nca = [rep.nca[e] for e in range(len(origin)) if origin[e] is not None]
    index = {name: r for r, name in enumerate(pattern.resources[:pattern.processors])}
    sol.memory_used = [rep.memory[index[f"p{p}"]] if f"p{p}" in index else 0.0 for p in range(sol.processors)]
    return sol


# The scope of a claim: the patterns among which a normalised period T/k is proven least (or bounded).
ONE_PERIODIC_CONTIGUOUS = "1-periodic contiguous"  # 1-periodic patterns of contiguous allocations
K_PERIODIC_CONTIGUOUS = "k-periodic contiguous"  # k-periodic patterns (every k) of contiguous allocations
K_PERIODIC_GENERAL = "k-periodic general"  # k-periodic patterns (every k) of any allocation
SCOPES = (ONE_PERIODIC_CONTIGUOUS, K_PERIODIC_CONTIGUOUS, K_PERIODIC_GENERAL)


def _claim(sol: PipelineSolution, allocation: str, exact_over: str | None = None,
           relaxation_bound: float | None = None) -> PipelineSolution:
    """Set the solution's status, ``optimal_over`` and lower bound through :mod:`dplace.verify.claims` (its one
    tolerance; a bound above a valid pattern's T/k is dropped there with a note), the one place this
    module claims either. ``allocation`` is the class asked for ("contiguous" or "general");
    ``exact_over`` a scope over which the method itself proved the pattern optimal (the contiguous DP:
    1-periodic contiguous); ``relaxation_bound`` a proven (confirmed) bound on T/k over every k-periodic
    general pattern. The pattern is ``optimal`` over k-periodic patterns only when its T/k reaches a
    bound valid for all of them."""

    P = sol.processors
    v = sol.normalised_period if sol.ok else None
    general = [claims.Bound(general_lower_bound(sol.chain, P), "largest layer, total load / P")]
    if relaxation_bound is not None:
        general.append(claims.Bound(relaxation_bound, "load relaxation (CP-SAT, confirmed without presolve)"))
    dec = dec_g = claims.decide(v, general, feasible=sol.ok)
    sol.lower_bound_over = K_PERIODIC_GENERAL
    if allocation == "contiguous":
        lb_c = contiguous_lower_bound(sol.chain, P, sol.memory, use_chain_memory=False)
        extra = [] if lb_c is None else [claims.Bound(lb_c, "contiguous stage loads, every NCA >= 1")]
        dec = claims.decide(v, general + extra, feasible=sol.ok)
        sol.lower_bound_over = K_PERIODIC_CONTIGUOUS
    sol.lower_bound = dec.bound.value if dec.bound else None
    sol.lower_bound_source = dec.bound.source if dec.bound else None
    notes = dec_g.notes + [n for n in dec.notes if n not in dec_g.notes]
    if notes:
        sol.extra["claim_notes"] = list(sol.extra.get("claim_notes", [])) + notes
    sol.optimal_over = None
    if not sol.ok:
        sol.status = "unknown"
        return sol
    if dec_g.optimal:
        sol.optimal_over = K_PERIODIC_GENERAL
    elif allocation == "contiguous" and dec.optimal:
        sol.optimal_over = K_PERIODIC_CONTIGUOUS
    elif exact_over is not None and sol.k == 1:
        sol.optimal_over = exact_over
    sol.status = "optimal" if sol.optimal_over else "feasible"
    return sol


def describe_status(sol: PipelineSolution) -> str:
    """One line for people: the status with its scope and the proven bound."""
    names = {ONE_PERIODIC_CONTIGUOUS: "1-periodic patterns of contiguous allocations only (a k-periodic "
                                      "pattern may have a lower T/k)",
             K_PERIODIC_CONTIGUOUS: "every k-periodic pattern of a contiguous allocation",
             K_PERIODIC_GENERAL: "every k-periodic pattern of any allocation"}
    out = sol.status if sol.optimal_over is None else f"optimal over {names[sol.optimal_over]}"
    if sol.lower_bound is not None:
        over = "contiguous allocations" if sol.lower_bound_over == K_PERIODIC_CONTIGUOUS else "any allocation"
        out += f"; proven T/k >= {sol.lower_bound:,.6g} µs over k-periodic patterns of {over}"
    return out


def _solution(method: str, chain: Chain, P: int, M: float | None, alloc: list[int],
              stages: list[tuple[int, int]] | None, pattern: Pattern, origin: Sequence[int | None],
              **extra: Any) -> PipelineSolution:
    sol = PipelineSolution(method, chain, P, M, "feasible", list(alloc), stages, extra=dict(extra))
    return _finish(sol, pattern, origin)
