"""A training step's graph -> ``dplace-instance/1`` (Baechi §3.1 colocation; FastT §4 sizes).

Ops are the graph's nodes (id = node name, ``extra["tf_node"]`` = node name). Edges carry the bytes of
the tensors between two nodes (static shape x dtype size, summed over tensors; control dependencies are
0-byte edges). Memory: a captured variable's placeholder holds the variable's bytes (model weights,
batch-norm statistics and optimizer slots alike); any other node holds its outputs' bytes. Colocation:
a resource variable with every op that takes its handle (read, assign, optimizer update) — the rule TF
enforces on GPUs — merged with TF's own ``_class: loc:@...`` attributes. The step's inputs are pinned
to the first device. Times start at 0:
:mod:`dplace.runtime.profile` fills them.
"""
from __future__ import annotations

from typing import Any, Iterable

from dplace.errors import InvalidInstanceError
from dplace.instance.graph import union_find
from dplace.instance.model import Device, Edge, Instance, Link, Op

from .zoo import TrainStep, _tf

PCIE = Link(10.0, 12000.0)  # µs, bytes/µs: a PCIe-3 x16-like link
LOOP_OPS = {"While", "StatelessWhile", "Enter", "Exit", "NextIteration", "LoopCond"}
GiB = 1 << 30


def tensor_bytes(t) -> tuple[int, bool]:
    """(bytes, shape fully known) of a graph tensor; resource/variant/string handles count 0."""
    tf = _tf()
    if t.dtype in (tf.resource, tf.variant, tf.string):
        return 0, True
    shape = t.shape
    if shape.rank is None:
        return 0, False
    n, known = 1, True
    for dim in shape.as_list():
        if dim is None:
            known = False
        else:
            n *= dim
    return n * t.dtype.size, known


def _dims(t) -> list[int | None]:
    return t.shape.as_list() if t.shape.rank is not None else []


def split_spec(op) -> dict[str, Any] | None:
    """FastT's split dimensions of a graph node from its static shapes (OS-DPOS, §5.2), or None.

    ``{"dims": {dim: size}, "cut": {dim: [producers of the inputs cut along dim]}, "reduce": [dims]}``
    (:mod:`dplace.heuristics.fastt` reads it). Inputs not listed are needed whole by every piece.
      * Conv2D(x, f): batch = N of x (x cut, filter whole); channel = output channels (f cut, x whole).
      * Conv2DBackpropInput(sizes, f, dy): batch = N (dy cut).
      * Conv2DBackpropFilter(x, sizes, dy): batch = N (x, dy cut; the filter gradient is a partial sum:
        reduce); channel = output channels (dy cut).
      * MatMul(a, b): with ``transpose_a`` and not ``transpose_b`` (TF's weight gradient a^T·dy) batch =
        the contracted rows (a, b cut; reduce); otherwise batch = the output's rows (a cut). channel =
        the output's columns (b cut).
      * BatchMatMulV2(a, b): with a rank-2 b (a broadcast weight matrix) batch = the leading dim (a
        cut, b whole) and channel = the output's last dim (b cut); with both of rank >= 3 and one
        leading dim, batch = that dim (both cut).
      * Einsum: batch = the first index when every operand and the output start with it (all cut).
    Sizes must be known and >= 2.
    """
    t = op.type
    ins = list(op.inputs)
    outs = _dims(op.outputs[0]) if op.outputs else []
    src = [x.op.name for x in ins]
    dims: dict[str, int] = {}
    cut: dict[str, list[str]] = {}
    reduce: list[str] = []

    def put(dim: str, size: Any, cut_inputs: list[int]) -> None:
        if isinstance(size, int) and size >= 2:
            dims[dim] = size
            cut[dim] = sorted({src[i] for i in cut_inputs})

    def attr(name: str) -> Any:
        try:
            return op.get_attr(name)
        except ValueError:
            return None

    if t == "Conv2D" and len(ins) == 2:
        x, f = _dims(ins[0]), _dims(ins[1])
        if len(x) == 4 and len(f) == 4 and attr("data_format") in (None, b"NHWC"):
            put("batch", x[0], [0])
            put("channel", f[3], [1])
    elif t == "Conv2DBackpropInput" and len(ins) == 3:
        dy = _dims(ins[2])
        if len(dy) == 4 and attr("data_format") in (None, b"NHWC"):
            put("batch", dy[0], [2])
    elif t == "Conv2DBackpropFilter" and len(ins) == 3:
        x, dy = _dims(ins[0]), _dims(ins[2])
        if len(x) == 4 and len(dy) == 4 and attr("data_format") in (None, b"NHWC"):
            put("batch", x[0], [0, 2])
            reduce.append("batch")
            put("channel", dy[3], [2])
    elif t == "MatMul" and len(ins) == 2 and len(outs) == 2:
        a = _dims(ins[0])
        if len(a) == 2 and attr("transpose_a") and not attr("transpose_b"):
            put("batch", a[0], [0, 1])
            reduce.append("batch")
        else:
            put("batch", outs[0], [0])
        put("channel", outs[1], [1])
    elif t == "BatchMatMulV2" and len(ins) == 2 and len(outs) >= 3:
        a, b = _dims(ins[0]), _dims(ins[1])
        if len(a) >= 3 and len(b) == 2:  # activations times a broadcast weight matrix
            if a[0] == outs[0]:
                put("batch", outs[0], [0])
            put("channel", outs[-1], [1])
        elif len(a) >= 3 and len(b) >= 3 and a[0] == b[0] == outs[0]:
            put("batch", outs[0], [0, 1])
    elif t == "Einsum" and ins:
        eq = attr("equation")
        eq = eq.decode() if isinstance(eq, bytes) else (eq or "")
        if "->" in eq:
            lhs, rhs = eq.split("->")
            terms = lhs.split(",")
            if len(terms) == len(ins) and rhs and all(x[:1] == rhs[0] for x in terms) and rhs[0].isalpha():
                put("batch", outs[0] if outs else None, list(range(len(ins))))
    if not dims:
        return None
    spec: dict[str, Any] = {"dims": dims, "cut": {d: cut[d] for d in dims}}
    if reduce and all(r in dims for r in reduce):
        spec["reduce"] = reduce
    return spec


def check_no_loops(graph) -> None:
    """Raise a clear error for graphs with control-flow loops (out of scope: a loop body is one node
    whose time depends on its trip count)."""
    for op in graph.get_operations():
        if op.type in LOOP_OPS:
            raise InvalidInstanceError(
                f"graph: node {op.name!r} is a {op.type} loop; graphs with control-flow loops are not supported "
                "(unroll the loop, e.g. keras LSTM(unroll=True))"
            )
    for fn in graph.as_graph_def().library.function:
        for nd in fn.node_def:
            if nd.op in LOOP_OPS:
                raise InvalidInstanceError(
                    f"graph: function {fn.signature.name!r} has a {nd.op} loop node {nd.name!r}; graphs with "
                    "control-flow loops are not supported (unroll the loop)"
                )


def extract(
    step: TrainStep,
    batch: int,
    devices: Iterable[str] = ("CPU:0",),
    *,
    memory: int = 8 * GiB,
    link: Link = PCIE,
    name: str | None = None,
) -> Instance:
    """The instance of ``step`` at ``batch`` on ``devices`` (names like 'CPU:0', 'GPU:1'), each with
    ``memory`` bytes, every pair joined by ``link``. Op times are 0 until profiled."""
    cf = step.concrete(batch)
    graph = cf.graph
    check_no_loops(graph)
    devs = [Device(str(d), int(memory), 1.0) for d in devices]

    # captured variables: internal placeholder -> variable
    tf = _tf()
    var_of: dict[str, Any] = {}
    for ext, internal in zip(cf.captured_inputs, graph.internal_captures):
        v = step.variable_of(ext)
        if v is not None:
            var_of[internal.op.name] = v
        elif internal.dtype == tf.resource:
            raise InvalidInstanceError(f"graph: captured resource {internal.name!r} is not a variable of the model")
        # a captured constant tensor: its placeholder holds its bytes like any output
    uf = union_find()  # ops that must share a device
    ops: list[Op] = []
    edge_bytes: dict[tuple[str, str], float] = {}
    unknown = 0
    for op in graph.get_operations():
        nm = op.name
        if nm in var_of:
            v = var_of[nm]
            mem = int(v.shape.num_elements() or 0) * tf.as_dtype(v.dtype).size
            extra = {"tf_node": nm, "variable": v.path if hasattr(v, "path") else v.name}
        else:
            mem = 0
            for t in op.outputs:
                b, known = tensor_bytes(t)
                mem += b
                unknown += not known
            extra = {"tf_node": nm}
            spec = split_spec(op)
            if spec is not None:
                extra["split"] = spec
        ops.append(Op(nm, 0.0, mem, op.type, None, None, extra))
        for t in op.inputs:
            b, known = tensor_bytes(t)
            key = (t.op.name, nm)
            edge_bytes[key] = edge_bytes.get(key, 0.0) + b
            if t.dtype == tf.resource:  # an op on a resource lives with the resource
                uf.union(t.op.name, nm)
        for c in op.control_inputs:
            edge_bytes.setdefault((c.name, nm), 0.0)
        try:
            cls = op.get_attr("_class")
        except ValueError:
            cls = []
        for loc in cls:
            loc = loc.decode() if isinstance(loc, bytes) else loc
            if loc.startswith("loc:@"):
                uf.union(loc[5:], nm)

    # colocation groups: named after the variable of the group when there is one
    root = {x: min(s) for s in uf.to_sets() for x in s}  # a set's name: its smallest member
    members: dict[str, list[str]] = {}
    for op in ops:
        if op.id in root:
            members.setdefault(root[op.id], []).append(op.id)
    group_of: dict[str, str] = {}
    for root, mem_ids in members.items():
        if len(mem_ids) < 2:
            continue
        vars_ = sorted(str(var_of[m].path if hasattr(var_of[m], "path") else var_of[m].name) for m in mem_ids if m in var_of)
        gname = "var:" + vars_[0] if vars_ else "loc:" + root
        for m in mem_ids:
            group_of[m] = gname
    # the step's inputs come from the host's input pipeline: pinned to the first device (TF also keeps
    # int32 function arguments in host memory, so a logical CPU other than CPU:0 would not be honoured)
    inputs = {t.op.name for t in graph.inputs[: len(graph.inputs) - len(graph.internal_captures)]}
    first = devs[0].name
    ops = [Op(op.id, op.time, op.memory, op.type, group_of.get(op.id), first if op.id in inputs else None, op.extra)
           for op in ops]
    edges = [Edge(s, d, b) for (s, d), b in edge_bytes.items()]
    meta = step.describe(batch)
    meta.update({
        "source": "dplace.runtime.extract",
        "inputs": [t.name for t in graph.inputs[: len(graph.inputs) - len(graph.internal_captures)]],
        "outputs": [t.name for t in graph.outputs],
        "tf_version": tf.__version__,
        "unknown_shape_tensors": unknown,
    })
    return Instance(
        name or f"{step.name}_b{batch}_{len(devs)}dev", devs, ops, edges, link=link, comm="parallel",
        extra={"tf": meta},
    )


def with_split_specs(inst: Instance, step: TrainStep, batch: int) -> Instance:
    """``inst`` (made by :func:`extract` from ``step`` at ``batch``, maybe profiled) with the split specs
    of :func:`split_spec` on its ops, matched by ``tf_node``: adds them to instances extracted before
    the specs existed without profiling again. Ops with no spec keep none."""
    graph = step.concrete(batch).graph
    specs = {op.name: split_spec(op) for op in graph.get_operations()}
    ops = []
    for op in inst.ops:
        spec = specs.get(op.extra.get("tf_node", op.id))
        extra = {k: v for k, v in op.extra.items() if k != "split"}
        if spec is not None:
            extra["split"] = spec
        ops.append(Op(op.id, op.time, op.memory, op.type, op.colocation, op.device, extra))
    return inst.replace(ops=ops)
