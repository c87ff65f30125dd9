"""The pattern validator and Theorem 4's unrolling (k_periodic)."""
from __future__ import annotations

import pytest
from pipeline_helpers import singletons

from dplace.pipeline import PatternOp, Pattern, k_periodic, make_chain, one_f_one_b_star, pattern_from_times, validate_pattern


def _two_layer_pattern(changes=None):
    c = make_chain([(1, 1), (1, 1)], weights=[1, 1], activations=[1, 1], processors=2)
    star = one_f_one_b_star(c, singletons(c), 2.0)
    ops = list(star.pattern.ops)
    for (kind, layer), kw in (changes or {}).items():
        i = next(i for i, o in enumerate(ops) if o.kind == kind and o.layer == layer)
        ops[i] = PatternOp(**{**ops[i].__dict__, **kw})
    p = star.pattern
    return Pattern(p.period, p.k, tuple(ops), p.chain, p.resources, p.processors)


def test_validator_accepts_1f1b_and_reports_nca_and_memory():
    rep = validate_pattern(_two_layer_pattern(), memory=3)
    assert rep.ok and rep.nca == [2, 1] and rep.memory == [3, 2]
    assert not validate_pattern(_two_layer_pattern(), memory=2.5).ok


@pytest.mark.parametrize("change, msg", [
    ({("F", 1): {"resource": 0}}, "ops on resources"),
    ({("F", 0): {"duration": 2.0}}, "duration must be"),
    ({("B", 0): {"shift": 5}}, "dependency"),
    ({("F", 0): {"start": 2.0}}, "start must be in"),
])
def test_validator_rejects(change, msg):
    rep = validate_pattern(_two_layer_pattern(change))
    assert not rep.ok and any(msg in e for e in rep.errors), rep.errors


def test_validator_rejects_overlap():
    c = make_chain([(1, 1), (1, 1)], processors=1)
    p = pattern_from_times(c, [0, 0], [0, 1], [2, 3], 3.0, ["p0"], 1)  # load 4 > period 3
    rep = validate_pattern(p)
    assert not rep.ok and any("overlaps" in e for e in rep.errors)


def test_k_periodic_for_k1_halves_throughput():
    c = make_chain([(1, 1)] * 3, activations=[1, 1, 1], processors=3)
    star = one_f_one_b_star(c, singletons(c), 2.0)
    kp = k_periodic(star.pattern, 1)
    rep = validate_pattern(kp)
    assert rep.ok and kp.period == 4 and rep.nca[0] <= star.nca[0]
