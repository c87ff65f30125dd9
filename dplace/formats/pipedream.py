"""PipeDream layer profiles (``*.graph.txt``, msr-fiddle/pipedream): a forward and a backward op per
layer (:func:`from_pipedream`)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..instance.io import read_text
from ..instance.model import Edge, Op
from .common import MS_TO_US, Parsed, bad, converter, parse_float

_TORCH_TYPES = {"Conv2d": "Conv2D", "Linear": "MatMul", "ReLU": "Relu", "BatchNorm2d": "BatchNorm",
                "MaxPool2d": "MaxPool", "AvgPool2d": "AvgPool", "AdaptiveAvgPool2d": "AvgPool",
                "Dropout": "Dropout", "Embedding": "GatherV2", "LSTM": "LSTM", "Softmax": "Softmax",
                "LogSoftmax": "LogSoftmax"}
_PD_NODE = re.compile(r"^(\S+) -- (.*) -- (forward_compute_time=.*)$")
_PD_EDGE = re.compile(r"^\s+(\S+) -- (\S+)\s*$")
_PD_FIELDS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")


def _torch_type(desc: str) -> tuple[str, dict]:
    m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*)", desc)
    cls = m.group(1) if m else "Layer"
    typ = _TORCH_TYPES.get(cls, cls)
    dims: dict[str, int] = {}
    if cls in ("Conv2d", "Linear"):
        args = re.match(r"\s*\w+\(\s*(\d+)\s*,\s*(\d+)", desc)
        if args:
            dims["channel"] = int(args.group(2))
    return typ, dims


@converter("pipedream")
def from_pipedream(path: str | Path, *, devices: int | None = None, merge_backward: bool = False) -> Parsed:
    """An instance from a PipeDream profile (``node -- desc -- forward_compute_time=F, ...`` lines, then
    ``\\tnodeA -- nodeB`` edges). Times are ms → µs; sizes bytes.

    Default (``merge_backward=False``), a training step: each layer ``X`` gives a forward op ``X``
    (time F, memory ``activation_size + parameter_size``; a list ``[a; b]`` of output sizes counts as
    their sum: weights plus the activation stashed for
    backward) and a backward op ``X/grad`` (time B, memory ``parameter_size``: the weight gradient,
    ``backward: true``, ``forward_of: X``), colocated (``colocation = X``: they share the weights, as
    the dnn-partitioning layer graphs do). Edges: forward ``A -> B`` carries A's ``activation_size``;
    backward ``B/grad -> A/grad`` carries the same bytes (a gradient is the size of its tensor); and
    ``X -> X/grad`` (stashed activation, same device). With ``merge_backward=True`` each layer is one op
    of time F + B and memory ``activation_size + parameter_size``; an edge carries the activation forward
    and its gradient back, 2 × ``activation_size`` bytes. ``type`` comes from the PyTorch class
    (Conv2d → Conv2D, Linear → MatMul, ...); Conv2d/Linear ops get ``split = {"dims": {"channel":
    out_channels}}`` (the batch size is not in the profile). Devices default to 4; memory per device to
    total / (0.7 · devices) (one device cannot hold the graph), raised to the largest colocated layer.
    """
    text = read_text(path, "input")
    layers: dict[str, tuple[str, dict[str, float]]] = {}
    pairs: list[tuple[str, str]] = []
    for ln, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        me = _PD_EDGE.match(line)
        if me:
            pairs.append((me.group(1), me.group(2)))
            continue
        mn = _PD_NODE.match(line)
        if not mn:
            raise bad(path, f"line {ln}: not a node or edge line: {line.strip()[:60]!r}")
        nid, desc, rest = mn.group(1), mn.group(2), mn.group(3)
        if nid in layers:
            raise bad(path, f"line {ln}: duplicate node {nid!r}")
        vals: dict[str, float] = {}
        for item in re.split(r",\s*(?=[A-Za-z_]+=)", rest):
            if "=" not in item:
                raise bad(path, f"line {ln}: bad field {item.strip()!r}")
            k, v = (x.strip() for x in item.split("=", 1))
            if v.startswith("[") and v.endswith("]"):  # several outputs: their total
                vals[k] = sum(parse_float(path, x.strip(), f"line {ln}: {k}") for x in v[1:-1].split(";") if x.strip())
            else:
                vals[k] = parse_float(path, v.rstrip(","), f"line {ln}: {k}")
        for k in _PD_FIELDS:
            if k not in vals:
                raise bad(path, f"line {ln}: node {nid!r} has no {k}")
        layers[nid] = (desc, vals)
    if not layers:
        raise bad(path, "no node lines found")
    for ln, (a, b) in enumerate(pairs):
        for x in (a, b):
            if x not in layers:
                raise bad(path, f"edge {a!r} -- {b!r}: unknown node {x!r}")
    ops: list[Op] = []
    edges: list[Edge] = []
    for nid, (desc, v) in layers.items():
        typ, dims = _torch_type(desc)
        act, par = int(v["activation_size"]), int(v["parameter_size"])
        extra: dict[str, Any] = {"description": desc.strip()}
        if dims:
            extra["split"] = {"dims": dims}
        if merge_backward:
            t = (v["forward_compute_time"] + v["backward_compute_time"]) * MS_TO_US
            ops.append(Op(nid, t, act + par, typ, None, None, extra))
        else:
            ops.append(Op(nid, v["forward_compute_time"] * MS_TO_US, act + par, typ, nid, None, extra))
            bextra = {"backward": True, "forward_of": nid, **({"split": extra["split"]} if dims else {})}
            ops.append(Op(f"{nid}/grad", v["backward_compute_time"] * MS_TO_US, par, f"{typ}Grad", nid, None,
                          bextra))
            edges.append(Edge(nid, f"{nid}/grad", float(act)))
    for a, b in pairs:
        act = layers[a][1]["activation_size"]
        if merge_backward:
            edges.append(Edge(a, b, 2.0 * act))
        else:
            edges.append(Edge(a, b, act))
            edges.append(Edge(f"{b}/grad", f"{a}/grad", act))
    return Parsed(ops, edges, name=Path(path).name.split(".")[0],
                  source={"merge_backward": merge_backward, "time_unit": "ms"})
