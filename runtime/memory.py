"""Memory measured on a real run, against dplace's memory model (op memory = its outputs' or its
variable's static bytes, additive per device).

- :func:`measure_peak`: per-device peak bytes of one placed step on a cluster (each local worker's CPU
  allocator statistics: TensorFlow's BFC allocator on the CPU, ``get_memory_info`` after a reset; on a
  GPU the same call reads the GPU allocator) and per-op bytes from the workers' step stats (the bytes
  each op's outputs allocated; temporaries too where TensorFlow records them, e.g. on GPUs).
- :func:`op_memory_score`: Celeritas' score of per-op estimates: the median over ops of
  ``|estimate - measured| / measured`` (ops whose outputs allocated bytes in the step).
"""
from __future__ import annotations

import statistics
from typing import Any


def op_memory_score(inst, record) -> dict[str, Any]:
    """Celeritas-style score of ``inst``'s per-op memory against a :class:`~dplace.runtime.remote.StepRecord`:
    ``median_rel_error`` over ops whose outputs allocated memory (measured = output bytes, plus the op's
    recorded temporaries where TF gives them), ``n`` such ops, and the totals."""
    errs, est_tot, meas_tot = [], 0, 0
    for op in inst.ops:
        node = op.extra.get("tf_node", op.id)
        meas = record.out_bytes.get(node, 0) + record.temp_bytes.get(node, 0)
        if meas <= 0:
            continue
        errs.append(abs(op.memory - meas) / meas)
        est_tot += op.memory
        meas_tot += meas
    return {"median_rel_error": statistics.median(errs) if errs else None, "n": len(errs),
            "estimate_bytes": est_tot, "measured_bytes": meas_tot,
            "temporaries_recorded": bool(record.temp_bytes)}


def measure_peak(inst, placement, step, batch: int | None = None, cluster=None, *, workers: int | None = None):
    """Per-device peak bytes of one step of ``placement`` on ``cluster`` (or on ``workers`` local
    workers started and stopped here, default one per instance device) and the per-op score. Returns
    ``{"peak": {device: bytes} | None, "predicted": {device: bytes}, "op_memory": {...}}``; ``peak`` is
    None on a cluster of other hosts (their allocators cannot be asked from here)."""
    from .cluster import LocalWorkers
    from .remote import execute

    def run(c):
        rep = execute(inst, placement, step, batch, c, steps=1, warmup=1, loss_steps=1, enforce_order=False)
        return {"peak": rep.extra["memory_peak_measured"], "predicted": rep.extra["memory_predicted"],
                "op_memory": rep.extra["op_memory"]}

    if cluster is not None:
        return run(cluster)
    with LocalWorkers(workers or inst.m) as w:
        return run(w.cluster)
