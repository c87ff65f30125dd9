"""Exact least period over 1-periodic patterns of contiguous allocations with memory: 1F1B* (§5.1,
Theorem 3 of Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021) inside a binary search on the period."""
from __future__ import annotations

import math
import time
from typing import Any

from dplace.errors import InfeasibleError

from .bounds import _candidates, _check_cost, _prefix
from .chain import Chain, communication_time
from .pattern import _tol, expand_communication, k_periodic, theorem4_nca, validate_pattern
from .solution import ONE_PERIODIC_CONTIGUOUS, PipelineSolution, _claim, _finish
from .star import one_f_one_b_star


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
