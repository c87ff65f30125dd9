"""Pipelined model parallelism on chains: periodic patterns, 1F1B*, k-periodic patterns, allocations.

Source: Beaumont, Eyraud-Dubois, Shilova, "Pipelined Model Parallelism: Complexity Results and
Memory Considerations" (Euro-Par 2021): model and NCA §3, 1F1B* §5.1 (Alg. 1, Thm. 3), k-periodic
patterns §5.2 (Thm. 4), contiguous vs general allocations §6 (Thm. 5, Lemma 2, Thm. 6).

This is a different problem from DAG placement (the objective is the period of a steady-state
pipeline, not one step's makespan), so nothing here is registered with :mod:`dplace.registry`.

Vocabulary (as in the paper):
- a *pattern* of period T holds each operation (F_l or B_l) k times; each copy has a resource, a start
  in [0, T) and a shift h: in period j it processes batch j·k + h at time j·T + start. The pattern is
  k-periodic; its normalised period is T/k.
- NCA_l, the number of concurrent activations of layer l, is the largest number of batches whose
  F_l has started and whose B_l has not ended (:func:`validate_pattern` counts it exactly from starts
  and shifts; :func:`nca_from_shifts` is the paper's max h − h' rule of §3.2, equal on valid patterns).
- memory of a processor = Σ over its layers of W_l + NCA_l·a_l.
- with a bandwidth β each cut between two resources becomes a communication layer of forward and
  backward time a_l/β (2·a_l/β in all, §3.1) on its own link resource, without memory.

Claims: every solution says over which patterns its T/k is proven least (``optimal_over``, one of
SCOPES) and carries a lower bound on T/k with its scope; :func:`_claim` is the one place that sets
them. The contiguous DP (and a proven contiguous CP-SAT run) is exact over 1-periodic contiguous
patterns only: when memory binds, a k-periodic pattern can do better (Theorem 4), so ``optimal``
over k-periodic patterns needs T/k to reach a bound valid for all of them (the load bounds).

Public functions: :func:`one_f_one_b_star`, :func:`k_periodic`, :func:`validate_pattern`, :func:`nca_from_shifts`,
:func:`contiguous_dp`, :func:`contiguous_milp`, :func:`general_milp`, :func:`contiguous_theorem4`,
:func:`k_search`, :func:`solve_pipeline`, the proven bounds :func:`general_lower_bound` and
:func:`contiguous_lower_bound`, plus
helpers to build patterns (:func:`pattern_from_times`, :func:`packed_pattern`) and the paper's
example chains (:func:`theorem4_chain`, :func:`theorem5_chain`, :func:`theorem6_chain`).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from dplace import claims
from dplace.chain import Chain, Layer, communication_time
from dplace.errors import InfeasibleError, InvalidInstanceError, SolverError

_REL = 1e-9  # relative tolerance on times and bytes


# ======================================================================================= patterns
@dataclass(frozen=True)
class PatternOp:
    kind: str  # "F" or "B"
    layer: int  # index in the pattern's chain
    resource: int  # processor 0..P-1, or a link (index >= P)
    start: float  # µs, in [0, period)
    shift: int  # batch shift h
    duration: float  # µs


@dataclass(frozen=True)
class Pattern:
    """A k-periodic pattern over ``chain`` (which includes communication layers, if any)."""

    period: float
    k: int
    ops: tuple[PatternOp, ...]
    chain: Chain
    resources: tuple[str, ...]  # names; the first ``processors`` are processors, the rest links
    processors: int

    @property
    def normalised_period(self) -> float:
        return self.period / self.k

    def allocation(self) -> list[int]:
        """Resource of each layer of the pattern's chain (-1 if the layer has no op)."""
        out = [-1] * self.chain.L
        for op in self.ops:
            out[op.layer] = op.resource
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"period": self.period, "k": self.k, "normalised_period": self.normalised_period,
                "resources": list(self.resources),
                "ops": [{"kind": o.kind, "layer": self.chain.layers[o.layer].id, "resource": self.resources[o.resource],
                         "start": o.start, "shift": o.shift, "duration": o.duration} for o in self.ops]}


@dataclass
class PatternReport:
    ok: bool
    errors: list[str]
    nca: list[int]  # per layer of the pattern's chain
    memory: list[float]  # per resource
    period: float
    k: int

    @property
    def normalised_period(self) -> float:
        return self.period / self.k

    def summary(self) -> str:
        if self.ok:
            return f"valid {self.k}-periodic pattern, period {self.period:g}, normalised {self.normalised_period:g}"
        return f"invalid pattern: {len(self.errors)} error(s); first: {self.errors[0]}"


def _tol(x: float) -> float:
    return _REL * max(1.0, abs(x))


def _batch_sequence(L: int) -> list[tuple[str, int]]:
    """The dependency chain of one batch (Figure 1): F_1..F_L, then B_L..B_1."""
    return [("F", l) for l in range(L)] + [("B", l) for l in reversed(range(L))]


def validate_pattern(pattern: Pattern, memory: float | None = None) -> PatternReport:
    """Check a k-periodic pattern: every op k times with shifts covering all residues mod k, each layer
    on one resource, durations from the chain, one op at a time per resource (circularly, ops of zero
    duration ignored), the Figure-1 dependencies across periods, NCA per layer and memory per resource
    (≤ ``memory`` when given). NCA_l is counted at each F_l start t: batches whose F_l started by t
    minus those whose B_l ended by t (so a zero-time B_l at t frees its activation first), at least 1."""
    ch = pattern.chain
    T, k = float(pattern.period), int(pattern.k)
    errs: list[str] = []
    L = ch.L
    nca = [0] * L
    mem = [0.0] * len(pattern.resources)
    if k < 1 or not (T > 0):
        return PatternReport(False, [f"period must be > 0 and k >= 1, got T={T!r}, k={k!r}"], nca, mem, T, k)
    copies: dict[tuple[str, int], dict[int, PatternOp]] = {}
    res_of = [-1] * L
    for op in pattern.ops:
        if op.kind not in ("F", "B") or not 0 <= op.layer < L:
            errs.append(f"op {op.kind}{op.layer}: unknown kind or layer")
            continue
        name = f"{op.kind}({ch.layers[op.layer].id})"
        want = ch.layers[op.layer].forward if op.kind == "F" else ch.layers[op.layer].backward
        if abs(op.duration - want) > _tol(want):
            errs.append(f"{name}: duration must be {want:g}, got {op.duration:g}")
        if not -_tol(T) <= op.start < T:
            errs.append(f"{name}: start must be in [0, {T:g}), got {op.start:g}")
        if op.duration > T + _tol(T):
            errs.append(f"{name}: duration {op.duration:g} exceeds the period {T:g}")
        if not 0 <= op.resource < len(pattern.resources):
            errs.append(f"{name}: unknown resource {op.resource}")
            continue
        if res_of[op.layer] not in (-1, op.resource):
            errs.append(f"layer {ch.layers[op.layer].id!r}: ops on resources {res_of[op.layer]} and {op.resource}")
        res_of[op.layer] = op.resource
        slot = copies.setdefault((op.kind, op.layer), {})
        r = op.shift % k
        if r in slot:
            errs.append(f"{name}: two copies process batches ≡ {r} mod {k}")
        slot[r] = op
    for kind, l in _batch_sequence(L):
        got = copies.get((kind, l), {})
        if len(got) != k:
            errs.append(f"{kind}({ch.layers[l].id}): needs {k} copies with distinct shifts mod {k}, got {len(got)}")
    if errs:
        return PatternReport(False, errs, nca, mem, T, k)
    # one op at a time per resource (circular)
    by_res: dict[int, list[PatternOp]] = {}
    for op in pattern.ops:
        if op.duration > 0:
            by_res.setdefault(op.resource, []).append(op)
    for r, ops in by_res.items():
        ops.sort(key=lambda o: o.start)
        for i, a in enumerate(ops):
            b = ops[(i + 1) % len(ops)]
            limit = b.start + (T if i == len(ops) - 1 else 0.0)
            if len(ops) > 1 and a.start + a.duration > limit + _tol(T):
                errs.append(f"resource {pattern.resources[r]!r}: {a.kind}({ch.layers[a.layer].id}) at {a.start:g} "
                            f"overlaps {b.kind}({ch.layers[b.layer].id}) at {b.start:g}")
    # dependencies: batch b runs op a then op b; op copies with the same residue process the same batches
    seq = _batch_sequence(L)
    for (ka, la), (kb, lb) in zip(seq, seq[1:]):
        for r, a in copies[(ka, la)].items():
            b = copies[(kb, lb)][r]
            dshift = a.shift - b.shift  # multiple of k
            if (dshift / k) * T + b.start < a.start + a.duration - _tol(T):
                errs.append(f"dependency {ka}({ch.layers[la].id}) -> {kb}({ch.layers[lb].id}) broken for shift "
                            f"{a.shift} -> {b.shift}")
    # NCA: exact count of live activations at each F_l start
    for l in range(L):
        fs, bs = copies[("F", l)], copies[("B", l)]
        best = 0
        for f in fs.values():
            t = f.start
            live = 0
            for r in range(k):
                fr, br = fs[r], bs[r]
                jf = math.floor((t - fr.start) / T + _REL)  # last period whose copy has started (<= t)
                jb = math.floor((t - br.start - br.duration) / T + _REL)  # last period whose copy ended (<= t)
                live += ((jf * k + fr.shift) - (jb * k + br.shift)) // k
            best = max(best, live)
        best = max(best, 1)  # below 1 only for zero-time layers (the dependencies are checked above)
        nca[l] = best
        if res_of[l] >= 0:
            mem[res_of[l]] += ch.layers[l].weights + best * ch.layers[l].activation
    if memory is not None:
        for r in range(min(pattern.processors, len(mem))):
            if mem[r] > memory + _tol(memory):
                errs.append(f"processor {pattern.resources[r]!r}: memory {mem[r]:g} exceeds {memory:g}")
    return PatternReport(not errs, errs, nca, mem, T, k)


def nca_from_shifts(pattern: Pattern) -> list[int]:
    """NCA_l by the paper's shift rule (§3.2): the largest h − h' over the copies of F_l, h' being the
    shift of the B_l copy that precedes it (the last one ended by the F_l start, taken from the previous
    period — shift h' − k — when none in this one). Equal to :func:`validate_pattern`'s count on valid
    patterns."""
    k, T = pattern.k, pattern.period
    fs: dict[int, list[PatternOp]] = {}
    bs: dict[int, list[PatternOp]] = {}
    for op in pattern.ops:
        (fs if op.kind == "F" else bs).setdefault(op.layer, []).append(op)
    out = []
    for l in range(pattern.chain.L):
        best = 1
        for f in fs.get(l, []):
            prev = [b for b in bs.get(l, []) if b.start + b.duration <= f.start + _tol(T)]
            if prev:
                h = max(prev, key=lambda b: (b.start + b.duration, b.start)).shift
            else:
                h = max(bs[l], key=lambda b: (b.start + b.duration, b.start)).shift - k
            best = max(best, f.shift - h)
        out.append(best)
    return out


def pattern_from_times(chain: Chain, allocation: Sequence[int], tau_f: Sequence[float], tau_b: Sequence[float],
                       period: float, resources: Sequence[str], processors: int) -> Pattern:
    """Fold a single-batch schedule (batch i runs F_l at tau_f[l] + i·T, B_l at tau_b[l] + i·T) into a
    1-periodic pattern: start = tau mod T, shift = -floor(tau / T), shifts renormalised so that B_1 has 0."""
    T = float(period)
    ops = []
    for kind, taus, durs in (("F", tau_f, chain.uf), ("B", tau_b, chain.ub)):
        for l, tau in enumerate(taus):
            q = math.floor(tau / T + _REL)
            start = tau - q * T
            if start < 0:
                start = 0.0
            ops.append([kind, l, allocation[l], start, -q, durs[l]])
    h0 = next(o[4] for o in ops if o[0] == "B" and o[1] == 0)
    return Pattern(T, 1, tuple(PatternOp(o[0], o[1], o[2], o[3], o[4] - h0, o[5]) for o in ops), chain,
                   tuple(resources), processors)


def single_batch_times(pattern: Pattern) -> tuple[list[float], list[float]]:
    """Inverse of :func:`pattern_from_times` for a 1-periodic pattern: tau = start - shift·T."""
    if pattern.k != 1:
        raise InvalidInstanceError(f"pattern: single-batch times need k = 1, got {pattern.k}")
    tf = [0.0] * pattern.chain.L
    tb = [0.0] * pattern.chain.L
    for op in pattern.ops:
        (tf if op.kind == "F" else tb)[op.layer] = op.start - op.shift * pattern.period
    return tf, tb


def k_periodic(pattern: Pattern, k: int) -> Pattern:
    """Theorem 4's construction (§5.2): unroll the 1-periodic ``pattern`` k+1 times (period (k+1)·T)
    and remove every operation of every (k+1)-th batch. The result is k-periodic with period (k+1)·T
    and normalised period (1 + 1/k)·T. A layer with NCA g keeps g − ⌊g/(k+1)⌋ live activations
    (:func:`theorem4_nca`), so only layers with g > k gain. The paper applies it to the pattern with
    no idle time (1F1B* at the stages' largest load, :func:`contiguous_theorem4`); applied to an
    already memory-feasible pattern it only lengthens the period. ``k = 1`` keeps one batch in two."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InvalidInstanceError(f"k must be an integer >= 1, got {k!r}")
    tf, tb = single_batch_times(pattern)
    T = pattern.period
    Tk = (k + 1) * T
    alloc = pattern.allocation()
    ops = []
    for kind, taus, durs in (("F", tf, pattern.chain.uf), ("B", tb, pattern.chain.ub)):
        for l, tau in enumerate(taus):
            for r in range(k):  # kept batches: i = q(k+1) + r, r < k, renumbered q·k + r
                t = tau + r * T
                j0 = math.floor(t / Tk + _REL)
                start = max(0.0, t - j0 * Tk)
                ops.append([kind, l, alloc[l], start, r - j0 * k, durs[l]])
    ref = min((o for o in ops if o[0] == "B" and o[1] == 0), key=lambda o: o[3])[4]
    ref -= ref % k  # keep residues; shift so the first B_1 is near 0
    return Pattern(Tk, k, tuple(PatternOp(o[0], o[1], o[2], o[3], o[4] - ref, o[5]) for o in ops), pattern.chain,
                   pattern.resources, pattern.processors)


def theorem4_nca(g: int, k: int) -> int:
    """NCA of a layer with NCA g in a 1-periodic pattern after :func:`k_periodic` with k: of any g
    consecutive batches at least ⌊g/(k+1)⌋ are dropped, and some window ending on a kept batch drops
    no more. (Exact for layers of positive duration; a zero-time layer may count fewer.)"""
    return g - g // (k + 1)


# ============================================================================== communication
def expand_communication(chain: Chain, allocation: Sequence[int], processors: int
                         ) -> tuple[Chain, list[int], list[int | None], list[str]]:
    """With β, insert a communication layer (u_F = u_B = a_l/β, no weights, no activation) at every
    cut l | l+1 whose layers are on different processors, each on its own link resource (§3.1).
    Returns (expanded chain, allocation over it, origin layer of each expanded layer or None, resource
    names). Without β (or without cuts) the chain is returned unchanged."""
    res = [f"p{p}" for p in range(processors)]
    if chain.bandwidth is None:
        return chain, list(allocation), list(range(chain.L)), res
    layers: list[Layer] = []
    alloc: list[int] = []
    origin: list[int | None] = []
    for l, ly in enumerate(chain.layers):
        layers.append(ly)
        alloc.append(allocation[l])
        origin.append(l)
        if l + 1 < chain.L and allocation[l] != allocation[l + 1]:
            half = communication_time(chain, l) / 2.0
            layers.append(Layer(f"comm:{ly.id}", half, half, 0.0, 0.0))
            alloc.append(len(res))
            origin.append(None)
            res.append(f"link{allocation[l]}-{allocation[l + 1]}@{ly.id}")
    return chain.replace(layers=tuple(layers), bandwidth=None), alloc, origin, res


# ===================================================================================== 1F1B*
@dataclass
class StarPattern:
    pattern: Pattern  # 1-periodic, over the chain with communication layers
    nca: list[int]  # per layer of the original chain (= group number of its stage)
    groups: list[list[int]]  # groups of items (stages and comm layers), group 1 = the last one
    origin: list[int | None]


def _check_stages(chain: Chain, stages: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    st = [tuple(s) for s in stages]
    pos = 0
    for i, (a, b) in enumerate(st):
        if a != pos or b <= a:
            raise InvalidInstanceError(f"partition: stage {i} must start at layer {pos} and be non-empty, got ({a}, {b})")
        pos = b
    if pos != chain.L:
        raise InvalidInstanceError(f"partition: stages must cover the {chain.L} layers, cover {pos}")
    return st  # type: ignore[return-value]


def one_f_one_b_star(chain: Chain, stages: Sequence[tuple[int, int]], period: float) -> StarPattern:
    """Algorithm 1 (1F1B*, §5.1) for the contiguous partition ``stages`` (half-open layer ranges, stage
    s on processor s) and period T: (1) groups built greedily from the last stage while the summed
    u_F + u_B stays ≤ T; (2) an Equal Shift Pattern inside each group (forwards back to back, then the
    backwards in reverse order); (3) groups connected with no idle time between forwards. Every
    layer of group g gets NCA g, which is the least any 1-periodic pattern of period T can use
    (Theorem 3). Communication layers (β) are items of their own, on links."""
    st = _check_stages(chain, stages)
    P = len(st)
    alloc = [0] * chain.L
    for s, (a, b) in enumerate(st):
        for l in range(a, b):
            alloc[l] = s
    ech, ealloc, origin, resources = expand_communication(chain, alloc, P)
    T = float(period)
    # items: maximal runs of expanded layers on one resource
    items: list[list[int]] = []
    for l in range(ech.L):
        if items and ealloc[items[-1][-1]] == ealloc[l]:
            items[-1].append(l)
        else:
            items.append([l])
    uf, ub = ech.uf, ech.ub
    U = [sum(uf[l] + ub[l] for l in it) for it in items]
    for i, it in enumerate(items):
        if U[i] > T + _tol(T):
            raise InvalidInstanceError(f"period: {T:g} is below the load {U[i]:g} of {resources[ealloc[it[0]]]}")
    # Phase 1: groups from the end
    groups: list[list[int]] = []
    cur: list[int] = []
    load = 0.0
    for i in reversed(range(len(items))):
        if cur and load + U[i] > T + _tol(T):
            groups.append(cur[::-1])
            cur, load = [], 0.0
        cur.append(i)
        load += U[i]
    groups.append(cur[::-1])
    # Phases 2-3 as single-batch times: forwards back to back from 0; the backwards of group g form
    # the V of the Equal Shift Pattern, delayed by (g-1)·T
    tau_f = [0.0] * ech.L
    tau_b = [0.0] * ech.L
    t = 0.0
    for l in range(ech.L):
        tau_f[l] = t
        t += uf[l]
    for g, grp in enumerate(groups, start=1):
        layers = [l for i in grp for l in items[i]]
        t = tau_f[layers[-1]] + uf[layers[-1]] + (g - 1) * T
        for l in reversed(layers):
            tau_b[l] = t
            t += ub[l]
    pat = pattern_from_times(ech, ealloc, tau_f, tau_b, T, resources, P)
    group_of_item = {i: g for g, grp in enumerate(groups, start=1) for i in grp}
    nca_e = [0] * ech.L
    for i, it in enumerate(items):
        for l in it:
            nca_e[l] = group_of_item[i]
    nca = [nca_e[e] for e in range(ech.L) if origin[e] is not None]
    return StarPattern(pat, nca, [[i for i in grp] for grp in groups], origin)


def packed_pattern(chain: Chain, allocation: Sequence[int], processors: int,
                   period: float | None = None) -> Pattern:
    """A valid 1-periodic pattern for any allocation (§6, Theorem 1's proof): on each processor the
    ops of its layers are packed back to back from time 0 in the order of one batch (F_1..F_L,
    B_L..B_1); each op then gets the largest shift its predecessor allows. Period = the largest
    processor load (or ``period`` if larger). Communication layers (β) sit alone on their links."""
    ech, ealloc, origin, resources = expand_communication(chain, allocation, processors)
    loads = [0.0] * len(resources)
    for l, r in enumerate(ealloc):
        loads[r] += ech.layers[l].forward + ech.layers[l].backward
    T = max(loads)
    if period is not None:
        T = max(T, float(period))
    if T <= 0:
        T = 1.0
    nxt = [0.0] * len(resources)
    start: dict[tuple[str, int], float] = {}
    seq = _batch_sequence(ech.L)
    for kind, l in seq:
        d = ech.layers[l].forward if kind == "F" else ech.layers[l].backward
        start[(kind, l)] = nxt[ealloc[l]]
        nxt[ealloc[l]] += d
    tau: dict[tuple[str, int], float] = {}
    prev_end = 0.0
    for kind, l in seq:
        s = start[(kind, l)]
        tau[(kind, l)] = s + T * max(0, math.ceil((prev_end - s) / T - _REL))
        prev_end = tau[(kind, l)] + (ech.layers[l].forward if kind == "F" else ech.layers[l].backward)
    return pattern_from_times(ech, ealloc, [tau[("F", l)] for l in range(ech.L)],
                              [tau[("B", l)] for l in range(ech.L)], T, resources, processors)


# ==================================================================================== solutions
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


# ====================================================================================== claims
# The scope of a claim: the patterns among which a normalised period T/k is proven least (or bounded).
ONE_PERIODIC_CONTIGUOUS = "1-periodic contiguous"  # 1-periodic patterns of contiguous allocations
K_PERIODIC_CONTIGUOUS = "k-periodic contiguous"  # k-periodic patterns (every k) of contiguous allocations
K_PERIODIC_GENERAL = "k-periodic general"  # k-periodic patterns (every k) of any allocation
SCOPES = (ONE_PERIODIC_CONTIGUOUS, K_PERIODIC_CONTIGUOUS, K_PERIODIC_GENERAL)


def general_lower_bound(chain: Chain, processors: int) -> float:
    """max(largest u_F + u_B, Σ(u_F + u_B)/P): no k-periodic pattern of any allocation has a smaller
    T/k (the processor of layer l runs it k times per period; the P processors share k·Σu)."""
    return max(max(chain.u), sum(chain.u) / processors)


def _contiguous_fits(chain: Chain, P: int, M: float | None, T: float) -> bool:
    """Can the chain be cut into ≤ P stages, each of load ≤ T and Σ(W + a) ≤ M, at cuts whose
    communication 2a/β is ≤ T? Greedy: from each stage start, cut at the farthest allowed point
    (both limits hold on every sub-range, so the farthest cut never needs more stages)."""
    L, u, w, a = chain.L, chain.u, chain.w, chain.a
    tol_t = _tol(T)
    i, stages = 0, 0
    while i < L:
        load = mem = 0.0
        e, last_cut = i, None
        while e < L:
            load += u[e]
            mem += w[e] + a[e]
            if load > T + tol_t or (M is not None and mem > M + _tol(M)):
                break
            e += 1
            if e == L or communication_time(chain, e - 1) <= T + tol_t:
                last_cut = e
        if last_cut is None:
            return False
        i, stages = last_cut, stages + 1
        if stages > P:
            return False
    return True


def contiguous_lower_bound(chain: Chain, processors: int | None = None, memory: float | None = None, *,
                           use_chain_memory: bool = True) -> float | None:
    """Least T/k that any k-periodic pattern of a contiguous allocation can reach (every k): every
    NCA is at least 1, so a stage needs Σ(W_l + a_l) ≤ M, and its processor runs each of its layers k
    times per period (T/k ≥ the stage's load; a cut's link: T/k ≥ 2a/β). The least T for which the
    chain splits into ≤ P such stages; None if even every NCA = 1 does not fit. ``memory`` None takes
    the chain's limit (none at all with ``use_chain_memory=False``)."""
    P = processors or chain.processors
    memory = memory if memory is not None else (chain.memory if use_chain_memory else None)
    top = max(chain.u)
    cands = _candidates(chain, top)
    comm = [communication_time(chain, l) for l in range(chain.L - 1)]
    if any(x >= top for x in comm):
        cands = sorted(set(cands) | {x for x in comm if x >= top})
    if not _contiguous_fits(chain, P, memory, cands[-1]):  # the whole load or the largest cut: fits iff any T does
        return None
    a, b = 0, len(cands) - 1
    while a < b:  # feasibility is monotone in T
        mid = (a + b) // 2
        if _contiguous_fits(chain, P, memory, cands[mid]):
            b = mid
        else:
            a = mid + 1
    return cands[a]


def _claim(sol: PipelineSolution, allocation: str, exact_over: str | None = None,
           relaxation_bound: float | None = None) -> PipelineSolution:
    """Set the solution's status, ``optimal_over`` and lower bound through :mod:`dplace.claims` (its one
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


# ============================================================================ k-periodic patterns
def _solution(method: str, chain: Chain, P: int, M: float | None, alloc: list[int],
              stages: list[tuple[int, int]] | None, pattern: Pattern, origin: Sequence[int | None],
              **extra: Any) -> PipelineSolution:
    sol = PipelineSolution(method, chain, P, M, "feasible", list(alloc), stages, extra=dict(extra))
    return _finish(sol, pattern, origin)


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


# =============================================================================== contiguous DP
def _prefix(xs: Sequence[float]) -> list[float]:
    out = [0.0]
    for x in xs:
        out.append(out[-1] + x)
    return out


class _ContiguousDP:
    """Exact feasibility test for a period T over contiguous partitions under 1F1B* memory.

    Any grouping of consecutive stages whose summed loads are ≤ T yields a valid 1-periodic pattern
    in which group g (numbered from the end) has NCA g, and the greedy grouping of Alg. 1 gives every
    stage its least group number (Theorem 3). So T is feasible iff layers can be cut into groups
    (from the end, loads ≤ T, communication included) and groups into ≤ P stages each fitting in
    memory with NCA = its group number. The DP goes group by group from the end; a state is (first
    layer covered, whether the comm layer at that cut is already in the group on its right) with the
    least number of stages used; without β, states that cover more layers with no more stages dominate.
    """

    def __init__(self, chain: Chain, P: int, M: float | None, k: int = 1) -> None:
        self.ch = chain
        self.P = P
        self.M = M
        self.k = k  # > 1: group g keeps theorem4_nca(g, k) activations (Theorem 4's unrolled pattern)
        self.L = chain.L
        self.U = _prefix(chain.u)
        self.W = _prefix(chain.w)
        self.A = _prefix(chain.a)
        self.c = [0.0] + [communication_time(chain, l - 1) for l in range(1, self.L)] + [0.0]  # c[j]: cut before j
        self.comm = chain.bandwidth is not None and any(x > 0 for x in self.c)
        self._reach: dict[int, list[int]] = {}

    def fits(self, i: int, j: int, g: int) -> bool:
        if self.M is None:
            return True
        n = g if self.k == 1 else theorem4_nca(g, self.k)
        m = self.W[j] - self.W[i] + n * (self.A[j] - self.A[i])
        return m <= self.M + _tol(self.M)

    def reach(self, g: int) -> list[int]:
        """reach[e] = least i with stage [i, e) fitting at NCA g (e if layer e-1 alone does not fit)."""
        r = self._reach.get(g)
        if r is None:
            r = [0] * (self.L + 1)
            i = 0
            for e in range(1, self.L + 1):
                while i < e and not self.fits(i, e, g):
                    i += 1
                r[e] = i
            self._reach[g] = r
        return r

    def _min_stages(self, i: int, j: int, g: int, limit: int) -> int | None:
        r = self.reach(g)
        cnt, e = 0, j
        while e > i:
            nxt = r[e]
            if nxt >= e:
                return None
            e = max(nxt, i)
            cnt += 1
            if cnt > limit:
                return None
        return cnt

    def _split_comm(self, i: int, j: int, g: int, limit: int) -> list[dict[int, tuple[float, int]]]:
        """For fixed end j: D[i][s] = (least internal comm, next cut) splitting [i, j) into s stages."""
        r = self.reach(g)
        D: list[dict[int, tuple[float, int]]] = [dict() for _ in range(j + 1)]
        D[j][0] = (0.0, j)
        for x in range(j - 1, i - 1, -1):
            for e in range(x + 1, j + 1):
                if r[e] > x:
                    continue
                add = self.c[e] if e < j else 0.0
                for s, (cm, _) in D[e].items():
                    if s + 1 > limit:
                        continue
                    v = cm + add
                    old = D[x].get(s + 1)
                    if old is None or v < old[0] - 1e-12:
                        D[x][s + 1] = (v, e)
        return D

    def solve(self, T: float) -> list[tuple[list[tuple[int, int]], int]] | None:
        """Groups (each a list of stages, from the chain's start) if T is feasible, else None."""
        P, L, U, c = self.P, self.L, self.U, self.c
        tol = _tol(T)
        # state key (i, f) -> (stages, parent) ; parent = (prev key, level, stage cuts of the group)
        levels: list[dict[tuple[int, int], tuple[int, Any]]] = [{(L, 0): (0, None)}]
        seen: dict[tuple[int, int], int] = {(L, 0): 0}
        for g in range(P if not self.comm else 2 * P - 1):
            cur = levels[-1]
            new: dict[tuple[int, int], tuple[int, Any]] = {}

            def offer(key, s, parent):
                if s > P:
                    return
                if key in seen and seen[key] <= s:
                    return
                old = new.get(key)
                if old is None or s < old[0]:
                    new[key] = (s, parent)

            for (j, f), (s0, _) in cur.items():
                right = c[j] if (f == 0 and j < L) else 0.0
                if right > T + tol:
                    continue
                if f == 0 and j < L and self.comm:  # a group made of the comm layer alone
                    offer((j, 1), s0, ((j, f), []))
                if not self.comm:
                    i = j - 1
                    while i >= 0 and U[j] - U[i] <= T + tol:
                        ms = self._min_stages(i, j, g + 1, P - s0)
                        if ms is None:
                            break
                        offer((i, 0), s0 + ms, ((j, f), None))
                        i -= 1
                    continue
                if j == 0 or U[j] - U[j - 1] + right > T + tol:
                    continue
                lo = j - 1
                while lo > 0 and U[j] - U[lo - 1] + right <= T + tol:
                    lo -= 1
                D = self._split_comm(lo, j, g + 1, P - s0)
                for i in range(j - 1, lo - 1, -1):
                    for flag in ((0, 1) if i > 0 else (0,)):
                        extra = c[i] if flag else 0.0
                        for s, (cm, _) in sorted(D[i].items()):
                            if U[j] - U[i] + right + cm + extra <= T + tol:
                                offer((i, flag), s0 + s, ((j, f), (i, j, g + 1)))
                                break
            if not new:
                return None
            if not self.comm:  # Pareto front: fewer layers left and fewer stages dominate
                front: dict[tuple[int, int], tuple[int, Any]] = {}
                bests = math.inf
                for key in sorted(new):
                    if new[key][0] < bests:
                        front[key] = new[key]
                        bests = new[key][0]
                new = front
            for key, (s, _) in new.items():
                seen[key] = min(seen.get(key, P + 1), s)
            levels.append(new)
            for key in ((0, 0), (0, 1)):
                if key in new:
                    return self._rebuild(levels, key)
        return None

    def _rebuild(self, levels, key) -> list[tuple[list[tuple[int, int]], int]]:
        groups = []
        g = len(levels) - 1
        while g > 0:
            s, parent = levels[g][key]
            prev, info = parent
            i, j = key[0], prev[0]
            if i < j:  # not a comm-only group
                if not self.comm:
                    r = self.reach(g)
                    cuts, e = [], j
                    while e > i:
                        b = max(r[e], i)
                        cuts.append((b, e))
                        e = b
                    stages = cuts[::-1]
                else:
                    D = self._split_comm(i, j, g, self.P)
                    s_here = s - levels[g - 1][prev][0]
                    stages, x, cnt = [], i, s_here
                    while x < j:
                        e = D[x][cnt][1]
                        stages.append((x, e))
                        x, cnt = e, cnt - 1
                groups.append((stages, g))
            key = prev
            g -= 1
        return groups  # from the chain's start


def _check_cost(chain: Chain) -> None:
    if sum(chain.u) <= 0:
        raise InvalidInstanceError(f"chain {chain.name!r}: total forward+backward time must be > 0, got 0")


def _candidates(chain: Chain, lo: float) -> list[float]:
    import numpy as np

    pre = np.asarray(_prefix(chain.u))
    diffs = (pre[None, :] - pre[:, None])
    vals = np.unique(diffs[np.triu_indices(len(pre), 1)])
    return vals[vals >= lo - _tol(lo)].tolist()


def contiguous_dp(chain: Chain, processors: int | None = None, memory: float | None = None, *,
                  use_chain_memory: bool = True) -> PipelineSolution:
    """Exact least period among **1-periodic** patterns of contiguous allocations with memory (1F1B*,
    §5.1, Theorem 3); the result says so (``optimal_over`` "1-periodic contiguous"), unless its period
    reaches a bound valid for every k-periodic pattern. A k-periodic pattern can have a lower T/k when
    memory binds (Theorem 4, :func:`contiguous_theorem4`, :func:`k_search`).

    A binary search over candidate periods (every sum of consecutive layer costs; with β a bisection
    on the period) with the exact feasibility DP of :class:`_ContiguousDP`; the pattern is 1F1B* at
    the least feasible period. ``memory`` None takes the chain's limit (none at all with
    ``use_chain_memory=False``). Raises InfeasibleError when no contiguous allocation fits."""
    t0 = time.perf_counter()
    P = processors or chain.processors
    M = memory if memory is not None else (chain.memory if use_chain_memory else None)
    T, stages = _least_contiguous(chain, P, M, 1)
    star = one_f_one_b_star(chain, stages, T)
    alloc = [s for s, (a_, b_) in enumerate(stages) for _ in range(a_, b_)]
    sol = PipelineSolution("contiguous_dp", chain, P, M, "feasible", alloc, stages, claimed_period=T,
                           extra={"groups": len(star.groups)})
    _finish(sol, star.pattern, star.origin)
    sol.solve_time_s = time.perf_counter() - t0
    return _claim(sol, "contiguous", exact_over=ONE_PERIODIC_CONTIGUOUS)


def _least_contiguous(chain: Chain, P: int, M: float | None, k: int) -> tuple[float, list[tuple[int, int]]]:
    """Least T and its stages for the DP of :class:`_ContiguousDP` (group g keeps NCA g, or
    theorem4_nca(g, k) when k > 1)."""
    _check_cost(chain)
    dp = _ContiguousDP(chain, P, M, k)
    total = dp.U[-1]
    lo = max(max(chain.u), total / P)
    hi = total + sum(dp.c)
    if dp.solve(hi) is None:
        raise InfeasibleError(
            f"chain {chain.name!r}: no contiguous allocation on {P} processors fits in memory {M:g}")
    if not dp.comm:
        cands = _candidates(chain, lo)
        a, b = 0, len(cands) - 1
        while a < b:
            mid = (a + b) // 2
            if dp.solve(cands[mid]) is not None:
                b = mid
            else:
                a = mid + 1
        T = cands[a]
    else:
        a_t, b_t = lo, hi
        for _ in range(60):
            if b_t - a_t <= 1e-9 * b_t:
                break
            mid = (a_t + b_t) / 2
            if dp.solve(mid) is not None:
                b_t = mid
            else:
                a_t = mid
        T = b_t
    groups = dp.solve(T)
    assert groups is not None
    stages = [st for grp, _ in groups for st in grp]
    if dp.comm:  # the period the found partition actually needs (≤ T)
        T = _needed_period(chain, stages, M, k)
    return T, stages


def _needed_period(chain: Chain, stages: list[tuple[int, int]], M: float | None, k: int = 1) -> float:
    """Least T for which 1F1B* on ``stages`` (unrolled by :func:`k_periodic` when k > 1) fits in
    memory (T ranges over group loads)."""
    alloc = [s for s, (a, b) in enumerate(stages) for _ in range(a, b)]
    ech, ealloc, _, _ = expand_communication(chain, alloc, len(stages))
    items: list[float] = []
    last = None
    for l in range(ech.L):
        if ealloc[l] == last:
            items[-1] += ech.layers[l].forward + ech.layers[l].backward
        else:
            items.append(ech.layers[l].forward + ech.layers[l].backward)
            last = ealloc[l]
    pre = _prefix(items)
    cands = sorted({pre[j] - pre[i] for i in range(len(pre)) for j in range(i + 1, len(pre))
                    if pre[j] - pre[i] >= max(items) - 1e-12})

    def fits(T: float) -> bool:
        pat = one_f_one_b_star(chain, stages, T).pattern
        return validate_pattern(pat if k == 1 else k_periodic(pat, k), M).ok

    a, b = 0, len(cands) - 1  # feasibility is monotone in T: larger T, no larger group numbers
    while a < b:
        mid = (a + b) // 2
        if fits(cands[mid]):
            b = mid
        else:
            a = mid + 1
    return cands[a]


# ============================================================================== CP-SAT models
def _int_scale(values: Sequence[float]) -> tuple[float, bool]:
    """Scale making times integers: 1 if they already are, else 1000 (rounded; flagged)."""
    if all(abs(v - round(v)) <= 1e-9 * max(1.0, abs(v)) for v in values):
        return 1.0, False
    return 1000.0, True


def _solver(time_limit_s: float | None, seed: int):
    from ortools.sat.python import cp_model

    s = cp_model.CpSolver()
    if time_limit_s is not None:
        s.parameters.max_time_in_seconds = float(time_limit_s)
    s.parameters.num_workers = 2
    s.parameters.random_seed = int(seed)
    return s


def _solve_alloc(m, b, L: int, P: int, time_limit_s: float | None, seed: int, presolve: bool = True):
    """Solve an allocation model: (solver, status, allocation or None when no solution was found)."""
    from ortools.sat.python import cp_model

    solver = _solver(time_limit_s, seed)
    solver.parameters.cp_model_presolve = presolve
    st = solver.Solve(m)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return solver, st, None
    return solver, st, [next(p for p in range(P) if solver.Value(b[l, p])) for l in range(L)]


def contiguous_milp(chain: Chain, processors: int | None = None, memory: float | None = None, *,
                    time_limit_s: float | None = 30.0, seed: int = 0) -> PipelineSolution:
    """CP-SAT model of the contiguous problem with the **1F1B* NCA model**: layer l's NCA is the
    number z_l of its group (groups of consecutive stages counted from the end, each group's summed
    u_F + u_B ≤ T), so memory of stage p is Σ_l [l in p](W_l + z_l·a_l) ≤ M; minimise T ≥ every stage
    load. With β the communication layer of each cut (2·a_l/β, on its own link) counts in T and in
    the load of one of the groups around the cut (or of a group of its own: z may jump by 2 there).
    Same optimum as :func:`contiguous_dp` (both are exact for this model)."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    _check_cost(chain)
    P = processors or chain.processors
    M = memory if memory is not None else chain.memory
    L = chain.L
    cf = [communication_time(chain, l) for l in range(L - 1)]
    sc, rounded = _int_scale(chain.u + cf)
    u = [int(round(x * sc)) for x in chain.u]
    cm = [int(round(x * sc)) for x in cf]  # comm time of cut l | l+1 (0 without β)
    W = [int(math.ceil(x)) for x in chain.w]
    A = [int(math.ceil(x)) for x in chain.a]
    need_groups = M is not None and any(A)
    G = P if not any(cm) else 2 * P - 1  # largest group number
    m = cp_model.CpModel()
    total = sum(u) + sum(cm)
    T = m.NewIntVar(max(u) if u else 0, max(total, 1), "T")  # the period
    b = {(l, p): m.NewBoolVar(f"b{l}_{p}") for l in range(L) for p in range(P)}  # layer l on stage p
    y = [m.NewIntVar(0, P - 1, f"y{l}") for l in range(L)]  # stage of layer l
    for l in range(L):
        m.AddExactlyOne(b[l, p] for p in range(P))
        m.Add(y[l] == sum(p * b[l, p] for p in range(P)))
    m.Add(y[0] == 0)
    cut = []
    for l in range(L - 1):  # contiguity: stage index grows by 0 or 1
        cv = m.NewBoolVar(f"cut{l}")
        m.Add(y[l + 1] - y[l] == cv)
        cut.append(cv)
    for p in range(P):  # stage load ≤ T
        m.Add(sum(u[l] * b[l, p] for l in range(L)) <= T)
    for l in range(L - 1):  # a link's load ≤ T
        if cm[l]:
            m.Add(cm[l] * cut[l] <= T)
    if M is not None:
        Mi = int(math.floor(M))
        if need_groups:
            z = [m.NewIntVar(1, G, f"z{l}") for l in range(L)]  # group number (= NCA) of layer l
            m.Add(z[L - 1] == 1)
            for l in range(L - 1):
                m.Add(z[l] - z[l + 1] >= 0)
                m.Add(z[l] - z[l + 1] <= (2 if cm[l] else 1) * cut[l])  # groups change only at stage cuts
                m.Add(z[l] - z[l + 1] <= (2 if cm[l] else 1))
            gb = {(l, g): m.NewBoolVar(f"gb{l}_{g}") for l in range(L) for g in range(1, G + 1)}
            for l in range(L):
                m.AddExactlyOne(gb[l, g] for g in range(1, G + 1))
                m.Add(z[l] == sum(g * gb[l, g] for g in range(1, G + 1)))
            cg = {}  # cg[l, g]: the comm layer of cut l is in group g
            for l in range(L - 1):
                if not cm[l]:
                    continue
                zc = m.NewIntVar(1, G, f"zc{l}")  # its group: between the groups of layers l+1 and l
                m.Add(zc >= z[l + 1])
                m.Add(zc <= z[l])
                bs = [m.NewBoolVar(f"zcb{l}_{g}") for g in range(1, G + 1)]
                m.AddExactlyOne(bs)
                m.Add(zc == sum(g * bs[g - 1] for g in range(1, G + 1)))
                for g in range(1, G + 1):
                    v = m.NewBoolVar(f"cg{l}_{g}")
                    m.AddBoolAnd([bs[g - 1], cut[l]]).OnlyEnforceIf(v)
                    m.AddBoolOr([bs[g - 1].Not(), cut[l].Not()]).OnlyEnforceIf(v.Not())
                    cg[l, g] = v
            for g in range(1, G + 1):  # group load ≤ T
                m.Add(sum(u[l] * gb[l, g] for l in range(L))
                      + sum(cm[l] * cg[l, g] for l in range(L - 1) if cm[l]) <= T)
            e = {}
            for l in range(L):
                for p in range(P):
                    e[l, p] = m.NewIntVar(0, G, f"e{l}_{p}")  # z_l if layer l is on p, else 0
                    m.Add(e[l, p] >= z[l]).OnlyEnforceIf(b[l, p])
            for p in range(P):
                m.Add(sum(W[l] * b[l, p] + A[l] * e[l, p] for l in range(L)) <= Mi)
        else:
            for p in range(P):
                m.Add(sum((W[l] + A[l]) * b[l, p] for l in range(L)) <= Mi)
    m.Minimize(T)
    solver, st, alloc = _solve_alloc(m, b, L, P, time_limit_s, seed)
    if st == cp_model.INFEASIBLE:
        raise InfeasibleError(f"chain {chain.name!r}: no contiguous allocation on {P} processors fits in memory {M}")
    if alloc is None:
        raise SolverError(f"contiguous_milp: no solution within {time_limit_s} s (status {solver.StatusName(st)})")
    stages: list[tuple[int, int]] = []
    for l in range(L):
        if l == 0 or alloc[l] != alloc[l - 1]:
            stages.append((l, l + 1))
        else:
            stages[-1] = (stages[-1][0], l + 1)
    claimed = solver.Value(T) / sc
    Tpat = _needed_period(chain, stages, M)
    star = one_f_one_b_star(chain, stages, Tpat)
    sol = PipelineSolution("contiguous_milp", chain, P, M, "feasible", alloc, stages, claimed_period=claimed,
                           extra={"bound": solver.BestObjectiveBound() / sc, "rounded_times": rounded})
    _finish(sol, star.pattern, star.origin)
    # CP-SAT's OPTIMAL is a claim: exact over 1-periodic contiguous patterns only when no time or byte
    # was rounded and the DP (an independent method) finds no shorter period
    exact = st == cp_model.OPTIMAL and not rounded and _integral_memory(chain)
    if exact:
        dp_period = contiguous_dp(chain, P, M, use_chain_memory=False).period
        exact = sol.period <= dp_period + _tol(dp_period)
        if not exact:
            sol.extra["claim_notes"] = [f"CP-SAT said OPTIMAL at {sol.period:.9g}, the contiguous DP finds "
                                        f"{dp_period:.9g}: not claimed"]
    sol.solve_time_s = time.perf_counter() - t0
    return _claim(sol, "contiguous", exact_over=ONE_PERIODIC_CONTIGUOUS if exact else None)


def _integral_memory(chain: Chain) -> bool:
    """Weights and activations are whole bytes, so the CP-SAT models' rounding up of them is exact."""
    return all(float(x).is_integer() for x in chain.w + chain.a)


def general_milp(chain: Chain, processors: int | None = None, memory: float | None = None, *,
                 time_limit_s: float | None = 30.0, seed: int = 0, hint: bool = True,
                 max_position_size: int = 2000) -> PipelineSolution:
    """CP-SAT models of general (non-contiguous) allocations: a processor may hold any set of layers;
    minimise the period T subject to memory. Two NCA models:

    1. **load model** (§6): T ≥ every processor (and link) load, memory Σ_l (W_l + 1·a_l) ≤ M — every
       NCA is at least 1, so this is a relaxation valid for every k-periodic pattern (T/k can never be
       below the largest load). Its allocation gets :func:`packed_pattern` (no idle time on the busiest
       processor); if that pattern fits in memory, it is optimal. Without a memory limit or activations
       this is the whole story.
    2. **position NCA** (otherwise, when 2·L·P ≤ ``max_position_size``): the model places every F_l and
       B_l in the pattern — start s ∈ [0, T), integer q with single-batch time τ = s + q·T (shift −q),
       τ following the Figure-1 chain, circular one-op-at-a-time per processor — and takes NCA_l =
       q_B − q_F + [s_B ≥ s_F] (s_B > s_F if u_B = 0), the exact count of the resulting 1-periodic
       pattern (§3.2, as :func:`validate_pattern` counts it). Exact
       over 1-periodic patterns whose times lie on the integer µs grid. Larger chains skip it (CP-SAT
       does not keep its time limit on them) and return the best valid pattern found, with the load
       model's bound.

    With β, a cut l | l+1 between processors adds a communication op of a_l/β each way, on a link of
    its own (one op at a time on it), between the two layers' ops (§3.1).
    With ``hint`` the contiguous DP solution seeds the search and is returned if nothing better is
    found (it is a general allocation too)."""
    t0 = time.perf_counter()
    _check_cost(chain)
    P = processors or chain.processors
    M = memory if memory is not None else chain.memory
    L = chain.L
    half = [communication_time(chain, l) / 2.0 for l in range(L - 1)]  # each way
    sc, rounded = _int_scale(chain.uf + chain.ub + half)
    data = dict(P=P, L=L, sc=sc, uf=[int(round(x * sc)) for x in chain.uf], ub=[int(round(x * sc)) for x in chain.ub],
                hc=[int(round(x * sc)) for x in half], W=[int(math.ceil(x)) for x in chain.w],
                A=[int(math.ceil(x)) for x in chain.a], M=None if M is None else int(math.floor(M)))
    seed_sol = None
    if hint:
        try:
            seed_sol = contiguous_dp(chain, P, M)
        except InfeasibleError:
            seed_sol = None
    deadline = None if time_limit_s is None else time.perf_counter() + float(time_limit_s)
    sol = PipelineSolution("general_milp", chain, P, M, "unknown", extra={"rounded_times": rounded})
    # 1. load model
    notes: list[str] = []
    got = _load_model(data, seed_sol, time_limit_s, seed, notes)
    activ = M is not None and any(data["A"])
    best: tuple[Pattern, list[int], list[int | None], str, float] | None = None  # pattern, alloc, origin, model, claim
    bound = None
    exact = not rounded and _integral_memory(chain)  # the load model is then a relaxation of the real problem
    proven = False
    if got == "infeasible":
        if seed_sol is None:
            raise InfeasibleError(f"chain {chain.name!r}: no allocation on {P} processors fits in memory {M}")
    elif got is not None:
        alloc, claim, bound = got
        pat = packed_pattern(chain, alloc, P)
        origin = expand_communication(chain, alloc, P)[2]
        if validate_pattern(pat, M).ok:
            best = (pat, alloc, origin, "load model + packed pattern", claim)
            proven = exact and bound is not None and claims.reaches(pat.period, bound)
    sol.extra["bound"] = bound
    # 2. position model
    if not proven and activ:
        if 2 * L * P <= max_position_size:
            left = None if deadline is None else max(1.0, deadline - time.perf_counter())
            incumbent = min([x for x in (best and best[0].period, seed_sol.period if seed_sol and seed_sol.ok else None)
                             if x is not None], default=None)
            got2 = _position_model(chain, data, seed_sol, left, seed, incumbent)
            if got2 == "infeasible" and best is None and seed_sol is None:
                raise InfeasibleError(f"chain {chain.name!r}: no allocation on {P} processors fits in memory {M}")
            if isinstance(got2, tuple):
                pat, alloc, origin, claim, bnd, optimal = got2
                # The position model is exact only over 1-periodic patterns on the integer µs grid: a
                # k-periodic pattern (Theorem 4) or fractional start times may do better, so its optimum
                # and bound are reported as such and never as a proven bound of the general problem.
                sol.extra["position_model_bound"] = bnd
                sol.extra["position_model_optimal"] = bool(optimal and not rounded)
                if validate_pattern(pat, M).ok and (best is None or pat.period < best[0].period - _tol(pat.period)):
                    best = (pat, alloc, origin, "position", claim)
        else:
            sol.extra["position_model"] = f"skipped: 2·L·P = {2 * L * P} > max_position_size {max_position_size}"
    if seed_sol is not None and seed_sol.ok and (best is None or seed_sol.period < best[0].period - _tol(seed_sol.period)):
        sol.allocation = list(seed_sol.allocation)
        sol.extra["nca_model"] = "contiguous 1F1B* (hint kept)"
        sol.claimed_period = seed_sol.period
        sol.pattern, sol.report = seed_sol.pattern, seed_sol.report
        sol.nca, sol.memory_used = list(seed_sol.nca), list(seed_sol.memory_used)
    elif best is not None:
        pat, alloc, origin, model, claim = best
        sol.allocation = alloc
        sol.claimed_period = claim
        sol.extra["nca_model"] = model
        _finish(sol, pat, origin)
    else:
        raise SolverError(f"general_milp: no valid pattern found within {time_limit_s} s for chain {chain.name!r}")
    sol.solve_time_s = time.perf_counter() - t0
    if notes:
        sol.extra["claim_notes"] = notes
    # optimal over every k-periodic pattern when T reaches the load relaxation's proven bound
    return _claim(sol, "general", relaxation_bound=bound if exact else None)


def _alloc_vars(m, data):
    P, L = data["P"], data["L"]
    b = {(l, p): m.NewBoolVar(f"b{l}_{p}") for l in range(L) for p in range(P)}  # layer l on processor p
    for l in range(L):
        m.AddExactlyOne(b[l, p] for p in range(P))
    m.Add(b[0, 0] == 1)  # identical processors: layer 1 on the first
    return b


def _cut_vars(m, data, b, T):
    """cut[l] ⇔ layers l and l+1 on different processors (only where a comm op has a duration)."""
    cut = {}
    for l in range(data["L"] - 1):
        if data["hc"][l] <= 0:
            continue
        cut[l] = m.NewBoolVar(f"cut{l}")
        for p in range(data["P"]):
            m.Add(cut[l] >= b[l, p] - b[l + 1, p])
            m.Add(cut[l] <= 2 - b[l, p] - b[l + 1, p])
        m.Add(2 * data["hc"][l] * cut[l] <= T)  # the link's load
    return cut


def _hint_alloc(m, b, seed_sol, data):
    if seed_sol is not None and seed_sol.ok:
        for l in range(data["L"]):
            for p in range(data["P"]):
                m.AddHint(b[l, p], int(seed_sol.allocation[l] == p))


def _load_cp(data, seed_sol, below: int | None = None):
    """The load relaxation (every NCA = 1) as a CP-SAT model: (model, T, b); ``below``: T ≤ below."""
    from ortools.sat.python import cp_model

    P, L, uf, ub, W, A = data["P"], data["L"], data["uf"], data["ub"], data["W"], data["A"]
    u = [uf[l] + ub[l] for l in range(L)]
    m = cp_model.CpModel()
    total = sum(u) + 2 * sum(data["hc"])
    T = m.NewIntVar(_load_floor(data), max(total, 1), "T")  # the period
    b = _alloc_vars(m, data)
    for p in range(P):
        m.Add(sum(u[l] * b[l, p] for l in range(L)) <= T)
        if data["M"] is not None:
            m.Add(sum((W[l] + A[l]) * b[l, p] for l in range(L)) <= data["M"])
    _cut_vars(m, data, b, T)
    if below is not None:
        m.Add(T <= below)
    _hint_alloc(m, b, seed_sol, data)
    m.Minimize(T)
    return m, T, b


def _load_floor(data) -> int:
    """max(largest layer, ⌈Σu/P⌉) in ticks: dplace's own arithmetic, no solver."""
    u = [f + b for f, b in zip(data["uf"], data["ub"])]
    return max(max(u), -(-sum(u) // data["P"]))


def _load_model(data, seed_sol, time_limit_s, seed, notes: list[str]):
    """Relaxation with every NCA = 1: (allocation, T, confirmed bound or None) | "infeasible" | None.

    CP-SAT's verdicts are claims: INFEASIBLE counts only when a search without presolve agrees, and its
    bound only when the arithmetic floor reaches it or a search without presolve finds no T below it
    (CP-SAT's presolve has been wrong on small models; see :mod:`dplace.claims`)."""
    from ortools.sat.python import cp_model

    L, P, sc = data["L"], data["P"], data["sc"]
    check_s = 5.0 if time_limit_s is None else min(5.0, float(time_limit_s))
    m, T, b = _load_cp(data, seed_sol)
    solver, st, alloc = _solve_alloc(m, b, L, P, time_limit_s, seed)
    if st == cp_model.INFEASIBLE:
        m, T, b = _load_cp(data, None)
        solver, st, alloc = _solve_alloc(m, b, L, P, check_s, seed, presolve=False)
        if st == cp_model.INFEASIBLE:
            return "infeasible"
        notes.append("load model: INFEASIBLE with presolve not confirmed by a search without it")
    if alloc is None:
        return None
    bound_ticks = solver.BestObjectiveBound()
    floor = _load_floor(data)
    confirmed = None
    if bound_ticks <= floor:
        confirmed = float(floor)
    else:
        below = int(math.ceil(bound_ticks - 1e-9)) - 1
        m2, _, b2 = _load_cp(data, None, below=below)
        solver2, st2, _ = _solve_alloc(m2, b2, L, P, check_s, seed, presolve=False)
        if st2 == cp_model.INFEASIBLE:
            confirmed = float(below + 1)
        else:
            notes.append(f"load model: CP-SAT bound {bound_ticks / sc:.9g} not confirmed by a search without "
                         f"presolve ({solver2.StatusName(st2)}): not used")
    return alloc, solver.Value(T) / sc, None if confirmed is None else confirmed / sc


def _position_model(chain, data, seed_sol, time_limit_s, seed, incumbent):
    """The position-NCA model: (pattern, allocation, origin, T, bound, optimal) | "infeasible" | None."""
    from ortools.sat.python import cp_model

    P, L, uf, ubk, hc, W, A, sc = (data[k] for k in ("P", "L", "uf", "ub", "hc", "W", "A", "sc"))
    u = [uf[l] + ubk[l] for l in range(L)]
    m = cp_model.CpModel()
    total = sum(u) + 2 * sum(hc)
    ub_T = max(total, 1)  # T = total allows NCA 1 everywhere (one batch at a time)
    if incumbent is not None:
        ub_T = max(1, min(ub_T, int(math.floor(incumbent * sc))))
    T = m.NewIntVar(min(ub_T, max(max(u), -(-sum(u) // P))), ub_T, "T")  # the period
    b = _alloc_vars(m, data)
    for p in range(P):
        m.Add(sum(u[l] * b[l, p] for l in range(L)) <= T)
    cut = _cut_vars(m, data, b, T)
    ops: list[tuple[str, int]] = []  # one batch's ops in order; "f"/"b" = comm of cut l
    for l in range(L):
        ops.append(("F", l))
        if l in cut:
            ops.append(("f", l))
    for l in reversed(range(L)):
        if l in cut:
            ops.append(("b", l))
        ops.append(("B", l))
    dur = {("F", l): uf[l] for l in range(L)} | {("B", l): ubk[l] for l in range(L)}
    dur |= {("f", l): hc[l] for l in cut} | {("b", l): hc[l] for l in cut}
    Q = 2 * len(ops) + 1
    horizon = int(max(total, 1))
    sv, qv, tau, shifted = {}, {}, {}, {}
    for op in ops:
        sv[op] = m.NewIntVar(0, horizon, f"s{op}")  # start in the pattern
        qv[op] = m.NewIntVar(0, Q, f"q{op}")  # whole periods before it in one batch's life
        m.Add(sv[op] <= T - 1)
        prod = m.NewIntVar(0, Q * horizon, f"pq{op}")
        m.AddMultiplicationEquality(prod, [T, qv[op]])
        tau[op] = m.NewIntVar(0, (Q + 1) * horizon, f"tau{op}")  # single-batch time τ = s + q·T
        m.Add(tau[op] == sv[op] + prod)
        shifted[op] = m.NewIntVar(0, 2 * horizon, f"s2{op}")
        m.Add(shifted[op] == sv[op] + T)
    for a, c in zip(ops, ops[1:]):  # Figure-1 dependencies (a comm op only delays when cut)
        m.Add(tau[c] >= tau[a] + (dur[a] if a[0] in "FB" else dur[a] * cut[a[1]]))
    m.Add(qv["F", 0] == 0)

    def pair(op, present):  # circular one-at-a-time: [s, s+d) and [s+T, s+T+d) in one NoOverlap
        if dur[op] == 0:
            return []
        return [m.NewOptionalFixedSizeIntervalVar(sv[op], dur[op], present, f"i{op}"),
                m.NewOptionalFixedSizeIntervalVar(shifted[op], dur[op], present, f"j{op}")]

    for p in range(P):
        m.AddNoOverlap([iv for op in ops if op[0] in "FB" for iv in pair(op, b[op[1], p])])
    for l in cut:
        m.AddNoOverlap(pair(("f", l), cut[l]) + pair(("b", l), cut[l]))
    nca = []
    for l in range(L):
        f_, b_ = ("F", l), ("B", l)
        ge = m.NewBoolVar(f"ge{l}")  # B_l ends after F_l starts in the pattern: s_B + [u_B = 0] > s_F
        z = 1 if ubk[l] == 0 else 0  # a zero-time B_l at s_F has freed its activation (validator's rule)
        m.Add(sv[b_] >= sv[f_] + z).OnlyEnforceIf(ge)
        m.Add(sv[b_] <= sv[f_] + z - 1).OnlyEnforceIf(ge.Not())
        n = m.NewIntVar(1, Q + 1, f"nca{l}")  # NCA_l (§3.2)
        m.Add(n == qv[b_] - qv[f_] + ge)
        nca.append(n)
    for p in range(P):
        e = []
        for l in range(L):
            v = m.NewIntVar(0, Q + 1, f"e{l}_{p}")  # NCA_l if layer l is on p, else 0
            m.Add(v >= nca[l]).OnlyEnforceIf(b[l, p])
            e.append(v)
        m.Add(sum(W[l] * b[l, p] + A[l] * e[l] for l in range(L)) <= data["M"])
    _hint_alloc(m, b, seed_sol, data)
    if (seed_sol is not None and seed_sol.ok and sc == 1.0 and chain.bandwidth is None
            and float(seed_sol.period).is_integer() and seed_sol.period <= ub_T):
        Ts = seed_sol.period
        m.AddHint(T, int(Ts))
        for op in seed_sol.pattern.ops:
            tau_v = op.start - op.shift * Ts
            q = int(math.floor(tau_v / Ts + _REL))
            m.AddHint(sv[op.kind, op.layer], int(round(tau_v - q * Ts)))
            m.AddHint(qv[op.kind, op.layer], q)
    m.Minimize(T)
    # CP-SAT's presolve overruns the time limit on the larger models
    solver, st, alloc = _solve_alloc(m, b, L, P, time_limit_s, seed, presolve=2 * L * P <= 400)
    if st == cp_model.INFEASIBLE:
        return "infeasible"
    if alloc is None:
        return None
    Tv = solver.Value(T)
    ech, ealloc, origin, resources = expand_communication(chain, alloc, P)

    def at(op):
        return solver.Value(sv[op]) + solver.Value(qv[op]) * Tv

    tf, tb = [], []
    for e, o in enumerate(origin):
        if o is not None:
            tf.append(at(("F", o)))
            tb.append(at(("B", o)))
        else:  # communication layer after layer origin[e - 1]
            l = origin[e - 1]
            if l in cut:
                tf.append(at(("f", l)))
                tb.append(at(("b", l)))
            else:  # zero-time comm layer
                tf.append(at(("F", l)) + uf[l])
                tb.append(at(("B", l + 1)) + ubk[l + 1])
    pat = pattern_from_times(ech, ealloc, [x / sc for x in tf], [x / sc for x in tb], Tv / sc, resources, P)
    return pat, alloc, origin, Tv / sc, solver.BestObjectiveBound() / sc, st == cp_model.OPTIMAL


def solve_pipeline(chain: Chain, *, processors: int | None = None, memory: float | None = None,
                   allocation: str = "contiguous", method: str | None = None, k: int | None = None,
                   max_k: int = 4, time_limit_s: float | None = 30.0, seed: int = 0) -> PipelineSolution:
    """One entry point: ``allocation`` contiguous (method ``dp`` or ``milp``) or general (``milp``)
    gives a 1-periodic solution; then, by ``k``:

    - None: when that solution is not proven optimal over every k-periodic pattern (memory binds),
      Theorem-4 patterns for k = 2..``max_k`` (:func:`k_search`); the least T/k is returned;
    - 1: the 1-periodic solution only;
    - K ≥ 2: the best Theorem-4 pattern for that K (the paper's construction from the no-idle pattern),
      with ``extra["worse_than_1_periodic"]`` when its T/k is above the 1-periodic solution's."""
    for name, v in (("k", k), ("max_k", max_k)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise InvalidInstanceError(f"{name} must be an integer >= 1, got {v!r}")
    if allocation == "contiguous":
        meth = method or "dp"
        if meth == "dp":
            sol = contiguous_dp(chain, processors, memory)
        elif meth == "milp":
            sol = contiguous_milp(chain, processors, memory, time_limit_s=time_limit_s, seed=seed)
        else:
            raise InvalidInstanceError(f"method must be one of dp, milp for contiguous allocations, got {meth!r}")
    elif allocation == "general":
        meth = method or "milp"
        if meth != "milp":
            raise InvalidInstanceError(f"method must be milp for general allocations, got {meth!r}")
        sol = general_milp(chain, processors, memory, time_limit_s=time_limit_s, seed=seed)
    else:
        raise InvalidInstanceError(f"allocation must be contiguous or general, got {allocation!r}")
    if k is not None and k > 1:
        return k_search(chain, sol, allocation, k, only_k=k)
    if k is None and max_k > 1 and sol.optimal_over not in (K_PERIODIC_CONTIGUOUS, K_PERIODIC_GENERAL):
        return k_search(chain, sol, allocation, max_k)
    return sol


# ============================================================================ paper instances
def theorem4_chain(k: int) -> Chain:
    """Theorem 4 (§5.2): P = L = k+1, M = k+1, u_F = u_B = 1, a_l = 1, W_1 = 1, W_{l+1} = l."""
    L = k + 1
    layers = tuple(Layer(f"l{l + 1}", 1.0, 1.0, float(max(1, l)), 1.0) for l in range(L))
    return Chain(f"theorem4_k{k}", layers, L, float(k + 1))


def theorem5_chain(k: int) -> Chain:
    """Theorem 5's chain C_k (§6.1), costs scaled by 2k+1 so that ε = 1: k parts (k, ε, k-1, ε), then
    one layer k, (k-2)(2k+1)+1 layers ε and one layer 1; P = 2k+1. Best general period k·(2k+1)."""
    s = 2 * k + 1
    costs: list[int] = []
    for _ in range(k):
        costs += [k * s, 1, (k - 1) * s, 1]
    costs += [k * s] + [1] * ((k - 2) * s + 1) + [s]
    layers = tuple(Layer(f"l{i + 1}", float(c), 0.0) for i, c in enumerate(costs))
    return Chain(f"theorem5_k{k}", layers, s, None)


def theorem6_chain(k: int, memory: int | None = None) -> Chain:
    """Theorem 6 (§6.2, Figure 8): k layers (cost 1, W = M-1), one layer (cost k, W = M), k layers
    (cost k-1, W = 1); P = k+2, M ≥ k (default M = k, k ≥ 3); weights only. Best general period k,
    best contiguous k(k-1)."""
    M = memory if memory is not None else k
    layers = ([Layer(f"a{i + 1}", 1.0, 0.0, float(M - 1)) for i in range(k)] + [Layer("big", float(k), 0.0, float(M))]
              + [Layer(f"c{i + 1}", float(k - 1), 0.0, 1.0) for i in range(k)])
    return Chain(f"theorem6_k{k}", tuple(layers), k + 2, float(M))


# ================================================================================== drawing
def _short_names(chain: Chain) -> list[str]:
    """1-based index among the real layers; ``c`` for a communication layer."""
    out, i = [], 0
    for ly in chain.layers:
        if ly.id.startswith("comm:"):
            out.append("c")
        else:
            i += 1
            out.append(str(i))
    return out


def draw_pattern(pattern: Pattern, width: int = 96, periods: int = 2) -> str:
    """The pattern over ``periods`` periods as text, one row per resource: ``F3`` / ``B3`` mark the
    start of layer 3's forward / backward (1-based; ``Fc``/``Bc`` a communication layer), ``^h`` its shift when there is room, ``=`` the
    rest of a forward, ``-`` the rest of a backward, ``.`` idle; ``|`` separates periods."""
    T = pattern.period
    span = periods * T
    cols = max(8, width)
    rows = []
    name_w = max(len(r) for r in pattern.resources)
    used = sorted({op.resource for op in pattern.ops if op.duration > 0} | set(range(pattern.processors)))
    names = _short_names(pattern.chain)
    for r in used:
        cells = ["."] * cols
        for j in range(periods):
            for op in pattern.ops:
                if op.resource != r or op.duration <= 0:
                    continue
                a = (op.start + j * T) / span * cols
                b = (op.start + op.duration + j * T) / span * cols
                first = int(round(a))
                last = max(first + 1, int(round(b)))
                label = f"{op.kind}{names[op.layer]}"
                if last - first >= len(label) + 2:
                    label += f"^{op.shift}"
                fill = "=" if op.kind == "F" else "-"
                for x in range(first, last):
                    ch = label[x - first] if x - first < len(label) else fill
                    cells[x % cols] = ch
        line = "".join(cells)
        per = cols // periods
        line = "|".join(line[i * per:(i + 1) * per] for i in range(periods)) + line[periods * per:]
        rows.append(f"{pattern.resources[r]:>{name_w}} |{line}|")
    ruler = f"{'':>{name_w}}  " + "".join(f"{'t=' + format(j * T, 'g'):<{cols // periods + 1}}" for j in range(periods))
    return "\n".join([ruler, *rows])


def save_gantt(pattern: Pattern, path: str, periods: int = 2, title: str | None = None) -> None:
    """Draw the pattern over ``periods`` periods with matplotlib (Agg) and write it atomically."""
    import io as _io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dplace.io import write_atomic

    T = pattern.period
    used = sorted({op.resource for op in pattern.ops if op.duration > 0} | set(range(pattern.processors)))
    names = _short_names(pattern.chain)
    fig, ax = plt.subplots(figsize=(10, 0.5 * len(used) + 1.5))
    for y, r in enumerate(used):
        for j in range(periods):
            for op in pattern.ops:
                if op.resource != r or op.duration <= 0:
                    continue
                x0 = op.start + j * T
                ax.broken_barh([(x0, op.duration)], (y - 0.4, 0.8),
                               facecolors="tab:blue" if op.kind == "F" else "tab:orange", edgecolor="black", linewidth=0.3)
                if len(pattern.ops) <= 80:
                    ax.text(x0 + op.duration / 2, y, f"{op.kind}{names[op.layer]}$^{{{op.shift}}}$", ha="center",
                            va="center", fontsize=7)
    for j in range(periods + 1):
        ax.axvline(j * T, color="grey", linestyle="--", linewidth=0.8)
    ax.set_yticks(range(len(used)))
    ax.set_yticklabels([pattern.resources[r] for r in used])
    ax.set_xlim(0, periods * T * 1.01 + 1e-9)
    ax.set_xlabel("time (µs)")
    ax.set_title(title or f"{pattern.k}-periodic pattern, period {T:g} (normalised {pattern.normalised_period:g})")
    fig.tight_layout()
    buf = _io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())
