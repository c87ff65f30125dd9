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

from .memscore import op_memory_score

__all__ = ["measure_peak", "op_memory_score"]


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
