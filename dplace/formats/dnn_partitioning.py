"""msr-fiddle/dnn-partitioning JSON inputs (NeurIPS 2020): operator and layer graphs with accelerator
latencies, sizes and colocation classes (:func:`from_dnn_partitioning`)."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Mapping

from ..instance.io import read_json
from ..instance.model import Edge, Op
from .common import MS_TO_US, Parsed, bad, converter, num

_SPLITTABLE = ("MatMul", "BatchMatMul", "Gemm", "Conv", "Conv2D", "ConvGrad", "Conv2DBackpropInput",
               "MatMulGrad", "GemmGrad")


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


@converter("dnn-partitioning")
def from_dnn_partitioning(path: str | Path, *, devices: int | None = None,
                           split_dims: Mapping[str, int] | None = None) -> Parsed:
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
    data = read_json(path, "dnn-partitioning file")
    if not isinstance(data, dict):
        raise bad(path, f"top level must be an object, got {type(data).__name__}")
    nodes, jedges = data.get("nodes"), data.get("edges")
    if not isinstance(nodes, list):
        raise bad(path, f"'nodes' must be a list, got {type(nodes).__name__}")
    if not isinstance(jedges, list):
        raise bad(path, f"'edges' must be a list, got {type(jedges).__name__}")
    file_devices = None
    if devices is None:
        mf = data.get("maxFPGAs")
        if isinstance(mf, bool) or not isinstance(mf, (int, float)) or mf < 1 or mf != int(mf):
            raise bad(path, f"maxFPGAs must be an integer >= 1 (or pass devices), got {mf!r}")
        file_devices = int(mf)
    names: dict[Any, str] = {}
    raw_names = [nd.get("name") if isinstance(nd, dict) else None for nd in nodes]
    use_names = all(isinstance(n, str) and n for n in raw_names) and len(set(raw_names)) == len(raw_names)
    ops: list[Op] = []
    for i, nd in enumerate(nodes):
        where = f"nodes[{i}]"
        if not isinstance(nd, dict):
            raise bad(path, f"{where} must be an object, got {nd!r}")
        if "id" not in nd:
            raise bad(path, f"{where}: missing field 'id'")
        nid = nd["id"]
        if isinstance(nid, bool) or not isinstance(nid, (int, str)):
            raise bad(path, f"{where}: id must be an integer or string, got {nid!r}")
        if nid in names:
            raise bad(path, f"{where}: duplicate node id {nid!r}")
        oid = raw_names[i] if use_names else str(nid)
        names[nid] = oid
        where = f"node {oid!r}"
        supported = nd.get("supportedOnFpga", True)
        key = "fpgaLatency" if supported else "cpuLatency"
        if key not in nd:
            raise bad(path, f"{where}: missing field {key!r}")
        t = round(num(path, nd[key], f"{where}: {key}") * MS_TO_US, 4)  # to 0.1 ns
        mem = num(path, nd.get("size", 0), f"{where}: size")
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
            raise bad(path, f"{where}: colorClass must be an integer or string, got {cc!r}")
        ops.append(Op(oid, t, int(round(mem)), typ, None if cc is None else f"c{cc}", None, extra))
    ops = _pair_forward(ops)
    edges: list[Edge] = []
    for i, ed in enumerate(jedges):
        where = f"edges[{i}]"
        if not isinstance(ed, dict):
            raise bad(path, f"{where} must be an object, got {ed!r}")
        for key in ("sourceId", "destId"):
            if key not in ed:
                raise bad(path, f"{where}: missing field {key!r}")
            if ed[key] not in names:
                raise bad(path, f"{where}: {key} names unknown node {ed[key]!r}")
        nbytes = num(path, ed.get("size", 0), f"{where}: size")
        edges.append(Edge(names[ed["sourceId"]], names[ed["destId"]], nbytes))
    msize = data.get("maxSizePerFPGA")

    def default(total: int) -> float:
        if isinstance(msize, bool) or not isinstance(msize, (int, float)) or not math.isfinite(msize) or msize <= 0:
            raise bad(path, f"maxSizePerFPGA must be a number > 0 (or pass memory), got {msize!r}")
        return msize

    return Parsed(ops, edges, devices=file_devices, default_memory=default, source={"time_unit": "ms"})


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
