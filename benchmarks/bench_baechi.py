"""Baechi benchmark (issue #3): time to place and makespans of m_topo, m_etf, m_sct and metis.

Run: ``.venv/bin/python benchmarks/bench_baechi.py [--ops 36000] [--devices 4] [--no-real] [--ablation]
[--methods m_topo,m_etf,m_sct,metis] [--real-methods all] [--sct-global] [--lp 3000,12000]``

Prints:
1. the generated Transformer-like training graph ``dplace.formats.generate.transformer_training(ops, devices)``:
   per method the wall time of ``dplace.solve`` (placement + the final simulation + the lower bound),
   the makespan (simulator), makespan / proven lower bound, memory kept, and size notes;
2. makespan / lower bound for each method on the bundled real instances ``instances/*.json``;
3. with ``--ablation``: m_etf and m_sct on the real instances with each Baechi §3 option switched off;
4. with ``--lp N,..`` (alone): m_sct's LP windowed (GLOP, HiGHS) vs global (HiGHS) vs the default.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

from rich.console import Console
from rich.table import Table

import dplace
from dplace.formats.generate import transformer_training

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = ("m_topo", "m_etf", "m_sct", "metis")


def _run(inst, method, **opts):
    t = time.perf_counter()
    res = dplace.solve(inst, method, **opts)
    return res, time.perf_counter() - t


def _note(res) -> str:
    ex = res.extra or {}
    parts = []
    if "clusters" in ex:
        parts.append(f"{ex['clusters']} clusters")
    if "sct_lp_time_s" in ex:
        parts.append(f"LP {ex['sct_lp_time_s']:.1f}s/{ex['sct_lp_windows']} win")
    if "fallbacks" in ex and ex["fallbacks"]:
        parts.append(f"{ex['fallbacks']} fallbacks")
    if "moved_for_memory" in ex and ex["moved_for_memory"]:
        parts.append(f"{ex['moved_for_memory']} moved")
    return ", ".join(parts)


def _ratio(res) -> str:
    if res.makespan is None or not res.lower_bound:
        return "-"
    return f"{res.makespan / res.lower_bound:.3f}"


def bench_lp(console: Console, sizes: list[int]) -> None:
    """m_sct's LP: the old default (windows of 1,000, GLOP), windows with HiGHS, one global LP with HiGHS
    (the paper's), and today's default (lp_window=None: global up to GLOBAL_LP_MAX clusters)."""
    from dplace.heuristics.baechi import GLOBAL_LP_MAX

    cases = [(os.path.basename(p), dplace.load_instance(p)) for p in sorted(glob.glob(os.path.join(ROOT, "instances", "tf", "*.json")))]
    cases += [(f"transformer_training({n}, 4)", transformer_training(n, 4)) for n in sizes]
    table = Table(title=f"m_sct LP: windowed vs global (default: global up to {GLOBAL_LP_MAX} clusters)")
    for col in ("instance", "clusters", "LP setting", "LP time (s)", "windows", "makespan (us)"):
        table.add_column(col, justify="right")
    for name, inst in cases:
        for opts in ({"lp_window": 1000, "lp_solver": "glop"}, {"lp_window": 1000, "lp_solver": "highs"},
                     {"lp_window": 0, "lp_solver": "highs"}, {}):
            res, _ = _run(inst, "m_sct", **opts)
            ex = res.extra
            label = " ".join(f"{k}={v}" for k, v in opts.items()) or "default"
            table.add_row(name, str(ex.get("clusters")), label, f"{ex['sct_lp_time_s']:.2f}", str(ex["sct_lp_windows"]),
                          f"{res.makespan:,.0f}")
        console.print(f"  done: {name}", style="dim")
    console.print(table)


def bench_generated(console: Console, ops: int, devices: int, methods, sct_global: bool) -> None:
    t = time.perf_counter()
    inst = transformer_training(ops, devices)
    gen = time.perf_counter() - t
    lb = dplace.lower_bound(inst)
    table = Table(title=f"transformer_training({ops}, {devices}): {inst.n} ops, {len(inst.esrc)} edges, "
                        f"generated in {gen:.1f}s, lower bound {lb:,.0f} us")
    for col in ("method", "time to place (s)", "makespan (us)", "makespan / LB", "memory ok", "notes"):
        table.add_column(col, justify="right" if col not in ("method", "notes") else "left")
    runs = [(m, {}) for m in methods]
    if sct_global:
        runs.append(("m_sct", {"lp_window": 0}))
    for m, opts in runs:
        res, dt = _run(inst, m, **opts)
        name = m + ("".join(f" {k}={v}" for k, v in opts.items()))
        ms = "-" if res.makespan is None else f"{res.makespan:,.0f}"
        table.add_row(name, f"{dt:.2f}", ms, _ratio(res), str(res.memory_ok), _note(res) or res.message or "")
    console.print(table)


def _real_instances():
    return sorted(glob.glob(os.path.join(ROOT, "instances", "*.json")))


def bench_real(console: Console, methods) -> None:
    paths = _real_instances()
    if not paths:
        console.print("no instances/*.json yet")
        return
    table = Table(title="bundled real instances: makespan / proven lower bound (time to place, s)")
    table.add_column("instance")
    table.add_column("ops", justify="right")
    table.add_column("LB (us)", justify="right")
    for m in methods:
        table.add_column(m, justify="right", no_wrap=True)
    for p in paths:
        inst = dplace.load_instance(p)
        row = [os.path.basename(p), str(inst.n), f"{dplace.lower_bound(inst):,.0f}"]
        for m in methods:
            res, dt = _run(inst, m)
            if res.makespan is None:
                row.append(res.status)
                continue
            flag = "" if res.memory_ok else " OOM"
            row.append(f"{_ratio(res)} ({dt:.1f}s){flag}")
        table.add_row(*row)
    console.print(table)


def bench_ablation(console: Console) -> None:
    switches = ("colocation_coadjust", "coplacement", "fusion", "forward_placement")
    table = Table(title="Baechi §3 options: makespan / LB with one option off (default = all on)")
    table.add_column("instance")
    table.add_column("method")
    table.add_column("default", justify="right")
    for s in switches:
        table.add_column(f"no {s}", justify="right")
    table.add_column("all off", justify="right")
    for p in _real_instances():
        inst = dplace.load_instance(p)
        for m in ("m_etf", "m_sct"):
            row = [os.path.basename(p), m, _ratio(_run(inst, m)[0])]
            for s in switches:
                row.append(_ratio(_run(inst, m, **{s: False})[0]))
            row.append(_ratio(_run(inst, m, **{s: False for s in switches})[0]))
            table.add_row(*row)
    console.print(table)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--methods", default=",".join(DEFAULT))
    ap.add_argument("--real-methods", default=None,
                    help="methods for the real-instance table (default: --methods; 'all' = every non-exact method)")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--no-generated", action="store_true")
    ap.add_argument("--ablation", action="store_true")
    ap.add_argument("--sct-global", action="store_true", help="also run m_sct with the LP solved globally (slow)")
    ap.add_argument("--lp", default=None, help="only the m_sct LP table, on instances/tf and transformer_training(N, 4) "
                                               "for each N of this comma list (e.g. 3000,12000)")
    args = ap.parse_args(argv)
    if args.lp is not None:
        bench_lp(Console(width=240), [int(x) for x in args.lp.split(",") if x])
        return 0
    methods = [m for m in args.methods.split(",") if m]
    console = Console(width=240)
    if not args.no_generated:
        bench_generated(console, args.ops, args.devices, methods, args.sct_global)
    if not args.no_real:
        real = methods
        if args.real_methods == "all":
            real = [m for m in dplace.methods() if dplace.method_info(m).kind != "exact"]
        elif args.real_methods:
            real = [m for m in args.real_methods.split(",") if m]
        bench_real(console, real)
    if args.ablation:
        bench_ablation(console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
