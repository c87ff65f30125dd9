"""1F1B* (Algorithm 1, §5.1 of Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021): the 1-periodic
pattern of a contiguous partition with the least NCA per layer (Theorem 3)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from dplace.errors import InvalidInstanceError

from .chain import Chain
from .pattern import Pattern, _tol, expand_communication, pattern_from_times


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
