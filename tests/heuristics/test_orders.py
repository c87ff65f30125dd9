"""Tests for heuristics/orders.py: the three topological orders and the path levels."""
from __future__ import annotations

import random

import pytest

from dplace.bounds import critical_path_length
from dplace.instance.io import instance_from_dict
from dplace.heuristics.orders import (
    blevel, cpath, cpd_topo_order, critical_path, dfs_topo_order, is_topological_order, m_topo_order,
    tlevel,
)


def make(ops, edges, m=2, bw=100.0, lat=0.0, mem=10**9):
    """ops: list of (id, time); edges: list of (src, dst, bytes)."""
    return instance_from_dict({
        "format": "dplace-instance/1", "name": "t",
        "devices": [{"name": f"d{i}", "memory": mem} for i in range(m)],
        "links": {"latency": lat, "bandwidth": bw},
        "ops": [{"id": o, "time": t} for o, t in ops],
        "edges": [{"src": a, "dst": b, "bytes": nb} for a, b, nb in edges],
    })


def random_dag(rng, n, p=0.3):
    ops = [(f"o{i}", rng.randint(1, 9)) for i in range(n)]
    perm = list(range(n))
    rng.shuffle(perm)
    edges = [(f"o{perm[i]}", f"o{perm[j]}", rng.randint(0, 500))
             for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    return make(ops, edges)


# Figure-3-like graph: two sources a, b; a -> a1 -> a2, b -> b1 -> b2
FORK = make([("a", 1), ("b", 1), ("a1", 1), ("b1", 1), ("a2", 1), ("b2", 1)],
            [("a", "a1", 0), ("a1", "a2", 0), ("b", "b1", 0), ("b1", "b2", 0)])


def names(inst, order):
    return [inst.ops[o].id for o in order]


def test_m_topo_is_bfs_like():
    assert names(FORK, m_topo_order(FORK)) == ["a", "b", "a1", "b1", "a2", "b2"]


def test_dfs_topo_follows_children_first():
    assert names(FORK, dfs_topo_order(FORK)) == ["a", "a1", "a2", "b", "b1", "b2"]


def test_cpd_topo_prefers_critical_child():
    # r has children x (short) and y (long): y is on the critical path and must come right after r
    inst = make([("r", 1), ("x", 1), ("y", 10), ("z", 1)], [("r", "x", 0), ("r", "y", 0), ("y", "z", 0)])
    assert names(inst, cpd_topo_order(inst)) == ["r", "y", "z", "x"]
    # sources by decreasing cpath
    inst2 = make([("s1", 1), ("s2", 5), ("t", 1)], [("s1", "t", 0), ("s2", "t", 0)])
    assert names(inst2, cpd_topo_order(inst2))[0] == "s2"


def test_levels_follow_equations_2_and_3():
    # bandwidth 100 B/us, no latency: edge a->b of 200 bytes costs 2 us on distinct devices
    inst = make([("a", 3), ("b", 4), ("c", 5)], [("a", "b", 200), ("b", "c", 0), ("a", "c", 100)])
    ix = inst.op_index
    t = tlevel(inst)
    b = blevel(inst)
    assert t[ix["a"]] == 0.0 and t[ix["b"]] == pytest.approx(5.0) and t[ix["c"]] == pytest.approx(9.0)
    assert b[ix["c"]] == 5.0 and b[ix["b"]] == pytest.approx(9.0) and b[ix["a"]] == pytest.approx(14.0)
    cp = cpath(inst)
    assert all(v == pytest.approx(14.0) for v in cp)
    assert names(inst, critical_path(inst)) == ["a", "b", "c"]
    # with no transfers and fastest-device costs the critical path matches the core's bound
    assert max(blevel(inst, "min", "zero")) == pytest.approx(critical_path_length(inst))


@pytest.mark.parametrize("seed", range(30))
def test_orders_are_topological_on_random_dags(seed):
    rng = random.Random(seed)
    inst = random_dag(rng, rng.randint(1, 25))
    for f in (m_topo_order, dfs_topo_order, cpd_topo_order):
        order = f(inst)
        assert is_topological_order(inst, order), f.__name__
        assert order == f(inst)  # deterministic
    cp = cpath(inst)
    path = critical_path(inst)
    # a source-to-sink path along edges (the old assert here, "not a topological order or covers every
    # op", held for any list: is_topological_order is False whenever the list does not cover every op)
    assert path and not inst.pred[path[0]] and not inst.succ[path[-1]]
    edges = set(zip(inst.esrc, inst.edst))
    assert all((a, b) in edges for a, b in zip(path, path[1:]))
    # every op on the returned path has the maximum cpath
    assert all(cp[o] == pytest.approx(max(cp)) for o in path)


def test_duplicate_edges_and_empty():
    inst = make([("a", 1), ("b", 1)], [("a", "b", 1), ("a", "b", 2)])
    for f in (m_topo_order, dfs_topo_order, cpd_topo_order):
        assert names(inst, f(inst)) == ["a", "b"]


@pytest.mark.parametrize("seed", range(20))
def test_priority_order_takes_the_smallest_ready_key(seed):
    from dplace.schedule.ranks import priority_order

    rng = random.Random(seed)
    inst = random_dag(rng, rng.randint(1, 20))
    key = {o: (rng.randint(0, 3), inst.topo_pos[o]) for o in range(inst.n)}  # many ties on the first part
    order = priority_order(inst, key.__getitem__)
    assert is_topological_order(inst, order)
    done: set[int] = set()
    for o in order:  # at every step, no ready op has a smaller key
        ready = [v for v in range(inst.n) if v not in done and all(inst.esrc[e] in done for e in inst.pred[v])]
        assert key[o] == min(key[v] for v in ready)
        done.add(o)
