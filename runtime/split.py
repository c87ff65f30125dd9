"""FastT's split graphs on TensorFlow (Yi et al., Middleware'20, §5.2 and §4): run them, time their pieces.

``GraphRewrite``: the step's GraphDef rewritten with an OS-DPOS result's splits, node for node the
split instance of :func:`dplace.heuristics.fastt_graphs.split_instance`: op ``X`` split on ``dim`` into
n becomes pieces ``X/<dim><i>`` (copies of ``X`` on a slice of each cut input), a ``SplitV`` node
``X/split<k>`` per cut input, and ``X/concat`` (``ConcatV2``) or, for a partial sum, ``X/reduce``
(``AddN``) that every consumer of ``X`` now reads. The slices are those of the split instance (sizes
as even as possible, the first ones larger), so a split step computes the same loss as the unsplit
one (up to float rounding). The small constants a rewrite adds (axes, sizes) run on their consumer's
device. :func:`dplace.runtime.replicas.execute_result` runs any result through
:func:`dplace.runtime.execute.execute`, with this rewrite when the result carries splits (after the
data-parallel rewrite of :mod:`dplace.runtime.replicas` when they split a data-parallel graph).

``split_shapes``: FastT re-profiles an op at the shapes of its split pieces (§4). Each op with a split
spec is run alone (its inputs fed at the piece's shape, under the profiler, the same event durations
as :func:`dplace.runtime.profile.op_times`) at every piece size OS-DPOS can ask for; the times go to
``extra["split"]["measured"] = {dim: {size: µs}}``, which ``split_instance`` and
``data_parallel_instance`` use instead of a linear share.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from dplace.errors import InvalidInstanceError
from dplace.instance.model import Instance, Op

from .zoo import TrainStep, _tf, tf_device

# ------------------------------------------------------------------------------------ cut rules
@dataclass(frozen=True)
class Cut:
    """How op ``X`` splits on one dim in TensorFlow: ``inputs`` = (input index, axis) cut along the dim,
    ``sizes`` = (input index, axis) of an int32 shape input whose entry becomes the piece's size,
    ``axis`` = the output's concat axis (None: the pieces are partial sums, added)."""

    inputs: tuple[tuple[int, int], ...]
    sizes: tuple[tuple[int, int], ...] = ()
    axis: int | None = 0


def _rank(t) -> int:
    return t.shape.rank if t.shape.rank is not None else -1


def cut_rules(op, dim: str) -> Cut:
    """The :class:`Cut` of graph op ``op`` on ``dim``; the same cases as
    :func:`dplace.runtime.extract.split_spec` (which decides that the op can be split there)."""
    t, ins = op.type, list(op.inputs)

    def attr(name: str) -> Any:
        try:
            return op.get_attr(name)
        except ValueError:
            return None

    if t == "Conv2D":
        return Cut(((0, 0),)) if dim == "batch" else Cut(((1, 3),), axis=3)
    if t == "Conv2DBackpropInput" and dim == "batch":
        return Cut(((2, 0),), sizes=((0, 0),))
    if t == "Conv2DBackpropFilter":
        return Cut(((0, 0), (2, 0)), axis=None) if dim == "batch" else Cut(((2, 3),), sizes=((1, 3),), axis=3)
    if t == "MatMul":
        ta, tb = bool(attr("transpose_a")), bool(attr("transpose_b"))
        if dim == "batch":
            if ta and not tb:
                return Cut(((0, 0), (1, 0)), axis=None)
            return Cut(((0, 1 if ta else 0),))
        return Cut(((1, 0 if tb else 1),), axis=1)
    if t == "BatchMatMulV2":
        a, b = ins
        if _rank(b) == 2:
            if dim == "batch":
                return Cut(((0, 0),))
            return Cut(((1, 0 if attr("adj_y") else 1),), axis=_rank(a) - 1)
        return Cut(((0, 0), (1, 0)))
    if t == "Einsum" and dim == "batch":
        return Cut(tuple((i, 0) for i in range(len(ins))))
    raise InvalidInstanceError(f"splits: op {op.name!r} ({t}) has no TensorFlow split rule for {dim!r}")


def _parts(size: int, n: int) -> list[int]:
    q, r = divmod(size, n)
    return [q + (1 if i < r else 0) for i in range(n)]


# ------------------------------------------------------------------------------------ the rewrite
def _attr(**kw):
    from tensorflow.core.framework import attr_value_pb2

    out = {}
    for k, v in kw.items():
        if isinstance(v, bool):
            out[k] = attr_value_pb2.AttrValue(b=v)
        elif isinstance(v, int):
            out[k] = attr_value_pb2.AttrValue(i=v)
        else:  # a DType
            out[k] = attr_value_pb2.AttrValue(type=v.as_datatype_enum)
    return out


def _node(gd, name: str, op: str, inputs: list[str], attrs: dict):
    nd = gd.node.add()
    nd.name, nd.op = name, op
    nd.input.extend(inputs)
    for k, v in attrs.items():
        nd.attr[k].CopyFrom(v)
    return nd


def _const(gd, name: str, values: list[int] | int):
    """An int32 Const (a scalar when ``values`` is an int)."""
    from tensorflow.core.framework import attr_value_pb2

    tf = _tf()
    nd = _node(gd, name, "Const", [], _attr(dtype=tf.int32))
    nd.attr["value"].CopyFrom(attr_value_pb2.AttrValue(tensor=tf.make_tensor_proto(values, dtype=tf.int32)))
    return nd


def _tensor(name: str) -> tuple[str, int]:
    base, _, idx = name.partition(":")
    return base, int(idx or 0)


@dataclass
class GraphRewrite:
    """The split rewrite of one step's graph for the split instance ``inst`` (see the module docstring).
    ``graph_def(gd)`` rewrites a GraphDef of the step; ``node(name)`` is the instance op whose device a
    graph node takes; ``tensor(name)`` renames a fetched tensor whose op was split."""

    step: TrainStep
    batch: int
    inst: Instance
    alias: dict[str, str] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)
    graph_op: Callable[[str], Any] | None = None  # graph node name -> tf.Operation (default: the step's at batch)

    def node(self, name: str) -> str:
        return self.alias.get(name, name)

    def tensor(self, name: str) -> str:
        base, idx = _tensor(name)
        return f"{self.renamed[base]}:0" if base in self.renamed and idx == 0 else name

    def graph_def(self, gd):
        op_of = self.graph_op or self.step.concrete(self.batch).graph.get_operation_by_name
        for op_id, dim, n in self.inst.extra.get("splits", []):
            self._split(gd, str(op_id), op_of(str(op_id)), str(dim), int(n))
        return gd

    def _split(self, gd, name: str, op, dim: str, n: int) -> None:
        tf = _tf()
        nodes = {nd.name: nd for nd in gd.node}
        if name not in nodes:
            raise InvalidInstanceError(f"splits: op {name!r} is not a node of the step's graph")
        x = nodes[name]
        rule = cut_rules(op, dim)
        size = int(op.inputs[rule.inputs[0][0]].shape[rule.inputs[0][1]])
        sizes = _parts(size, n)
        ids = self.inst.op_index
        made = [nd for nd in self.inst.ops if nd.extra.get("split_of") == name and nd.type == "Split"]
        split_of_src = {self._src(o): o.id for o in made}
        # one SplitV per cut input: the instance names one per producer, a second input of it is an alias
        cut_in: dict[int, str] = {}
        for idx, axis in rule.inputs:
            src = x.input[idx]
            producer = _tensor(src)[0]
            sp = split_of_src.get(producer, f"{name}/split{idx}")
            if sp in self.alias or any(nd.name == sp for nd in gd.node):
                self.alias[f"{sp}_in{idx}"] = self.alias.get(sp, sp)
                sp = f"{sp}_in{idx}"
            elif sp not in ids:
                self.alias[sp] = name + f"/{dim}0"
            dtype = op.inputs[idx].dtype
            _const(gd, f"{sp}/sizes", sizes)
            _const(gd, f"{sp}/axis", axis)
            self.alias[f"{sp}/sizes"] = self.alias[f"{sp}/axis"] = self.node(sp)
            _node(gd, sp, "SplitV", [src, f"{sp}/sizes", f"{sp}/axis"],
                  _attr(T=dtype, Tlen=tf.int32, num_split=n))
            cut_in[idx] = sp
        pieces = []
        for i, s in enumerate(sizes):
            p = gd.node.add()
            p.CopyFrom(x)
            p.name = f"{name}/{dim}{i}"
            for idx, sp in cut_in.items():
                p.input[idx] = f"{sp}:{i}"
            for idx, axis in rule.sizes:  # a conv gradient's shape input: the shape of its output
                shape = [int(v) for v in op.outputs[0].shape]
                shape[axis] = s
                c = f"{p.name}/shape{idx}"
                _const(gd, c, shape)
                self.alias[c] = p.name
                p.input[idx] = c
            pieces.append(p.name)
        dtype = op.outputs[0].dtype
        out = f"{name}/reduce" if rule.axis is None else f"{name}/concat"
        if out not in ids:  # no consumer in the instance: the output runs with the first piece
            self.alias[out] = pieces[0]
        if rule.axis is None:
            _node(gd, out, "AddN", [f"{p}:0" for p in pieces], _attr(N=n, T=dtype))
        else:
            _const(gd, f"{out}/axis", rule.axis)
            _node(gd, out, "ConcatV2", [f"{p}:0" for p in pieces] + [f"{out}/axis"], _attr(N=n, T=dtype, Tidx=tf.int32))
            self.alias[f"{out}/axis"] = self.node(out)
        self.renamed[name] = out
        for nd in gd.node:  # consumers of X read its output node
            if nd.name in pieces or nd.name == out:
                continue
            for k, s in enumerate(nd.input):
                if s in (name, f"{name}:0"):
                    nd.input[k] = out
                elif s == "^" + name:
                    nd.input[k] = "^" + out
        gd.node.remove(x)

    def _src(self, op: Op) -> str:
        o = self.inst.op_index[op.id]
        return self.inst.ops[self.inst.esrc[self.inst.pred[o][0]]].id


# ------------------------------------------------------------------------------ measured split shapes
def piece_sizes(size: int, dim: str, devices: int, batch: int | None) -> list[int]:
    """Every size of ``dim`` that OS-DPOS can give a piece of an op of ``size`` on ``devices`` devices:
    the parts of ``size`` in 1..devices (1: the op's own size, the reference of every share) and, on
    the batch, each data-parallel replica's rows (as :func:`data_parallel_instance` cuts them) and
    their parts."""
    out: set[int] = set()
    for n in range(1, min(devices, size) + 1):
        out.update(_parts(size, n))
    if dim == "batch" and devices > 1:
        if isinstance(batch, int) and batch >= devices:
            reps = [s if size == batch else max(1, int(size * s / batch)) for s in _parts(batch, devices)]
        else:
            reps = [max(1, int(size / devices))]
        for p in reps:
            for n in range(1, min(devices, p) + 1):
                out.update(_parts(p, n))
    return sorted(out)


FILL_VALUE = "fill_value"  # the float32 scalar every measured shape's inputs are filled with


def _variant(gd, src, op, dim: str, size: int, name: str, after: str | None) -> str:
    """Add to ``gd`` the node ``src`` (graph op ``op``) alone at ``size`` of ``dim``: every input a
    ``Fill`` of its shape (cut axes at ``size``), a shape input the output's shape at ``size``; each new
    node waits for ``after`` (variants run one at a time). Returns the variant's node name."""
    tf = _tf()
    rule = cut_rules(op, dim)
    cut = dict(rule.inputs)
    sized = dict(rule.sizes)
    dep = [f"^{after}"] if after else []
    x = gd.node.add()
    x.CopyFrom(src)
    x.name = f"{name}/op"
    del x.input[:]
    shape_in = {"Conv2DBackpropInput": 0, "Conv2DBackpropFilter": 1}.get(op.type)  # the output's shape
    for i, inp in enumerate(op.inputs):
        if i == shape_in:
            shape = [int(v) for v in op.outputs[0].shape]
            if i in sized:
                shape[sized[i]] = size
            _const(gd, f"{name}/in{i}", shape)
        else:
            shape = [int(v) for v in inp.shape]
            if i in cut:
                shape[cut[i]] = size
            _const(gd, f"{name}/in{i}/shape", shape)
            value = FILL_VALUE  # fed, so that the function runtime cannot fold the inputs away as constants
            if inp.dtype != tf.float32:
                value = _node(gd, f"{name}/in{i}/value", "Cast", [FILL_VALUE],
                              _attr(SrcT=tf.float32, DstT=inp.dtype, Truncate=False)).name
            _node(gd, f"{name}/in{i}", "Fill", [f"{name}/in{i}/shape", value] + dep,
                  _attr(T=inp.dtype, index_type=tf.int32))
        x.input.append(f"{name}/in{i}")
    x.input.extend(dep)
    return x.name


def split_shapes(inst: Instance, step: TrainStep, batch: int, *, device: str | None = None, steps: int = 3,
                 warmup: int = 1, progress=None) -> Instance:
    """``inst`` (extracted from ``step`` at ``batch``) with ``extra["split"]["measured"] = {dim: {size:
    µs}}`` on every op with a split spec: the op run alone at each of its :func:`piece_sizes`, one shape
    after another in one function, under the profiler (the minimum of ``steps`` runs after ``warmup``), on
    ``device`` (default the instance's first device). FastT §4 profiles the split shapes; OS-DPOS then
    times a piece as the op's time × measured(piece) / measured(op) (:func:`measured_share`). Ops whose
    input shapes are not all known are left unmeasured (linear share)."""
    from tensorflow.core.framework import graph_pb2

    from dplace.heuristics.fastt_graphs import MEASURED_KEY as KEY
    from dplace.heuristics.fastt_graphs import SPLIT_KEY, split_dims

    from .profile import _noop, _profiled

    tf = _tf()
    graph = step.concrete(batch).graph
    src = {nd.name: nd for nd in graph.as_graph_def().node}
    dev = tf_device(device or inst.devices[0].name)
    gd = graph_pb2.GraphDef()
    gd.versions.CopyFrom(graph.as_graph_def().versions)
    _node(gd, FILL_VALUE, "Placeholder", [], _attr(dtype=tf.float32))
    variants: dict[str, tuple[str, str, int]] = {}  # variant node -> (op id, dim, size)
    last = None
    for op in inst.ops:
        node = op.extra.get("tf_node", op.id)
        dims = split_dims(op)
        if not dims or node not in src:
            continue
        top = graph.get_operation_by_name(node)
        if not all(t.shape.is_fully_defined() for t in list(top.inputs) + list(top.outputs[:1])):
            continue
        for dim, size in sorted(dims.items()):
            for s in piece_sizes(size, dim, inst.m, batch):
                last = _variant(gd, src[node], top, dim, s, f"v{len(variants)}", last)
                variants[last] = (op.id, dim, s)
    if last is None:
        return inst
    for nd in gd.node:
        nd.device = dev
    wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(gd, name=""), [])
    g = wrapped.graph
    fn = wrapped.prune(feeds=[g.get_tensor_by_name(FILL_VALUE + ":0")], fetches=g.get_tensor_by_name(last + ":0"))
    with tf.device(dev):
        half = tf.constant(0.5)
    # the minimum over runs: a shape run alone takes µs, and one preempted run on a busy machine would
    # otherwise decide it (a 30x outlier under a median of 3 was seen at load 10)
    runs = [_profiled(lambda: fn(half).numpy(), 1, warmup if i == 0 else 0, progress or _noop)
            for i in range(steps)]
    times = {v: min(r[v] for r in runs if v in r) for v in variants if any(v in r for r in runs)}
    measured: dict[str, dict[str, dict[str, float]]] = {}
    for v, (op_id, dim, s) in variants.items():
        if v in times:
            measured.setdefault(op_id, {}).setdefault(dim, {})[str(s)] = round(times[v], 3)
    ops = []
    for op in inst.ops:
        if op.id in measured:
            op = Op(op.id, op.time, op.memory, op.type, op.colocation, op.device,
                    dict(op.extra, **{SPLIT_KEY: dict(op.extra[SPLIT_KEY], **{KEY: measured[op.id]})}))
        ops.append(op)
    meta = dict(inst.extra.get("tf", {}))
    meta["profile"] = dict(meta.get("profile", {}), split_shapes={
        "ops": len(measured), "shapes": len(variants), "timed": sum(len(t) for d in measured.values() for t in d.values()),
        "steps": steps, "warmup": warmup, "device": device or inst.devices[0].name,
        "statistic": "minimum over the runs; each shape run alone, one after another"})
    return inst.replace(ops=ops, extra={**inst.extra, "tf": meta})
