"""Converters into ``dplace-chain/1`` chains: PipeDream profiles and dplace instances, linearised.

``python -m dplace.pipeline.convert PROFILE.graph.txt... --out DIR`` converts PipeDream profiles.
"""
from __future__ import annotations

import itertools

import math
import os
import re
from pathlib import Path
from typing import Any, Mapping

from dplace.errors import InvalidInstanceError

from .chain import Chain, Layer, save_chain


_NODE_RE = re.compile(
    r"^(node\d+) -- (.*) -- forward_compute_time=([-0-9.eE+]+), backward_compute_time=([-0-9.eE+]+), "
    r"activation_size=(\[[-0-9.eE+; ]*\]|[-0-9.eE+]+), parameter_size=([-0-9.eE+]+)\s*$")
_EDGE_RE = re.compile(r"^\s+(node\d+) -- (node\d+)\s*$")


def _layer_order(path: Path, nodes: Mapping[str, Any], succ: Mapping[str, list[str]]) -> list[str]:
    """The profile's nodes in topological order, the smallest node number first among the ready ones
    (``nx.lexicographical_topological_sort``)."""
    import networkx as nx

    G = nx.DiGraph()
    G.add_nodes_from(nodes)
    G.add_edges_from((a, b) for a, bs in succ.items() for b in bs)
    try:
        return list(nx.lexicographical_topological_sort(G, key=lambda n: int(n[4:])))
    except nx.NetworkXUnfeasible:
        u = nx.find_cycle(G)[0][0]
        raise InvalidInstanceError(f"profile {str(path)!r}: graph has a cycle through {u!r}") from None


def chain_from_pipedream(path: str | os.PathLike, *, processors: int = 4, memory: float | None = None,
                         bandwidth: float | None = None, name: str | None = None) -> Chain:
    """Linearise a PipeDream profile (``*.graph.txt``: times in ms, sizes in bytes) into a chain.

    Linearisation: the layer DAG is put in topological order (Kahn, ties broken by node number) and
    each node becomes one layer with u_F = forward_compute_time·1000 µs, u_B =
    backward_compute_time·1000 µs, W = parameter_size and a = activation_size (the node's own output; a list of outputs is summed).
    On a branchy graph a cut may carry more tensors than the one output counted here.
    """
    from dplace.instance.io import read_text

    p = Path(path)
    text = read_text(p, "profile")
    nodes: dict[str, tuple[str, float, float, float, float]] = {}
    succ: dict[str, list[str]] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = _NODE_RE.match(line)
        if m:
            nid, desc, f, b, act, par = m.groups()
            acts = act.strip("[]").split(";") if act.startswith("[") else [act]  # several outputs: summed
            nodes[nid] = (desc, float(f), float(b), sum(float(x) for x in acts if x.strip()), float(par))
            continue
        m = _EDGE_RE.match(line)
        if m:
            succ.setdefault(m.group(1), []).append(m.group(2))
            continue
        raise InvalidInstanceError(f"profile {str(p)!r}: line {lineno}: not a node or edge line: {line[:60]!r}")
    for a, bs in succ.items():
        for b in [a, *bs]:
            if b not in nodes:
                raise InvalidInstanceError(f"profile {str(p)!r}: edge names unknown node {b!r}")
    order = _layer_order(p, nodes, succ)
    layers = []
    for nid in order:
        desc, f, b, act, par = nodes[nid]
        for what, v in (("forward_compute_time", f), ("backward_compute_time", b), ("activation_size", act),
                        ("parameter_size", par)):
            if v < 0 or math.isnan(v):
                raise InvalidInstanceError(f"profile {str(p)!r}: node {nid!r}: {what} must be >= 0, got {v!r}")
        layers.append(Layer(nid, round(f * 1000.0, 6), round(b * 1000.0, 6), par, act))
    stem = name or p.name.replace(".graph.txt", "")
    return Chain(stem, tuple(layers), processors, memory, bandwidth,
                 {"source": f"pipedream-profiles/{p.name}", "linearisation": "topological (node number ties)"})


def chain_from_instance(inst, *, processors: int | None = None, memory: float | None = None,
                        bandwidth: float | None = None) -> Chain:
    """Linearise a ``dplace.instance.model.Instance`` into a chain.

    - Forward ops are the ops without a ``forward_of`` field that do not descend from an op that has
      one; they become the layers, in the instance's deterministic topological order.
    - An op with ``forward_of: X`` adds its time to the backward time of X's layer (its twin). Any
      other op (e.g. a weight update after the backward pass) joins the layer of its nearest
      ancestor that has a ``forward_of`` twin (breadth-first over predecessors), else the last layer.
      Without any ``forward_of`` field, every op is a layer with backward time 0.
    - Times are the op's fastest duration over devices (µs); activation = the largest edge leaving
      the forward op to another forward op (its output tensor); weights = sum of the ``memory`` of the
      ops in the layer minus that activation (an instance's op memory is for one batch and already
      holds the kept output, which the chain counts as NCA·a), at least 0.
    - processors defaults to the instance's device count; memory to the smallest device memory;
      bandwidth to the instance's default link bandwidth only when given explicitly.
    """
    n = inst.n
    twin = [None] * n
    for o, op in enumerate(inst.ops):
        f = op.extra.get("forward_of") if op.extra else None
        if f is not None:
            if f not in inst.op_index:
                raise InvalidInstanceError(f"op {op.id!r}: forward_of names unknown op {f!r}")
            twin[o] = inst.op_index[f]
    backward_side = [twin[o] is not None for o in range(n)]
    for o in inst.topo:  # descendants of backward ops are on the backward side
        if not backward_side[o]:
            backward_side[o] = any(backward_side[inst.esrc[e]] for e in inst.pred[o])
    forward = [o for o in inst.topo if not backward_side[o]]
    if not forward:
        raise InvalidInstanceError("instance: no forward op to linearise (every op descends from a backward op)")
    layer_of = {o: i for i, o in enumerate(forward)}
    fwd = [min(inst.dur[o]) for o in forward]
    bwd = [0.0] * len(forward)
    wts = [float(inst.mem[o]) for o in forward]
    for o in inst.topo:
        if not backward_side[o]:
            continue
        if twin[o] is not None and twin[o] in layer_of:
            li = layer_of[twin[o]]
        else:
            li = _nearest_twin_layer(inst, o, twin, layer_of, default=len(forward) - 1)
        bwd[li] += min(inst.dur[o])
        wts[li] += float(inst.mem[o])
    act = []
    for o in forward:
        out = [inst.ebytes[e] for e in inst.succ[o] if not backward_side[inst.edst[e]]]
        act.append(float(max(out)) if out else 0.0)
    # an instance's op memory holds one batch, its kept output included; the chain counts that
    # output through NCA·a, so it leaves the weights
    wts = [max(0.0, wts[i] - act[i]) for i in range(len(forward))]
    layers = tuple(Layer(inst.ops[o].id, fwd[i], bwd[i], wts[i], act[i]) for i, o in enumerate(forward))
    procs = processors if processors is not None else inst.m
    mem = memory if memory is not None else float(min(inst.capacity))
    return Chain(inst.name, layers, procs, mem, bandwidth,
                 {"source": f"dplace-instance {inst.name}", "linearisation": "forward ops in topological order, backward twins folded"})


def _nearest_twin_layer(inst, o: int, twin: list, layer_of: Mapping[int, int], default: int) -> int:
    import networkx as nx

    for x in itertools.chain((o,), (y for _, y in nx.bfs_edges(inst.graph, o, reverse=True))):
        if twin[x] is not None and twin[x] in layer_of:
            return layer_of[twin[x]]
    return default


def main(argv: list[str] | None = None) -> int:
    """``python -m dplace.pipeline.convert PROFILE.graph.txt... --out DIR [--processors P]``: convert PipeDream
    profiles into ``DIR/<name>.json`` chains (no memory limit, no bandwidth)."""
    import argparse
    import sys

    from dplace.errors import DplaceError

    ap = argparse.ArgumentParser(prog="python -m dplace.pipeline.convert", description=main.__doc__)
    ap.add_argument("profiles", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--processors", type=int, default=4)
    args = ap.parse_args(argv)
    try:
        for prof in args.profiles:
            ch = chain_from_pipedream(prof, processors=args.processors)
            dest = Path(args.out) / f"{ch.name}.json"
            save_chain(ch, dest)
            print(f"{dest}: {ch.L} layers")
    except DplaceError as exc:
        print(f"dplace.pipeline.convert: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
