"""Chains of layers for pipelined model parallelism: the ``dplace-chain/1`` format and converters.

Source of the model: Beaumont, Eyraud-Dubois, Shilova, "Pipelined Model Parallelism: Complexity
Results and Memory Considerations" (Euro-Par 2021), §3.1.

A chain is L layers; layer l has a forward time u_F, a backward time u_B (µs), weights W_l and an
activation size a_l (bytes). ``processors`` P and ``memory`` M (bytes per processor, ``null`` = no
limit) describe the machine; ``bandwidth`` β (bytes/µs, optional) turns each cut between processors
into an extra communication layer of time 2·a_l/β (§3.1, see :func:`communication_time`).

JSON (``dplace-chain/1``)::

    {"format": "dplace-chain/1", "name": "vgg16",
     "layers": [{"id": "conv1", "forward": 12.0, "backward": 20.0, "weights": 1792, "activation": 4096}],
     "processors": 4, "memory": 8000000000, "bandwidth": 12000.0}

``format`` may be left out; when present it must be ``"dplace-chain/1"``. Unknown top-level fields
are kept in ``Chain.extra`` (e.g. ``source``).
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .errors import InvalidInstanceError
from .model import check_number

CHAIN_FORMAT = "dplace-chain/1"
_LAYER_KEYS = ("id", "forward", "backward", "weights", "activation")
_TOP_KEYS = {"format", "name", "layers", "processors", "memory", "bandwidth"}


def _bad(msg: str) -> InvalidInstanceError:
    return InvalidInstanceError(msg)


def _num(value: Any, where: str, *, positive: bool = False) -> float:
    return check_number(value, where, positive=positive)


@dataclass(frozen=True)
class Layer:
    id: str
    forward: float  # µs, u_F
    backward: float  # µs, u_B
    weights: float = 0.0  # bytes, W_l (all copies the optimizer needs, §3.2)
    activation: float = 0.0  # bytes, a_l (output of F_l; same size as the gradient b_l)

    @property
    def cost(self) -> float:
        """u_F + u_B: the processing cost of the layer (§6)."""
        return self.forward + self.backward


@dataclass(frozen=True)
class Chain:
    """A validated, read-only chain. ``memory`` None means no memory limit; ``bandwidth`` None: no comm."""

    name: str
    layers: tuple[Layer, ...]
    processors: int = 1
    memory: float | None = None
    bandwidth: float | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "layers", tuple(self.layers))
        if not self.layers:
            raise _bad("layers: at least one layer is required")
        seen: set[str] = set()
        for i, ly in enumerate(self.layers):
            if not isinstance(ly, Layer):
                raise _bad(f"layers[{i}] must be a Layer, got {type(ly).__name__}")
            if not isinstance(ly.id, str) or not ly.id:
                raise _bad(f"layers[{i}]: id must be a non-empty string, got {ly.id!r}")
            if ly.id in seen:
                raise _bad(f"layers: duplicate layer id {ly.id!r}")
            seen.add(ly.id)
            for key in _LAYER_KEYS[1:]:
                _num(getattr(ly, key), f"layer {ly.id!r}: {key}")
        if isinstance(self.processors, bool) or not isinstance(self.processors, int) or self.processors < 1:
            raise _bad(f"processors must be an integer >= 1, got {self.processors!r}")
        if self.memory is not None:
            _num(self.memory, "memory")
        if self.bandwidth is not None:
            _num(self.bandwidth, "bandwidth", positive=True)

    # integer views ------------------------------------------------------------------------
    @property
    def L(self) -> int:
        return len(self.layers)

    @property
    def uf(self) -> list[float]:
        return [ly.forward for ly in self.layers]

    @property
    def ub(self) -> list[float]:
        return [ly.backward for ly in self.layers]

    @property
    def u(self) -> list[float]:
        return [ly.forward + ly.backward for ly in self.layers]

    @property
    def w(self) -> list[float]:
        return [ly.weights for ly in self.layers]

    @property
    def a(self) -> list[float]:
        return [ly.activation for ly in self.layers]

    def replace(self, **changes: Any) -> "Chain":
        """A new validated Chain with some fields changed (explicit transform)."""
        args = dict(name=self.name, layers=self.layers, processors=self.processors, memory=self.memory,
                    bandwidth=self.bandwidth, extra=self.extra)
        args.update(changes)
        return Chain(**args)

    def __repr__(self) -> str:
        return (f"Chain({self.name!r}, L={self.L}, processors={self.processors}, memory={self.memory}, "
                f"bandwidth={self.bandwidth})")


def communication_time(chain: Chain, l: int) -> float:
    """µs of the communication layer after layer ``l`` (0-based) when the cut l | l+1 crosses
    processors: 2·a_l/β (the activation forward, the gradient backward; §3.1). 0 without β."""
    if chain.bandwidth is None:
        return 0.0
    return 2.0 * chain.layers[l].activation / chain.bandwidth


# ---------------------------------------------------------------------------------- JSON I/O
def chain_from_dict(data: Any) -> Chain:
    """Build and validate a :class:`Chain` from the parsed ``dplace-chain/1`` JSON object."""
    if not isinstance(data, dict):
        raise _bad(f"chain must be a JSON object, got {type(data).__name__}")
    fmt = data.get("format", CHAIN_FORMAT)
    if fmt != CHAIN_FORMAT:
        raise _bad(f"format must be {CHAIN_FORMAT!r}, got {fmt!r}")
    if "layers" not in data:
        raise _bad("chain: missing field 'layers'")
    raw = data["layers"]
    if not isinstance(raw, list):
        raise _bad(f"layers must be a list, got {type(raw).__name__}")
    layers = []
    for i, obj in enumerate(raw):
        if not isinstance(obj, dict):
            raise _bad(f"layers[{i}] must be an object, got {obj!r}")
        lid = obj.get("id", f"l{i}")
        if not isinstance(lid, str) or not lid:
            raise _bad(f"layers[{i}]: id must be a non-empty string, got {lid!r}")
        vals = {}
        for key in _LAYER_KEYS[1:]:
            if key not in obj:
                if key in ("forward", "backward"):
                    raise _bad(f"layer {lid!r}: missing field {key!r}")
                vals[key] = 0.0
            else:
                vals[key] = _num(obj[key], f"layer {lid!r}: {key}")
        layers.append(Layer(lid, **vals))
    procs = data.get("processors", 1)
    if isinstance(procs, bool) or not isinstance(procs, int) or procs < 1:
        raise _bad(f"processors must be an integer >= 1, got {procs!r}")
    mem = data.get("memory")
    if mem is not None:
        mem = _num(mem, "memory")
    bw = data.get("bandwidth")
    if bw is not None:
        bw = _num(bw, "bandwidth", positive=True)
    extra = {k: v for k, v in data.items() if k not in _TOP_KEYS}
    return Chain(str(data.get("name", "chain")), tuple(layers), procs, mem, bw, extra)


def chain_to_dict(chain: Chain) -> dict[str, Any]:
    """The ``dplace-chain/1`` JSON object of ``chain`` (round-trips through :func:`chain_from_dict`)."""
    out: dict[str, Any] = {"format": CHAIN_FORMAT, "name": chain.name}
    out["layers"] = [{"id": ly.id, "forward": ly.forward, "backward": ly.backward, "weights": ly.weights,
                      "activation": ly.activation} for ly in chain.layers]
    out["processors"] = chain.processors
    out["memory"] = chain.memory
    if chain.bandwidth is not None:
        out["bandwidth"] = chain.bandwidth
    out.update(chain.extra)
    return out


def load_chain(path: str | os.PathLike) -> Chain:
    """Load and validate a ``dplace-chain/1`` file; errors name the field and value."""
    from .io import read_json

    return chain_from_dict(read_json(path, "chain"))


def save_chain(chain: Chain, path: str | os.PathLike) -> None:
    """Write ``chain`` atomically as ``dplace-chain/1`` JSON."""
    from .io import save_json

    save_json(path, chain_to_dict(chain))


# ---------------------------------------------------------------------------------- converters
_NODE_RE = re.compile(
    r"^(node\d+) -- (.*) -- forward_compute_time=([-0-9.eE+]+), backward_compute_time=([-0-9.eE+]+), "
    r"activation_size=(\[[-0-9.eE+; ]*\]|[-0-9.eE+]+), parameter_size=([-0-9.eE+]+)\s*$")
_EDGE_RE = re.compile(r"^\s+(node\d+) -- (node\d+)\s*$")


def _stable_topo(names: list[str], succ: Mapping[str, list[str]], key) -> list[str]:
    """Kahn's algorithm, always taking the ready node with the smallest ``key`` (deterministic)."""
    import heapq

    indeg = {n: 0 for n in names}
    for n in names:
        for s in succ.get(n, ()):
            indeg[s] += 1
    heap = [(key(n), n) for n in names if indeg[n] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for s in succ.get(n, ()):
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (key(s), s))
    if len(order) != len(names):
        raise _bad(f"graph has a cycle through {sorted(set(names) - set(order))[0]!r}")
    return order


def chain_from_pipedream(path: str | os.PathLike, *, processors: int = 4, memory: float | None = None,
                         bandwidth: float | None = None, name: str | None = None) -> Chain:
    """Linearise a PipeDream profile (``*.graph.txt``: times in ms, sizes in bytes) into a chain.

    Linearisation: the layer DAG is put in topological order (Kahn, ties broken by node number) and
    each node becomes one layer with u_F = forward_compute_time·1000 µs, u_B =
    backward_compute_time·1000 µs, W = parameter_size and a = activation_size (the node's own output; a list of outputs is summed).
    On a branchy graph a cut may carry more tensors than the one output counted here.
    """
    from .io import read_text

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
        raise _bad(f"profile {str(p)!r}: line {lineno}: not a node or edge line: {line[:60]!r}")
    for a, bs in succ.items():
        for b in [a, *bs]:
            if b not in nodes:
                raise _bad(f"profile {str(p)!r}: edge names unknown node {b!r}")
    order = _stable_topo(list(nodes), succ, key=lambda n: int(n[4:]))
    layers = []
    for nid in order:
        desc, f, b, act, par = nodes[nid]
        for what, v in (("forward_compute_time", f), ("backward_compute_time", b), ("activation_size", act),
                        ("parameter_size", par)):
            if v < 0 or math.isnan(v):
                raise _bad(f"profile {str(p)!r}: node {nid!r}: {what} must be >= 0, got {v!r}")
        layers.append(Layer(nid, round(f * 1000.0, 6), round(b * 1000.0, 6), par, act))
    stem = name or p.name.replace(".graph.txt", "")
    return Chain(stem, tuple(layers), processors, memory, bandwidth,
                 {"source": f"pipedream-profiles/{p.name}", "linearisation": "topological (node number ties)"})


def chain_from_instance(inst, *, processors: int | None = None, memory: float | None = None,
                        bandwidth: float | None = None) -> Chain:
    """Linearise a ``dplace.model.Instance`` into a chain.

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
                raise _bad(f"op {op.id!r}: forward_of names unknown op {f!r}")
            twin[o] = inst.op_index[f]
    backward_side = [twin[o] is not None for o in range(n)]
    for o in inst.topo:  # descendants of backward ops are on the backward side
        if not backward_side[o]:
            backward_side[o] = any(backward_side[inst.esrc[e]] for e in inst.pred[o])
    forward = [o for o in inst.topo if not backward_side[o]]
    if not forward:
        raise _bad("instance: no forward op to linearise (every op descends from a backward op)")
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
    from collections import deque

    seen = {o}
    queue = deque([o])
    while queue:
        x = queue.popleft()
        if twin[x] is not None and twin[x] in layer_of:
            return layer_of[twin[x]]
        for e in inst.pred[x]:
            y = inst.esrc[e]
            if y not in seen:
                seen.add(y)
                queue.append(y)
    return default


def make_chain(costs: Iterable[tuple[float, float]] | Iterable[float], *, weights: Iterable[float] | None = None,
               activations: Iterable[float] | None = None, processors: int = 2, memory: float | None = None,
               bandwidth: float | None = None, name: str = "chain") -> Chain:
    """A small chain for tests and examples: ``costs`` are (u_F, u_B) pairs, or one number per layer
    (the processing cost, split as u_F = cost, u_B = 0 — Theorem 1's convention)."""
    cs = list(costs)
    ws = list(weights) if weights is not None else [0.0] * len(cs)
    as_ = list(activations) if activations is not None else [0.0] * len(cs)
    if len(ws) != len(cs) or len(as_) != len(cs):
        raise _bad(f"make_chain: weights/activations need {len(cs)} values, got {len(ws)}/{len(as_)}")
    layers = []
    for i, c in enumerate(cs):
        f, b = (c, 0.0) if not isinstance(c, (tuple, list)) else c
        layers.append(Layer(f"l{i + 1}", f, b, ws[i], as_[i]))
    return Chain(name, tuple(layers), processors, memory, bandwidth)


def main(argv: list[str] | None = None) -> int:
    """``python -m dplace.chain PROFILE.graph.txt... --out DIR [--processors P]``: convert PipeDream
    profiles into ``DIR/<name>.json`` chains (no memory limit, no bandwidth)."""
    import argparse
    import sys

    from .errors import DplaceError

    ap = argparse.ArgumentParser(prog="python -m dplace.chain", description=main.__doc__)
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
        print(f"dplace.chain: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
