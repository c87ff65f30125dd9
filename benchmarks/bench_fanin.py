"""The ``fan_in`` bound (issue 25 item 4, sequential comm): what it adds and what it costs.

Per graph (sequential comm): the whole-graph ``fan_in`` part and its time; the segment bound of the graph
(each segment also bounded by its own ``fan_in``) beside the segment bound of the same graph in parallel
comm (what the segments gave sequential graphs before: step 1 of :mod:`dplace.formulations.bounds_segments`
relaxes sequential to parallel), each with its wall time within ``--bound-s``.

    .venv/bin/python benchmarks/bench_fanin.py                       # 3k and 36k Transformers, bundled graphs
    .venv/bin/python benchmarks/bench_fanin.py --ops 3000 --no-bundled --bound-s 15

Graphs: ``dplace generate transformer --ops N --devices 4 --comm sequential`` and the bundled real graphs
(``dplace convert instance FILE --comm sequential``). Report ``cat /proc/loadavg`` beside the figures.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED = ("bert12_training_4dev", "resnet50_training_4dev", "inceptionv3_training_4dev")


def graphs(args: argparse.Namespace):
    from dplace.formats.generate import transformer_training
    from dplace.instance.io import load_instance

    for n in [int(x) for x in args.ops.split(",") if x]:
        yield f"transformer {n}", transformer_training(n, 4, comm="sequential")  # = dplace generate's seed 0
    if not args.no_bundled:
        for name in BUNDLED:
            yield name, load_instance(os.path.join(ROOT, "instances", f"{name}.json")).replace(comm="sequential")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="3000,36000", help="generated Transformers (comma-separated op counts)")
    ap.add_argument("--no-bundled", action="store_true")
    ap.add_argument("--bound-s", type=float, default=30.0, help="each segment bound's time limit")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    from dplace.bounds import critical_path_length
    from dplace.bounds.fanin import fan_in_bound
    from dplace.formulations.bounds_segments import segment_bound

    print(f"{'graph':28} {'ops':>6} {'critical path':>14} {'fan_in':>12} {'s':>6} {'segments seq':>13} {'s':>6} "
          f"{'segments par':>13} {'s':>6} {'gain':>6}  load")
    for name, inst in graphs(args):
        cp = critical_path_length(inst)
        t0 = time.perf_counter()
        fan = fan_in_bound(inst)
        t_fan = time.perf_counter() - t0
        t0 = time.perf_counter()
        seq = segment_bound(inst, time_limit_s=args.bound_s).best[0]
        t_seq = time.perf_counter() - t0
        t0 = time.perf_counter()
        par = segment_bound(inst.replace(comm="parallel"), time_limit_s=args.bound_s).best[0]
        t_par = time.perf_counter() - t0
        print(f"{name:28} {inst.n:>6} {cp:>14,.0f} {fan:>12,.0f} {t_fan:>6.2f} {seq:>13,.0f} {t_seq:>6.1f} {par:>13,.0f} "
              f"{t_par:>6.1f} {100 * (seq - par) / par:>5.1f}%  {open('/proc/loadavg').read().split()[:3]}", flush=True)


if __name__ == "__main__":
    main()
