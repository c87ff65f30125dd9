"""FastT benchmark (issue #5): DPOS / OS-DPOS placement time on the generated 36,000-op Transformer
training graph (4 and 8 devices), and DPOS vs heft vs m_etf (and OS-DPOS) on the bundled real instances.

    .venv/bin/python benchmarks/bench_fastt.py                 # both tables
    .venv/bin/python benchmarks/bench_fastt.py --part generated --ops 36000 --devices 4 8
    .venv/bin/python benchmarks/bench_fastt.py --part real
    .venv/bin/python benchmarks/bench_fastt.py --part real --instances 'instances/tf/*.json' --methods dpos,os_dpos
    .venv/bin/python benchmarks/bench_fastt.py --part real --max-dpos-runs 32   # the old cap, to compare
    .venv/bin/python benchmarks/bench_fastt.py --part real --methods dpos,os_dpos,os_dpos_dp  # + §5.2's DP graph

Prints tables; no timing is asserted. Times are wall-clock seconds of ``dplace.solve`` (placement plus the
final simulation), makespans are the simulator's (µs).
"""
from __future__ import annotations

import argparse
import glob
import os
import time

from rich.console import Console
from rich.table import Table

import dplace


def _row(inst, method, **options):
    t0 = time.perf_counter()
    if method == DP:  # OS-DPOS from FastT §5.2's data-parallel input graph (when the model fits a device)
        res = dplace.solve(inst, "os_dpos", data_parallel=True, **options)
    else:
        res = dplace.solve(inst, method, **options)
    dt = time.perf_counter() - t0
    ex = res.extra or {}
    return {
        "method": method, "time_s": dt, "makespan": res.makespan, "lb": res.lower_bound,
        "memory_ok": res.memory_ok, "fifo": ex.get("makespan_fifo"), "splits": len(ex.get("splits", [])),
        "runs": ex.get("dpos_runs"), "stopped": ex.get("stopped"), "status": res.status,
        "split_list": ex.get("splits", []),
        "evaluate_ok": _evaluate_ok(inst, res) if ex.get("splits") or ex.get("data_parallel") else None,
        "replicas": (ex.get("data_parallel") or {}).get("replicas"), "dp_skipped": ex.get("data_parallel_skipped"),
    }


def _evaluate_ok(inst, res) -> bool:
    """What ``dplace evaluate`` does with a saved OS-DPOS result: rebuild the split graph, re-simulate, check."""
    import json

    from dplace.result import result_from_dict

    data = json.loads(json.dumps(res.to_dict()))
    again = result_from_dict(inst, data)  # on the graph the transform rebuilds from inst
    target = again.instance
    return (data["instance"] == target.name and dplace.check(target, data).ok
            and abs(again.makespan - res.makespan) <= 1e-6 * max(1.0, res.makespan))


DP = "os_dpos_dp"  # pseudo-method of this script: os_dpos with data_parallel=True (os_dpos's default now)
OS = ("os_dpos", "os_dpos_model_graph", DP)  # the OS-DPOS methods (their rows show splits)


def _fmt(x, spec=",.0f"):
    return "-" if x is None else format(x, spec)


def generated(console: Console, n_ops: int, devices: list[int], max_runs: int, methods: list[str]) -> None:
    from dplace.formats.generate import transformer_training

    table = Table(title=f"FastT placement time, transformer_training({n_ops}, m)")
    for col in ("m", "ops", "method", "time s", "makespan µs", "FIFO makespan µs", "lower bound µs", "splits",
                "DPOS runs", "stopped", "mem ok"):
        table.add_column(col, justify="right")
    for m in devices:
        inst = transformer_training(n_ops, m)
        for method in methods:
            opts = {"max_dpos_runs": max_runs} if method in OS and max_runs is not None else {}
            r = _row(inst, method, **opts)
            table.add_row(str(m), str(inst.n), method, f"{r['time_s']:.2f}", _fmt(r["makespan"]), _fmt(r["fifo"]),
                          _fmt(r["lb"]), str(r["splits"]) if method in OS else "-", _fmt(r["runs"], "d"),
                          r["stopped"] or "-", str(r["memory_ok"]))
            console.print(f"  done: m={m} {method} {r['time_s']:.2f}s", style="dim")
    console.print(table)


def real(console: Console, pattern: str, max_runs: int, methods: list[str]) -> None:
    paths = sorted(p for pat in pattern.split(",") for p in glob.glob(pat))
    if not paths:
        console.print(f"no instances match {pattern!r}")
        return
    known = set(dplace.methods())
    table = Table(title="DPOS vs heft vs m_etf on the bundled real instances (makespan µs; time s)")
    for col in ("instance", "ops", "m", "lower bound", "method", "makespan", "gap", "time s", "FIFO makespan",
                "splits", "mem ok"):
        table.add_column(col, justify="right")
    for path in paths:
        inst = dplace.load_instance(path)
        for method in methods:
            if method not in known and method != DP:
                table.add_row(os.path.basename(path), str(inst.n), str(inst.m), "-", method, "not registered",
                              "", "", "", "", "")
                continue
            opts = {"max_dpos_runs": max_runs} if method in OS and max_runs is not None else {}
            r = _row(inst, method, **opts)
            if method in OS:
                dp = (f"; data-parallel graph of {r['replicas']} replicas" if r["replicas"]
                      else f"; {r['dp_skipped']}" if r["dp_skipped"] else "")
                console.print(f"  {os.path.basename(path)}: {method} kept {r['splits']} splits {r['split_list']} "
                              f"({r['runs']} DPOS runs, stopped: {r['stopped']}{dp}); evaluate accepts: {r['evaluate_ok']}")
            gap = None if r["makespan"] in (None, 0) or r["lb"] is None else (r["makespan"] - r["lb"]) / r["makespan"]
            table.add_row(os.path.basename(path), str(inst.n), str(inst.m), _fmt(r["lb"]), method,
                          _fmt(r["makespan"]), _fmt(gap, ".1%"), f"{r['time_s']:.2f}", _fmt(r["fifo"]),
                          str(r["splits"]) if method in OS else "-", str(r["memory_ok"]))
    console.print(table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=["generated", "real", "all"], default="all")
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--devices", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--max-dpos-runs", type=int, default=None,
                    help="OS-DPOS cap on DPOS re-runs (default: none, the paper's whole loop)")
    ap.add_argument("--instances", default="instances/*.json,instances/tf/*.json", help="comma list of globs")
    ap.add_argument("--methods", default="", help="comma list (default: dpos,os_dpos_model_graph / heft,m_etf,dpos,os_dpos,os_dpos_model_graph); "
                    f"{DP}: os_dpos from the data-parallel input graph")
    args = ap.parse_args()
    console = Console(width=200)
    chosen = [m for m in args.methods.split(",") if m]
    if args.part in ("generated", "all"):
        generated(console, args.ops, args.devices, args.max_dpos_runs, chosen or ["dpos", "os_dpos_model_graph"])
    if args.part in ("real", "all"):
        real(console, args.instances, args.max_dpos_runs, chosen or ["heft", "m_etf", "dpos", "os_dpos", "os_dpos_model_graph"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
