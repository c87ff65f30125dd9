"""The problem's records: ``Device``, ``Link``, ``Op``, ``Edge`` (frozen dataclasses) and the format's name.
Units are documented in :mod:`dplace.instance.model`, which re-exports these; :mod:`dplace.instance.columns`
builds ``Op``/``Edge`` objects from them on first use."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

FORMAT = "dplace-instance/1"
COMM_MODES = ("parallel", "sequential")


@dataclass(frozen=True)
class Device:
    """A device: ``memory`` in bytes (what its ops may hold at once), ``speed`` relative to 1 (a scalar
    op time ``t`` takes ``t / speed`` here)."""

    name: str
    memory: int  # bytes
    speed: float = 1.0  # relative speed; a scalar op time t takes t / speed here


@dataclass(frozen=True)
class Link:
    """A directed link's cost model: moving ``b`` bytes takes ``latency + b / bandwidth`` µs
    (latency in µs, bandwidth in bytes per µs)."""

    latency: float  # µs
    bandwidth: float  # bytes / µs

    def transfer_time(self, nbytes: float) -> float:
        """µs to move ``nbytes`` over this link."""
        return self.latency + nbytes / self.bandwidth


@dataclass(frozen=True)
class Op:
    """An operation of the graph. ``time``: µs on a device of speed 1, or ``{device name: µs}``;
    ``memory``: bytes it holds on its device for the whole step; ``type``: a label (e.g. ``MatMul``);
    ``colocation``: ops with the same value must share a device; ``device``: the device it is pinned
    to; ``extra``: unknown JSON fields, kept as given."""

    id: str
    time: float | Mapping[str, float]  # µs at speed 1, or µs per device name
    memory: int = 0  # bytes held on its device
    type: str | None = None
    colocation: str | None = None  # same value => same device
    device: str | None = None  # pinned device name
    extra: Mapping[str, Any] = field(default_factory=dict)  # unknown fields, kept as given


@dataclass(frozen=True)
class Edge:
    """A data dependency: ``dst`` starts after ``src`` ends and, on another device, after ``bytes``
    have crossed the link between them."""

    src: str
    dst: str
    bytes: float = 0.0
    extra: Mapping[str, Any] = field(default_factory=dict)
