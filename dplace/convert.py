"""Converters from other graph formats to ``dplace-instance/1``.

* :func:`from_dnn_partitioning` — the JSON inputs of msr-fiddle/dnn-partitioning (operator and layer
  graphs with accelerator latencies, sizes, colocation classes);
* :func:`from_pipedream` — PipeDream layer profiles (text);
* :func:`from_dot` — DOT task graphs with ``Weight`` attributes on nodes and edges (own parser for the
  subset those files use);
* :func:`from_stg` — Standard Task Graph set files (Kasahara).

Every converter returns a validated :class:`~dplace.model.Instance` and raises
:class:`~dplace.errors.InvalidInstanceError` with one line naming the file, the field and the value.
Memory per device: ``memory`` (bytes) wins, else ``memory_fraction`` × the total op memory, else the
format's default (see each function). ``add_cli`` registers ``dplace convert``.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from .errors import InvalidInstanceError
from .io import read_json, read_text
from .model import COMM_MODES, Device, Edge, Instance, Link, Op, check_number

FORMATS = ("dnn-partitioning", "pipedream", "dot", "stg")
_MS_TO_US = 1000.0


# ---------------------------------------------------------------------------------------------- helpers
def _bad(path: Any, msg: str) -> InvalidInstanceError:
    return InvalidInstanceError(f"{path}: {msg}")


def _num(path: Any, value: Any, where: str) -> float:
    """``value`` as a finite float >= 0, else an error naming file, field and value."""
    try:
        return check_number(value, where)
    except InvalidInstanceError as exc:
        raise _bad(path, str(exc)) from None


def _parse_float(path: Any, text: str, where: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise _bad(path, f"{where} must be a number, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise _bad(path, f"{where} must be a finite number >= 0, got {text!r}")
    return v


def _check_options(devices: Any, memory: Any, memory_fraction: Any, latency: Any, bandwidth: Any,
                   comm: Any) -> None:
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise InvalidInstanceError(f"devices must be an integer >= 1, got {devices!r}")
    if memory is not None:
        check_number(memory, "memory (bytes per device)", positive=True)
    if memory_fraction is not None:
        check_number(memory_fraction, "memory_fraction", positive=True)
    check_number(latency, "latency (µs)")
    check_number(bandwidth, "bandwidth (bytes/µs)", positive=True)
    if comm not in COMM_MODES:
        raise InvalidInstanceError(f"comm must be one of {', '.join(COMM_MODES)}, got {comm!r}")


def _capacity(ops: list[Op], n_devices: int, memory: float | None, memory_fraction: float | None,
              default: Callable[[int], float], *, raise_to_largest: bool = True) -> int:
    """Bytes per device: ``memory``, else ``memory_fraction`` × total, else the format's default raised
    to the largest op or colocation group when ``raise_to_largest`` (a synthetic default always gives a
    valid instance; a size stated in the file is kept as stated)."""
    total = sum(op.memory for op in ops)
    if memory is not None:
        return int(memory)
    if memory_fraction is not None:
        return int(math.ceil(memory_fraction * total))
    if not raise_to_largest:
        return int(math.ceil(default(total)))
    groups: dict[str, int] = {}
    for op in ops:
        if op.colocation is not None:
            groups[op.colocation] = groups.get(op.colocation, 0) + int(op.memory)
    largest = max([int(op.memory) for op in ops] + list(groups.values()) + [0])
    return max(int(math.ceil(default(total))), largest)


def _default_split(total: int, m: int) -> float:
    from .generate import default_memory

    return default_memory(total, m)


def _build(path: Any, name: str, n_devices: int, cap: int, ops: list[Op], edges: list[Edge], latency: float,
           bandwidth: float, comm: str, source: dict) -> Instance:
    devices = [Device(f"gpu{d}", cap, 1.0) for d in range(n_devices)]
    try:
        return Instance(name, devices, ops, edges, link=Link(float(latency), float(bandwidth)), comm=comm,
                        extra={"source": source})
    except InvalidInstanceError as exc:
        raise _bad(path, str(exc)) from None


# type names from op names (dnn-partitioning operator graphs) and PyTorch layer descriptions (PipeDream)
_SPLITTABLE = ("MatMul", "BatchMatMul", "Gemm", "Conv", "Conv2D", "ConvGrad", "Conv2DBackpropInput",
               "MatMulGrad", "GemmGrad")
_TORCH_TYPES = {"Conv2d": "Conv2D", "Linear": "MatMul", "ReLU": "Relu", "BatchNorm2d": "BatchNorm",
                "MaxPool2d": "MaxPool", "AvgPool2d": "AvgPool", "AdaptiveAvgPool2d": "AvgPool",
                "Dropout": "Dropout", "Embedding": "GatherV2", "LSTM": "LSTM", "Softmax": "Softmax",
                "LogSoftmax": "LogSoftmax"}


def op_type_from_name(name: str) -> str:
    """A type for an op of a dnn-partitioning operator graph, from its name.

    ``MatMul47`` → ``MatMul``; ``MatMul47_Grad/Gemm_7`` → ``Gemm`` (the gradient op's own kind);
    ``Conv3_Grad/ConvGrad_2_gpu_0/...`` → ``ConvGrad``; weights and other tensors (``gpu_0/res4_w_0``,
    ``99``, ``cls.predictions.bias``: names not starting with a capital) → ``Variable``.
    """
    part = name.split("_Grad/", 1)[1] if "_Grad/" in name else name
    m = re.match(r"[A-Z][A-Za-z]*", part)
    return "Variable" if m is None else m.group(0)


def _split_field(op_type: str, dims: Mapping[str, int] | None) -> dict:
    if dims and op_type in _SPLITTABLE:
        return {"split": {"dims": {k: int(v) for k, v in dims.items()}}}
    return {}


# ---------------------------------------------------------------------------------------------- dnn-partitioning
def from_dnn_partitioning(
    path: str | Path,
    *,
    devices: int | None = None,
    memory: float | None = None,
    memory_fraction: float | None = None,
    latency: float = 10.0,
    bandwidth: float = 12000.0,
    comm: str = "parallel",
    name: str | None = None,
    split_dims: Mapping[str, int] | None = None,
) -> Instance:
    """An instance from a msr-fiddle/dnn-partitioning JSON input (operator or layer graph).

    Units: ``fpgaLatency`` is read as **milliseconds** in both OperatorGraphs and LayerGraphs and
    converted to µs (× 1000). Evidence for the LayerGraphs: their latencies are PipeDream's profiled
    ``forward_compute_time``/``backward_compute_time`` (ms) verbatim (e.g. Inception-V3 ``node77`` is
    1.37 in both), and ResNet-50 inference sums to 201 (layer graph) vs 325 (operator graph); their edge
    ``cost`` is ``size / 2^31``, i.e. seconds at 2 GiB/s, 1000 × the OperatorGraphs' ms — ``cost`` is
    ignored: transfer time comes from ``size`` (bytes) and the link model (``latency`` µs,
    ``bandwidth`` bytes/µs). Op ``memory`` = node ``size`` (bytes held on the device). Op id = node
    ``name`` (``str(id)`` when names are missing or repeated); ``colorClass`` → ``colocation``
    (``"c<class>"``); ``isBackwardNode`` → ``backward: true``; the source node id is kept as
    ``source_id``; ``type`` is guessed from the name (:func:`op_type_from_name`). A backward node
    whose name says which forward node it differentiates (``X_Grad/...``, ``Xgrad``) gets
    ``forward_of: X`` (:func:`forward_name`).
    Ops not ``supportedOnFpga`` are kept, take their ``cpuLatency`` (they run at CPU speed on any
    device) and carry ``supported_on_fpga: false`` (none of the shared files has one).
    The files give no tensor shapes, so ``split`` is set only when ``split_dims`` (e.g.
    ``{"batch": 32}``) is given, on MatMul/Gemm/Conv-like ops.
    Devices: ``devices`` (default ``maxFPGAs``); memory per device: ``memory`` bytes, else
    ``memory_fraction`` × total op memory, else ``maxSizePerFPGA``.
    """
    _check_options(devices, memory, memory_fraction, latency, bandwidth, comm)
    data = read_json(path, "dnn-partitioning file")
    if not isinstance(data, dict):
        raise _bad(path, f"top level must be an object, got {type(data).__name__}")
    nodes, jedges = data.get("nodes"), data.get("edges")
    if not isinstance(nodes, list):
        raise _bad(path, f"'nodes' must be a list, got {type(nodes).__name__}")
    if not isinstance(jedges, list):
        raise _bad(path, f"'edges' must be a list, got {type(jedges).__name__}")
    if devices is None:
        mf = data.get("maxFPGAs")
        if isinstance(mf, bool) or not isinstance(mf, (int, float)) or mf < 1 or mf != int(mf):
            raise _bad(path, f"maxFPGAs must be an integer >= 1 (or pass devices), got {mf!r}")
        devices = int(mf)
    names: dict[Any, str] = {}
    raw_names = [nd.get("name") if isinstance(nd, dict) else None for nd in nodes]
    use_names = all(isinstance(n, str) and n for n in raw_names) and len(set(raw_names)) == len(raw_names)
    ops: list[Op] = []
    for i, nd in enumerate(nodes):
        where = f"nodes[{i}]"
        if not isinstance(nd, dict):
            raise _bad(path, f"{where} must be an object, got {nd!r}")
        if "id" not in nd:
            raise _bad(path, f"{where}: missing field 'id'")
        nid = nd["id"]
        if isinstance(nid, bool) or not isinstance(nid, (int, str)):
            raise _bad(path, f"{where}: id must be an integer or string, got {nid!r}")
        if nid in names:
            raise _bad(path, f"{where}: duplicate node id {nid!r}")
        oid = raw_names[i] if use_names else str(nid)
        names[nid] = oid
        where = f"node {oid!r}"
        supported = nd.get("supportedOnFpga", True)
        key = "fpgaLatency" if supported else "cpuLatency"
        if key not in nd:
            raise _bad(path, f"{where}: missing field {key!r}")
        t = round(_num(path, nd[key], f"{where}: {key}") * _MS_TO_US, 4)  # to 0.1 ns
        mem = _num(path, nd.get("size", 0), f"{where}: size")
        typ = op_type_from_name(oid) if use_names else None
        extra: dict[str, Any] = {"source_id": nid}
        if nd.get("isBackwardNode"):
            extra["backward"] = True
        if not supported:
            extra["supported_on_fpga"] = False
        if typ:
            extra.update(_split_field(typ, split_dims))
        cc = nd.get("colorClass")
        if cc is not None and (isinstance(cc, bool) or not isinstance(cc, (int, str))):
            raise _bad(path, f"{where}: colorClass must be an integer or string, got {cc!r}")
        ops.append(Op(oid, t, int(round(mem)), typ, None if cc is None else f"c{cc}", None, extra))
    ops = _pair_forward(ops)
    edges: list[Edge] = []
    for i, ed in enumerate(jedges):
        where = f"edges[{i}]"
        if not isinstance(ed, dict):
            raise _bad(path, f"{where} must be an object, got {ed!r}")
        for key in ("sourceId", "destId"):
            if key not in ed:
                raise _bad(path, f"{where}: missing field {key!r}")
            if ed[key] not in names:
                raise _bad(path, f"{where}: {key} names unknown node {ed[key]!r}")
        nbytes = _num(path, ed.get("size", 0), f"{where}: size")
        edges.append(Edge(names[ed["sourceId"]], names[ed["destId"]], nbytes))
    msize = data.get("maxSizePerFPGA")

    def default(total: int) -> float:
        if isinstance(msize, bool) or not isinstance(msize, (int, float)) or not math.isfinite(msize) or msize <= 0:
            raise _bad(path, f"maxSizePerFPGA must be a number > 0 (or pass memory), got {msize!r}")
        return msize

    cap = _capacity(ops, devices, memory, memory_fraction, default, raise_to_largest=False)
    nm = name or Path(path).stem
    return _build(path, nm, devices, cap, ops, edges, latency, bandwidth, comm,
                  {"format": "dnn-partitioning", "file": Path(path).name, "time_unit": "ms"})


def forward_name(backward_id: str) -> str | None:
    """The forward op a backward op's name says it differentiates: ``X_Grad/...`` (operator graphs)
    or ``Xgrad`` (layer graphs) name ``X``; None when the name says nothing."""
    if "_Grad/" in backward_id:
        return backward_id.split("_Grad/", 1)[0] or None
    if backward_id.endswith("grad") and len(backward_id) > 4:
        return backward_id[:-4]
    return None


def _pair_forward(ops: list[Op]) -> list[Op]:
    """Backward ops (``backward: true``) get ``forward_of`` = the forward op their name points to
    (:func:`forward_name`), when that op exists and is not itself a backward op (Baechi §3.3 (ii))."""
    fwd = {op.id for op in ops if not op.extra.get("backward")}
    out = []
    for op in ops:
        f = forward_name(op.id) if op.extra.get("backward") and "forward_of" not in op.extra else None
        if f is not None and f in fwd:
            op = Op(op.id, op.time, op.memory, op.type, op.colocation, op.device, dict(op.extra, forward_of=f))
        out.append(op)
    return out


# ---------------------------------------------------------------------------------------------- PipeDream
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


def from_pipedream(
    path: str | Path,
    *,
    devices: int | None = None,
    memory: float | None = None,
    memory_fraction: float | None = None,
    latency: float = 10.0,
    bandwidth: float = 12000.0,
    comm: str = "parallel",
    name: str | None = None,
    merge_backward: bool = False,
) -> Instance:
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
    _check_options(devices, memory, memory_fraction, latency, bandwidth, comm)
    devices = 4 if devices is None else devices
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
            raise _bad(path, f"line {ln}: not a node or edge line: {line.strip()[:60]!r}")
        nid, desc, rest = mn.group(1), mn.group(2), mn.group(3)
        if nid in layers:
            raise _bad(path, f"line {ln}: duplicate node {nid!r}")
        vals: dict[str, float] = {}
        for item in re.split(r",\s*(?=[A-Za-z_]+=)", rest):
            if "=" not in item:
                raise _bad(path, f"line {ln}: bad field {item.strip()!r}")
            k, v = (x.strip() for x in item.split("=", 1))
            if v.startswith("[") and v.endswith("]"):  # several outputs: their total
                vals[k] = sum(_parse_float(path, x.strip(), f"line {ln}: {k}") for x in v[1:-1].split(";") if x.strip())
            else:
                vals[k] = _parse_float(path, v.rstrip(","), f"line {ln}: {k}")
        for k in _PD_FIELDS:
            if k not in vals:
                raise _bad(path, f"line {ln}: node {nid!r} has no {k}")
        layers[nid] = (desc, vals)
    if not layers:
        raise _bad(path, "no node lines found")
    for ln, (a, b) in enumerate(pairs):
        for x in (a, b):
            if x not in layers:
                raise _bad(path, f"edge {a!r} -- {b!r}: unknown node {x!r}")
    ops: list[Op] = []
    edges: list[Edge] = []
    for nid, (desc, v) in layers.items():
        typ, dims = _torch_type(desc)
        act, par = int(v["activation_size"]), int(v["parameter_size"])
        extra: dict[str, Any] = {"description": desc.strip()}
        if dims:
            extra["split"] = {"dims": dims}
        if merge_backward:
            t = (v["forward_compute_time"] + v["backward_compute_time"]) * _MS_TO_US
            ops.append(Op(nid, t, act + par, typ, None, None, extra))
        else:
            ops.append(Op(nid, v["forward_compute_time"] * _MS_TO_US, act + par, typ, nid, None, extra))
            bextra = {"backward": True, "forward_of": nid, **({"split": extra["split"]} if dims else {})}
            ops.append(Op(f"{nid}/grad", v["backward_compute_time"] * _MS_TO_US, par, f"{typ}Grad", nid, None,
                          bextra))
            edges.append(Edge(nid, f"{nid}/grad", float(act)))
    for a, b in pairs:
        act = layers[a][1]["activation_size"]
        if merge_backward:
            edges.append(Edge(a, b, 2.0 * act))
        else:
            edges.append(Edge(a, b, act))
            edges.append(Edge(f"{b}/grad", f"{a}/grad", act))
    cap = _capacity(ops, devices, memory, memory_fraction, lambda total: _default_split(total, devices))
    nm = name or Path(path).name.split(".")[0]
    return _build(path, nm, devices, cap, ops, edges, latency, bandwidth, comm,
                  {"format": "pipedream", "file": Path(path).name, "merge_backward": merge_backward,
                   "time_unit": "ms"})


# ---------------------------------------------------------------------------------------------- DOT
_DOT_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<arrow>->|--)|(?P<punct>[{}\[\];,=])|(?P<id>-?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?(?![A-Za-z0-9_.])|[A-Za-z0-9_.]+))'
)


def _dot_tokens(path: Any, text: str) -> list[str]:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = "\n".join(
        "" if ln.lstrip().startswith("#") else re.sub(r"(^|\s)//.*$", "", ln) for ln in text.splitlines()
    )
    out: list[str] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _DOT_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            frag = text[pos:].strip()[:20]
            raise _bad(path, f"DOT syntax: unexpected text {frag!r}")
        tok = m.group("str")
        out.append(tok if tok is not None else m.group(m.lastgroup))
        pos = m.end()
    return out


def _unq(tok: str) -> str:
    if tok.startswith('"'):
        return tok[1:-1].replace('\\"', '"')
    return tok


def _dot_attrs(path: Any, toks: list[str], i: int) -> tuple[dict[str, str], int]:
    """Parse ``[k=v, k=v; ...]`` starting at toks[i] == '['; returns attrs and the index after ']'."""
    attrs: dict[str, str] = {}
    i += 1
    while i < len(toks) and toks[i] != "]":
        if toks[i] in (",", ";"):
            i += 1
            continue
        key = _unq(toks[i])
        if i + 2 < len(toks) and toks[i + 1] == "=":
            attrs[key] = _unq(toks[i + 2])
            i += 3
        else:
            attrs[key] = "true"
            i += 1
    if i >= len(toks):
        raise _bad(path, "DOT syntax: '[' without ']'")
    return attrs, i + 1


def _weight(path: Any, attrs: Mapping[str, str], what: str) -> float | None:
    for key in ("Weight", "weight"):
        if key in attrs:
            return _parse_float(path, attrs[key], f"{what}: Weight")
    return None


def from_dot(
    path: str | Path,
    *,
    devices: int | None = None,
    memory: float | None = None,
    memory_fraction: float | None = None,
    latency: float = 0.0,
    bandwidth: float = 12000.0,
    comm: str = "parallel",
    name: str | None = None,
) -> Instance:
    """An instance from a DOT task graph (``digraph``) with ``Weight`` on nodes and edges.

    A node's ``Weight`` is its time in µs (required for every node); an edge's ``Weight`` is its
    communication time in the same unit on a link of ``bandwidth``: ``bytes = Weight × bandwidth``, so
    with the default ``latency=0`` a transfer takes exactly ``Weight`` (the classic task-graph meaning;
    missing edge Weight = 0). Ops hold no memory unless a node has a ``memory`` attribute (bytes).
    Supported subset (own parser): ``strict``/``digraph NAME { ... }``, node statements, edge chains
    ``a -> b -> c`` with attributes, ``graph``/``node``/``edge`` default statements (``node [Weight=..]``
    and ``edge [Weight=..]`` defaults apply), ``key=value`` graph attributes, comments; subgraphs and
    undirected graphs are rejected. Devices default to 4, memory per device to 16 GiB when ops hold none.
    """
    _check_options(devices, memory, memory_fraction, latency, bandwidth, comm)
    devices = 4 if devices is None else devices
    toks = _dot_tokens(path, read_text(path, "input"))
    i = 0
    if i < len(toks) and toks[i].lower() == "strict":
        i += 1
    if i >= len(toks) or toks[i].lower() not in ("digraph", "graph"):
        raise _bad(path, f"DOT: expected 'digraph', got {toks[i] if i < len(toks) else 'end of file'!r}")
    if toks[i].lower() == "graph":
        raise _bad(path, "DOT: undirected 'graph' is not a task graph; expected 'digraph'")
    i += 1
    gname = None
    if i < len(toks) and toks[i] != "{":
        gname = _unq(toks[i])
        i += 1
    if i >= len(toks) or toks[i] != "{":
        raise _bad(path, "DOT: expected '{' after digraph name")
    i += 1
    node_attrs: dict[str, dict[str, str]] = {}
    order: list[str] = []
    edge_list: list[tuple[str, str, dict[str, str]]] = []
    node_default: dict[str, str] = {}
    edge_default: dict[str, str] = {}

    def touch(n: str) -> None:
        if n not in node_attrs:
            node_attrs[n] = {}
            order.append(n)

    closed = False
    while i < len(toks):
        t = toks[i]
        if t == "}":
            closed = True
            i += 1
            break
        if t in (";", ","):
            i += 1
            continue
        if t == "{" or t.lower() == "subgraph":
            raise _bad(path, "DOT: subgraphs are not supported")
        if t in ("[", "]", "=", "->", "--"):
            raise _bad(path, f"DOT syntax: unexpected {t!r}")
        low = t.lower()
        if low in ("node", "edge", "graph") and i + 1 < len(toks) and toks[i + 1] == "[":
            attrs, i = _dot_attrs(path, toks, i + 1)
            if low == "node":
                node_default.update(attrs)
            elif low == "edge":
                edge_default.update(attrs)
            continue
        if i + 2 < len(toks) and toks[i + 1] == "=":  # graph attribute
            i += 3
            continue
        chain = [_unq(t)]
        i += 1
        while i < len(toks) and toks[i] in ("->", "--"):
            if toks[i] == "--":
                raise _bad(path, "DOT: undirected edge '--' in a digraph")
            if i + 1 >= len(toks) or toks[i + 1] in ("{", "}", "[", "]", ";", ",", "=", "->"):
                raise _bad(path, f"DOT syntax: edge from {chain[-1]!r} has no target")
            chain.append(_unq(toks[i + 1]))
            i += 2
        attrs: dict[str, str] = {}
        if i < len(toks) and toks[i] == "[":
            attrs, i = _dot_attrs(path, toks, i)
        if len(chain) == 1:
            touch(chain[0])
            node_attrs[chain[0]].update(attrs)
        else:
            for a, b in zip(chain, chain[1:]):
                touch(a)
                touch(b)
                edge_list.append((a, b, {**edge_default, **attrs}))
    if not closed:
        raise _bad(path, "DOT: missing closing '}'")
    if not order:
        raise _bad(path, "DOT: the graph has no nodes")
    ops: list[Op] = []
    for n in order:
        attrs = {**node_default, **node_attrs[n]}
        w = _weight(path, attrs, f"node {n!r}")
        if w is None:
            raise _bad(path, f"node {n!r}: missing Weight")
        mem = _parse_float(path, attrs["memory"], f"node {n!r}: memory") if "memory" in attrs else 0.0
        extra = {"label": attrs["label"]} if "label" in attrs else {}
        ops.append(Op(n, w, int(mem), attrs.get("type"), None, None, extra))
    edges = []
    for a, b, attrs in edge_list:
        w = _weight(path, attrs, f"edge {a!r}->{b!r}")
        edges.append(Edge(a, b, (w or 0.0) * float(bandwidth)))
    cap = _capacity(ops, devices, memory, memory_fraction, lambda total: _default_split(total, devices))
    nm = name or gname or Path(path).stem
    return _build(path, nm, devices, cap, ops, edges, latency, bandwidth, comm,
                  {"format": "dot", "file": Path(path).name})


# ---------------------------------------------------------------------------------------------- STG
def from_stg(
    path: str | Path,
    *,
    devices: int | None = None,
    memory: float | None = None,
    memory_fraction: float | None = None,
    latency: float = 0.0,
    bandwidth: float = 12000.0,
    comm: str = "parallel",
    name: str | None = None,
    edge_bytes: float = 0.0,
) -> Instance:
    """An instance from a Standard Task Graph (STG, Kasahara) file.

    Format: the first number is the task count n (real tasks), then one line per task
    ``id cost npred pred_1 ... pred_npred`` for tasks 0 .. n+1 (0 and n+1 are the dummy entry and exit
    tasks of cost 0, kept as ops ``t0`` and ``t<n+1>``); a file listing exactly n tasks is accepted too.
    Anything after the task lines (STG files end with ``#`` comment blocks) is ignored. Costs are read
    as µs. STG has no communication costs: every edge carries ``edge_bytes`` (default 0, so with the
    default ``latency=0`` communication is free). Ops hold no memory; devices default to 4 with 16 GiB.
    """
    _check_options(devices, memory, memory_fraction, latency, bandwidth, comm)
    devices = 4 if devices is None else devices
    eb = _num(path, edge_bytes, "edge_bytes")
    lines = []
    for ln, line in enumerate(read_text(path, "input").splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if lines:
                break  # the trailing comment block
            continue
        lines.append((ln, s.split()))
    if not lines:
        raise _bad(path, "no task count line")
    ln0, head = lines[0]
    if len(head) != 1 or not head[0].isdigit():
        raise _bad(path, f"line {ln0}: first line must be the task count, got {' '.join(head)[:40]!r}")
    n = int(head[0])
    tasks: dict[int, tuple[float, list[int], int]] = {}
    for ln, toks in lines[1:]:
        if len(tasks) == n + 2:
            break
        if not all(re.fullmatch(r"-?\d+(\.\d+)?", t) for t in toks):
            if len(tasks) in (n, n + 2):
                break
            raise _bad(path, f"line {ln}: expected 'id cost npred preds...', got {' '.join(toks)[:40]!r}")
        if len(toks) < 3:
            raise _bad(path, f"line {ln}: expected 'id cost npred preds...', got {' '.join(toks)!r}")
        tid = int(float(toks[0]))
        cost = _parse_float(path, toks[1], f"line {ln}: task {tid}: cost")
        npred = int(float(toks[2]))
        preds = [int(float(t)) for t in toks[3:]]
        if npred != len(preds):
            raise _bad(path, f"line {ln}: task {tid}: npred is {npred} but {len(preds)} predecessors are listed")
        if tid in tasks:
            raise _bad(path, f"line {ln}: duplicate task id {tid}")
        tasks[tid] = (cost, preds, ln)
    if len(tasks) not in (n, n + 2):
        raise _bad(path, f"task count is {n} but {len(tasks)} task lines were found (expected {n} or {n + 2})")
    ops = [Op(f"t{tid}", cost, 0, None, None, None,
              {"dummy": True} if (len(tasks) == n + 2 and tid in (min(tasks), max(tasks)) and cost == 0) else {})
           for tid, (cost, _, _) in tasks.items()]
    edges = []
    for tid, (_, preds, ln) in tasks.items():
        for p in preds:
            if p not in tasks:
                raise _bad(path, f"line {ln}: task {tid}: unknown predecessor {p}")
            edges.append(Edge(f"t{p}", f"t{tid}", eb))
    cap = _capacity(ops, devices, memory, memory_fraction, lambda total: _default_split(total, devices))
    nm = name or Path(path).stem
    return _build(path, nm, devices, cap, ops, edges, latency, bandwidth, comm,
                  {"format": "stg", "file": Path(path).name})


CONVERTERS: dict[str, Callable[..., Instance]] = {
    "dnn-partitioning": from_dnn_partitioning,
    "pipedream": from_pipedream,
    "dot": from_dot,
    "stg": from_stg,
}


def convert(fmt: str, path: str | Path, **options: Any) -> Instance:
    """Dispatch to the converter of ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in CONVERTERS:
        raise InvalidInstanceError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return CONVERTERS[fmt](path, **options)


# ---------------------------------------------------------------------------------------------- CLI
def _parse_dims(text: str) -> dict[str, int]:
    dims: dict[str, int] = {}
    for item in text.split(","):
        k, sep, v = item.partition("=")
        if not sep or not k.strip() or not v.strip().isdigit() or int(v) < 1:
            raise InvalidInstanceError(f"--split-dims: expected name=N[,name=N], got {text!r}")
        dims[k.strip()] = int(v)
    return dims


def add_cli(subparsers: Any) -> None:
    """``dplace convert FORMAT INPUT --out FILE [--devices N] [--memory BYTES] [--latency] ...``."""
    import argparse

    p = subparsers.add_parser(
        "convert", help="convert a graph from another format to a dplace instance",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert a graph measured or published elsewhere to a dplace-instance/1 file.\n\n"
        "formats:\n"
        "  dnn-partitioning  JSON inputs of msr-fiddle/dnn-partitioning (NeurIPS 2020): operator or layer\n"
        "                    graphs, fpgaLatency read as ms, node/edge size in bytes, colorClass -> colocation\n"
        "  pipedream         PipeDream layer profile (*.graph.txt): forward/backward times in ms, activation\n"
        "                    and parameter sizes in bytes; a forward and a backward op per layer\n"
        "  dot               DOT digraph with a Weight (µs) on every node; edge Weight = transfer time in µs\n"
        "  stg               Standard Task Graph set file (Kasahara): task costs as µs, no communication\n\n"
        "The MIT-licensed data of the first two are at github.com/msr-fiddle/dnn-partitioning and\n"
        "github.com/msr-fiddle/pipedream (copies here under /work/shared/data; instances/README.md lists\n"
        "the commands that made the bundled instances).",
        epilog="example:\n  dplace convert dnn-partitioning bert_L-12_training.json --devices 4 "
        "--memory-fraction 0.35 --out bert.json")
    p.add_argument("format", choices=FORMATS, help="format of INPUT: " + ", ".join(FORMATS) + " (described above)")
    p.add_argument("input", help="the file to convert")
    p.add_argument("--out", required=True, help="output instance JSON (written atomically)")
    p.add_argument("--devices", type=int, default=None, help="device count (default: the file's or 4)")
    p.add_argument("--memory", type=float, default=None, help="bytes per device")
    p.add_argument("--memory-fraction", type=float, default=None,
                   help="bytes per device as a fraction of the total op memory")
    p.add_argument("--latency", type=float, default=None,
                   help="link latency in µs (default 10; 0 for dot and stg)")
    p.add_argument("--bandwidth", type=float, default=None, help="link bandwidth in bytes/µs (default 12000)")
    p.add_argument("--comm", choices=COMM_MODES, default="parallel",
                   help="transfer model: parallel delays or one at a time per link (default parallel)")
    p.add_argument("--name", default=None, help="instance name (default: from the input file's name)")
    p.add_argument("--merge-backward", action="store_true", help="pipedream: one op of F+B per layer")
    p.add_argument("--split-dims", default=None, help="dnn-partitioning: e.g. batch=32 for MatMul/Conv ops")
    p.add_argument("--edge-bytes", type=float, default=None, help="stg: bytes on every edge (default 0)")
    p.add_argument("--compact", action="store_true", help="write minified JSON")
    p.set_defaults(func=_cmd_convert)


def write_instance(inst: Instance, path: str | Path, *, compact: bool = False) -> None:
    """Write ``inst`` atomically (minified JSON with ``compact``)."""
    import json

    from .io import instance_to_dict, save_instance, write_atomic

    if compact:
        write_atomic(path, json.dumps(instance_to_dict(inst), separators=(",", ":")) + "\n")
    else:
        save_instance(inst, path)


def _cmd_convert(args: Any) -> int:
    from .io import check_outputs

    check_outputs({"--out": args.out}, {"graph": args.input})
    opts: dict[str, Any] = dict(devices=args.devices, memory=args.memory, memory_fraction=args.memory_fraction,
                                comm=args.comm, name=args.name)
    if args.latency is not None:
        opts["latency"] = args.latency
    if args.bandwidth is not None:
        opts["bandwidth"] = args.bandwidth
    if args.merge_backward:
        if args.format != "pipedream":
            raise InvalidInstanceError("--merge-backward applies to the pipedream format only")
        opts["merge_backward"] = True
    if args.split_dims is not None:
        if args.format != "dnn-partitioning":
            raise InvalidInstanceError("--split-dims applies to the dnn-partitioning format only")
        opts["split_dims"] = _parse_dims(args.split_dims)
    if args.edge_bytes is not None:
        if args.format != "stg":
            raise InvalidInstanceError("--edge-bytes applies to the stg format only")
        opts["edge_bytes"] = args.edge_bytes
    inst = convert(args.format, args.input, **opts)
    write_instance(inst, args.out, compact=args.compact)
    total = sum(inst.mem)
    print(f"wrote {args.out}: {inst.n} ops, {len(inst.edges)} edges, {inst.m} devices × "
          f"{inst.capacity[0]:,} bytes (total op memory {total:,})")
    return 0


__all__ = ["FORMATS", "CONVERTERS", "convert", "from_dnn_partitioning", "from_dot", "from_pipedream", "from_stg",
           "op_type_from_name", "add_cli"]
