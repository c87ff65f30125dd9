"""Place phase of HEFT / DPOS, compiled (dplace.kernels) against the pure-Python reference: CPU seconds
of the schedule loop alone (rank, priority order, est/commit; no make_result), and whether the two give
the same placement, order and makespan. Prints a table.

    .venv/bin/python benchmarks/bench_list_kernels.py t36k.json
    .venv/bin/python benchmarks/bench_list_kernels.py big.npz --methods heft --no-reference

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
    if method == "heft":
        from dplace.heuristics.heft import heft_schedule

        return heft_schedule(inst)
    from dplace.heuristics.fastt import DposOptions, _dpos_schedule

    return _dpos_schedule(inst, DposOptions())[0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("instance")
    ap.add_argument("--methods", default="heft,dpos")
    ap.add_argument("--no-reference", action="store_true", help="compiled only (the reference takes minutes at 1M ops)")
    args = ap.parse_args()
    c0 = time.process_time()
    inst = load_instance(args.instance)
    print(f"{args.instance}: {inst.n} ops, {inst.m} devices, load {time.process_time() - c0:.2f} s CPU")
    print(f"{'method':8} {'kernel':8} {'place CPU s':>12} {'makespan':>16} same")
    for method in args.methods.split(","):
        runs = {}
        for kern in (("numba",) if args.no_reference else ("numba", "python")):
            os.environ["DPLACE_KERNEL"] = kern
            reps = 2 if kern == "numba" else 1  # the first compiled call may compile: timed apart
            for rep in range(reps):
                c0 = time.process_time()
                st = _place(inst, method)
                dt = time.process_time() - c0
                label = kern if rep == reps - 1 else "compile"
                runs[label] = (st.placement, st.order(), st.makespan)
                same = ""
                if "python" in runs and label == "python":
                    same = "yes" if runs["python"] == runs["numba"] else "NO"
                print(f"{method:8} {label:8} {dt:12.2f} {st.makespan:16.6f} {same}", flush=True)
    os.environ.pop("DPLACE_KERNEL", None)


if __name__ == "__main__":
    main()
