"""The per-op dispatch cost on one worker: what an op costs its core beyond its kernel's own time.

A profile's op times are kernel times (op start to op end in the worker's step stats,
:func:`dplace.runtime.remote.median_times`); the executor's work around each kernel (scheduling it,
bookkeeping its inputs and outputs) is in no op's time. :func:`fit_dispatch_cost` measures it: two chains
of tiny ``Mul`` ops (a random 16-float vector times another), ``n`` and ``4 n`` long, on one device; the wall
time per extra op, ``(t(4n) - t(n)) / 3n`` (medians over steps, rounds interleaved so a change of load
hits both), less the kernel's own time per ``Mul`` (the median over the nodes of one traced step) is the
dispatch cost per op. :func:`with_dispatch` folds it into every op time of an instance.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from .recvcost import session_config, time_probes
from .zoo import _tf


def chain_graph(n: int, device: str):
    """(graph, fetch): ``n`` ``Mul`` ops in a chain on ``device`` (of two random vectors of 16 floats)."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        c = tf.random.uniform([16], 1.0, 1.0001)  # random inputs: nothing to fold into a constant
        v = tf.random.uniform([16])
        for _ in range(n):
            v = tf.multiply(v, c)
        out = tf.reduce_sum(v)
    return g, out


def kernel_us(target: str, n: int, device: str) -> float:
    """The median kernel time (op start to op end) of the chain's ``Mul`` ops in one traced step."""
    tf = _tf()
    g, out = chain_graph(n, device)
    with tf.compat.v1.Session(target, graph=g, config=session_config()) as sess:
        sess.run(out)
        opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
        md = tf.compat.v1.RunMetadata()
        sess.run(out, options=opts, run_metadata=md)
    ts = [(ns.op_end_rel_nanos - ns.op_start_rel_nanos) / 1000.0 for ds in md.step_stats.dev_stats
          for ns in ds.node_stats if ns.node_name.startswith("Mul")]  # in ns: the µs fields round to 0 here
    return statistics.median(ts) if ts else 0.0


@dataclass
class DispatchFit:
    """Per op: the wall time one more op adds to a step (``per_op_us``, median over rounds), its kernel's
    own time (``kernel_us``) and the difference, the dispatch cost (``us``, at least 0)."""

    us: float
    per_op_us: float
    kernel_us: float
    rounds: list[float]
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"us": self.us, "per_op_us": self.per_op_us, "kernel_us": self.kernel_us, "rounds": self.rounds,
                "n": self.n, "how": "(step of a 4n-op Mul chain - step of an n-op chain) / 3n, less the Mul "
                                    "kernel's own time (dplace.runtime.dispatch)"}


def fit_dispatch_cost(target: str, device: str, *, n: int = 200, rounds: int = 3, steps: int = 7) -> DispatchFit:
    """The dispatch cost per op on TensorFlow device ``device`` of session target ``target`` (a cluster's
    ``target`` and ``devices[name]``; ``""`` and ``/device:CPU:0`` in this process): see the module
    docstring."""
    graphs = {"short": chain_graph(n, device), "long": chain_graph(4 * n, device)}
    t = time_probes(target, graphs, rounds=rounds, steps=steps)
    per_round = [(b - a) / (3 * n) for a, b in zip(t["short"], t["long"])]
    per_op = statistics.median(per_round)
    k = kernel_us(target, n, device)
    return DispatchFit(round(max(0.0, per_op - k), 3), round(per_op, 3), round(k, 3),
                       [round(x, 3) for x in per_round], n)


def with_dispatch(inst, us: float):
    """``inst`` with ``us`` added to every op's time (µs at speed 1, or each device's entry; an op that
    took no time, a NoOp the executor still dispatches, included)."""
    from dataclasses import replace

    if not us:
        return inst
    ops = [replace(op, time={k: v + us for k, v in op.time.items()} if isinstance(op.time, dict) else op.time + us)
           for op in inst.ops]
    return inst.replace(ops=ops)
