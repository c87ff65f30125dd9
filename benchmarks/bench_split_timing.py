"""OS-DPOS with split pieces timed from measured split shapes vs by a linear share (FastT §4, §5.2).

Input: an instance made by ``dplace profile --split-shapes`` (its splittable ops carry
``extra.split.measured``). The same instance with those tables removed gives the linear-share run.
Prints per method: makespan (the simulator's), DPOS's makespan on its input graph, splits kept, DPOS runs,
and the largest measured/linear ratio of a piece or replica time (how far the linear share is off).

    .venv/bin/dplace profile --model transformer --batch 8 --width 64 --layers 2 --seq-len 16 --devices 2 \\
        --split-shapes --steps 5 --warmup 1 --out t.json
    .venv/bin/python benchmarks/bench_split_timing.py t.json
"""
from __future__ import annotations

import argparse

import dplace
from dplace.heuristics.fastt_graphs import data_parallel_instance, split_dims
from dplace.instance.model import Op


def without_measurements(inst):
    def strip(o: Op) -> Op:
        ex = dict(o.extra)
        if isinstance(ex.get("split"), dict):
            ex["split"] = {k: v for k, v in ex["split"].items() if k != "measured"}
        return Op(o.id, o.time, o.memory, o.type, o.colocation, o.device, ex)

    return inst.replace(ops=[strip(o) for o in inst.ops])


def share_spread(inst) -> tuple[float, float]:
    """(min, max) over ops and measured sizes of measured share / linear share."""
    ratios = []
    for op in inst.ops:
        table = (op.extra.get("split") or {}).get("measured") or {}
        for dim, size in split_dims(op).items():
            t = table.get(dim) or {}
            whole = t.get(str(size))
            for s, v in t.items():
                if whole and int(s) != size:
                    ratios.append((v / whole) / (int(s) / size))
    return (min(ratios), max(ratios)) if ratios else (float("nan"), float("nan"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    measured = dplace.load_instance(args.instance)
    lo, hi = share_spread(measured)
    print(f"{measured.name}: {measured.extra['tf']['profile'].get('split_shapes')}")
    print(f"measured share / linear share over every measured piece shape: {lo:.2f} .. {hi:.2f}")
    dp = data_parallel_instance(measured)
    dpl = data_parallel_instance(without_measurements(measured))
    print(f"data-parallel input graph, sum of op times: measured {sum(min(d) for d in dp.dur):,.0f} µs, "
          f"linear {sum(min(d) for d in dpl.dur):,.0f} µs (model graph {sum(min(d) for d in measured.dur):,.0f} µs)")
    print("| method | pieces timed | makespan µs | DPOS on its input | splits kept | DPOS runs |")
    print("|---|---|---|---|---|---|")
    for method in ("os_dpos", "os_dpos_model_graph"):
        for label, inst in (("measured", measured), ("linear share", without_measurements(measured))):
            r = dplace.solve(inst, method, time_limit_s=args.time_limit)
            print(f"| {method} | {label} | {r.makespan:,.0f} | {r.extra['dpos_makespan']:,.0f} | "
                  f"{len(r.extra['splits'])} | {r.extra['dpos_runs']} |")


if __name__ == "__main__":
    main()
