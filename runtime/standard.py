"""Celeritas' Standard Evaluation (§4.2) with memory measured, not assumed.

Step 1 (§4.2.1): per op, time and memory measured at small batches and fitted as ``a + b * batch``,
predicted for the large batch. Times come from the profiler (:func:`dplace.runtime.profile.op_times`);
memory from a traced step on a TensorFlow worker (the bytes each op's outputs allocated plus the
temporaries TensorFlow records, :class:`dplace.runtime.remote.StepRecord`). Step 2 (§4.2.2): the large
batch itself under the sequential placement (``standard_evaluation``), times and memory re-measured.
The estimate's accuracy is Celeritas' score: the median over ops of |estimate − measured| / measured
(:func:`dplace.runtime.memory.op_memory_score`), for the regression and, beside it, for dplace's static
estimate (output bytes from the shapes).

An op that did not run in the traced step (a fed input, a variable's placeholder, a folded constant)
keeps its static bytes: a variable holds its weights whatever the batch. An op that ran without
allocating (a view, a forwarded buffer) measures 0.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from dplace.instance.model import Instance, Link

from .extract import GiB, PCIE, extract
from .profile import Measurement, _noop, op_times, predict, with_times
from .zoo import TrainStep


def traced_bytes(step: TrainStep, batch: int, cluster, device_of: Callable[[str], str], *, warmup: int = 1):
    """(bytes per graph node that ran, the :class:`~dplace.runtime.remote.StepRecord`) of one traced step of
    ``step`` at ``batch`` on ``cluster``, ``warmup`` untimed steps first."""
    from .remote import SessionStep

    sess = SessionStep(step, batch, cluster, device_of)
    try:
        for _ in range(warmup):
            sess.run()
        _, rec = sess.run(trace=True)
    finally:
        sess.close()
    # a variable's placeholder is fed a VarHandleOp that allocates nothing: it is not in rec.device, so
    # it keeps its static bytes (measured_memory)
    return {n: rec.out_bytes.get(n, 0) + rec.temp_bytes.get(n, 0) for n in rec.device}, rec


def measured_memory(inst: Instance, ran: dict[str, int]) -> dict[str, float]:
    """Per node of ``inst``: the measured bytes where it ran, else its static bytes (module docstring)."""
    out = {}
    for op in inst.ops:
        node = op.extra.get("tf_node", op.id)
        out[node] = float(ran[node]) if node in ran else float(op.memory)
    return out


def regress(step: TrainStep, batch: int, small_batches: Iterable[int], devices: Iterable[str], cluster, *,
            memory: int = 8 * GiB, link: Link = PCIE, steps: int = 5, warmup: int = 2,
            progress=_noop, name: str | None = None) -> Instance:
    """Step 1: the instance at ``batch`` with per-op times (profiler, this process, ``devices[0]``) and
    memory (traced on ``cluster``'s first device) measured at ``small_batches`` and regressed. Its
    ``tf.profile.memory`` records the source and, per small batch, the score of the static estimate."""
    from dplace.runtime.memory import op_memory_score

    from .remote import canonical

    devices = list(devices)
    first = canonical(cluster.devices[devices[0]])
    small, scores = [], {}
    for b in small_batches:
        times = op_times(step, b, steps=steps, warmup=warmup, device=devices[0], progress=progress)
        at = extract(step, b)
        ran, rec = traced_bytes(step, b, cluster, lambda node: first)
        small.append(Measurement(b, times, measured_memory(at, ran)))
        scores[str(b)] = op_memory_score(at, rec)["median_rel_error"]
    pred = predict(small, batch)
    inst = extract(step, batch, devices, memory=memory, link=link, name=name)
    out = with_times(inst, pred.times, pred.memory)
    meta = dict(out.extra["tf"])
    meta["profile"] = {
        "estimated_from_batches": [m.batch for m in small], "steps": steps, "warmup": warmup, "device": devices[0],
        "statistic": "median, then least squares a + b*batch per op",
        "memory": {"source": "measured (traced step on a worker: output bytes + recorded temporaries), "
                             "then least squares a + b*batch per op",
                   "static_estimate_score_at_small_batches": scores},
    }
    return out.replace(extra={**out.extra, "tf": meta})


def step2(inst: Instance, step: TrainStep, batch: int, cluster, *, warmup: int = 1) -> tuple[Instance, dict[str, Any]]:
    """Step 2's memory: the large batch under the sequential placement on ``cluster`` (instance device
    -> task device), per-op memory re-measured. Returns the instance with the measured memory and the
    scores: Celeritas' median relative error of ``inst``'s (the regression's) per-op estimate and of the
    static estimate, against this run."""
    from dplace.heuristics.celeritas import fill_placement
    from dplace.heuristics.orders import dfs_topo_order
    from dplace.runtime.memory import op_memory_score

    from .remote import canonical

    c = cluster.map_devices([d.name for d in inst.devices])
    pl = fill_placement(inst, dfs_topo_order(inst))
    node_dev = {op.extra.get("tf_node", op.id): canonical(c.devices[inst.devices[pl[o]].name])
                for o, op in enumerate(inst.ops)}
    ran, rec = traced_bytes(step, batch, c, lambda node: node_dev[node], warmup=warmup)
    static = extract(step, batch, [d.name for d in inst.devices])
    score = {"regression": op_memory_score(inst, rec), "static": op_memory_score(static, rec),
             "devices_used": sorted({inst.devices[d].name for d in pl})}
    mem = measured_memory(inst, ran)
    out = with_times(inst, {op.extra.get("tf_node", op.id): op.time for op in inst.ops}, mem)
    meta = dict(out.extra.get("tf", {}))
    prof = dict(meta.get("profile", {}))
    prof["step2_memory"] = {"placement": "standard_evaluation", "score": score}
    meta["profile"] = prof
    return out.replace(extra={**out.extra, "tf": meta}), score
