"""Graph algorithms of dplace, on networkx: the one place for them.

Ops are the integers ``0 .. n-1``; :func:`digraph` builds an ``nx.DiGraph`` whose nodes are added in
that order and whose successors keep the order the edges were given (parallel edges collapse into one),
so every order below is deterministic. ``Instance.graph`` is the instance's graph, built on first use.
The loops every method runs over a whole instance (its topological order, a priority order, longest
paths) run on the instance's integer edge lists instead, where networkx measured more than 10 % of a
solve of the 36k-op graph (:func:`ready_order`, :func:`longest_to`, :func:`longest_from`).

* orders: :func:`topological_order` (smallest key first: ``nx.lexicographical_topological_sort``),
  :func:`generation_order` (FIFO Kahn, Baechi's M-TOPO: ``nx.topological_sort``), :func:`queue_order`
  (Kahn with a double-ended queue on successor lists, for the Celeritas orders networkx does not have),
  :func:`linear_extensions` (``nx.all_topological_sorts``);
* cycles and reachability: :func:`edge_on_cycle` (``nx.find_cycle``), :func:`descendants`,
  :func:`ancestors`, :func:`is_dag`;
* on edge lists: :func:`ready_order` (Kahn, smallest key first), longest paths with op and edge weights
  :func:`longest_to` / :func:`longest_from` (every op's level) and :func:`longest_path` (one path);
* :func:`union_find` (``networkx.utils.UnionFind``), :class:`DisjointSets` (the same on lists, for
  Baechi) and :func:`components`.

Compiled twins of the longest paths: :mod:`dplace.kernels.levels` and :mod:`dplace.kernels.bounds`
(tests/kernels/test_kernels_bounds.py, test_list_kernels.py).
"""
from __future__ import annotations

import heapq
from collections import deque
from typing import TYPE_CHECKING, Callable, Hashable, Iterable, Iterator, Sequence

if TYPE_CHECKING:
    import networkx as nx
    from networkx.utils import UnionFind

# networkx is imported inside the functions that use it: importing it costs about 0.2 s of CPU (shared
# machine), 4 % of a whole solve of the 36k-op graph by a method that never needs it (HEFT, DPOS).

__all__ = [
    "DisjointSets", "NotADag", "ancestors", "components", "descendants", "digraph", "edge_on_cycle", "generation_order",
    "is_dag", "linear_extensions", "link_means", "longest_from", "longest_path", "longest_to", "queue_order",
    "ready_order", "topological_order", "union_find",
]

class NotADag(ValueError):
    """The graph has a directed cycle (raised by the orders below)."""


def digraph(n: int, edges: Iterable[tuple[int, int]]) -> nx.DiGraph:
    """The directed graph on nodes ``0 .. n-1`` (added in that order) with ``edges`` in the given order."""
    import networkx as nx

    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(edges)
    return G


# ----------------------------------------------------------------------------------------- orders
def topological_order(G: nx.DiGraph, key: Callable[[Hashable], object] | None = None) -> list:
    """The topological order that always takes the ready node of smallest ``key(node)`` (ties: the node
    added first); with ``key=None`` the smallest node. Raises :data:`NotADag` on a cycle.
    ``nx.lexicographical_topological_sort``, O((V + E) log V)."""
    import networkx as nx

    try:
        return list(nx.lexicographical_topological_sort(G, key=key))
    except nx.NetworkXUnfeasible as exc:
        raise NotADag(str(exc)) from None


def generation_order(G: nx.DiGraph) -> list:
    """Kahn's algorithm with a FIFO queue: sources in node order, then each node's newly freed
    successors in edge order. Equal to ``nx.topological_sort`` (a FIFO queue empties one generation
    before the next: a node is freed only once all its predecessors, of earlier generations, are out)."""
    import networkx as nx

    try:
        return list(nx.topological_sort(G))
    except nx.NetworkXUnfeasible as exc:
        raise NotADag(str(exc)) from None


def queue_order(succ: Sequence[Iterable[int]], sources: Sequence[int], *, to_head: bool,
                scan: Callable[[list], Iterable] | None = None) -> list[int]:
    """Kahn's algorithm popping the head of a double-ended queue that starts as ``sources`` (every node
    without predecessors, in the caller's order); ``succ[u]`` lists u's successors, nodes ``0 .. n-1``
    (an nx.DiGraph's ``G.succ`` will do). The successors of the popped node are scanned in
    ``scan(successors)`` order (default: as listed); each one freed joins the tail (``to_head=False``:
    :func:`generation_order`) or is pushed to the head, so the last one scanned comes out first
    (Celeritas' DFS-TOPO and CPD-TOPO). networkx's orders take a fixed key per node, not a queue end, so
    this one is written here, on plain lists."""
    n = len(succ)
    indeg = [0] * n
    for u in range(n):
        for v in succ[u]:
            indeg[v] += 1
    q = deque(sources)
    push = q.appendleft if to_head else q.append
    out: list[int] = []
    while q:
        u = q.popleft()
        out.append(u)
        children = list(succ[u])
        for v in (scan(children) if scan is not None else children):
            indeg[v] -= 1
            if indeg[v] == 0:
                push(v)
    if len(out) != n:
        raise NotADag("graph has a cycle (or sources missed a node without predecessors)")
    return out


def linear_extensions(G: nx.DiGraph) -> Iterator[tuple]:
    """Every topological order of ``G`` (``nx.all_topological_sorts``; exponentially many)."""
    import networkx as nx

    for order in nx.all_topological_sorts(G):
        yield tuple(order)


# ------------------------------------------------------------------------ cycles and reachability
def is_dag(G: nx.DiGraph) -> bool:
    import networkx as nx

    return nx.is_directed_acyclic_graph(G)


def edge_on_cycle(G: nx.DiGraph) -> tuple | None:
    """One edge ``(u, v)`` on a directed cycle of ``G``, or None when ``G`` is acyclic (``nx.find_cycle``)."""
    import networkx as nx

    try:
        cycle = nx.find_cycle(G)
    except nx.NetworkXNoCycle:
        return None
    return cycle[0][0], cycle[0][1]


def descendants(G: nx.DiGraph, node: Hashable) -> set:
    """Nodes reachable from ``node`` (``node`` excluded)."""
    import networkx as nx

    return nx.descendants(G, node)


def ancestors(G: nx.DiGraph, node: Hashable) -> set:
    """Nodes from which ``node`` is reachable (``node`` excluded)."""
    import networkx as nx

    return nx.ancestors(G, node)


# ------------------------------------------------- hot loops over an instance's edge lists
# An instance's graph as integer lists (``dplace.instance.model.Instance`` has them): ``n`` ops; edge e runs
# ``esrc[e] -> edst[e]``; ``succ[o]`` / ``pred[o]`` list the edges leaving / entering o. The loops below run
# on these lists, not on an nx.DiGraph: on the 36,000-op graph networkx costs more than 10 % of a whole
# ``dplace solve`` (benchmarks/bench_graph.py; figures in each docstring and in the README's notes).


def ready_order(g, key: Callable[[int], object] | None = None) -> list[int]:
    """Kahn's algorithm on edge lists, always taking the ready op of smallest ``key(o)`` (default: the
    op index); ``key`` must be distinct per op. The same order as :func:`topological_order` on
    :func:`digraph`; shorter than ``g.n`` when there is a cycle. O((V + E) log V).

    Lists, not networkx: on the 36k-op graph building the nx.DiGraph and sorting it took 0.138 + 0.352 s
    of CPU against 0.028 s here (shared machine, best of 3); with the instance-wide loops on networkx a
    whole m_topo solve took +25 % CPU, heft +20 % (benchmarks/bench_graph.py)."""
    indeg = [len(p) for p in g.pred]
    succ, edst = g.succ, g.edst
    if key is None:
        heap = [o for o in range(g.n) if indeg[o] == 0]
        heapq.heapify(heap)
        out: list[int] = []
        while heap:
            u = heapq.heappop(heap)
            out.append(u)
            for e in succ[u]:
                v = edst[e]
                indeg[v] -= 1
                if indeg[v] == 0:
                    heapq.heappush(heap, v)
        return out
    kheap = [(key(o), o) for o in range(g.n) if indeg[o] == 0]
    heapq.heapify(kheap)
    out = []
    while kheap:
        u = heapq.heappop(kheap)[1]
        out.append(u)
        for e in succ[u]:
            v = edst[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(kheap, (key(v), v))
    return out


def longest_to(g, order: Sequence[int], w: Sequence[float],
               c: Sequence[float] | None = None) -> tuple[list[float], list[int]]:
    """Longest path ending at each op, the op's own weight excluded, and the predecessor it comes
    through: ``to[v] = max(0, max over edges e = (u, v) of (to[u] + w[u]) + c[e])``; ``via[v]`` is the
    first predecessor in ``order`` (a topological order) that makes ``to[v]`` larger than 0 (-1: none).
    Celeritas' tlevel (eq. 2), heads of energetic reasoning; O(V + E) on edge lists (see above).

    networkx's ``dag_longest_path`` returns one path under edge weights only; per-op levels of a
    node-weighted graph are this dynamic programme."""
    to = [0.0] * g.n
    via = [-1] * g.n
    succ, edst = g.succ, g.edst
    for u in order:
        f = to[u] + w[u]
        for e in succ[u]:
            v = edst[e]
            x = f if c is None else f + c[e]
            if x > to[v]:
                to[v] = x
                via[v] = u
    return to, via


def longest_from(g, order: Sequence[int], w: Sequence[float], c: Sequence[float] | None = None,
                 *, own: bool = True) -> list[float]:
    """Longest path starting at each op: ``frm[u] = w[u] + max(0, max over edges e = (u, v) of
    c[e] + frm[v])``; with ``own=False`` the part after ``w[u]`` (the max alone: a tail). HEFT's upward
    rank (Topcuoglu et al. 2002, eq. 7), Celeritas' blevel (eq. 3); ``order`` topological; O(V + E).

    Lists, not networkx: on the 36k-op graph 0.014 s of CPU here against 0.099 s over nx.DiGraph
    adjacency with a ``{(u, v): cost}`` map (HEFT's and DPOS's rank; benchmarks/bench_graph.py)."""
    frm = [0.0] * g.n
    after = frm if own else [0.0] * g.n
    succ, edst = g.succ, g.edst
    for u in reversed(order):
        best = 0.0
        for e in succ[u]:
            x = frm[edst[e]] if c is None else c[e] + frm[edst[e]]
            if x > best:
                best = x
        frm[u] = w[u] + best
        if not own:
            after[u] = best
    return after


def longest_path(g, order: Sequence[int], w: Sequence[float],
                 c: Sequence[float] | None = None) -> tuple[float, list[int]]:
    """(length, ops first to last) of one longest path, op weights ``w`` and edge weights ``c``
    included; ties go to the path ending first in ``order``, reached through the predecessor first in
    ``order`` (:func:`longest_to`)."""
    if not g.n:
        return 0.0, []
    to, via = longest_to(g, order, w, c)
    end = max(order, key=lambda v: to[v] + w[v])  # max keeps the first of equals
    path = [end]
    while via[path[-1]] >= 0:
        path.append(via[path[-1]])
    path.reverse()
    return to[end] + w[end], path


# ----------------------------------------------------------------------------------- union-find

def link_means(lat, bw, m: int) -> tuple[float, float]:
    """Mean latency and mean 1 / bandwidth over the ordered pairs of distinct devices (``m >= 2``), the
    mean edge cost's two scalars (``lat + bytes * inv``); ``lat[a][b]``, ``bw[a][b]`` as lists or
    arrays, summed as Python floats in pair order (so lists and arrays give the same floats)."""
    pairs = [(a, b) for a in range(m) for b in range(m) if a != b]
    lat_mean = sum(float(lat[a][b]) for a, b in pairs) / len(pairs)
    inv = sum(1.0 / float(bw[a][b]) for a, b in pairs) / len(pairs)
    return lat_mean, inv


def critical_path_ops(inst) -> list[int]:
    """Ops of one longest path with every op on its fastest device and no transfers (first to last)."""
    return longest_path(inst, inst.topo, [min(row) for row in inst.dur])[1]

def union_find(items: Iterable[Hashable] = ()) -> UnionFind:
    """A ``networkx.utils.UnionFind`` on ``items`` (each its own set): ``uf[x]`` names x's set,
    ``uf.union(a, b)`` merges two."""
    from networkx.utils import UnionFind

    return UnionFind(items)


class DisjointSets:
    """Union-find on the integers ``0 .. n-1`` over plain lists (union by size, path halving): the
    one the Baechi heuristics run on every solve.

    Lists, not ``networkx.utils.UnionFind``: that one needs networkx imported (about 0.2 s of CPU on the
    shared machine), inside the fifth of their time limit the exact methods give the heuristics for a
    hint, which made ``milp``'s 1 s test return its hint in 2 of 4 runs (0 of 3 before); m_etf's whole
    solve of the 36k-op graph took +9.5 % CPU with it (benchmarks/bench_graph.py)."""

    def __init__(self, n: int) -> None:
        self.parent = list(range(n))
        self.size = [1] * n

    def find(self, x: int) -> int:
        p = self.parent
        while p[x] != x:
            p[x] = p[p[x]]
            x = p[x]
        return x

    def union(self, a: int, b: int) -> int:
        """Merge the sets of ``a`` and ``b``; returns the root of the merged set."""
        a, b = self.find(a), self.find(b)
        if a == b:
            return a
        if self.size[a] < self.size[b]:
            a, b = b, a
        self.parent[b] = a
        self.size[a] += self.size[b]
        return a

    def __getitem__(self, x: int) -> int:  # as networkx's UnionFind: uf[x] names x's set
        return self.find(x)


def components(uf: UnionFind | DisjointSets, items: Iterable[Hashable]) -> list:
    """``uf[x]`` for each of ``items``: the name of its set (one of its members)."""
    return [uf[x] for x in items]
