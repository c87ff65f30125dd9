"""Topological orders and path levels shared by the list schedulers and the coarseners.

Sources: Baechi (Jeon et al., SoCC'20) §2.2 for M-TOPO's BFS-like order; Celeritas (Xu et al.) §4.2.2
for DFS-TOPO and §5.1.2 / Alg. 1 with eqs. (2)-(3) for tlevel, blevel and CPD-TOPO.

Costs. Levels need one computation cost per op and one transfer cost per edge, but an op's time
depends on its device and an edge costs nothing when both ends share a device. The representative
costs used here come from :mod:`dplace.schedule.ranks`: by default an op costs its *mean* time over devices
(``op_costs(inst, "mean")``) and an edge costs its *mean* transfer time over ordered pairs of distinct
devices (``edge_costs(inst, "mean")``: mean latency + bytes × mean 1/bandwidth). Pass
``op_cost="min"`` / ``comm_cost="zero"`` for the transfer-free, fastest-device levels. Everything is
O(V + E) and returns plain lists indexed by op.

Compiled twin of Celeritas' orders: :mod:`dplace.kernels.celeritas` (tests/kernels/test_etf_kernels.py).
"""
from __future__ import annotations

import numpy as np

from dplace import kernels
from dplace.instance.graph import NotADag, generation_order, longest_to, queue_order
from dplace.instance.model import Instance
from dplace.schedule.ranks import edge_costs, op_costs, upward_rank

__all__ = [
    "blevel", "cpath", "cpd_topo_order", "critical_path", "dfs_topo_order", "is_topological_order",
    "m_topo_order", "tlevel",
]


def tlevel(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> list[float]:
    """Top level (Celeritas eq. 2): longest path from a source to o, excluding o's own time.

    tlevel(o) = 0 for a source, else max over predecessors p of tlevel(p) + w_p + c_(p,o).
    """
    return longest_to(inst, inst.topo, op_costs(inst, op_cost), edge_costs(inst, comm_cost))[0]


def blevel(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> list[float]:
    """Bottom level (Celeritas eq. 3): longest path from o to a sink, including o's own time.

    blevel(o) = w_o for a sink, else w_o + max over successors s of blevel(s) + c_(o,s).
    The same quantity as HEFT's upward rank, so it is :func:`dplace.schedule.ranks.upward_rank`.
    """
    return upward_rank(inst, op_cost, comm_cost)


def cpath(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> list[float]:
    """cpath(o) = tlevel(o) + blevel(o): the longest source-to-sink path through o (Celeritas §5.1.2)."""
    t = tlevel(inst, op_cost, comm_cost)
    b = blevel(inst, op_cost, comm_cost)
    return [x + y for x, y in zip(t, b)]


def critical_path(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> list[int]:
    """Ops of one longest source-to-sink path (length = max blevel), from source to sink.

    Starts at the source of largest blevel and follows, at each step, the successor s maximizing
    c_(o,s) + blevel(s); ties broken by topological position, so the result is deterministic.
    """
    if inst.n == 0:
        return []
    b = blevel(inst, op_cost, comm_cost)
    c = edge_costs(inst, comm_cost)
    tp = inst.topo_pos
    sources = [o for o in inst.topo if not inst.pred[o]]
    o = min(sources, key=lambda s: (-b[s], tp[s]))
    path = [o]
    edst = inst.edst
    while inst.succ[o]:
        best_e = min(inst.succ[o], key=lambda e: (-(c[e] + b[edst[e]]), tp[edst[e]]))
        o = edst[best_e]
        path.append(o)
    return path


def _queue_order(inst: Instance, *, to_head: bool, source_key=None, scan=None) -> list[int]:
    """Shared loop of DFS-TOPO and CPD-TOPO (:func:`dplace.instance.graph.queue_order`): sources queued in
    topological order (sorted by ``source_key`` when given), children scanned in ``scan(children)``
    order (default: edge order), each freed one pushed to the head or joining the tail."""
    sources = [o for o in inst.topo if not inst.pred[o]]
    if source_key is not None:
        sources.sort(key=source_key)
    edst = inst.edst
    return queue_order([[edst[e] for e in es] for es in inst.succ], sources, to_head=to_head, scan=scan)


def m_topo_order(inst: Instance) -> list[int]:
    """M-TOPO order (Baechi §2.2): a FIFO queue of zero-indegree ops; newly freed ops join the tail.

    Initial sources are queued in the instance's topological order; the children of an op are
    visited in edge order.
    """
    return generation_order(inst.graph)


def dfs_topo_order(inst: Instance) -> list[int]:
    """DFS-TOPO order (Celeritas §4.2.2): like M-TOPO, but freed children go to the HEAD of the queue.

    Among several children freed by the same op, the first in edge order comes out first.
    """
    # reverse scan: the first child in edge order ends at the head
    if kernels.use(kernels.size(inst), "large"):
        return _head_order_arrays(inst, None)
    return _queue_order(inst, to_head=True, scan=reversed)


def _head_order_arrays(inst: Instance, cp) -> list[int]:
    """DFS-TOPO (``cp`` None) or CPD-TOPO compiled (:mod:`dplace.kernels.celeritas`): the same order."""
    from dplace.kernels import celeritas as kc

    a = kernels.inst_arrays(inst)
    src = a.topo[np.diff(a.pred_ptr)[a.topo] == 0]
    if cp is not None:
        src = src[np.lexsort((a.topo_pos[src], -cp[src]))]
    out = kc.queue_order(a.n, a.succ_ptr, kc.scan_csr(a, cp), src, True)
    if len(out) != a.n:
        raise NotADag("graph has a cycle (or sources missed a node without predecessors)")
    return out.tolist()


def cpd_topo_order(inst: Instance, op_cost: str = "mean", comm_cost: str = "mean") -> list[int]:
    """CPD-TOPO order (Celeritas Alg. 1, function CPD_Topo, with tlevel/blevel of eqs. 2-3).

    Sources sorted by decreasing cpath; the children of each popped op are scanned by increasing
    cpath and each freed one is pushed to the head, so the freed child of largest cpath (the one on
    the critical path) comes out next. Ties are broken by topological position (earlier first).
    """
    if kernels.use(kernels.size(inst), "large") and op_cost == comm_cost == "mean":
        from dplace.kernels.levels import cpath as kcpath

        return _head_order_arrays(inst, kcpath(kernels.inst_arrays(inst)))
    cp = cpath(inst, op_cost, comm_cost)
    tp = inst.topo_pos
    return _queue_order(inst, to_head=True, source_key=lambda o: (-cp[o], tp[o]),
                        scan=lambda ch: sorted(ch, key=lambda o: (cp[o], -tp[o])))


def is_topological_order(inst: Instance, order: list[int]) -> bool:
    """True iff ``order`` lists every op once and every edge goes forward in it."""
    if len(order) != inst.n:
        return False
    pos = [-1] * inst.n
    for i, o in enumerate(order):
        if not (0 <= o < inst.n) or pos[o] >= 0:
            return False
        pos[o] = i
    return all(pos[s] < pos[d] for s, d in zip(inst.esrc, inst.edst))
