"""Chains of layers for pipelined model parallelism: the ``dplace-chain/1`` format (converters: :mod:`.convert`).

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

import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from dplace.errors import InvalidInstanceError
from dplace.instance.model import check_number

CHAIN_FORMAT = "dplace-chain/1"
_LAYER_KEYS = ("id", "forward", "backward", "weights", "activation")
_TOP_KEYS = {"format", "name", "layers", "processors", "memory", "bandwidth"}


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
            raise InvalidInstanceError("layers: at least one layer is required")
        seen: set[str] = set()
        for i, ly in enumerate(self.layers):
            if not isinstance(ly, Layer):
                raise InvalidInstanceError(f"layers[{i}] must be a Layer, got {type(ly).__name__}")
            if not isinstance(ly.id, str) or not ly.id:
                raise InvalidInstanceError(f"layers[{i}]: id must be a non-empty string, got {ly.id!r}")
            if ly.id in seen:
                raise InvalidInstanceError(f"layers: duplicate layer id {ly.id!r}")
            seen.add(ly.id)
            for key in _LAYER_KEYS[1:]:
                check_number(getattr(ly, key), f"layer {ly.id!r}: {key}")
        if isinstance(self.processors, bool) or not isinstance(self.processors, int) or self.processors < 1:
            raise InvalidInstanceError(f"processors must be an integer >= 1, got {self.processors!r}")
        if self.memory is not None:
            check_number(self.memory, "memory")
        if self.bandwidth is not None:
            check_number(self.bandwidth, "bandwidth", positive=True)

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
        raise InvalidInstanceError(f"chain must be a JSON object, got {type(data).__name__}")
    fmt = data.get("format", CHAIN_FORMAT)
    if fmt != CHAIN_FORMAT:
        raise InvalidInstanceError(f"format must be {CHAIN_FORMAT!r}, got {fmt!r}")
    if "layers" not in data:
        raise InvalidInstanceError("chain: missing field 'layers'")
    raw = data["layers"]
    if not isinstance(raw, list):
        raise InvalidInstanceError(f"layers must be a list, got {type(raw).__name__}")
    layers = []
    for i, obj in enumerate(raw):
        if not isinstance(obj, dict):
            raise InvalidInstanceError(f"layers[{i}] must be an object, got {obj!r}")
        lid = obj.get("id", f"l{i}")
        if not isinstance(lid, str) or not lid:
            raise InvalidInstanceError(f"layers[{i}]: id must be a non-empty string, got {lid!r}")
        vals = {}
        for key in _LAYER_KEYS[1:]:
            if key not in obj:
                if key in ("forward", "backward"):
                    raise InvalidInstanceError(f"layer {lid!r}: missing field {key!r}")
                vals[key] = 0.0
            else:
                vals[key] = check_number(obj[key], f"layer {lid!r}: {key}")
        layers.append(Layer(lid, **vals))
    procs = data.get("processors", 1)
    if isinstance(procs, bool) or not isinstance(procs, int) or procs < 1:
        raise InvalidInstanceError(f"processors must be an integer >= 1, got {procs!r}")
    mem = data.get("memory")
    if mem is not None:
        mem = check_number(mem, "memory")
    bw = data.get("bandwidth")
    if bw is not None:
        bw = check_number(bw, "bandwidth", positive=True)
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
    from dplace.instance.io import read_json

    return chain_from_dict(read_json(path, "chain"))


def save_chain(chain: Chain, path: str | os.PathLike) -> None:
    """Write ``chain`` atomically as ``dplace-chain/1`` JSON."""
    from dplace.instance.io import save_json

    save_json(path, chain_to_dict(chain))


def make_chain(costs: Iterable[tuple[float, float]] | Iterable[float], *, weights: Iterable[float] | None = None,
               activations: Iterable[float] | None = None, processors: int = 2, memory: float | None = None,
               bandwidth: float | None = None, name: str = "chain") -> Chain:
    """A small chain for tests and examples: ``costs`` are (u_F, u_B) pairs, or one number per layer
    (the processing cost, split as u_F = cost, u_B = 0 — Theorem 1's convention)."""
    cs = list(costs)
    ws = list(weights) if weights is not None else [0.0] * len(cs)
    as_ = list(activations) if activations is not None else [0.0] * len(cs)
    if len(ws) != len(cs) or len(as_) != len(cs):
        raise InvalidInstanceError(f"make_chain: weights/activations need {len(cs)} values, got {len(ws)}/{len(as_)}")
    layers = []
    for i, c in enumerate(cs):
        f, b = (c, 0.0) if not isinstance(c, (tuple, list)) else c
        layers.append(Layer(f"l{i + 1}", f, b, ws[i], as_[i]))
    return Chain(name, tuple(layers), processors, memory, bandwidth)
