"""Periodic patterns of a chain: their representation, the validator, folding and unrolling.

Source: Beaumont, Eyraud-Dubois, Shilova, "Pipelined Model Parallelism: Complexity Results and
Memory Considerations" (Euro-Par 2021): patterns and NCA §3, k-periodic patterns §5.2 (Thm. 4),
communication layers §3.1, the packed pattern of any allocation §6 (Theorem 1's proof).

- a *pattern* of period T holds each operation (F_l or B_l) k times; each copy has a resource, a start
  in [0, T) and a shift h: in period j it processes batch j·k + h at time j·T + start. The pattern is
  k-periodic; its normalised period is T/k.
- NCA_l, the number of concurrent activations of layer l, is the largest number of batches whose
  F_l has started and whose B_l has not ended (:func:`validate_pattern` counts it exactly from starts
  and shifts; :func:`nca_from_shifts` is the paper's max h − h' rule of §3.2, equal on valid patterns).
- memory of a processor = Σ over its layers of W_l + NCA_l·a_l.
- with a bandwidth β each cut between two resources becomes a communication layer of forward and
  backward time a_l/β (2·a_l/β in all, §3.1) on its own link resource, without memory.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from dplace.errors import InvalidInstanceError

from .chain import Chain, Layer, communication_time

_REL = 1e-9  # relative tolerance on times and bytes


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
