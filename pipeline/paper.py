"""The chains of the paper's theorems (Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021, §5.2 and §6)."""
from __future__ import annotations

from .chain import Chain, Layer


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
