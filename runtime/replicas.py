"""FastT's data-parallel graph on TensorFlow (Yi et al., Middleware'20, §5.2): run its results.

:func:`dplace.heuristics.fastt_graphs.data_parallel_instance` replicates every op reachable from the
step's batch inputs once per device (``rep<r>/<op>``, replica r on its share b_r of the global batch b,
the shares as even as possible, the first ones larger) and sums the replicas' tensors where they reach
the shared state in one ``<op>/allreduce`` node. A replica cannot be a copy of the step's nodes: its
static shapes (and the batch-size constants of its loss mean and gradients) are those of batch b_r. So
:class:`ReplicaRewrite` re-traces the step at each b_r and builds one graph, node for node the
data-parallel instance:

* Replicated nodes: replica r's are the nodes of the step traced at b_r, renamed ``rep<r>/<node>``
  (inputs and ``_class`` colocations renamed alike). A shared constant that differs between the
  traces (a shape, the batch size of a mean) gets a copy ``rep<r>/<node>`` from replica r's trace,
  on the shared constant's device. Any other node that differs between the traces is not handled
  (``NotImplementedError``), nor is a trace whose node names differ.
* Batch inputs: the step is fed the whole batch (placeholder ``x`` on replica 0's input device);
  ``rep<r>/x`` is a ``Slice`` of rows [sum(b_<r), sum(b_<=r)) of it.
* Shared nodes (variables, their reads, the optimizer's updates, constants) run once, from the
  step's own trace at b.
* ``<u>/allreduce``: each replica's u is a gradient (or an optimizer's value affine in it) of the
  mean loss over its own b_r rows, so the full batch's value is the average sum_r (b_r / b) · u_r,
  which equals the instance's sum of the replicas' full-size tensors up to that weighting: one
  ``Mul`` by b_r / b per replica (``<u>/allreduce/mul<r>``) and an ``AddN``, all on the allreduce
  op's device. A control input from a replicated node becomes a ``NoOp`` waiting for every replica.
* The fetched loss is sum_r (b_r / b) · loss_r (``<output>/replicas``, on replica 0's output device):
  the mean over the whole batch, so it is compared with the unplaced step's loss as any other result.

What runs beyond the instance's model (small, and said here rather than hidden): the weighting
``Mul``s beside each all-reduce ``AddN`` (the instance times the sum alone), the loss's weighted sum
(one scalar per replica sent to replica 0's output device), and, when a replica's input is placed away
from replica 0's (extracted graphs pin every input to the first device, so not there), the whole batch
sent to its ``Slice``.

Exact for losses that are means over the batch and for layers that act on each example alone (dense,
convolution, attention, layer normalisation). Batch normalisation in training mode normalises each
replica by its own rows, as every data-parallel step does; its loss then differs from the single-device
step's, which the loss check reports.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dplace.errors import InvalidInstanceError
from dplace.instance.model import Instance

from .split import GraphRewrite, _attr, _const, _node, _parts, _tensor
from .zoo import TrainStep, _tf

DP_KEY = "data_parallel"


def _parse(s: str) -> tuple[bool, str, int]:
    """(control input, node, output index) of a NodeDef input string."""
    if s.startswith("^"):
        return True, s[1:], 0
    base, idx = _tensor(s)
    return False, base, idx


def _scalar(gd, name: str, value: float, dtype):
    from tensorflow.core.framework import attr_value_pb2

    tf = _tf()
    nd = _node(gd, name, "Const", [], _attr(dtype=dtype))
    nd.attr["value"].CopyFrom(attr_value_pb2.AttrValue(tensor=tf.make_tensor_proto(value, dtype=dtype)))
    return nd


@dataclass
class ReplicaRewrite:
    """The data-parallel rewrite of one step's graph for the data-parallel instance ``inst`` (see the
    module docstring); the same interface as :class:`dplace.runtime.split.GraphRewrite`, which a result
    with splits applies after it (:func:`rewrite_for`)."""

    step: TrainStep
    batch: int
    inst: Instance
    alias: dict[str, str] = field(default_factory=dict)
    renamed: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        dp = self.inst.extra.get(DP_KEY)
        if not isinstance(dp, dict):
            raise InvalidInstanceError(f"execute: instance {self.inst.name!r} is not a data-parallel graph")
        self.n = int(dp["replicas"])
        if self.batch < self.n:
            raise InvalidInstanceError(f"execute: batch {self.batch} cannot be shared by {self.n} replicas")
        self.sizes = _parts(self.batch, self.n)
        self.inputs = [str(x) for x in dp["inputs"]]
        self.replicated = {str(op.extra["replica_of"]) for op in self.inst.ops
                           if "replica_of" in op.extra and not op.extra.get("allreduce")}
        fed = {t.op.name for t in self.step.concrete(self.batch).graph.inputs}
        odd = [x for x in self.inputs if x not in fed]
        if odd:
            raise NotImplementedError(f"execute: data-parallel input {odd[0]!r} is not an input of the step's graph "
                                      "(replicas slice the step's inputs)")
        self.dep: set[str] = set()  # shared nodes copied per replica (graph_def)
        self._out = None  # the GraphDef being built
        self._reduced: dict[tuple[str, int], str] = {}  # (replicated node, output) -> its weighted sum

    def node(self, name: str) -> str:
        return self.alias.get(name, name)

    def tensor(self, name: str) -> str:
        base, idx = _tensor(name)
        return f"{self.renamed[base]}:0" if base in self.renamed and idx == 0 else name

    def graph_op(self, name: str):
        """The tf.Operation of graph node ``name``: ``rep<r>/<node>`` in the step traced at b_r."""
        head, _, rest = name.partition("/")
        if head.startswith("rep") and head[3:].isdigit() and rest in self.replicated:
            return self.step.concrete(self.sizes[int(head[3:])]).graph.get_operation_by_name(rest)
        return self.step.concrete(self.batch).graph.get_operation_by_name(name)

    def graph_def(self, gd):
        from tensorflow.core.framework import graph_pb2

        base = {nd.name: nd for nd in gd.node}
        traces = []
        for b in self.sizes:
            tr = {nd.name: nd for nd in self.step.concrete(b).graph.as_graph_def().node}
            if set(tr) != set(base):
                odd = sorted(set(tr) ^ set(base))[:3]
                raise NotImplementedError(f"execute: the step traced at batch {b} has other nodes than at batch "
                                          f"{self.batch} (e.g. {', '.join(odd)}); replicas need the same nodes")
            traces.append(tr)
        out = graph_pb2.GraphDef()
        out.versions.CopyFrom(gd.versions)
        out.library.CopyFrom(gd.library)
        self._out, self._reduced = out, {}
        self.dep = self._batch_dependent(base, traces)
        for name, nd in base.items():  # shared nodes and the whole-batch inputs, once
            if name in self.replicated and name not in self.inputs:
                continue
            new = out.node.add()
            new.CopyFrom(nd)
            if name not in self.inputs:
                self._shared_inputs(new)
        for name in self.inputs:
            self.alias[name] = f"rep0/{name}"
        for r, tr in enumerate(traces):
            self._replica(r, tr)
        graph = self.step.concrete(self.batch).graph
        for t in graph.outputs:
            self._output(t)
        return out

    # --------------------------------------------------------------------------------- the parts
    def _batch_dependent(self, base: dict, traces: list[dict]) -> set[str]:
        """The shared nodes whose value depends on the batch size: those that differ between the traces
        (shapes, the batch size of a mean) and those computed from them. Replicas get their own copies;
        a stateful one is not handled."""
        memo: dict[str, bool] = {}

        def dep(name: str) -> bool:
            stack = [name]
            while stack:
                x = stack[-1]
                if x in memo:
                    stack.pop()
                    continue
                srcs = [src for ctrl, src, _ in map(_parse, base[x].input)
                        if not ctrl and src not in self.replicated and src not in memo]
                if srcs:
                    stack.extend(srcs)
                    continue
                stack.pop()
                memo[x] = any(base[x] != tr[x] for tr in traces) or any(
                    memo.get(src, False) for ctrl, src, _ in map(_parse, base[x].input) if not ctrl)
            return memo[name]

        out = {name for name in base if name not in self.replicated and dep(name)}
        for name in sorted(out):
            if self.graph_op(name).op_def.is_stateful:
                raise NotImplementedError(f"execute: shared node {name!r} ({base[name].op}) depends on the batch "
                                          f"size, and replicas at batches {self.sizes} cannot share it")
        return out

    def _replica(self, r: int, tr: dict) -> None:
        out = self._out
        pre = f"rep{r}/"
        off = sum(self.sizes[:r])
        for name in self.inputs:  # the replica's rows of the whole batch
            op = self.graph_op(name)
            rank = op.outputs[0].shape.rank
            rows = f"{pre}{name}"
            _const(out, f"{rows}/begin", [off] + [0] * (rank - 1))
            _const(out, f"{rows}/size", [self.sizes[r]] + [-1] * (rank - 1))
            self.alias[f"{rows}/begin"] = self.alias[f"{rows}/size"] = rows
            _node(out, rows, "Slice", [name, f"{rows}/begin", f"{rows}/size"],
                  _attr(T=op.outputs[0].dtype, Index=_tf().int32))
        local = self.replicated | self.dep
        for name in sorted(local - set(self.inputs)):
            nd = out.node.add()
            nd.CopyFrom(tr[name])
            nd.name = pre + name
            if name in self.dep:  # a shared node of the replica's batch: on the shared node's device
                self.alias[nd.name] = name
            for k, s in enumerate(nd.input):
                ctrl, src, idx = _parse(s)
                if src in local:
                    nd.input[k] = ("^" if ctrl else "") + pre + s.lstrip("^")
            if "_class" in nd.attr:
                locs = [x.decode() for x in nd.attr["_class"].list.s]
                del nd.attr["_class"].list.s[:]
                nd.attr["_class"].list.s.extend(
                    (f"loc:@{pre}{x[5:]}" if x.startswith("loc:@") and x[5:] in local else x).encode() for x in locs)

    def _shared_inputs(self, nd) -> None:
        """A shared node's inputs from replicated nodes read their weighted sum over the replicas."""
        for k, s in enumerate(nd.input):
            ctrl, src, idx = _parse(s)
            if src not in self.replicated:
                continue
            nd.input[k] = "^" + self._wait(src) if ctrl else self._reduce(src, idx)

    def _reduce(self, src: str, idx: int) -> str:
        """The node summing sum_r (b_r / b) · rep<r>/src:idx, on ``<src>/allreduce``'s device."""
        if (src, idx) in self._reduced:
            return self._reduced[(src, idx)]
        op = f"{src}/allreduce"
        name = op if not any(s == src for s, _ in self._reduced) else f"{op}_{idx}"
        dtype = self.graph_op(src).outputs[idx].dtype
        if not dtype.is_floating:
            raise NotImplementedError(f"execute: replicas of {src!r} feed shared state with a {dtype.name} tensor, "
                                      "which cannot be averaged")
        self._weighted(name, [f"rep{r}/{src}:{idx}" for r in range(self.n)], dtype, op)
        self._reduced[(src, idx)] = name
        return name

    def _wait(self, src: str) -> str:
        """A node that runs after every replica of ``src`` (a control input of a shared node)."""
        key = (src, -1)
        if key not in self._reduced:
            name = f"{src}/allreduce" + ("" if not any(s == src for s, _ in self._reduced) else "_wait")
            _node(self._out, name, "NoOp", [f"^rep{r}/{src}" for r in range(self.n)], {})
            self.alias[name] = f"{src}/allreduce"
            self._reduced[key] = name
        return self._reduced[key]

    def _weighted(self, name: str, parts: list[str], dtype, device_of: str) -> None:
        out = self._out
        muls = []
        for r, part in enumerate(parts):
            w, m = f"{name}/w{r}", f"{name}/mul{r}"
            _scalar(out, w, self.sizes[r] / self.batch, dtype)
            _node(out, m, "Mul", [part, w], _attr(T=dtype))
            muls.append(m)
            self.alias[w] = self.alias[m] = device_of
        _node(out, name, "AddN", muls, _attr(N=self.n, T=dtype))
        if name != device_of:
            self.alias[name] = device_of

    def _output(self, t) -> None:
        """The fetched ``t`` (the loss) as the batch-weighted sum of the replicas' values."""
        src, idx = _tensor(t.name)
        if src not in self.replicated:
            return
        name = f"{src}/replicas"
        self._weighted(name, [f"rep{r}/{src}:{idx}" for r in range(self.n)], t.dtype, f"rep0/{src}")
        self.renamed[src] = name


@dataclass
class ChainedRewrite:
    """The data-parallel rewrite, then the split rewrite of a result that splits replicas' ops."""

    first: ReplicaRewrite
    then: GraphRewrite

    def node(self, name: str) -> str:
        return self.first.node(self.then.node(name))

    def tensor(self, name: str) -> str:
        return self.then.tensor(self.first.tensor(name))

    def graph_def(self, gd):
        return self.then.graph_def(self.first.graph_def(gd))


def rewrite_for(step: TrainStep, batch: int, g: Instance) -> Any:
    """The rewrite that runs the FastT graph ``g``: data-parallel (``extra.data_parallel``), then split
    (``extra.splits``), or split alone."""
    if not g.extra.get(DP_KEY):
        return GraphRewrite(step, batch, g)
    first = ReplicaRewrite(step, batch, g)
    if not g.extra.get("splits"):
        return first
    return ChainedRewrite(first, GraphRewrite(step, batch, g, graph_op=first.graph_op))


def result_graph(inst: Instance, res, step: TrainStep, batch: int | None) -> tuple[Instance, Any, int]:
    """(the graph a Result was computed on, the rewrite that runs it or None, the batch): ``inst`` itself
    for a result with no transform, the FastT graph (data-parallel replicas, splits) for OS-DPOS's."""
    tr = getattr(res, "transform", None)
    if tr is None:
        return inst, None, batch if batch is not None else int(inst.extra.get("tf", {}).get("batch", 0)) or 1
    if tr.kind != "fastt":
        raise NotImplementedError(f"execute: results on a {tr.kind!r} rewrite of the graph cannot run yet")
    if batch is None:
        batch = int(tr.base.extra.get("tf", {}).get("batch", 0)) or 1
    return res.instance, rewrite_for(step, batch, res.instance), batch


def describe(rep, rewrite, step: TrainStep):
    """``rep`` (an ExecReport) with ``extra["data_parallel"]`` when ``rewrite`` replicated the step: the
    replicas, their rows and, with batch normalisation, why the loss then differs."""
    dp = rewrite if isinstance(rewrite, ReplicaRewrite) else getattr(rewrite, "first", None)
    if dp is not None:
        bn = sum(1 for v in step.variables.values() if str(getattr(v, "name", "")).endswith("moving_mean"))
        rep.extra[DP_KEY] = {"replicas": dp.n, "rows": dp.sizes, "batch_norm_layers": bn}
        if bn:
            rep.extra[DP_KEY]["note"] = ("each replica normalises by its own rows' batch statistics, so the loss "
                                         "differs from the single-device step's by design")
    return rep


def execute_result(inst: Instance, res, step: TrainStep, batch: int | None = None, **kw):
    """:func:`dplace.runtime.execute.execute` of a Result on the graph it was computed on
    (:func:`result_graph`)."""
    from .execute import execute

    g, rewrite, batch = result_graph(inst, res, step, batch)
    return describe(execute(g, res, step, batch, rewrite=rewrite, **kw), rewrite, step)
