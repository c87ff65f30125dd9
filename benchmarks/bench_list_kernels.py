"""Place phase of HEFT / DPOS, compiled (dplace.kernels) against the pure-Python reference: CPU seconds
of the schedule loop alone (rank, priority order, est/commit; no make_result), and whether the two give
the same placement, order and makespan. Prints a table.

    .venv/bin/python benchmarks/bench_list_kernels.py t36k.json
    .venv/bin/python benchmarks/bench_list_kernels.py big.npz --methods heft --no-reference
    .venv/bin/python benchmarks/bench_list_kernels.py t36k_seq.json --methods heft,heft_links@10,dpos \
        --no-reference --repeats 3

``heft_links@W``: one of ``heft_links``' schedules, with split-cost weight W. ``--repeats K``: the compiled
loop timed K times, the least printed. To time older code, run this file with that checkout's interpreter
from that checkout (it imports only ``heft_schedule`` and ``_dpos_schedule``).

The first compiled call in a fresh install compiles the kernels (printed as "compile"); later processes
load them from numba's cache.

t36k.json: `.venv/bin/dplace generate transformer --ops 36000 --devices 4 --out t36k.json`.
"""
from __future__ import annotations

import argparse
import os
import time

from dplace.instance.io import load_instance


def _place(inst, method: str):
    if method == "heft" or method.startswith("heft_links@"):
        from dplace.heuristics.heft import heft_schedule

        if method == "heft":
            return heft_schedule(inst)
        return heft_schedule(inst, True, link_aware=True, lookahead=float(method.split("@", 1)[1]))
    from dplace.heuristics.fastt import DposOptions, _dpos_schedule

    return _dpos_schedule(inst, DposOptions())[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("instance")
    ap.add_argument("--methods", default="heft,dpos")
    ap.add_argument("--no-reference", action="store_true", help="compiled only (the reference takes minutes at 1M ops)")
    ap.add_argument("--repeats", type=int, default=1, help="compiled loop timings, the least printed")
    args = ap.parse_args()
    c0 = time.process_time()
    inst = load_instance(args.instance)
    print(f"{args.instance}: {inst.n} ops, {inst.m} devices, load {time.process_time() - c0:.2f} s CPU")
    print(f"{'method':14} {'kernel':8} {'place CPU s':>12} {'makespan':>16} same")
    for method in args.methods.split(","):
        runs = {}
        for kern in (("numba",) if args.no_reference else ("numba", "python")):
            os.environ["DPLACE_KERNEL"] = kern
            reps = 1 + max(1, args.repeats) if kern == "numba" else 1  # the first compiled call may compile
            best = float("inf")
            for rep in range(reps):
                c0 = time.process_time()
                st = _place(inst, method)
                dt = time.process_time() - c0
                if kern == "numba" and rep:
                    best = min(best, dt)
                    if rep < reps - 1:
                        continue
                    dt = best
                label = kern if rep == reps - 1 else "compile"
                runs[label] = (st.placement, st.order(), st.makespan)
                same = ""
                if "python" in runs and label == "python":
                    same = "yes" if runs["python"] == runs["numba"] else "NO"
                print(f"{method:14} {label:8} {dt:12.2f} {st.makespan:16.6f} {same}", flush=True)
    os.environ.pop("DPLACE_KERNEL", None)


if __name__ == "__main__":
    main()
