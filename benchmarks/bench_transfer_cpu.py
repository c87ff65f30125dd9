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

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=300, help="tiny tensors (transfers) per step")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=9)
    ap.add_argument("--heavy", type=int, default=30, help="matmuls in the heavy chain")
    ap.add_argument("--size", type=int, default=512)
    args = ap.parse_args(argv)
    from dplace.runtime.cluster import LocalWorkers
    from dplace.runtime.recvcost import probe_graph, time_probes

    cfgs = ("base_a", "send", "base_b", "recv", "fan_base", "fanout")
    with LocalWorkers(2) as w:
        cl = w.cluster
        a, b = cl.task_device(0), cl.task_device(1)
        graphs = {c: probe_graph(c, args.n, a, b, heavy=args.heavy, size=args.size) for c in cfgs}
        loads = [loadavg()]
        times = time_probes(cl.target, graphs, rounds=args.reps, steps=args.steps, warmup=3)
        loads.append(loadavg())
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
