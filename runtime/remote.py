"""A placed training step run on a TensorFlow cluster (:mod:`dplace.runtime.cluster`) through a TF1
session, and what the cluster's own record says about the run.

The step's GraphDef gets ``node.device`` from the placement (a task device such as
``/job:worker/replica:0/task:1/device:CPU:0``) and is imported into a graph in which every captured
variable becomes a ``VarHandleOp`` on its colocation group's device, initialised once from the values it
had before any step (so the loss can be compared with a single-device step). The session's master is task
0; the client opens no port. Grappler and the classic graph optimizer are off, soft placement is off: the
graph that runs is the graph that was placed, or TensorFlow refuses it.

The record: a step run with ``FULL_TRACE`` returns step stats that each worker's executor wrote for the
ops it ran (device, start, end, output allocations). :class:`StepRecord` reads them: where each node ran,
when, and the bytes its outputs allocated.
"""
from __future__ import annotations

import re
import statistics
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable

from dplace import interrupt
from dplace.errors import InvalidInstanceError

from . import watched
from .cluster import LOST_WORKER_WAIT_S, Cluster, ClusterError
from .recvcost import fit_receive_cost, watched_call
from .zoo import TrainStep, _tf


def canonical(device: str) -> str:
    """'/job:worker/task:1/device:CPU:0' -> '/job:worker/replica:0/task:1/device:CPU:0'."""
    tf = _tf()
    spec = tf.DeviceSpec.from_string(device)
    return spec.replace(replica=spec.replica or 0, task=spec.task or 0,
                        device_index=spec.device_index or 0).to_string()


_RECV = re.compile(r"\[(\d+)B\] \[[^]]*\] edge_\d+_(\S+) from (\S+) to (\S+)\s*$")


@dataclass
class StepRecord:
    """What the workers recorded for one traced step: per node (by name) the device it ran on, start and
    end (µs, one clock: the workers of a local cluster share the machine's), and output bytes."""

    device: dict[str, str] = field(default_factory=dict)
    start_us: dict[str, float] = field(default_factory=dict)
    end_us: dict[str, float] = field(default_factory=dict)
    out_bytes: dict[str, int] = field(default_factory=dict)  # requested bytes of the outputs it allocated
    temp_bytes: dict[str, int] = field(default_factory=dict)  # allocator bytes it used, where TF records them
    op_us: dict[str, float] = field(default_factory=dict)  # the kernel's own time (op start to op end)
    op_type: dict[str, str] = field(default_factory=dict)  # from the timeline label "name = Type(inputs)"
    op_end_us: dict[str, float] = field(default_factory=dict)  # when its kernel ended: its outputs exist
    # each tensor a worker received (its RecvTensor call): producer node, from and to device, bytes, start
    # and end (µs; the call starts when the receiver asks, before the tensor may exist)
    transfers: list[tuple[str, str, str, int, float, float]] = field(default_factory=list)

    @classmethod
    def from_metadata(cls, md) -> "StepRecord":
        rec = cls()
        for ds in md.step_stats.dev_stats:
            dev = canonical(ds.device)
            for ns in ds.node_stats:
                name = ns.node_name
                start = float(ns.all_start_micros)
                end = start + float(ns.all_end_rel_micros)
                if name == "RecvTensor":  # a worker's gRPC call, not a node: "[64B] [..Mb/s] edge_7_<node> from A to B"
                    m = _RECV.match(ns.timeline_label)
                    if m:
                        rec.transfers.append((m[2], canonical(m[3]), canonical(m[4]), int(m[1]), start, end))
                    continue
                rec.op_us[name] = rec.op_us.get(name, 0.0) + float(ns.op_end_rel_micros - ns.op_start_rel_micros)
                rec.op_end_us[name] = max(rec.op_end_us.get(name, 0.0), start + float(ns.op_end_rel_micros))
                label = ns.timeline_label.split(" = ", 1)
                if len(label) == 2:
                    rec.op_type.setdefault(name, label[1].split("(", 1)[0].strip())
                if name in rec.start_us:  # a node seen twice (e.g. a device listed twice): keep the span
                    rec.start_us[name] = min(rec.start_us[name], start)
                    rec.end_us[name] = max(rec.end_us[name], end)
                else:
                    rec.device[name], rec.start_us[name], rec.end_us[name] = dev, start, end
                ob = sum(int(o.tensor_description.allocation_description.requested_bytes) for o in ns.output)
                if ob:
                    rec.out_bytes[name] = rec.out_bytes.get(name, 0) + ob
                tb = sum(int(m.total_bytes) for m in ns.memory)
                if tb:
                    rec.temp_bytes[name] = rec.temp_bytes.get(name, 0) + tb
        return rec

    def busy(self) -> dict[str, list[tuple[float, float]]]:
        """Per device, its merged busy intervals (µs)."""
        per: dict[str, list[tuple[float, float]]] = {}
        for n, start in self.start_us.items():
            per.setdefault(self.device[n], []).append((start, self.end_us[n]))
        return {d: merge_intervals(iv) for d, iv in per.items()}

    def concurrency(self) -> dict[str, float]:
        """Span of the step, per-device busy time and the time two or more devices were busy at once (µs)."""
        busy = self.busy()
        if not busy:
            return {"span_us": 0.0, "concurrent_us": 0.0}
        events = sorted((t, s) for iv in busy.values() for a, b in iv for t, s in ((a, 1), (b, -1)))
        level, last, both = 0, events[0][0], 0.0
        for t, s in events:
            if level >= 2:
                both += t - last
            level += s
            last = t
        lo = min(a for iv in busy.values() for a, _ in iv)
        hi = max(b for iv in busy.values() for _, b in iv)
        out = {"span_us": hi - lo, "concurrent_us": both}
        out.update({f"busy_us {d}": sum(b - a for a, b in iv) for d, iv in sorted(busy.items())})
        return out


def merge_intervals(iv: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


class SessionStep:
    """The placed step as a session on ``cluster``: ``run()`` -> loss; ``run(trace=True)`` -> (loss,
    :class:`StepRecord`). ``device_of(node)`` gives each graph node's TensorFlow device; ``after`` maps a
    node to the node it must follow (control dependency: the enforced order)."""

    def __init__(self, step: TrainStep, batch: int, cluster: Cluster, device_of: Callable[[str], str],
                 after: dict[str, str] | None = None, *, timeout_s: float = 600.0, rewrite=None):
        tf = _tf()
        self.cluster = cluster
        self.timeout_ms = int(timeout_s * 1000)
        cf = step.concrete(batch)
        graph = cf.graph
        gd = graph.as_graph_def()
        if rewrite is not None:  # a FastT graph: dplace.runtime.replicas.rewrite_for
            gd = rewrite.graph_def(gd)
        for nd in gd.node:
            nd.device = device_of(nd.name)
            if after and nd.name in after:
                nd.input.append("^" + after[nd.name])
        g = tf.Graph()
        input_map, init_feeds, inits = {}, {}, []
        self.stand_in: dict[str, str] = {}  # node of the VarHandleOp that replaces a variable's placeholder -> it
        uid = uuid.uuid4().hex[:12]
        with g.as_default():
            for i, (internal, ext) in enumerate(zip(graph.internal_captures, cf.captured_inputs)):
                node = internal.op.name
                var = step.variable_of(ext)
                with tf.device(device_of(node)), tf.name_scope("dplace_feed"):
                    if var is None:  # a captured constant
                        input_map[node + ":0"] = tf.constant(ext.numpy())
                        continue
                    value = step.initial[id(var.handle)]
                    h = tf.raw_ops.VarHandleOp(dtype=tf.as_dtype(value.dtype), shape=value.shape,
                                               shared_name=f"dplace_{uid}_{i}", container="")
                    ph = tf.compat.v1.placeholder(tf.as_dtype(value.dtype), value.shape)
                    inits.append(tf.raw_ops.AssignVariableOp(resource=h, value=ph))
                    init_feeds[ph] = value
                    input_map[node + ":0"] = h
                    self.stand_in[h.op.name] = node
            tf.compat.v1.import_graph_def(gd, input_map=input_map, name="")
        x, y = step.inputs(batch)
        self.feed = {graph.inputs[0].name: x.numpy(), graph.inputs[1].name: y.numpy()}
        self.fetch = [rewrite.tensor(t.name) if rewrite else t.name for t in graph.outputs][:1]
        cfg = tf.compat.v1.ConfigProto(allow_soft_placement=False, operation_timeout_in_ms=self.timeout_ms,
                                       isolate_session_state=True)
        cfg.graph_options.rewrite_options.disable_meta_optimizer = True
        cfg.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
        cfg.graph_options.optimizer_options.do_constant_folding = False
        cfg.graph_options.optimizer_options.do_function_inlining = False
        self.broken = False  # the cluster failed under this session: closing it would wait on a dead master
        self.last_us = float("nan")  # the last call's wall time, measured in its own thread
        self.sess = None
        # a session opened on a dead master waits for it with no time limit: opened watched, as every call
        self.sess = self._guard(lambda: watched.cluster_session(cluster.target, g, cfg))
        self._guard(lambda: self.sess.run(inits, init_feeds))

    def _guard(self, call: Callable[[], Any]) -> Any:
        """``call()`` (a TensorFlow call on the cluster) watched (:func:`dplace.runtime.watched.call`): a
        worker's death ends it with one error naming the worker, even where TensorFlow would wait."""
        tf = _tf()
        try:
            timed = watched.call(call, self._check_alive)
            self.last_us = timed.us
            return timed.value
        except (ClusterError, KeyboardInterrupt):  # a call may still run (abandoned): never close it
            self.broken = True
            raise
        except (tf.errors.InvalidArgumentError, tf.errors.NotFoundError, tf.errors.UnimplementedError) as exc:
            self._check_alive()
            msg = _first_line(exc)
            raise InvalidInstanceError(f"execute: TensorFlow cannot run this placement: {msg}") from None
        except tf.errors.OpError as exc:  # Unavailable, DeadlineExceeded, Aborted, ...: a worker is gone
            self.broken = True
            self.cluster.check_alive(wait_s=LOST_WORKER_WAIT_S)  # names the worker that died
            raise ClusterError(f"cluster: {type(exc).__name__}: {_first_line(exc)}") from None

    def _check_alive(self) -> None:
        try:
            self.cluster.check_alive()
        except ClusterError:
            self.broken = True
            raise

    def run(self, trace: bool = False):
        tf = _tf()
        interrupt.stop_point()
        self._check_alive()
        level = tf.compat.v1.RunOptions.FULL_TRACE if trace else tf.compat.v1.RunOptions.NO_TRACE
        opts = tf.compat.v1.RunOptions(trace_level=level, timeout_in_ms=self.timeout_ms)
        md = tf.compat.v1.RunMetadata()
        out = self._guard(lambda: self.sess.run(self.fetch, self.feed, options=opts, run_metadata=md))
        loss = float(out[0])
        return (loss, StepRecord.from_metadata(md)) if trace else loss

    def close(self) -> None:
        """Close the session; after a cluster failure, drop it instead: TF_CloseSession (also from the
        session's ``__del__``) would wait on the dead master with no time limit (seen here)."""
        if self.sess is None:
            return
        if not self.broken:
            try:
                self._guard(self.sess.close)
                return
            except Exception:  # a dead cluster (or a close given up on): nothing to release
                pass
        self.sess._closed = True  # TensorFlow's own flag: no close, no delete (the handle is leaked)
        self.sess._session = None


def _first_line(exc: Exception) -> str:
    """The informative line of a TensorFlow error (not its "Graph execution error:" header or traceback)."""
    text = str(getattr(exc, "message", exc)).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("File ", "Graph execution"))]
    keep = [ln for ln in lines if re.search(r"Error|error|Could not|Cannot|cannot", ln)] or lines
    return (keep or [type(exc).__name__])[0][:300]


def median_times(records: list[StepRecord]) -> dict[str, float]:
    """µs per node: the median over the records of its kernel time (op start to op end: without the
    executor's own work around it, which tracing inflates); a node missing from a record counts 0."""
    nodes = set().union(*(r.op_us for r in records)) if records else set()
    return {n: statistics.median([r.op_us.get(n, 0.0) for r in records]) for n in nodes}


# ------------------------------------------------------------------------------ execute on a cluster
def execute(inst, placement, step: TrainStep, batch: int | None, cluster: Cluster, *, order=None, steps: int = 10,
            warmup: int = 3, loss_steps: int = 2, rtol: float = 1e-3, atol: float = 1e-5,
            enforce_order: bool = True, progress: Callable[[str, int, int], None] | None = None, rewrite=None):
    """Run ``placement`` (a Result, or a placement accepted by ``dplace.simulate``) of ``inst`` on
    ``cluster`` (instance device -> task device by ``cluster.map_devices``) with the Result's order (or
    ``order``, per-device op lists, for a bare placement) enforced: ``max(warmup, loss_steps)``
    untimed steps, ``steps`` timed ones, then one traced step read back from the workers' own step stats.

    Returns an :class:`dplace.runtime.execute.ExecReport`: ``ops_moved`` lists every op the record
    shows on another device than placed; ``order_matched`` compares the record's start times with the
    enforced order; the loss of the first ``loss_steps`` steps is compared with a single-device step's
    (the client's own CPU, same start values and data); ``extra`` holds the record's concurrency (time
    two or more workers were busy at once), the cluster and, for local workers, the measured memory
    (:func:`dplace.runtime.memory.measure_step`). ``rewrite``: the graph of ``inst`` is the step's graph
    rewritten (a FastT graph, :func:`dplace.runtime.replicas.rewrite_for`), as in
    :func:`dplace.runtime.execute.execute`."""
    from collections import Counter

    from dplace.result import Result
    from dplace.schedule.simulate import as_placement, simulate

    from .execute import ExecReport, _order_chains, _order_check, loss_verdict, measured_steps, reference_losses
    from .memscore import op_memory_score

    result_makespan = None
    if batch is None:
        batch = int(inst.extra.get("tf", {}).get("batch", 0)) or 1
    if isinstance(placement, Result):
        if placement.placement is None:
            raise InvalidInstanceError(f"result: method {placement.method!r} has no placement ({placement.status})")
        result_makespan = placement.makespan
        order = placement.order
        placement = placement.placement
    if not enforce_order:
        order = None
    pl = as_placement(inst, placement)
    sched = simulate(inst, pl, order)
    cluster = cluster.map_devices([d.name for d in inst.devices])
    tf_of = {d.name: canonical(cluster.devices[d.name]) for d in inst.devices}
    inst_of = {v: k for k, v in tf_of.items()}
    node_dev = {op.extra.get("tf_node", op.id): inst.devices[pl[o]].name for o, op in enumerate(inst.ops)}
    types = {op.extra.get("tf_node", op.id): str(op.type) for op in inst.ops}

    def device_of(node: str) -> str:
        node = rewrite.node(node) if rewrite else node
        if node not in node_dev:
            raise InvalidInstanceError(f"placement: graph node {node!r} is not an op of instance {inst.name!r}")
        return tf_of[node_dev[node]]

    cf = step.concrete(batch)
    fed = {t.op.name for t in cf.graph.inputs}
    chains = _order_chains(inst, order, fed) if order is not None else None
    loss_ref = reference_losses(step, batch, loss_steps)
    after = {b: a for ch in (chains or []) for a, b in zip(ch, ch[1:])}
    untimed = max(warmup, loss_steps)
    total = untimed + steps + 1
    sess = SessionStep(step, batch, cluster, device_of, after, rewrite=rewrite)
    try:
        losses, times = measured_steps(sess.run, untimed=untimed, steps=steps, loss_steps=loss_steps, total=total,
                                       progress=progress, timer=lambda: sess.last_us)
        local = cluster.local
        if local is not None:
            for t in range(len(local.procs)):
                local.ask(t, "reset")
        _, rec = sess.run(trace=True)
        traced_us = sess.last_us
        for stand_in, node in sess.stand_in.items():  # a variable ran where its VarHandleOp ran
            if stand_in in rec.device:
                rec.device.setdefault(node, rec.device[stand_in])
        peaks = _peaks(cluster, inst_of)
        if progress:
            progress("record", total, total)
    finally:
        sess.close()
    ran_on = {n: inst_of.get(d, d) for n, d in rec.device.items() if n in node_dev}
    moved = sorted((n, d, ran_on[n]) for n, d in node_dev.items() if n in ran_on and ran_on[n] != d)
    per_dev = dict(sorted(Counter(ran_on.values()).items()))
    matched, mismatches = (None, [])
    if chains is not None:
        matched, mismatches = _order_check(inst, chains, {n: rec.start_us[n] for n in rec.start_us})
    loss_ok, loss_diff = loss_verdict(losses[:loss_steps], loss_ref, rtol, atol)
    conc = rec.concurrency()
    conc = {inst_of.get(k.split(" ", 1)[1], k) if k.startswith("busy_us ") else k: v for k, v in conc.items()}
    predicted_mem = {d.name: sched.memory[i] for i, d in enumerate(inst.devices)}
    extra = {"loss_max_rel_diff": loss_diff, "instance": inst.name, "result_makespan_us": result_makespan,
             "cluster": {"tasks": cluster.tasks, "devices": cluster.devices, "local": local is not None},
             "record": conc, "memory_peak_measured": peaks, "memory_predicted": predicted_mem,
             "op_memory": op_memory_score(inst, rec),
             "steps_us": times}
    return ExecReport(
        model=step.name, batch=batch, devices=[d.name for d in inst.devices], steps=steps, warmup=untimed,
        step_us_mean=statistics.fmean(times) if times else float("nan"),
        step_us_std=statistics.pstdev(times) if len(times) > 1 else 0.0,
        step_us_median=statistics.median(times) if times else float("nan"),
        predicted_us=sched.makespan, ops_moved=moved, ops_not_run=sum(1 for n in node_dev if n not in ran_on),
        not_run_types=dict(Counter(types[n] for n in node_dev if n not in ran_on).most_common()),
        ops_per_device=per_dev, loss_ref=loss_ref, loss_placed=losses[:loss_steps], loss_ok=loss_ok,
        extra=extra, order_enforced=chains is not None, order_matched=matched, order_mismatches=mismatches,
        ran_on=ran_on, trace=(rec, traced_us),
    )


def _peaks(cluster: Cluster, inst_of: dict[str, str]) -> dict[str, int] | None:
    """Peak bytes of each local worker's CPU allocator since its last reset, per instance device (None
    for a cluster of other hosts, or where TensorFlow keeps no statistics)."""
    local = cluster.local
    if local is None:
        return None
    out = {}
    for dev, tfdev in cluster.devices.items():
        task = int(canonical(tfdev).split("/task:")[1].split("/")[0])
        ans = local.ask(task, "memory").split()
        if len(ans) != 3 or not ans[2].isdigit():
            return None
        out[dev] = int(ans[2])
    return out


# ------------------------------------------------------------------------------ profile for a cluster
def profile(step: TrainStep, batch: int, cluster: Cluster, devices: list[str], *, steps: int = 5, warmup: int = 2,
            comm_sizes: list[int] | None = None, comm_reps: int = 7, memory: int | None = None,
            progress: Callable[[str, int, int], None] | None = None, name: str | None = None,
            receive_probe: dict[str, int] | None = None):
    """The instance of ``step`` at ``batch`` for ``cluster``: op times measured with every op on the
    first device's task (its thread limits), the median over ``steps`` traced steps of each op's time in
    the worker's own step stats; links fitted per ordered pair of devices (:func:`fit_links`); the
    receive cost per tensor, ``transfer_cpu`` (:func:`dplace.runtime.recvcost.fit_receive_cost`), taken
    out of the fitted latencies (a lone transfer's wall time includes it; ``receive_probe``: its
    options); memory
    model checked against the measured run (``tf.profile.memory``: per-device peak, predicted total,
    Celeritas' per-op score)."""
    from .extract import GiB, extract
    from .memscore import op_memory_score
    from .profile import with_times

    cluster = cluster.map_devices(list(devices))
    inst = extract(step, batch, devices, memory=memory or 8 * GiB, name=name)
    first = canonical(cluster.devices[devices[0]])
    sess = SessionStep(step, batch, cluster, lambda node: first)
    local = cluster.local
    total = warmup + steps
    try:
        for i in range(warmup):
            sess.run()
            if progress:
                progress("warm-up", i + 1, total)
        task0 = int(first.split("/task:")[1].split("/")[0])
        if local is not None:
            local.ask(task0, "reset")
        records = []
        for i in range(steps):
            records.append(sess.run(trace=True)[1])
            if progress:
                progress("profile", warmup + i + 1, total)
        peak = None
        if local is not None:
            ans = local.ask(task0, "memory").split()
            peak = int(ans[2]) if len(ans) == 3 and ans[2].isdigit() else None
    finally:
        sess.close()
    times = median_times(records)
    out = with_times(inst, times)
    fits = fit_links(cluster, list(devices), sizes=comm_sizes or comm_sizes_for(inst), reps=comm_reps,
                     progress=progress)
    recv = fit_receive_cost(cluster, list(devices), progress=progress, **(receive_probe or {})) if len(devices) > 1 else None
    tc = recv.us if recv is not None else 0.0
    pairs = dict(out.pairs)
    from dplace.instance.model import Link

    for f in fits:  # a lone transfer's wall time holds the receiver's core time: the model adds it apart
        pairs[(f.src, f.dst)] = Link(round(max(0.0, f.latency - tc), 3), round(f.bandwidth, 3))
    out = out.replace(pairs=pairs, transfer_cpu=tc)
    meta = dict(out.extra["tf"])
    meta["profile"] = {
        "steps": steps, "warmup": warmup, "statistic": "median of the worker's step stats (op start to op end)",
        "cluster": {"tasks": cluster.tasks, "devices": cluster.devices, "local": local is not None,
                    "threads": local.threads if local else None, "cores": local.cores if local else None,
                    "inter_threads": local.inter_threads if local else None},
        "ops_timed": sum(1 for op in inst.ops if op.extra["tf_node"] in times),
        "links": [f.to_dict() for f in fits],
        "receive_cost": recv.to_dict() if recv is not None else None,
        "memory": {"peak_measured": peak, "predicted": sum(inst.mem),
                   "op_memory": op_memory_score(inst, records[-1]) if records else None},
    }
    return out.replace(extra={**out.extra, "tf": meta})


def comm_sizes_for(inst, points: int = 8) -> list[int]:
    """``points`` sizes (bytes, geometric) from the smallest to the largest positive edge of ``inst``
    (at least 4 bytes apart, at most 256 MiB)."""
    sizes = [b for b in inst.ebytes if b > 0]
    lo = max(4, int(min(sizes))) if sizes else 4
    hi = min(256 << 20, max(int(max(sizes)), lo * 4)) if sizes else 4 << 20
    r = (hi / lo) ** (1 / (points - 1))
    return sorted({int(lo * r ** k) // 4 * 4 or 4 for k in range(points)})


@dataclass
class LinkFit:
    src: str
    dst: str
    latency: float  # µs
    bandwidth: float  # bytes/µs
    r2: float
    samples: list[tuple[int, float]]  # (bytes, µs): the pair's copy minus the same-task call

    def to_dict(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "latency": self.latency, "bandwidth": self.bandwidth,
                "r2": self.r2, "samples": self.samples}


def fit_links(cluster: Cluster, devices: list[str], *, sizes: list[int], reps: int = 7,
              progress: Callable[[str, int, int], None] | None = None) -> list[LinkFit]:
    """``latency + bytes / bandwidth`` fitted per ordered pair of ``devices`` on ``cluster``: a float32
    tensor of each size lives on the source (a variable), is copied to the destination and one element
    read there; the median wall time of ``reps`` runs minus that of the same graph with both ends on the
    destination is the transfer. R² of the fit is kept."""
    import numpy as np

    from .commfit import fit_line

    tf = _tf()
    cluster = cluster.map_devices(list(devices))
    pairs = [(a, b) for a in devices for b in devices if a != b]
    total, done = len(pairs) * len(sizes) * 2, 0
    g = tf.Graph()
    runs: dict[tuple[str, str, int], Any] = {}
    init = []
    with g.as_default():
        for a, b in pairs:
            for s in sizes:
                for src in (a, b):  # (a -> b) and (b -> b): the same call without the transfer
                    with tf.device(cluster.devices[src]):
                        v = tf.Variable(tf.zeros((max(1, s // 4),), tf.float32))
                        init.append(v.initializer)
                        x = v.read_value()
                    with tf.device(cluster.devices[b]):
                        runs[(src, b, s, a)] = tf.identity(x)[-1:]
    cfg = tf.compat.v1.ConfigProto(allow_soft_placement=False, isolate_session_state=True,
                                   operation_timeout_in_ms=600_000)
    cfg.graph_options.rewrite_options.disable_meta_optimizer = True
    cfg.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    fits = []
    alive = cluster.check_alive  # every session call watched: a worker's death ends it (runtime/watched.py)
    sess = watched_call(lambda: watched.cluster_session(cluster.target, g, cfg), alive)[0]
    ok = False
    try:
        watched_call(lambda: sess.run(init), alive)
        for a, b in pairs:
            samples = []
            for s in sizes:
                med = {}
                for src in (a, b):
                    fetch = runs[(src, b, s, a)]
                    watched_call(lambda: sess.run(fetch), alive)
                    ts = []
                    for _ in range(reps):
                        interrupt.stop_point()
                        ts.append(watched_call(lambda: sess.run(fetch), alive)[1])  # timed in its thread
                    med[src] = statistics.median(ts)
                    done += 1
                    if progress:
                        progress("commfit", done, total)
                samples.append((s, max(0.0, med[a] - med[b])))
            lat, bw, _ = fit_line(samples)
            ys = np.array([t for _, t in samples])
            pred = np.array([lat + s / bw for s, _ in samples])
            ss_tot = float(((ys - ys.mean()) ** 2).sum())
            r2 = 1.0 - float(((ys - pred) ** 2).sum()) / ss_tot if ss_tot > 0 else 0.0
            fits.append(LinkFit(a, b, lat, bw, r2, samples))
        ok = True
    finally:
        if ok:  # after a failure the master may be dead: closing would wait on it
            watched_call(sess.close, alive)
        else:
            sess._closed, sess._session = True, None
    return fits
