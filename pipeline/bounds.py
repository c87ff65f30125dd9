"""Proven lower bounds on the normalised period T/k of every k-periodic pattern (§6 of Beaumont,
Eyraud-Dubois, Shilova, Euro-Par 2021), and the candidate periods they and the DP search over."""
from __future__ import annotations

from typing import Sequence

from dplace.errors import InvalidInstanceError

from .chain import Chain, communication_time
from .pattern import _tol


def _prefix(xs: Sequence[float]) -> list[float]:
    out = [0.0]
    for x in xs:
        out.append(out[-1] + x)
    return out


def _check_cost(chain: Chain) -> None:
    if sum(chain.u) <= 0:
        raise InvalidInstanceError(f"chain {chain.name!r}: total forward+backward time must be > 0, got 0")


def _candidates(chain: Chain, lo: float) -> list[float]:
    import numpy as np

    pre = np.asarray(_prefix(chain.u))
    diffs = (pre[None, :] - pre[:, None])
    vals = np.unique(diffs[np.triu_indices(len(pre), 1)])
    return vals[vals >= lo - _tol(lo)].tolist()


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
