"""Celeritas benchmark (issue #4): fusion on the 36k-op Transformer, Table-2 analog, makespans.

Run: ``.venv/bin/python benchmarks/bench_celeritas.py [--ops 36000] [--repeat 3] [--no-real] [--random N]``

Prints three tables:
1. the generated Transformer-like graph (``dplace.formats.generate.transformer_training(ops, 4)``): nodes, edges
   and CCR before/after Optimal Operation Fusion (R=200, M=0.25), and wall times (best of ``repeat``)
   of the fusion alone and of ``dplace.solve(inst, "celeritas")`` end to end (order, fusion, coarse
   graph, Adjusting Placement, map back, simulation of the original graph, lower bound);
2. the paper's Table 2 for the bundled real graphs ``instances/*.json`` with the makespans of
   celeritas, order_place, standard_evaluation and m_sct (when registered) side by side;
3. how often Adjusting Placement is worse than Order-Place on random DAGs, on the coarse model
   (ScheduleState, insertion) and on the original graph (simulator);
4. ``--classic N``: the gap to the proven optimum (cpsat) on classic task graphs with unlimited memory
   (``formulations._brute.task_graph``: 10 and 14 tasks, 2/4/8 processors, CCR 0.1/1/10, N seeds) of
   celeritas and order_place (the paper's setting) and their ``*_balanced`` variants, and heft;
   the real graphs (table 2) are run in both settings too.
"""
from __future__ import annotations

import argparse
import glob
import os
import random
import sys
import time

from rich.console import Console
from rich.table import Table

import dplace
from dplace.formats.generate import transformer_training
from dplace.heuristics.celeritas import adjusting_placement, fill_schedule
from dplace.heuristics.coarsen import coarsen, coarsen_report
from dplace.heuristics.orders import cpd_topo_order
from dplace.schedule.simulate import simulate
from dplace.testing import random_instance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _best(fn, repeat):
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def transformer_table(n_ops: int, repeat: int) -> Table:
    t0 = time.perf_counter()
    inst = transformer_training(n_ops, 4)
    gen = time.perf_counter() - t0
    rep = coarsen_report(inst)
    t_fuse, _ = _best(lambda: coarsen(inst), repeat)
    t_cel, res = _best(lambda: dplace.solve(inst, "celeritas"), repeat)
    t_op, res_op = _best(lambda: dplace.solve(inst, "order_place"), 1)
    t_se, res_se = _best(lambda: dplace.solve(inst, "standard_evaluation"), 1)
    tab = Table(title=f"{inst.name} ({inst.n} ops, {len(inst.esrc)} edges, 4 devices; generated in {gen:.2f} s)")
    for col in ("quantity", "value"):
        tab.add_column(col)
    rows = [
        ("nodes before / after fusion", f"{rep['nodes_before']} / {rep['nodes_after']}"),
        ("edges before / after fusion", f"{rep['edges_before']} / {rep['edges_after']}"),
        ("CCR before / after fusion", f"{rep['ccr_before']:.3f} / {rep['ccr_after']:.3f}"),
        ("colocated ops moved to their group's anchor", str(rep["moved_colocated_ops"])),
        ("fusion wall time (best of %d)" % repeat, f"{t_fuse:.3f} s"),
        ("celeritas end to end, dplace.solve (best of %d)" % repeat, f"{t_cel:.3f} s  (goal <= 3 s)"),
        ("order_place / standard_evaluation end to end", f"{t_op:.3f} s / {t_se:.3f} s"),
        ("makespan celeritas / order_place / standard_eval",
         f"{res.makespan:.0f} / {res_op.makespan:.0f} / {res_se.makespan:.0f} µs"),
        ("lower bound", f"{res.lower_bound:.0f} µs"),
        ("memory ok (celeritas)", str(res.memory_ok)),
    ]
    for r in rows:
        tab.add_row(*r)
    return tab


def real_table(methods: list[str], time_limit: float) -> Table | None:
    paths = sorted(glob.glob(os.path.join(ROOT, "instances", "*.json"))
                   + glob.glob(os.path.join(ROOT, "instances", "tf", "*.json")))
    if not paths:
        return None
    tab = Table(title="Table-2 analog on the bundled real graphs (R=200, M=0.25) and makespans (µs)")
    for col in ["instance", "nodes", "nodes fused", "CCR", "CCR fused", "lower bound"] + methods:
        tab.add_column(col, justify="right")
    for p in paths:
        inst = dplace.load_instance(p)
        rep = coarsen_report(inst)
        cells = []
        lb = None
        for m in methods:
            t0 = time.perf_counter()
            res = dplace.solve(inst, m, time_limit_s=time_limit)
            dt = time.perf_counter() - t0
            lb = res.lower_bound if res.lower_bound is not None else lb
            if res.makespan is None:
                cells.append(f"{res.status}")
            else:
                flag = "" if res.memory_ok else " (OOM)"
                cells.append(f"{res.makespan:.0f}{flag} [{dt:.2f}s]")
        tab.add_row(os.path.basename(p), str(rep["nodes_before"]), str(rep["nodes_after"]),
                    f"{rep['ccr_before']:.3f}", f"{rep['ccr_after']:.3f}", f"{lb:.0f}" if lb else "-", *cells)
    return tab


def sweep_table(settings: list[tuple[int, float]]) -> Table | None:
    paths = sorted(glob.glob(os.path.join(ROOT, "instances", "*.json")))
    if not paths:
        return None
    tab = Table(title="celeritas on the real graphs: coarse nodes and makespan (µs) for other R, M")
    tab.add_column("instance", justify="right")
    for R, M in settings:
        tab.add_column(f"R={R} M={M}", justify="right")
    for p in paths:
        inst = dplace.load_instance(p)
        cells = []
        for R, M in settings:
            res = dplace.solve(inst, "celeritas", R=R, M=M)
            flag = "" if res.memory_ok else " OOM"
            cells.append(f"{res.extra['coarse_nodes']} nodes: {res.makespan:.0f}{flag}")
        tab.add_row(os.path.basename(p), *cells)
    return tab


def claim_table(n: int) -> Table:
    worse_model = worse_sim = 0
    for s in range(n):
        inst = random_instance(random.Random(s), comm="parallel", colocation=False, pins=False, memory_slack=100)
        order = cpd_topo_order(inst)
        ap, st = adjusting_placement(inst, order)
        op, ref = fill_schedule(inst, order)
        worse_model += st.makespan > ref.makespan + 1e-9
        worse_sim += simulate(inst, ap).makespan > simulate(inst, op).makespan + 1e-9
    tab = Table(title=f"Adjusting Placement worse than Order-Place? ({n} random DAGs, 1-9 ops, 1-3 devices, ample memory)")
    tab.add_column("model")
    tab.add_column("instances where AP > OP", justify="right")
    tab.add_row("coarse model (ScheduleState, insertion; the paper's)", f"{worse_model} ({100 * worse_model / n:.1f} %)")
    tab.add_row("simulator (TF-like dispatch)", f"{worse_sim} ({100 * worse_sim / n:.1f} %)")
    return tab


def classic_table(seeds: int, time_limit: float) -> Table:
    from dplace.formulations._brute import task_graph

    runs = [("celeritas_balanced", {}), ("celeritas", {}), ("order_place_balanced", {}), ("order_place", {}),
            ("heft", {})]
    gaps: list[list[float]] = [[] for _ in runs]
    unproven = 0
    for n in (10, 14):
        for procs in (2, 4, 8):
            for ccr_ in (0.1, 1.0, 10.0):
                for seed in range(seeds):
                    inst = task_graph(n, procs, ccr_, seed=seed)
                    opt = dplace.solve(inst, "cpsat", time_limit_s=time_limit, progress=False)
                    if opt.status != "optimal":
                        unproven += 1
                        continue
                    for i, (m, kw) in enumerate(runs):
                        gaps[i].append(dplace.solve(inst, m, **kw).makespan / opt.makespan - 1)
    tab = Table(title=f"gap to the proven optimum on classic task graphs, unlimited memory "
                      f"({len(gaps[0])} graphs; {unproven} left out: not proven optimal in {time_limit:g} s)")
    for col in ("method", "mean gap", "max gap", "optimal (gap < 1e-9)"):
        tab.add_column(col, justify="right")
    for (m, kw), g in zip(runs, gaps):
        if not g:
            continue
        label = m + ("" if not kw else " " + " ".join(f"{k}={v}" for k, v in kw.items()))
        tab.add_row(label, f"{100 * sum(g) / len(g):.1f} %", f"{100 * max(g):.0f} %",
                    str(sum(1 for x in g if x < 1e-9)))
    return tab


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-real", action="store_true", help="skip the bundled real graphs")
    ap.add_argument("--random", type=int, default=2000, help="random DAGs for the AP-vs-OP count (0: skip)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="per method on the real graphs")
    ap.add_argument("--classic", type=int, default=3, help="seeds per classic task-graph setting (0: skip)")
    args = ap.parse_args(argv)
    con = Console(width=max(Console().width, 180))
    con.print(transformer_table(args.ops, args.repeat))
    if not args.no_real:
        methods = [m for m in ("celeritas_balanced", "celeritas", "order_place_balanced", "order_place",
                               "standard_evaluation", "heft", "m_sct") if m in dplace.methods()]
        tab = real_table(methods, args.time_limit)
        con.print(tab if tab is not None else "no instances/*.json yet")
        tab = sweep_table([(200, 0.25), (200, 0.1), (200, 0.05), (50, 0.25), (20, 0.25)])
        if tab is not None:
            con.print(tab)
    if args.random:
        con.print(claim_table(args.random))
    if args.classic:
        con.print(classic_table(args.classic, 30.0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
