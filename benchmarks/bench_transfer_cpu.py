"""Which worker's core pays for a tensor sent between workers, and per what (edge or tensor)?

Two local workers (one core each, 1 intra-op / 1 inter-op thread, loopback: :class:`LocalWorkers`). A
heavy chain ``H`` (matmuls) sits on one worker; ``N`` tiny tensors are made on worker A and summed by one
``AddN``. Each configuration changes only where the ``AddN`` (or the consumers) sit, so the difference in
step time against its base, divided by ``N``, is the core time one transfer costs the worker that runs
``H`` (the bottleneck):

  send   H on A, AddN on B     vs  base_a  (H on A, AddN on A)   -> the sender's core pays
  recv   H on B, AddN on B     vs  base_b  (H on B, AddN on A)   -> the receiver's core pays
  fanout H on B, one tensor from A read by N ops on B  vs  fan_base (the tensor made on B)
         -> per tensor (TF's Send/Recv pair per tensor and destination device) or per edge

    .venv/bin/python benchmarks/bench_transfer_cpu.py [--n 300] [--reps 5] [--steps 9]

Configurations are interleaved over ``--reps`` rounds; each round keeps the median of ``--steps`` steps;
the table gives the median over rounds (µs) and /proc/loadavg. No timed asserts.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def build(tf, cfg: str, n: int, a: str, b: str, heavy: int, size: int):
    g = tf.Graph()
    h_dev = a if cfg in ("base_a", "send") else b
    with g.as_default():
        with tf.device(h_dev):
            m = tf.constant(1.0 / size, shape=(size, size))
            h = m
            for _ in range(heavy):
                h = tf.matmul(h, m)
            hs = tf.reduce_sum(h)
        if cfg.startswith("fan"):
            with tf.device(a if cfg == "fanout" else b):
                v = tf.constant([1.0] * 16)
                p = v * 2.0
            with tf.device(b):
                outs = [p + float(i) for i in range(n)]
                s = tf.reduce_sum(tf.add_n(outs))
        else:
            with tf.device(a):
                v = tf.constant([1.0] * 16)
                ps = [v * float(i) for i in range(n)]
            with tf.device(b if cfg in ("send", "recv") else a):
                s = tf.reduce_sum(tf.add_n(ps))
        with tf.device(a):
            out = hs + s
    return g, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300, help="tiny tensors (transfers) per step")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--heavy", type=int, default=30, help="matmuls in the heavy chain")
    ap.add_argument("--size", type=int, default=512)
    args = ap.parse_args(argv)
    from dplace.runtime.cluster import LocalWorkers
    from dplace.runtime.zoo import _tf

    tf = _tf()
    cfgs = ("base_a", "send", "base_b", "recv", "fan_base", "fanout")
    times: dict[str, list[float]] = {c: [] for c in cfgs}
    with LocalWorkers(2) as w:
        cl = w.cluster
        a, b = cl.task_device(0), cl.task_device(1)
        conf = tf.compat.v1.ConfigProto(allow_soft_placement=False)
        conf.graph_options.rewrite_options.disable_meta_optimizer = True
        conf.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
        conf.graph_options.optimizer_options.do_constant_folding = False
        sessions = {}
        for c in cfgs:
            g, out = build(tf, c, args.n, a, b, args.heavy, args.size)
            sess = tf.compat.v1.Session(cl.target, graph=g, config=conf)
            for _ in range(3):
                sess.run(out)
            sessions[c] = (sess, out)
        loads = [loadavg()]
        for _ in range(args.reps):
            for c in cfgs:
                sess, out = sessions[c]
                ts = []
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    sess.run(out)
                    ts.append((time.perf_counter() - t0) * 1e6)
                times[c].append(statistics.median(ts))
            loads.append(loadavg())
        for sess, _ in sessions.values():
            sess.close()
    med = {c: statistics.median(v) for c, v in times.items()}
    print(f"N = {args.n} transfers per step; heavy chain {args.heavy} x matmul {args.size}^2; "
          f"{args.reps} rounds x {args.steps} steps; loadavg {loads[0]} .. {loads[-1]}")
    print(f"{'config':<10} {'median step µs':>15} {'rounds (µs)':>s}")
    for c in cfgs:
        print(f"{c:<10} {med[c]:>15.0f}   " + " ".join(f"{x:.0f}" for x in times[c]))
    for what, x, base in (("sender pays", "send", "base_a"), ("receiver pays", "recv", "base_b"),
                          ("per edge (fan-out)", "fanout", "fan_base")):
        d = [(t - t0) / args.n for t, t0 in zip(times[x], times[base])]
        print(f"{what:<20} ({x} - {base}) / N = {statistics.median(d):7.1f} µs per transfer "
              f"(rounds: {', '.join(f'{v:.1f}' for v in d)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
