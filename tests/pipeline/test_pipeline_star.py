"""1F1B* (Algorithm 1): valid patterns whose NCA is the group number, the least any pattern reaches (Theorem 3)."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st
from pipeline_helpers import CHAINS, delay_patterns, from_tau

from dplace import pipeline as pl
from dplace.pipeline import contiguous_dp, k_periodic, load_chain, make_chain, one_f_one_b_star, validate_pattern


def test_theorem3_exhaustive_shifts_never_beat_1f1b_star():
    rng = random.Random(3)
    cases = 0
    while cases < 6:
        L = rng.randint(2, 4)
        c = make_chain([(rng.randint(1, 2), rng.randint(1, 2)) for _ in range(L)], processors=3)
        S = rng.randint(2, min(3, L))
        cuts = sorted(rng.sample(range(1, L), S - 1))
        b = [0, *cuts, L]
        stages = list(zip(b, b[1:]))
        loads = [sum(c.u[x:y]) for x, y in stages]
        if max(loads) > 6:
            continue
        T = rng.randint(max(loads), min(sum(loads), 6))
        star = one_f_one_b_star(c, stages, T)
        rep = validate_pattern(star.pattern)
        assert rep.ok and rep.nca == star.nca
        # the same partition at stage level: one "layer" per stage
        stage_chain = make_chain([(sum(c.uf[x:y]), sum(c.ub[x:y])) for x, y in stages], processors=S)
        best = [99] * S
        for ok, tau in delay_patterns(stage_chain, T):
            if not ok:
                continue
            r = validate_pattern(from_tau(stage_chain, tau, T))
            if r.ok:
                best = [min(x, y) for x, y in zip(best, r.nca)]
        star_stage = [star.nca[x] for x, _ in stages]
        assert best == star_stage  # 1F1B* reaches the least NCA of every stage at once
        cases += 1


def test_communication_layer_time():
    c = make_chain([(1, 1), (1, 1)], activations=[3, 0], processors=2, bandwidth=2.0)
    star = one_f_one_b_star(c, [(0, 1), (1, 2)], 3.0)
    comm = [op for op in star.pattern.ops if op.layer == 1]  # expanded chain: l1, comm, l2
    assert sum(op.duration for op in comm) == pytest.approx(2 * 3 / 2.0)
    assert validate_pattern(star.pattern).ok


@pytest.mark.parametrize("name", ["vgg16", "gnmt", "squeezenet1_0"])
def test_real_chains_validator_nca_is_group_number(name):
    # zero-time layers (inputs, reshapes) included: the validator's count matches 1F1B*'s group numbers
    c = load_chain(CHAINS / f"{name}.json")
    free = contiguous_dp(c, 4, None, use_chain_memory=False)
    sol = contiguous_dp(c, 4, 0.8 * max(free.memory_used))
    star = one_f_one_b_star(c, sol.stages, sol.period)
    assert sol.ok and validate_pattern(star.pattern).nca == star.nca == sol.nca
    assert sol.period >= free.period


@st.composite
def chain_partition_period(draw):
    L = draw(st.integers(1, 7))
    fb = draw(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=L, max_size=L))
    if sum(f + b for f, b in fb) == 0:
        fb[0] = (1, 0)
    acts = draw(st.lists(st.integers(0, 4), min_size=L, max_size=L))
    beta = draw(st.sampled_from([None, 1.0, 2.0]))
    c = make_chain(fb, activations=acts, processors=L, bandwidth=beta)
    cuts = sorted(draw(st.sets(st.integers(1, L - 1), max_size=L - 1))) if L > 1 else []
    b = [0, *cuts, L]
    stages = list(zip(b, b[1:]))
    items = [sum(c.u[x:y]) for x, y in stages] + [pl.communication_time(c, y - 1) for _, y in stages[:-1]]
    T = max(items) + draw(st.integers(0, 10))
    return c, stages, max(T, 1)


@settings(max_examples=40, deadline=None)
@given(chain_partition_period())
def test_1f1b_star_is_valid_and_nca_is_group_number(case):
    c, stages, T = case
    star = one_f_one_b_star(c, stages, T)
    rep = validate_pattern(star.pattern)
    assert rep.ok, rep.errors
    real = [e for e, o in enumerate(star.origin) if o is not None]
    for i, e in enumerate(real):  # the group number; a zero-time layer may count fewer (its F and B coincide)
        assert rep.nca[e] == star.nca[i] or (rep.nca[e] < star.nca[i] and c.u[i] == 0)
    assert pl.nca_from_shifts(star.pattern) == rep.nca  # the paper's max h − h' rule
    assert max(star.nca) == len(star.groups) or star.nca[0] <= len(star.groups)
    kp = k_periodic(star.pattern, 2)
    r2 = validate_pattern(kp)
    assert r2.ok and all(a <= b for a, b in zip(r2.nca, rep.nca))
    for e, l in enumerate(real):  # g − ⌊g/3⌋ (exact when the layer takes time; zero-time ones may count fewer)
        want = pl.theorem4_nca(star.nca[e], 2)
        assert r2.nca[l] == want or (r2.nca[l] < want and c.u[e] == 0)
    if all(op.duration > 0 for op in kp.ops):
        assert pl.nca_from_shifts(kp) == r2.nca
