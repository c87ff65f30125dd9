"""dplace.instance.graph on small graphs worked out by hand."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from dplace.instance import graph as g

# 0 -> 1 -> 3, 0 -> 2 -> 3, 4 alone; nodes added 0..4
DIAMOND = [(0, 1), (0, 2), (1, 3), (2, 3)]


def test_digraph_keeps_node_and_edge_order():
    G = g.digraph(5, [(0, 2), (0, 1), (2, 3), (0, 2)])
    assert list(G) == [0, 1, 2, 3, 4]
    assert list(G.succ[0]) == [2, 1]  # edge order; the parallel 0 -> 2 collapses
    assert G.number_of_edges() == 3


def test_topological_order_takes_smallest_ready_node():
    G = g.digraph(5, DIAMOND)
    # ready at the start: 0 and 4; 0 frees 1 and 2; 1 < 2 < 4; 3 after both 1 and 2
    assert g.topological_order(G) == [0, 1, 2, 3, 4]


def test_topological_order_with_key():
    G = g.digraph(5, DIAMOND)
    key = {0: 5, 1: 3, 2: 1, 3: 0, 4: 2}.__getitem__
    # ready {0 (5), 4 (2)} -> 4; {0} -> 0; {1 (3), 2 (1)} -> 2; {1} -> 1; {3} -> 3
    assert g.topological_order(G, key) == [4, 0, 2, 1, 3]


def test_topological_order_raises_on_cycle_and_names_an_edge():
    G = g.digraph(4, [(0, 1), (1, 2), (2, 1), (2, 3)])
    with pytest.raises(g.NotADag):
        g.topological_order(G)
    assert g.edge_on_cycle(G) in {(1, 2), (2, 1)}
    assert g.edge_on_cycle(g.digraph(3, [(0, 1), (1, 2)])) is None
    assert not g.is_dag(G) and g.is_dag(g.digraph(5, DIAMOND))


def test_generation_order_is_fifo_kahn():
    # 0 -> 3, 1 -> 2, 2 -> 4, 3 -> 4; FIFO: sources 0 1, then 3 (freed by 0), 2 (by 1), then 4
    G = g.digraph(5, [(0, 3), (1, 2), (2, 4), (3, 4)])
    assert g.generation_order(G) == [0, 1, 3, 2, 4]


def test_queue_order_head_and_tail():
    # 0 -> 1, 0 -> 2, 1 -> 3, 5 alone (a second source); sources queued [0, 5]
    succ = [[1, 2], [3], [4], [], [], []]
    sources = [0, 5]
    assert g.queue_order(succ, sources, to_head=False) == [0, 5, 1, 2, 3, 4]
    # to the head, scanned in reverse so the first child comes out first: 0, 1, 3, 2, 4, then 5
    assert g.queue_order(succ, sources, to_head=True, scan=reversed) == [0, 1, 3, 2, 4, 5]
    # an nx.DiGraph's successors do as well
    G = g.digraph(6, [(0, 1), (0, 2), (1, 3), (2, 4)])
    assert g.queue_order(G.succ, sources, to_head=True, scan=reversed) == [0, 1, 3, 2, 4, 5]
    with pytest.raises(g.NotADag):
        g.queue_order([[1], [0]], [], to_head=False)


def test_linear_extensions_of_a_diamond():
    G = g.digraph(4, DIAMOND)
    assert sorted(g.linear_extensions(G)) == [(0, 1, 2, 3), (0, 2, 1, 3)]
    assert sorted(g.linear_extensions(g.digraph(2, []))) == [(0, 1), (1, 0)]


def test_reachability():
    G = g.digraph(5, DIAMOND)
    assert g.descendants(G, 0) == {1, 2, 3}
    assert g.ancestors(G, 3) == {0, 1, 2}
    assert g.descendants(G, 4) == set()


def lists(n, edges):
    """The edge-list form (an Instance's ``n, esrc, edst, succ, pred``) of ``edges``."""
    succ, pred = [[] for _ in range(n)], [[] for _ in range(n)]
    for e, (u, v) in enumerate(edges):
        succ[u].append(e)
        pred[v].append(e)
    return SimpleNamespace(n=n, esrc=[u for u, _ in edges], edst=[v for _, v in edges], succ=succ, pred=pred)


def test_ready_order_on_edge_lists():
    # the same orders as test_topological_order_takes_smallest_ready_node / _with_key
    assert g.ready_order(lists(5, DIAMOND)) == [0, 1, 2, 3, 4]
    key = {0: 5, 1: 3, 2: 1, 3: 0, 4: 2}.__getitem__
    assert g.ready_order(lists(5, DIAMOND), key) == [4, 0, 2, 1, 3]
    # a cycle 1 -> 2 -> 1 leaves 1, 2 and 3 out
    assert g.ready_order(lists(4, [(0, 1), (1, 2), (2, 1), (2, 3)])) == [0]


def test_longest_paths_node_and_edge_weights():
    # diamond with w = [1, 5, 2, 1, 7]; edge costs c = [0, 10, 0, 0] (edge 0 -> 2 costs 10)
    el = lists(5, DIAMOND)
    order = [0, 1, 2, 3, 4]
    w = [1.0, 5.0, 2.0, 1.0, 7.0]
    c = [0.0, 10.0, 0.0, 0.0]
    to, via = g.longest_to(el, order, w, c)
    # to[2] = 1 + 10; to[1] = 1; to[3] = max(1 + 5, 11 + 2) = 13 through 2
    assert to == [0.0, 1.0, 11.0, 13.0, 0.0]
    assert via == [-1, 0, 0, 2, -1]
    # from (own weight included): 3: 1; 1: 5 + 1; 2: 2 + 1; 0: 1 + max(0 + 6, 10 + 3) = 14; 4: 7
    assert g.longest_from(el, order, w, c) == [14.0, 6.0, 3.0, 1.0, 7.0]
    assert g.longest_from(el, order, w, c, own=False) == [13.0, 1.0, 1.0, 0.0, 0.0]
    assert g.longest_path(el, order, w, c) == (14.0, [0, 2, 3])
    # without edge weights: 0 -> 1 -> 3 = 7 ties with the lone 4 = 7: the one ending first in order wins
    assert g.longest_path(el, order, w) == (7.0, [0, 1, 3])


def test_longest_to_ties_keep_first_predecessor_in_order():
    to, via = g.longest_to(lists(3, [(1, 2), (0, 2)]), [0, 1, 2], [2.0, 2.0, 1.0])
    assert to[2] == 2.0 and via[2] == 0
    # parallel edges: the costlier one counts
    assert g.longest_from(lists(2, [(0, 1), (0, 1)]), [0, 1], [1.0, 1.0], [3.0, 5.0]) == [7.0, 1.0]


def test_union_find_components():
    uf = g.union_find(range(6))
    uf.union(0, 3)
    uf.union(4, 3)
    uf.union(1, 2)
    labels = g.components(uf, range(6))
    assert labels[0] == labels[3] == labels[4]
    assert labels[1] == labels[2] != labels[0]
    assert len(set(labels)) == 3  # {0, 3, 4}, {1, 2}, {5}
