"""The anchored search bound (dplace.bounds.anchored_search) against the brute-force optimum
(dplace.verify.oracle, written from the model's text), both comm modes, on the generators of
tests/test_bounds.py (NAS-cell-like forks, graphs with one source and one sink, random graphs) and the
mirrored pieces of tests/test_bounds_mirror.py; and inside the segment bound."""
import json
import random

import pytest

from dplace.bounds import lower_bound_parts
from dplace.bounds.anchored_search import anchored_search_bound
from dplace.instance.io import instance_to_dict
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.testing import random_instance
from dplace.verify.oracle import brute_force
from test_bounds import _anchored_random, _branches
from test_bounds_mirror import _mirrored


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_anchored_search_never_above_the_brute_force_optimum(comm):
    """Started at the best cheap bound and allowed up to twice the optimum, it never passes the optimum;
    it raises the cheap bounds on some instances, on some up to the optimum."""
    rng = random.Random(61 if comm == "parallel" else 62)
    checked = raised = 0
    for i in range(100):
        k = i % 4
        if k == 0:
            inst = _branches(rng, comm)
        elif k == 1:
            inst = _anchored_random(rng).replace(comm=comm)
        elif k == 2:
            inst = random_instance(rng, n_ops=rng.randint(3, 8), comm=comm)
        else:
            inst = _mirrored(rng, comm)[0]
        orc = brute_force(inst)
        if orc.optimum is None:
            continue
        assert orc.complete
        lo = max(lower_bound_parts(inst).values())
        b = anchored_search_bound(inst, lo, 2 * orc.optimum + 10, max_nodes=2000)
        assert lo <= b <= orc.optimum * (1 + 1e-6) + 1e-9, (json.dumps(instance_to_dict(inst)), b, orc.optimum)
        raised += b > lo + 1e-9
        checked += 1
    assert checked >= 80
    assert raised >= 8


def _tied() -> Instance:
    """src -> o0, o1 (tied by colocation) -> snk, a link d0-d1 slower than the others (a drawn instance)."""
    ops = [Op("o0", 7.597, 2, colocation="g"), Op("o1", 3.31, 0, colocation="g"), Op("src", 1, 0), Op("snk", 0, 0)]
    edges = [Edge("src", "o0", 7.0), Edge("o0", "snk", 2.0), Edge("src", "o1", 3.0), Edge("o1", "snk", 5.0)]
    return Instance("tied", [Device(f"d{d}", 10) for d in range(3)], ops, edges, link=Link(0.948, 2.0),
                    pairs={("d0", "d1"): Link(1.815, 2.0)}, comm="sequential")


def test_anchored_search_raises_the_cheap_bounds_near_the_optimum():
    """Every cheap bound 10.206 at most; the search proves 11.68 (its bisection stops within 0.5);
    the brute-force optimum is 11.907."""
    inst = _tied()
    opt = brute_force(inst).optimum
    lo = max(lower_bound_parts(inst).values())
    b = anchored_search_bound(inst, lo, 2 * opt)
    assert lo == pytest.approx(10.206) and opt == pytest.approx(11.907)
    assert opt - 0.5 <= b <= opt


def test_anchored_search_stops_when_asked():
    inst = _tied()
    lo = max(lower_bound_parts(inst).values())
    assert anchored_search_bound(inst, lo, lo + 20, stop=lambda: True) == lo


def test_the_segment_bound_rounds_the_search_up_to_a_whole_tick():
    """``_searched_lb`` (step 4 of the segment bound) on integer data: the search proves 10.5 (its bisection
    stops within 0.5), the optimum is a whole number, so 11: the brute-force optimum, and with an answer of 11
    the piece is proven optimal (every cheap bound: 9)."""
    from dplace.budget import Budget
    from dplace.formulations.bounds_segments import _searched_lb

    ops = [Op("src", 2, 0), Op("b0", 2, 2, colocation="g"), Op("b1", 6, 0, colocation="g"), Op("snk", 1, 2)]
    edges = [Edge("src", "b0", 2.0), Edge("b0", "snk", 5.0), Edge("src", "b1", 4.0), Edge("b1", "snk", 0.0)]
    inst = Instance("ints", [Device(f"d{d}", 5) for d in range(3)], ops, edges, link=Link(0.0, 1.0))
    lo = max(lower_bound_parts(inst).values())
    assert lo == pytest.approx(9.0) and brute_force(inst).optimum == pytest.approx(11.0)
    assert _searched_lb(inst, lo, 11.0, Budget(10.0)) == (11.0, True)
    assert _searched_lb(inst, lo, 9.0, Budget(10.0)) == (lo, False)  # nothing above the answer to prove
