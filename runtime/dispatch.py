"""The per-op dispatch cost on one worker: what an op costs its core beyond its kernel's own time.

A profile's op times are kernel times (op start to op end in the worker's step stats,
:func:`dplace.runtime.remote.median_times`); the executor's work around each kernel (scheduling it,
bookkeeping its inputs and outputs) is in no op's time. :func:`fit_dispatch_cost` measures it: two chains
of tiny ``Mul`` ops (a random 16-float vector times another), ``n`` and ``4 n`` long, on one device; the wall
time per extra op, ``(t(4n) - t(n)) / 3n`` (medians over steps, rounds interleaved so a change of load
hits both), less the kernel's own time per op (the median over the nodes of one traced step, in ns) is
the dispatch cost per op. Tiny kernels run inline in the executor (0.0-0.1 µs each here); 64² ``MatMul``s,
which it hands to its inter-op thread pool, cost about 2.5 µs each beyond their kernel (2 workers,
load 17). :func:`fold_dispatch` measures both and folds them into a profile's op times (``dplace
profile --workers``); :func:`with_dispatch` adds given figures.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable

from . import watched
from .recvcost import session_config, time_probes, watched_call
from .zoo import _tf


def chain_graph(n: int, device: str, size: int = 0):
    """(graph, fetch): ``n`` ops in a chain on ``device``: ``Mul`` of two random vectors of 16 floats
    (``size`` 0: a kernel TensorFlow's executor runs inline), or ``MatMul`` of random ``size``² matrices
    (a kernel it hands to its inter-op thread pool once it measured it as expensive)."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default(), tf.device(device):
        shape = [size, size] if size else [16]
        c = tf.random.uniform(shape, 1.0, 1.0001) / max(1, size)  # random inputs: nothing to fold
        v = tf.random.uniform(shape)
        for _ in range(n):
            v = tf.linalg.matmul(v, c, name="MatMul") if size else tf.multiply(v, c, name="Mul")
        out = tf.reduce_sum(v)
    return g, out


def kernel_us(target: str, n: int, device: str, size: int = 0, alive: Callable[[], None] | None = None) -> float:
    """The median kernel time (op start to op end) of the chain's ops in one traced step (``alive``: the
    session's calls run watched, :func:`~.recvcost.watched_call`)."""
    tf = _tf()
    g, out = chain_graph(n, device, size)
    sess = watched_call(lambda: watched.cluster_session(target, g, session_config()), alive)[0]
    opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    md = tf.compat.v1.RunMetadata()
    try:
        watched_call(lambda: sess.run(out), alive)
        watched_call(lambda: sess.run(out, options=opts, run_metadata=md), alive)
    except BaseException:
        if alive is None:  # after a worker's death a call may still run in it: left alone
            sess.close()
        raise
    sess.close()
    ts = [(ns.op_end_rel_nanos - ns.op_start_rel_nanos) / 1000.0 for ds in md.step_stats.dev_stats
          for ns in ds.node_stats if ns.node_name.startswith("MatMul" if size else "Mul")]  # ns: µs round to 0
    return statistics.median(ts) if ts else 0.0


@dataclass
class DispatchFit:
    """Per op: the wall time one more op adds to a step (``per_op_us``, median over rounds), its kernel's
    own time (``kernel_us``) and the difference, the dispatch cost (``us``, at least 0). Per step: what a
    step costs beyond its ops (``step_us``: the n-op chain's step less n x ``per_op_us``; the session,
    master and worker round trip), which no op's time holds either."""

    us: float
    per_op_us: float
    kernel_us: float
    rounds: list[float]
    n: int
    step_us: float = 0.0
    size: int = 0  # 0: the Mul chain; else the MatMul chain's matrix side

    def to_dict(self) -> dict[str, Any]:
        return {"us": self.us, "per_op_us": self.per_op_us, "kernel_us": self.kernel_us, "rounds": self.rounds,
                "n": self.n, "step_us": self.step_us, "size": self.size, "how": "(step of a 4n-op chain - step of an n-op chain) / 3n, less the "
                                    "kernel's own time (dplace.runtime.dispatch)"}


def fit_dispatch_cost(target: str, device: str, *, n: int = 200, rounds: int = 3, steps: int = 7,
                      size: int = 0, alive: Callable[[], None] | None = None) -> DispatchFit:
    """The dispatch cost per op on TensorFlow device ``device`` of session target ``target`` (a cluster's
    ``target`` and ``devices[name]``; ``""`` and ``/device:CPU:0`` in this process): see the module
    docstring. ``alive``: the cluster's ``check_alive``, every session call then runs watched."""
    graphs = {"short": chain_graph(n, device, size), "long": chain_graph(4 * n, device, size)}
    t = time_probes(target, graphs, rounds=rounds, steps=steps, alive=alive)
    per_round = [(b - a) / (3 * n) for a, b in zip(t["short"], t["long"])]
    per_op = statistics.median(per_round)
    k = kernel_us(target, n, device, size, alive)
    step = statistics.median(a - n * p for a, p in zip(t["short"], per_round))
    return DispatchFit(round(max(0.0, per_op - k), 3), round(per_op, 3), round(k, 3),
                       [round(x, 3) for x in per_round], n, round(step, 1), size)


def with_dispatch(inst, us: float, inline_us: float | None = None):
    """``inst`` with ``us`` added to every op's time (µs at speed 1, or each device's entry); with
    ``inline_us``, ops that took no measured time (kernels under 1 µs: the executor runs those inline)
    get ``inline_us`` instead."""
    from dataclasses import replace

    def extra(t: float) -> float:
        return us if inline_us is None or t > 0 else inline_us

    if not us and not inline_us:
        return inst
    ops = [replace(op, time={k: v + extra(v) for k, v in op.time.items()} if isinstance(op.time, dict)
                   else op.time + extra(op.time)) for op in inst.ops]
    return inst.replace(ops=ops)


def fold_dispatch(inst, target: str, device: str, *, rounds: int = 3, alive: Callable[[], None] | None = None):
    """A profile's instance with the dispatch cost measured on ``device`` folded into its op times: ops
    with a measured kernel time get the cost of an expensive kernel (a chain of 64² ``MatMul``), ops
    timed 0 (under 1 µs) that of an inline one (a chain of tiny ``Mul``); both fits go to
    ``extra["tf"]["profile"]["dispatch"]``. Returns (instance, (inline fit, expensive fit))."""
    inline = fit_dispatch_cost(target, device, n=200, rounds=rounds, alive=alive)
    heavy = fit_dispatch_cost(target, device, n=100, rounds=rounds, size=64, alive=alive)
    out = with_dispatch(inst, heavy.us, inline.us)
    tf_meta = dict(out.extra.get("tf", {}))
    prof = dict(tf_meta.get("profile", {}))
    prof["dispatch"] = {"inline": inline.to_dict(), "expensive": heavy.to_dict(),
                        "folded": "op time > 0: + expensive us; op time 0: + inline us"}
    tf_meta["profile"] = prof
    return out.replace(extra={**out.extra, "tf": tf_meta}), (inline, heavy)
