"""The receive cost per tensor (the instance's ``transfer_cpu``), measured on a cluster.

A tensor sent between workers costs the receiving worker's core time (gRPC receive, deserialisation,
the ``_Recv`` kernel), once per tensor and destination device (TensorFlow's Send/Recv pairs): measured
by ``benchmarks/bench_transfer_cpu.py`` (the sender's share and a fan-out of one tensor to many consumers
add nothing measurable). :func:`fit_receive_cost` measures it per receiving device: a heavy matmul chain
keeps the receiver busy; ``n`` tiny tensors made on another device are summed by one ``AddN`` on the
receiver (``recv``) or on the sender (``base``); ``(recv - base) / n`` is the core time one received
tensor costs. The graphs are built by :func:`probe_graph`, which the benchmark shares.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from dplace import interrupt

from . import watched
from .cluster import LOST_WORKER_WAIT_S, ClusterError
from .zoo import _tf


def probe_graph(cfg: str, n: int, a: str, b: str, *, heavy: int = 20, size: int = 512):
    """(graph, fetch) of one probe: ``n`` tiny tensors made on ``a``, a chain of ``heavy`` matmuls of
    ``size``² on the device that should be the bottleneck. ``cfg``:

    * ``base_a`` / ``send``: the chain on ``a``; the AddN of the tensors on ``a`` / on ``b``;
    * ``base_b`` / ``recv``: the chain on ``b``; the AddN on ``a`` / on ``b``;
    * ``fan_base`` / ``fanout``: the chain on ``b``; one tensor made on ``b`` / on ``a``, read by ``n``
      ops on ``b``."""
    tf = _tf()
    g = tf.Graph()
    with g.as_default():
        with tf.device(a if cfg in ("base_a", "send") else b):
            m = tf.constant(1.0 / size, shape=(size, size))
            h = m
            for _ in range(heavy):
                h = tf.matmul(h, m)
            hs = tf.reduce_sum(h)
        if cfg.startswith("fan"):
            with tf.device(a if cfg == "fanout" else b):
                p = tf.constant([1.0] * 16) * 2.0
            with tf.device(b):
                s = tf.reduce_sum(tf.add_n([p + float(i) for i in range(n)]))
        else:
            with tf.device(a):
                v = tf.constant([1.0] * 16)
                ps = [v * float(i) for i in range(n)]
            with tf.device(b if cfg in ("send", "recv") else a):
                s = tf.reduce_sum(tf.add_n(ps))
        with tf.device(a):
            out = hs + s
    return g, out


def session_config():
    """The probes' session: no graph rewrites (every op runs where it is put)."""
    tf = _tf()
    conf = tf.compat.v1.ConfigProto(allow_soft_placement=False, operation_timeout_in_ms=600_000)
    conf.graph_options.rewrite_options.disable_meta_optimizer = True
    conf.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    conf.graph_options.optimizer_options.do_constant_folding = False
    return conf


def watched_call(fn: Callable[[], Any], alive: Callable[..., None] | None) -> tuple[Any, float]:
    """(``fn()``, its wall µs): with ``alive`` (a cluster's ``check_alive``, which takes ``wait_s``) run watched
    (:func:`dplace.runtime.watched.call`: a worker's death ends a call TensorFlow would wait in); a
    TensorFlow error of a lost worker (Unavailable, Aborted, ...) becomes the cluster's one error naming
    the worker that died (:class:`~dplace.runtime.cluster.ClusterError`)."""
    if alive is not None:
        try:
            timed = watched.call(fn, alive)
        except _tf().errors.OpError as exc:
            if isinstance(exc, (_tf().errors.InvalidArgumentError, _tf().errors.NotFoundError)):
                raise
            alive(wait_s=LOST_WORKER_WAIT_S)  # Unavailable, Aborted, ...: a worker is gone; this names it
            raise ClusterError(f"cluster: {type(exc).__name__}: {str(exc).strip().splitlines()[-1][:300]}") from None
        return timed.value, timed.us
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1e6


def time_probes(target: str, graphs: dict[str, tuple[Any, Any]], *, rounds: int, steps: int,
                warmup: int = 2, alive: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """Per probe, the median step (µs) of ``steps`` runs in each of ``rounds`` rounds (probes interleaved
    round by round, so a change of the machine's load hits all of them). ``alive``: every session call
    runs watched (:func:`watched_call`); after a worker's death no session is closed (a call may still
    run in it)."""
    tf = _tf()
    sessions = {}
    broken = False
    try:
        for k, (g, out) in graphs.items():
            sess = watched_call(lambda g=g: watched.cluster_session(target, g, session_config()), alive)[0]
            sessions[k] = (sess, out)
            for _ in range(warmup):
                watched_call(lambda s=sess, o=out: s.run(o), alive)
        times: dict[str, list[float]] = {k: [] for k in graphs}
        for _ in range(rounds):
            for k, (sess, out) in sessions.items():
                ts = []
                for _ in range(steps):
                    interrupt.stop_point()
                    ts.append(watched_call(lambda s=sess, o=out: s.run(o), alive)[1])
                times[k].append(statistics.median(ts))
        return times
    except BaseException:
        broken = True
        raise
    finally:
        for sess, _ in sessions.values():
            if not broken or alive is None:
                sess.close()


@dataclass
class ReceiveFit:
    """The receive cost per tensor (µs): the median over receiving devices of each one's median over
    rounds of ``(recv - base) / n``, and the per-device figures."""

    us: float
    per_device: dict[str, float]
    rounds: dict[str, list[float]]
    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"us": self.us, "per_device": self.per_device, "rounds": self.rounds, "n": self.n,
                "how": "(step with n tensors received - the same with them summed on the sender) / n, the "
                       "receiver busy with a matmul chain (dplace.runtime.recvcost)"}


def fit_receive_cost(cluster, devices: list[str], *, n: int = 200, rounds: int = 3, steps: int = 5,
                     heavy: int = 20, size: int = 512,
                     progress: Callable[[str, int, int], None] | None = None) -> ReceiveFit:
    """The receive cost per tensor on ``cluster``: each device in turn receives ``n`` tiny tensors from
    the next one while it runs ``heavy`` matmuls of ``size``² (see the module docstring)."""
    cluster = cluster.map_devices(list(devices))
    per: dict[str, float] = {}
    rows: dict[str, list[float]] = {}
    for i, b in enumerate(devices):
        a = devices[(i + 1) % len(devices)]
        if a == b:
            break
        da, db = cluster.devices[a], cluster.devices[b]
        graphs = {c: probe_graph(c, n, da, db, heavy=heavy, size=size) for c in ("base_b", "recv")}
        t = time_probes(cluster.target, graphs, rounds=rounds, steps=steps, alive=cluster.check_alive)
        rows[b] = [(r - r0) / n for r, r0 in zip(t["recv"], t["base_b"])]
        per[b] = max(0.0, statistics.median(rows[b]))
        if progress:
            progress("receive cost", i + 1, len(devices))
    us = statistics.median(per.values()) if per else 0.0
    return ReceiveFit(round(us, 3), per, rows, n)
