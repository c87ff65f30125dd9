"""Standard Evaluation (Celeritas §4.2): measure per-op times of a training step, fill the instance.

``op_times`` runs the step under TensorFlow's profiler and parses its trace (xplane): every op event
is named ``"<node name>:<op type>"``; an op's time is the median over the profiled steps of its summed
event durations in that step. ``profile`` = extract + op_times. ``regress`` is the small-batch linear
regression of §4.2.1: per-op time and memory fitted as ``a + b * batch`` on small batches, predicted
for a larger batch; ``regression_error`` compares a prediction with a real measurement (mean relative
deviation over ops, as Celeritas Table 5). ``measure_placed`` is §4.2's step 2: the large batch itself
run under the sequential (standard_evaluation) placement across the devices, times re-measured.
"""
from __future__ import annotations

import glob
import os
import statistics
import tempfile
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from dplace.instance.model import Instance, Link, Op

from .extract import GiB, PCIE, extract
from .fit import fit_line
from .xplane import xplane_events
from .zoo import TrainStep, _tf, tf_device

Progress = Callable[[str, int, int], None]  # (stage, done, total)


def _noop(stage: str, done: int, total: int) -> None:
    pass


def parse_xplane(path: str, steps: int) -> dict[str, float]:
    """µs per node from one xplane file holding ``steps`` runs of a step: the events of a node are
    sorted in time, cut into ``steps`` equal runs, summed per run; the median run is kept."""
    host, kernels = xplane_events(path)
    out: dict[str, float] = {}
    for source in (host, kernels):  # device kernel times replace host launch times
        for node, evs in source.items():
            evs.sort()
            k = len(evs)
            if steps > 1 and k % steps == 0:
                per = k // steps
                runs = [sum(d for _, d in evs[i * per:(i + 1) * per]) for i in range(steps)]
                out[node] = statistics.median(runs) / 1e6
            else:
                out[node] = sum(d for _, d in evs) / max(1, steps) / 1e6
    return out


def op_times(step: TrainStep, batch: int, *, steps: int = 5, warmup: int = 2, device: str | None = None,
             progress: Progress = _noop) -> dict[str, float]:
    """µs per graph node of ``step`` at ``batch``, unplaced (or on ``device``), median over ``steps``."""
    tf = _tf()
    fn = step.concrete(batch)
    x, y = step.inputs(batch)
    with tf.device(tf_device(device) if device else None):
        return _profiled(lambda: fn(x, y).numpy(), steps, warmup, progress)


def _profiled(call: Callable[[], Any], steps: int, warmup: int, progress: Progress) -> dict[str, float]:
    """``warmup`` untimed calls, then ``steps`` under the profiler: µs per node (:func:`parse_xplane`)."""
    tf = _tf()
    total = warmup + steps
    for i in range(warmup):
        call()
        progress("warm-up", i + 1, total)
    with tempfile.TemporaryDirectory(prefix="dplace-prof-") as logdir:
        tf.profiler.experimental.start(logdir)
        try:
            for i in range(steps):
                call()
                progress("profile", warmup + i + 1, total)
        finally:
            tf.profiler.experimental.stop()
        files = glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb"))
        if not files:
            raise RuntimeError(f"profiler wrote no xplane file under {logdir}")
        return parse_xplane(sorted(files)[-1], steps)


def measure_placed(inst: Instance, step: TrainStep, batch: int | None = None, *, steps: int = 5, warmup: int = 2,
                   progress: Progress = _noop) -> Instance:
    """Celeritas §4.2 Standard Evaluation, step 2: run the large batch itself under the sequential
    placement (``standard_evaluation``: DFS-TOPO order filling one device to its memory, then the next)
    on ``inst``'s devices and take the op times from that run; memory stays as ``inst`` has it (the
    step-1 regression, linear in the batch). Returns ``inst`` with the new times; its ``tf.profile``
    records ``step2`` (devices used, whether the placement kept memory)."""
    from dplace.heuristics.celeritas import fill_placement
    from dplace.heuristics.orders import dfs_topo_order
    from dplace.schedule.simulate import simulate

    from .execute import _call, _graph_fn, _variables

    tf = _tf()
    if batch is None:
        batch = int(inst.extra.get("tf", {}).get("batch", 0)) or 1
    pl = fill_placement(inst, dfs_topo_order(inst))
    node_dev = {op.extra.get("tf_node", op.id): inst.devices[pl[o]].name for o, op in enumerate(inst.ops)}
    fn, caps = _graph_fn(step, batch, lambda node: node_dev[node])
    handles = _variables(step, caps, lambda node: node_dev[node])
    x, y = step.inputs(batch)
    with tf.device(tf_device(inst.devices[0].name)):
        x, y = tf.identity(x), tf.identity(y)
    times = _profiled(lambda: _call(fn, x, y, handles), steps, warmup, progress)
    out = with_times(inst, times)
    meta = dict(out.extra.get("tf", {}))
    prof = dict(meta.get("profile", {}))
    prof["step2"] = {"placement": "standard_evaluation", "steps": steps, "warmup": warmup,
                     "devices_used": sorted({inst.devices[d].name for d in pl}),
                     "memory_ok": simulate(inst, pl).memory_ok,
                     "ops_timed": sum(1 for node in node_dev if node in times)}
    meta["profile"] = prof
    return out.replace(extra={**out.extra, "tf": meta})


def with_times(inst: Instance, times: dict[str, float], memory: dict[str, float] | None = None) -> Instance:
    """A copy of ``inst`` whose op times (µs) come from ``times`` (by ``tf_node``; missing -> 0) and,
    when given, memory from ``memory``."""
    ops = []
    for op in inst.ops:
        node = op.extra.get("tf_node", op.id)
        t = max(0.0, float(times.get(node, 0.0)))
        m = op.memory if memory is None else max(0, int(round(memory.get(node, op.memory))))
        ops.append(Op(op.id, round(t, 3), m, op.type, op.colocation, op.device, op.extra))
    return inst.replace(ops=ops)


def profile(step: TrainStep, batch: int, devices: Iterable[str] = ("CPU:0",), *, memory: int = 8 * GiB,
            link: Link = PCIE, steps: int = 5, warmup: int = 2, progress: Progress = _noop,
            name: str | None = None) -> Instance:
    """Extract ``step`` at ``batch`` and fill its op times from the profiler (Standard Evaluation)."""
    devices = list(devices)
    inst = extract(step, batch, devices, memory=memory, link=link, name=name)
    times = op_times(step, batch, steps=steps, warmup=warmup, device=devices[0], progress=progress)
    out = with_times(inst, times)
    meta = dict(out.extra["tf"])
    meta["profile"] = {"steps": steps, "warmup": warmup, "device": devices[0], "statistic": "median",
                       "ops_timed": sum(1 for op in inst.ops if op.extra["tf_node"] in times)}
    return out.replace(extra={**out.extra, "tf": meta})


# ------------------------------------------------------------------ small-batch regression (§4.2.1)
def _fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least squares ``y = a + b x`` (:func:`dplace.runtime.fit.fit_line`); one point: proportional
    ``b = y / x``."""
    if len(xs) == 1:
        return 0.0, ys[0] / xs[0]
    return fit_line(xs, ys)


@dataclass
class Measurement:
    batch: int
    times: dict[str, float]  # µs per node
    memory: dict[str, float]  # bytes per node


def measure(step: TrainStep, batch: int, *, steps: int = 5, warmup: int = 2, device: str | None = None,
            progress: Progress = _noop) -> Measurement:
    inst = extract(step, batch)
    times = op_times(step, batch, steps=steps, warmup=warmup, device=device, progress=progress)
    return Measurement(batch, times, {op.id: float(op.memory) for op in inst.ops})


def predict(small: list[Measurement], batch: int) -> Measurement:
    """Per node, ``a + b * batch`` fitted on the small-batch measurements (clipped at 0)."""
    xs = [float(m.batch) for m in small]
    nodes = set(small[0].memory)
    times, memory = {}, {}
    for node in nodes:
        a, b = _fit(xs, [m.times.get(node, 0.0) for m in small])
        times[node] = max(0.0, a + b * batch)
        a, b = _fit(xs, [m.memory.get(node, 0.0) for m in small])
        memory[node] = max(0.0, a + b * batch)
    return Measurement(batch, times, memory)


def regress(step: TrainStep, batch: int, small_batches: Iterable[int] = (1, 2, 4), devices: Iterable[str] = ("CPU:0",),
            *, memory: int = 8 * GiB, link: Link = PCIE, steps: int = 5, warmup: int = 2,
            progress: Progress = _noop, name: str | None = None) -> Instance:
    """The instance at ``batch`` estimated from profiles at ``small_batches`` (the batch itself is traced,
    for the graph and edge sizes, but never run)."""
    devices = list(devices)
    small = [measure(step, b, steps=steps, warmup=warmup, device=devices[0], progress=progress)
             for b in small_batches]
    pred = predict(small, batch)
    inst = extract(step, batch, devices, memory=memory, link=link, name=name)
    out = with_times(inst, pred.times, pred.memory)
    meta = dict(out.extra["tf"])
    meta["profile"] = {"estimated_from_batches": [m.batch for m in small], "steps": steps, "warmup": warmup,
                       "device": devices[0], "statistic": "median, then least squares a + b*batch per op"}
    return out.replace(extra={**out.extra, "tf": meta})


@dataclass
class RegressionError:
    model: str
    batch: int
    small_batches: list[int]
    mem_dev: float  # mean relative deviation of memory over ops with memory > 0
    time_dev: float  # mean relative deviation of time over ops with measured time >= min_us
    time_dev_weighted: float  # sum |pred - real| / sum real (time-weighted)
    step_pred_us: float  # sum of predicted op times
    step_real_us: float  # sum of measured op times
    n_mem: int
    n_time: int


def regression_error(pred: Measurement, real: Measurement, *, model: str = "", small_batches: list[int] | None = None,
                     min_us: float = 1.0) -> RegressionError:
    mem = [abs(pred.memory.get(k, 0.0) - v) / v for k, v in real.memory.items() if v > 0]
    tt = [(pred.times.get(k, 0.0), v) for k, v in real.times.items() if v >= min_us]
    td = [abs(p - v) / v for p, v in tt]
    tot = sum(v for _, v in tt)
    return RegressionError(
        model, real.batch, list(small_batches or []), sum(mem) / max(1, len(mem)), sum(td) / max(1, len(td)),
        sum(abs(p - v) for p, v in tt) / tot if tot else 0.0,
        sum(pred.times.values()), sum(real.times.values()), len(mem), len(td),
    )
