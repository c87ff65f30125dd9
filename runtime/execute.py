"""Run a placement on TensorFlow and measure it (Celeritas §6.3: drop 5 warm-up steps, average 50).

The step's GraphDef gets ``node.device`` from the Result's placement and is imported as a function;
each variable is created on the device of its colocation group (its placeholder's device) from the
values it had before any step. Verification reads the graphs TensorFlow actually executed (the
per-device partition graphs of the run metadata), not the request: every op found on another device
than placed is listed. Soft placement is off, so TensorFlow errors out rather than moving an op.
The loss of the first two steps must equal the unplaced run's (same start values, same data).

Execution order (FastT §6.1 "Order Enforcement"): when the Result carries a per-device order, it is
enforced with control dependencies, each op on a device depending on the one before it in the
device's list (FastT's first implementation; the paper later moved to executor priorities, which
need a modified TensorFlow). Input and variable placeholders are left out of the chains. One extra
step then runs under TensorFlow's profiler and the ops' measured start times, per placed device, are
compared with the order: ``order_matched`` says whether every device ran its traced ops in the
Result's sequence. Without an order, TensorFlow's own executor order is used and the prediction is the
simulator's order-free makespan.
"""
from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable

from dplace import interrupt
from dplace.errors import InvalidInstanceError
from dplace.instance.model import Instance
from dplace.result import Result
from dplace.schedule.simulate import as_placement, simulate

from .zoo import TrainStep, _tf, ensure_logical_cpus, short_device, tf_device


@dataclass
class ExecReport:
    model: str
    batch: int
    devices: list[str]
    steps: int
    warmup: int
    step_us_mean: float
    step_us_std: float
    step_us_median: float
    predicted_us: float  # dplace.simulate makespan of the placement without an order, as TF runs it (µs)
    ops_moved: list[tuple[str, str, str]]  # (node, placed, ran on)
    ops_not_run: int  # instance ops absent from every executed partition graph (e.g. folded constants)
    not_run_types: dict[str, int]  # their op types
    ops_per_device: dict[str, int]  # instance ops found per device in the executed graphs (and variables)
    loss_ref: list[float]
    loss_placed: list[float]
    loss_ok: bool
    extra: dict[str, Any] = field(default_factory=dict)
    order_enforced: bool = False  # the Result's per-device order was added as control dependencies
    order_matched: bool | None = None  # measured per-device start order == the Result's (None: not enforced)
    order_mismatches: list[tuple[str, str, str]] = field(default_factory=list)  # (device, expected, ran first)
    ran_on: dict[str, str] = field(default_factory=dict, repr=False)  # node -> device it ran on (cluster runs)
    trace: Any = field(default=None, repr=False)  # cluster runs: (StepRecord of the traced step, its wall µs)

    @property
    def ok(self) -> bool:
        """No op moved, the loss agrees and, when an order was enforced, every device ran it."""
        return not self.ops_moved and self.loss_ok and self.order_matched is not False

    def to_dict(self) -> dict[str, Any]:
        d = asdict(replace(self, ran_on={}, trace=None))  # neither is copied: both are large
        d.pop("ran_on")
        d.pop("trace")
        d["ops_moved_count"] = len(self.ops_moved)
        d["ok"] = self.ok
        return d


def _graph_fn(step: TrainStep, batch: int, device_of: Callable[[str], str] | None,
              after: dict[str, str] | None = None, rewrite=None):
    """(callable(x, y, *handles), placeholder names of the captured variables) for the step's graph
    with every node's device set by ``device_of`` (None: no device, TF's default placement) and, for
    each node in ``after``, a control dependency on the node it names; ``rewrite``: a
    :class:`dplace.runtime.split.GraphRewrite` applied to the GraphDef first."""
    tf = _tf()
    cf = step.concrete(batch)
    graph = cf.graph
    gd = graph.as_graph_def()
    if rewrite is not None:
        gd = rewrite.graph_def(gd)
    for nd in gd.node:
        nd.device = tf_device(device_of(nd.name)) if device_of else ""
        if after and nd.name in after:
            nd.input.append("^" + after[nd.name])
    wrapped = tf.compat.v1.wrap_function(lambda: tf.compat.v1.import_graph_def(gd, name=""), [])
    g = wrapped.graph
    fn = wrapped.prune(
        feeds=[g.get_tensor_by_name(t.name) for t in graph.inputs],
        fetches=[g.get_tensor_by_name(rewrite.tensor(t.name) if rewrite else t.name) for t in graph.outputs],
    )
    names = [t.op.name for t in graph.internal_captures]
    return fn, list(zip(names, cf.captured_inputs))


def _variables(step: TrainStep, caps, device_of: Callable[[str], str] | None) -> list[Any]:
    """The captured inputs to feed: a fresh variable with the step's start value on its
    placeholder's device for each variable; captured constants as they are, copied to their device."""
    tf = _tf()
    out = []
    for node, ext in caps:
        var = step.variable_of(ext)
        with tf.device(tf_device(device_of(node)) if device_of else None):
            if var is None:
                out.append(tf.identity(ext))
            else:
                out.append(tf.Variable(step.initial[id(var.handle)], name=node.replace("/", "_")[-60:]))
    return out


def _call(fn, x, y, feeds) -> float:
    tf = _tf()
    try:
        out = fn(x, y, *[getattr(f, "handle", f) for f in feeds])
    except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError, tf.errors.UnimplementedError) as exc:
        msg = str(exc.message if hasattr(exc, "message") else exc).strip().splitlines()[0][:300]
        raise InvalidInstanceError(f"execute: TensorFlow cannot run this placement: {msg}") from None
    if isinstance(out, (list, tuple)):
        out = out[0]
    return float(out.numpy())


def reference_losses(step: TrainStep, batch: int, n: int) -> list[float]:
    """Losses of the first ``n`` steps with no device requested (TensorFlow's default placement);
    kept on ``step`` since they do not depend on any placement."""
    cache = step.__dict__.setdefault("_reference_losses", {})
    if (batch, n) in cache:
        return list(cache[(batch, n)])
    fn, caps = _graph_fn(step, batch, None)
    handles = _variables(step, caps, None)
    x, y = step.inputs(batch)
    cache[(batch, n)] = [_call(fn, x, y, handles) for _ in range(n)]
    return list(cache[(batch, n)])


def execute(inst: Instance, placement: Result | Any, step: TrainStep, batch: int | None = None, *,
            steps: int = 50, warmup: int = 5, loss_steps: int = 2, rtol: float = 1e-3, atol: float = 1e-5,
            enforce_order: bool = True, progress: Callable[[str, int, int], None] | None = None,
            rewrite=None) -> ExecReport:
    """Run ``placement`` (a Result or a placement accepted by ``dplace.simulate``) of ``inst`` on the
    devices named in it, ``warmup`` untimed then ``steps`` timed steps, and verify it.

    Loss check: the first step's loss (same weights, same data) and the second's (after one update)
    must match the unplaced run's within ``rtol`` (``rewrite``: the graph of ``inst`` is the step's graph
    rewritten, :class:`dplace.runtime.split.GraphRewrite`, its added nodes placed by ``rewrite.node``). Later steps are not compared: reduction order differs
    between runs at the 1e-5 level and training amplifies it (ResNet50, batch 8: 7e-6 relative at step
    2, 1-3% at step 3), while a lost or misplaced update changes step 2 by far more than 1e-3."""
    tf = _tf()
    from tensorflow.python.eager import context

    result_makespan = None
    order = None
    if batch is None:
        batch = int(inst.extra.get("tf", {}).get("batch", 0)) or 1
    if isinstance(placement, Result):
        result_makespan = placement.makespan
        if placement.placement is None:
            raise InvalidInstanceError(f"result: method {placement.method!r} has no placement ({placement.status})")
        order = placement.order if enforce_order else None
        placement = placement.placement
    pl = as_placement(inst, placement)
    # without an order TensorFlow's executor runs ops as they become ready, which is what
    # dplace.simulate models without an order; with one, the order is enforced and simulated
    predicted = simulate(inst, pl, order).makespan
    cpus = [d.name for d in inst.devices if d.name.upper().startswith("CPU:")]
    have = ensure_logical_cpus(1 + max((int(c.split(":")[1]) for c in cpus), default=0))
    present = {short_device(d.name) for d in tf.config.list_logical_devices()}
    for dev in inst.devices:
        if dev.name not in present:
            more = f" (this process has {have} logical CPUs)" if dev.name in cpus else ""
            raise InvalidInstanceError(
                f"devices: instance device {dev.name!r} is not present{more}; present: {', '.join(sorted(present))}"
            )
    types = {op.extra.get("tf_node", op.id): str(op.type) for op in inst.ops}
    node_dev = {op.extra.get("tf_node", op.id): inst.devices[pl[o]].name for o, op in enumerate(inst.ops)}

    def device_of(node: str) -> str:
        node = rewrite.node(node) if rewrite else node
        if node not in node_dev:
            raise InvalidInstanceError(f"placement: graph node {node!r} is not an op of instance {inst.name!r}")
        return node_dev[node]

    fed = {t.op.name for t in step.concrete(batch).graph.inputs}  # step inputs and captured tensors
    chains = _order_chains(inst, order, fed) if order is not None else None
    loss_ref = reference_losses(step, batch, loss_steps)
    fn, caps = _graph_fn(step, batch, device_of, {b: a for ch in (chains or []) for a, b in zip(ch, ch[1:])}, rewrite)
    handles = _variables(step, caps, device_of)
    x, y = step.inputs(batch)
    in_nodes = [t.op.name for t in step.concrete(batch).graph.inputs[:2]]
    with tf.device(tf_device(device_of(in_nodes[0]))):  # an input's _Arg runs where its tensor lives
        x = tf.identity(x)
    with tf.device(tf_device(device_of(in_nodes[1]))):
        y = tf.identity(y)

    context.enable_run_metadata()
    try:
        context.export_run_metadata()  # drain what earlier runs left in the buffer
        first = _call(fn, x, y, handles)  # instantiation: the partition graphs are recorded here
        meta = context.export_run_metadata()
    finally:
        context.disable_run_metadata()
    ran_on: dict[str, str] = {}
    for fg in meta.function_graphs:
        for part in fg.partition_graphs:
            for nd in part.node:
                if nd.name in node_dev and nd.device:
                    ran_on.setdefault(nd.name, short_device(nd.device))
    for (node, _), feed in zip(caps, handles):  # captured inputs become _Arg nodes: check the feeds
        if node in node_dev and node not in ran_on and getattr(feed, "device", ""):
            ran_on[node] = short_device(feed.device)
    moved = sorted((n, d, ran_on[n]) for n, d in node_dev.items() if n in ran_on and ran_on[n] != d)
    per_dev: dict[str, int] = {}
    for n, d in ran_on.items():
        per_dev[d] = per_dev.get(d, 0) + 1

    untimed = max(warmup, loss_steps)
    total = untimed + steps
    losses, times = measured_steps(lambda: _call(fn, x, y, handles), untimed=untimed, steps=steps,
                                   loss_steps=loss_steps, total=total, progress=progress, losses=[first])
    matched, mismatches = None, []
    if chains is not None:
        if progress:
            progress("order check", total, total)
        matched, mismatches = _order_check(inst, chains, _start_times(fn, x, y, handles))
    loss_ok, loss_diff = loss_verdict(losses[:loss_steps], loss_ref, rtol, atol)
    meta_tf = inst.extra.get("tf", {})
    return ExecReport(
        model=step.name, batch=batch, devices=[d.name for d in inst.devices], steps=steps, warmup=untimed,
        step_us_mean=statistics.fmean(times) if times else float("nan"),
        step_us_std=statistics.pstdev(times) if len(times) > 1 else 0.0,
        step_us_median=statistics.median(times) if times else float("nan"),
        predicted_us=predicted, ops_moved=moved, ops_not_run=sum(1 for n in node_dev if n not in ran_on),
        not_run_types=dict(Counter(types[n] for n in node_dev if n not in ran_on).most_common()),
        ops_per_device=dict(sorted(per_dev.items())), loss_ref=loss_ref, loss_placed=losses[:loss_steps],
        loss_ok=loss_ok, extra={"loss_max_rel_diff": loss_diff, "instance": inst.name,
                                "instance_batch": meta_tf.get("batch"), "result_makespan_us": result_makespan},
        order_enforced=chains is not None, order_matched=matched, order_mismatches=mismatches,
    )


def measured_steps(call: Callable[[], float], *, untimed: int, steps: int, loss_steps: int, total: int,
                   progress: Callable[[str, int, int], None] | None = None,
                   losses: list[float] | None = None,
                   timer: Callable[[], float] | None = None) -> tuple[list[float], list[float]]:
    """The measured-step loop of both executors: ``untimed`` warm-up steps (the first ``loss_steps``
    losses kept; ``losses`` holds those of steps already run), then ``steps`` timed ones. Returns
    (losses, per timed step its wall time in µs: measured around ``call``, or ``timer()`` after it, the
    call's own measure, for a call run in another thread)."""
    losses = list(losses or [])
    for i in range(len(losses), untimed):
        interrupt.stop_point()
        v = call()
        if i < loss_steps:
            losses.append(v)
        if progress:
            progress("warm-up", i + 1, total)
    times = []
    for i in range(steps):
        interrupt.stop_point()
        t0 = time.perf_counter()
        call()
        times.append((time.perf_counter() - t0) * 1e6 if timer is None else timer())
        if progress:
            progress("timed", untimed + i + 1, total)
    return losses, times


def loss_verdict(losses: list[float], loss_ref: list[float], rtol: float, atol: float) -> tuple[bool, float]:
    """(every loss finite and within ``rtol``/``atol`` of the single-device step's, the largest relative
    difference)."""
    pairs = list(zip(losses, loss_ref))
    ok = len(pairs) == len(loss_ref) and all(
        math.isfinite(a) and math.isclose(a, b, rel_tol=rtol, abs_tol=atol) for a, b in pairs)
    return ok, max((abs(a - b) / max(abs(b), atol) for a, b in pairs), default=0.0)


def _order_chains(inst: Instance, order: list[list[int]], fed: set[str] = frozenset()) -> list[list[str]]:
    """Per device, the graph nodes of the order to chain with control dependencies. Nodes that are fed
    to the step's function rather than run — placeholders, and every name in ``fed`` (the graph's
    inputs: the step's inputs and all captured tensors, including small captured constants that the
    graph shows as ``Const`` ops) — are left out: the pruned function takes them as arguments, so a
    control dependency on one is met when the step starts and would cut the device's chain there."""
    def node(o: int) -> str:
        return inst.ops[o].extra.get("tf_node", inst.ops[o].id)

    return [[node(o) for o in ops if inst.ops[o].type != "Placeholder" and node(o) not in fed] for ops in order]


def _start_times(fn, x, y, handles) -> dict[str, int]:
    """First start (ps) of every node in one profiled step."""
    import glob
    import os
    import tempfile

    from .xplane import xplane_events

    tf = _tf()
    with tempfile.TemporaryDirectory(prefix="dplace-order-") as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            _call(fn, x, y, handles)
        finally:
            tf.profiler.experimental.stop()
        files = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
        if not files:
            raise RuntimeError(f"profiler wrote no xplane file under {logdir}")
        host, kernels = xplane_events(sorted(files)[-1])
    out: dict[str, int] = {}
    for src in (host, kernels):
        for node, evs in src.items():
            out[node] = min(out.get(node, min(evs)[0]), min(evs)[0])
    return out


def _order_check(inst: Instance, chains: list[list[str]], start: dict[str, int]) -> tuple[bool, list]:
    """Did every device run its traced nodes in the chain's sequence? Mismatches: (device, the node the
    order wanted next, the node that started first instead), the first per device."""
    bad = []
    for d, chain in enumerate(chains):
        want = [n for n in chain if n in start]
        got = sorted(want, key=lambda n: start[n])
        if got != want:
            i = next(i for i, (a, b) in enumerate(zip(want, got)) if a != b)
            bad.append((inst.devices[d].name, want[i], got[i]))
    return not bad, bad
