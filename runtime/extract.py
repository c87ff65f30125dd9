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
from dplace.model import Device, Edge, Instance, Link, Op

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


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, a: str) -> str:
        self.parent.setdefault(a, a)
        while self.parent[a] != a:
            self.parent[a] = self.parent[self.parent[a]]
            a = self.parent[a]
        return a

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


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
    uf = _UnionFind()
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
    members: dict[str, list[str]] = {}
    for op in ops:
        if op.id in uf.parent:
            members.setdefault(uf.find(op.id), []).append(op.id)
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
