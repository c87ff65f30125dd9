"""The bounds on arrays (dplace.kernels.bounds) give the reference's values to the last bit, and the same
memory-infeasibility message."""
import random
from pathlib import Path

import numpy as np
import pytest

from dplace import bounds
from dplace.errors import InfeasibleError
from dplace.instance.graph import longest_path
from dplace.instance.io import load_instance
from dplace.kernels import bounds as kb
from dplace.testing import contract_instances, random_instance


def _instances():
    rng = random.Random(21)
    out = list(contract_instances())
    out += [load_instance(p) for p in sorted(Path(__file__).parents[2].glob("instances/*.json"))]
    out += [random_instance(rng, n_ops=rng.randint(1, 30), integer=rng.random() < 0.5,
                            memory_slack=rng.choice([0.3, 0.6, 3.0])) for _ in range(80)]
    return out


def _error(f, inst):
    try:
        f(inst)
    except InfeasibleError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("inst", _instances(), ids=lambda i: i.name)
def test_bounds_on_arrays_equal_the_reference(inst):
    assert _error(kb.check_memory_feasible, inst) == _error(bounds.check_memory_feasible, inst)
    w = [min(r) for r in inst.dur]
    assert kb.critical_path(inst) == longest_path(inst, inst.topo, w)
    p, head, tail = kb.heads_tails(inst)
    assert p.tolist() == w
    from dplace.instance.graph import longest_from, longest_to
    assert head.tolist() == longest_to(inst, inst.topo, w)[0]
    assert tail.tolist() == longest_from(inst, inst.topo, w, own=False)
    parts = {k: v for k, v in bounds.lower_bound_parts(inst).items() if k in ("critical_path", "work",
                                                                              "longest_op", "pinned", "memory_path")}
    got = bounds.scale_parts(inst)
    for k, v in parts.items():
        assert got[k] == v, k
    assert got["energetic"] == bounds.energetic_bound(inst)
    assert max(got.values()) <= max(bounds.lower_bound_parts(inst).values())
    assert np.isfinite(list(got.values())).all()
