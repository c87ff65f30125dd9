"""Tests for the Metis baseline (heuristics/metis.py)."""
from __future__ import annotations

import random

import pytest

import dplace
from dplace.errors import InvalidInstanceError
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.testing import random_instance


def _inst(ops, edges, *, m=2, memory=10**9):
    return Instance("t", [Device(f"d{i}", memory) for i in range(m)], ops,
                    [Edge(a, b, nb) for a, b, nb in edges], link=Link(1.0, 10.0))


def test_two_cliques_split_along_the_light_cut():
    # two 4-op groups, heavy inside, one light edge between: METIS cuts the light edge
    ops = [Op(f"a{i}", 10, 1) for i in range(4)] + [Op(f"b{i}", 10, 1) for i in range(4)]
    edges = [(f"a{i}", f"a{j}", 1000) for i in range(4) for j in range(i + 1, 4)]
    edges += [(f"b{i}", f"b{j}", 1000) for i in range(4) for j in range(i + 1, 4)] + [("a3", "b0", 1)]
    inst = _inst(ops, edges)
    res = dplace.solve(inst, "metis")
    assert dplace.check(inst, res).ok
    assert res.order is None  # FIFO: the simulator's own order
    assert len(set(res.placement[:4])) == 1 and len(set(res.placement[4:])) == 1
    assert res.placement[0] != res.placement[4]


def test_colocation_pins_and_memory_repair():
    ops = [Op("p", 1, 10, device="d1"), Op("g1", 1, 10, colocation="g"), Op("g2", 1, 10, colocation="g")]
    ops += [Op(f"x{i}", 5, 30) for i in range(4)]
    edges = [("p", "g1", 5), ("g1", "g2", 5)] + [(f"x{i}", f"x{i + 1}", 100) for i in range(3)]
    inst = _inst(ops, edges, memory=100)
    res = dplace.solve(inst, "metis")
    rep = dplace.check(inst, res)
    assert rep.ok, rep.summary()
    assert res.placement[0] == 1 and res.placement[1] == res.placement[2]
    assert res.memory_ok  # 150 bytes on 2 x 100: repair makes it fit


@pytest.mark.parametrize("seed", range(20))
def test_random_memory_kept_or_flagged(seed):
    inst = random_instance(random.Random(seed), n_ops=12, comm=("parallel", "sequential")[seed % 2])
    res = dplace.solve(inst, "metis", seed=seed)
    if res.status == "infeasible":
        return
    rep = dplace.check(inst, res)
    assert rep.ok, rep.summary()
    assert res.memory_ok == rep.memory_ok
    again = dplace.solve(inst, "metis", seed=seed)
    assert again.placement == res.placement


def test_single_device_and_option_validation():
    inst = _inst([Op("a", 1, 1), Op("b", 1, 1)], [("a", "b", 1)], m=1)
    assert dplace.solve(inst, "metis").placement == [0, 0]
    with pytest.raises(InvalidInstanceError, match="ufactor"):
        dplace.solve(inst, "metis", ufactor=0)
