"""networkx (dplace.instance.graph) against the plain-list loops it replaced, on the 36,000-op graph.

Part 1, kernels: each row times a kernel on networkx and on the instance's plain lists, alternately in
one process, CPU seconds, best of ``--repeat``; the outputs must agree. "dplace uses" says which side
dplace.instance.graph runs (lists only where networkx cost a whole solve more than 10 %; the side it does not
use is written here, and only here, as the reference).

Part 2, whole processes (``--base DIR``: a checkout of dplace before dplace.instance.graph with its own .venv):
``dplace solve FILE --method M`` under the two trees, alternately, ``--runs`` times each; the ratio of
medians (wall and the child's CPU time) is what networkx costs a method (the rule: plain lists stay
only where it is above 1.10).

    .venv/bin/python benchmarks/bench_graph.py [--instance FILE | --ops 36000] [--repeat 3]
        [--base /tmp/gbase --methods m_topo,heft,m_etf,dpos,celeritas --runs 3]

The machine may be shared: compare only figures taken side by side in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import networkx as nx

from dplace.instance import graph
from dplace.instance.io import instance_to_dict
from dplace.instance.model import Instance


# ------------------------------------------ the other side of each row: plain lists or networkx
def nx_levels_from(G, order, w, cmap):
    """Upward rank over nx.DiGraph adjacency with a {(u, v): cost} map (the networkx form)."""
    frm = [0.0] * len(w)
    succ = G.succ
    for u in reversed(order):
        best = 0.0
        for v in succ[u]:
            x = cmap[u, v] + frm[v]
            if x > best:
                best = x
        frm[u] = w[u] + best
    return frm


def nx_levels_to(G, order, w):
    to = [0.0] * len(w)
    succ = G.succ
    for u in order:
        f = to[u] + w[u]
        for v in succ[u]:
            if f > to[v]:
                to[v] = f
    return to


def cost_map(inst: Instance, c) -> dict:
    out: dict = {}
    for u, v, x in zip(inst.esrc, inst.edst, c):
        if out.get((u, v), x) <= x:
            out[u, v] = x
    return out


def ref_fifo(inst: Instance) -> list[int]:
    """The same FIFO order on the instance's lists, through dplace.instance.graph's own list kernel."""
    succ = [[inst.edst[e] for e in inst.succ[o]] for o in range(inst.n)]
    return graph.queue_order(succ, [o for o in range(inst.n) if not inst.pred[o]], to_head=False)


def lists_union(n: int, pairs) -> list[int]:
    ds = graph.DisjointSets(n)
    for a, b in pairs:
        ds.union(a, b)
    return graph.components(ds, range(n))


def nx_union(n: int, pairs) -> list[int]:
    uf = graph.union_find(range(n))
    for a, b in pairs:
        uf.union(a, b)
    return graph.components(uf, range(n))


def same_partition(a, b) -> bool:
    return len(set(a)) == len(set(zip(a, b))) == len(set(b))


# ------------------------------------------------------------------------------------- timing
def best_of(fn, repeat: int) -> tuple[float, object]:
    """(least CPU seconds of this process over ``repeat`` calls, the last output)."""
    out, ts = None, []
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        ts.append(time.process_time() - t)
    return min(ts), out


def kernels(inst: Instance, repeat: int) -> list[tuple[str, str, float, float, bool]]:
    """(kernel, which side dplace uses, networkx CPU s, lists CPU s, same output) per row."""
    from dplace.schedule.ranks import edge_costs, op_costs, upward_rank

    w = op_costs(inst, "mean")
    c = edge_costs(inst, "mean")
    pmin = [min(r) for r in inst.dur]
    tp = inst.topo_pos
    rank = upward_rank(inst)
    key = lambda o: (-rank[o], tp[o])  # noqa: E731
    pl = [min(inst.m - 1, i * inst.m // inst.n) for i in inst.topo_pos]  # contiguous split of the order
    pairs = [(o, inst.edst[inst.succ[o][0]]) for o in inst.topo if len(inst.succ[o]) == 1]
    G = graph.digraph(inst.n, zip(inst.esrc, inst.edst))
    sources = [o for o in inst.topo if not inst.pred[o]]

    def placed(lists: bool):
        wd = [inst.dur[o][pl[o]] for o in range(inst.n)]
        ce = [inst.transfer_time(e, pl[u], pl[v]) for e, (u, v) in enumerate(zip(inst.esrc, inst.edst))]
        if lists:
            return graph.longest_path(inst, inst.topo, wd, ce)[1]
        return nx.dag_longest_path(node_weighted(wd, cost_map(inst, ce)), topo_order=inst.topo + [-1])[:-1]

    def node_weighted(wd, cmap):
        """Edge weight w[u] + c(u, v), plus a sink -1 after every op carrying its weight."""
        H = nx.DiGraph()
        H.add_nodes_from(range(inst.n))
        H.add_weighted_edges_from((u, v, wd[u] + x) for (u, v), x in cmap.items())
        H.add_weighted_edges_from((u, -1, wd[u]) for u in range(inst.n))
        return H

    cases = [  # (name, used, networkx, lists, equal)
        ("build nx.DiGraph", "nx", lambda: graph.digraph(inst.n, zip(inst.esrc, inst.edst)), None, None),
        ("topological order (Instance.topo)", "lists",
         lambda: graph.topological_order(graph.digraph(inst.n, zip(inst.esrc, inst.edst))),
         lambda: graph.ready_order(inst), None),
        ("priority order (HEFT rank key)", "lists", lambda: graph.topological_order(G, key),
         lambda: graph.ready_order(inst, key), None),
        ("upward rank (HEFT, DPOS)", "lists", lambda: nx_levels_from(G, inst.topo, w, cost_map(inst, c)),
         lambda: graph.longest_from(inst, inst.topo, w, c), None),
        ("heads (bounds, tlevel)", "lists", lambda: nx_levels_to(G, inst.topo, pmin),
         lambda: graph.longest_to(inst, inst.topo, pmin)[0], None),
        ("placed critical path (OS-DPOS)", "lists", lambda: placed(False), lambda: placed(True), None),
        ("generation order (orders.m_topo)", "nx", lambda: graph.generation_order(G), lambda: ref_fifo(inst), None),
        ("queue order (DFS-TOPO)", "lists", lambda: graph.queue_order(G.succ, sources, to_head=True, scan=reversed),
         lambda: graph.queue_order([[inst.edst[e] for e in es] for es in inst.succ], sources, to_head=True,
                                   scan=reversed), None),
        ("union-find (Baechi units)", "lists", lambda: nx_union(inst.n, pairs), lambda: lists_union(inst.n, pairs),
         same_partition),
    ]
    rows = []
    for name, used, fnx, fref, eq in cases:
        t_nx = t_ref = float("inf")
        a = b = None
        for _ in range(repeat):  # alternate so both see the same load
            t, a = best_of(fnx, 1)
            t_nx = min(t_nx, t)
            if fref is not None:
                t, b = best_of(fref, 1)
                t_ref = min(t_ref, t)
        ok = True if fref is None else (eq(a, b) if eq else a == b)
        rows.append((name, used, t_nx, t_ref if fref is not None else 0.0, ok))
    return rows


def solve_times(dplace_bin: str, file: str, method: str) -> tuple[float, float]:
    """(wall s, CPU s of the child: user + system) of one ``dplace solve``; CPU time moves less than
    wall time when other work shares the machine."""
    with tempfile.TemporaryDirectory() as d:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run([dplace_bin, "solve", file, "--method", method, "--out", os.path.join(d, "r.json")],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instance", help="instance JSON (default: generate the Transformer graph)")
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", help="a dplace checkout from before dplace.instance.graph, with .venv/bin/dplace")
    ap.add_argument("--methods", default="m_topo,heft,m_etf,dpos,celeritas")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()

    if args.instance:
        from dplace.instance.io import load_instance

        t = time.perf_counter()
        inst = load_instance(args.instance)
        print(f"load {args.instance}: {time.perf_counter() - t:.2f} s")
    else:
        from dplace.formats.generate import transformer_training

        inst = transformer_training(args.ops, 4)
    print(f"{inst.n} ops, {len(inst.edges)} edges, {inst.m} devices; best of {args.repeat}, alternating")
    print(f"{'kernel':34s} {'dplace uses':>11s} {'networkx s':>10s} {'lists s':>8s} {'nx/lists':>8s}  same")
    for name, used, t_nx, t_ref, ok in kernels(inst, args.repeat):
        ratio = f"{t_nx / t_ref:8.2f}" if t_ref > 0 else f"{'':8s}"
        print(f"{name:34s} {used:>11s} {t_nx:10.3f} {t_ref:8.3f} {ratio}  {'yes' if ok else 'NO'}", flush=True)

    if args.base:
        file = args.instance
        tmp = None
        if file is None:
            tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
            tmp.write(json.dumps(instance_to_dict(inst)))
            tmp.close()
            file = tmp.name
        new_bin = str(Path(sys.executable).parent / "dplace")
        old_bin = str(Path(args.base) / ".venv" / "bin" / "dplace")
        print(f"\nwhole process: dplace solve FILE --method M, {args.runs} runs each, alternating "
              f"(before: {args.base})")
        print(f"{'method':12s} {'before wall':>11s} {'after wall':>10s} {'ratio':>6s} {'before CPU':>10s} "
              f"{'after CPU':>9s} {'ratio':>6s}")
        for m in args.methods.split(","):
            old, new = [], []
            for _ in range(args.runs):
                old.append(solve_times(old_bin, file, m))
                new.append(solve_times(new_bin, file, m))
            (ow, oc), (nw, nc) = ([statistics.median(x[i] for x in runs) for i in (0, 1)] for runs in (old, new))
            print(f"{m:12s} {ow:11.2f} {nw:10.2f} {nw / ow:6.3f} {oc:10.2f} {nc:9.2f} {nc / oc:6.3f}", flush=True)
        if tmp is not None:
            os.unlink(tmp.name)


if __name__ == "__main__":
    main()
