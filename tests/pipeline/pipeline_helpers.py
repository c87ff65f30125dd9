"""Reference searches and small builders shared by the pipeline tests (oracles written from the paper)."""
from __future__ import annotations

import itertools
import random
from pathlib import Path

from dplace.pipeline import Chain, make_chain, one_f_one_b_star, pattern_from_times, validate_pattern
from dplace.pipeline.dp import _needed_period
from dplace.pipeline.pattern import _batch_sequence


ROOT = Path(__file__).resolve().parents[2]
CHAINS = ROOT / "instances" / "chains"
PROFILES = ROOT / "instances" / "sources" / "pipedream-profiles"


def singletons(chain: Chain) -> list[tuple[int, int]]:
    return [(l, l + 1) for l in range(chain.L)]


def brute_contiguous(chain: Chain, P: int, M):
    """Least 1F1B* period over every contiguous partition into at most P stages (reference)."""
    best = None
    for r in range(min(P, chain.L)):
        for cuts in itertools.combinations(range(1, chain.L), r):
            b = [0, *cuts, chain.L]
            stages = list(zip(b, b[1:]))
            T = _needed_period(chain, stages, M)
            if validate_pattern(one_f_one_b_star(chain, stages, T).pattern, M).ok and (best is None or T < best):
                best = T
    return best


def random_chain(rng: random.Random, L: int, P: int, cost: int, memory, bandwidth=lambda: None) -> Chain:
    """Times 1..cost forward and 0..cost backward, weights 0..4, activations 0..3; ``memory`` and
    ``bandwidth`` are drawn last (callables), in that order."""
    fb = [(rng.randint(1, cost), rng.randint(0, cost)) for _ in range(L)]
    w, a = [rng.randint(0, 4) for _ in range(L)], [rng.randint(0, 3) for _ in range(L)]
    m = memory()
    return make_chain(fb, weights=w, activations=a, processors=P, memory=m, bandwidth=bandwidth())


def delay_patterns(chain: Chain, T: float, step: float = 1.0):
    """Every 1-periodic pattern with one layer per processor whose single-batch times are built from
    delays in {0, step, ..., T - step} between consecutive operations of Figure 1 (F_1..F_L, B_L..B_1).
    A delay ≥ T can be cut by T without moving any op modulo T nor raising any NCA, so on this time
    grid this is every pattern that can matter."""
    L = chain.L
    grid = [i * step for i in range(int(round(T / step)))]
    seq = _batch_sequence(L)
    for delays in itertools.product(grid, repeat=2 * L - 1):
        tau = {}
        t = 0.0
        for i, (kind, l) in enumerate(seq):
            if i:
                t += delays[i - 1]
            tau[kind, l] = t
            t += chain.layers[l].forward if kind == "F" else chain.layers[l].backward
        # cheap pre-filter: F_l and B_l must not overlap modulo T on their processor
        ok = True
        for l in range(L):
            d = (tau["B", l] - tau["F", l]) % T
            if not (chain.layers[l].forward - 1e-9 <= d <= T - chain.layers[l].backward + 1e-9):
                ok = False
                break
        yield ok, tau


def from_tau(chain, tau, T):
    return pattern_from_times(chain, list(range(chain.L)), [tau["F", l] for l in range(chain.L)],
                              [tau["B", l] for l in range(chain.L)], T, [f"p{p}" for p in range(chain.L)], chain.L)


def brute_general(c: Chain, P: int):
    """Least period of any 1-periodic pattern (any allocation, times on the integer grid) that the
    validator accepts under the chain's memory: allocations × single-batch delays in [0, T)."""
    L = c.L
    seq = _batch_sequence(L)
    for T in range(int(max(max(c.u), -(-sum(c.u) // P))), int(sum(c.u)) + 1):
        for alloc in itertools.product(range(P), repeat=L):
            loads = [sum(c.u[l] for l in range(L) if alloc[l] == p) for p in range(P)]
            if alloc[0] != 0 or max(loads) > T:
                continue
            for delays in itertools.product(range(T), repeat=2 * L - 1):
                tau, t = {}, 0
                for i, (kind, l) in enumerate(seq):
                    t += delays[i - 1] if i else 0
                    tau[kind, l] = t
                    t += c.layers[l].forward if kind == "F" else c.layers[l].backward
                pat = pattern_from_times(c, list(alloc), [tau["F", l] for l in range(L)],
                                         [tau["B", l] for l in range(L)], T, [f"p{p}" for p in range(P)], P)
                if validate_pattern(pat, c.memory).ok:
                    return T
    return None
