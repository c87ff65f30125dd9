"""Exact methods benchmark (issue #6). Prints tables; no timed asserts.

  A  cpsat vs milp-cbc vs milp-highs: time to a proven optimum on generated 8/12/16/20-op layered DAGs
     (``dplace.formats.generate.layered_dag``, CCR 1) with 2 and 4 devices, both comm modes optional.
  B  classic task-graph benchmarks (formulations._brute.task_graph: 10-30 tasks, 2-16 processors,
     CCR 0.1-10, transfers only between processors): share proven optimal by cpsat, with the targets
     "every 10-task case optimal in <= 2 s" and ">= 95 % of the 21-30-task cases optimal in 30 s".
  C  refine and portfolio vs the best heuristic on the bundled real graphs instances/*.json (60 s).

Usage: .venv/bin/python benchmarks/bench_exact.py [A] [B] [C] [--limit S] [--budget S] [--seeds N]
       [--comm parallel|sequential|both]
The machine may be shared: times are wall-clock and include contention; run parts separately.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import dplace
from dplace.formulations._brute import task_graph


def _fmt(res, t: float) -> str:
    if res.status == "optimal":
        return f"{t:7.2f}s"
    if res.makespan is None:
        return f"{res.status[:8]:>8}"
    return f" gap {100 * (res.gap or 0):4.1f}%"


def part_a(limit: float, seeds: int, comms: list[str]) -> None:
    from dplace.formats.generate import layered_dag

    print(f"\n## A. time to proven optimum (limit {limit:g} s; 'gap x%' = not proven within the limit)")
    solvers = [("cpsat", {"progress": False}), ("milp-cbc", {"solver": "cbc"}), ("milp-highs", {"solver": "highs"})]
    print(f"{'instance':34s} {'comm':10s} {'optimum':>10s} " + " ".join(f"{n:>11s}" for n, _ in solvers))
    tot = {n: [0, 0.0] for n, _ in solvers}
    for comm in comms:
        for n_ops in (8, 12, 16, 20):
            for m in (2, 4):
                for seed in range(seeds):
                    inst = layered_dag(n_ops, m, ccr=1.0, seed=seed, comm=comm)
                    cells = []
                    best = None
                    optima = []
                    for name, opts in solvers:
                        meth = name.split("-")[0]
                        t0 = time.perf_counter()
                        res = dplace.solve(inst, meth, time_limit_s=limit, **opts)
                        t = time.perf_counter() - t0
                        cells.append(_fmt(res, t))
                        if res.status == "optimal":
                            tot[name][0] += 1
                            tot[name][1] += t
                            best = res.makespan
                            optima.append(res.makespan)
                    if optima and max(optima) - min(optima) > 1e-6 * max(1.0, max(optima)):
                        cells.append(f"DISAGREE {optima}")
                    print(f"{inst.name[:34]:34s} {comm:10s} {best if best is not None else float('nan'):10.1f} "
                          + " ".join(f"{c:>11s}" for c in cells), flush=True)
    print("(every pair of proven optima above agrees to 1e-6 unless a row says DISAGREE)")
    print("proven optimal (count, mean time): " + ", ".join(
        f"{n} {c} ({(s / c if c else 0):.2f}s)" for n, (c, s) in tot.items()))


def part_b(seeds: int) -> None:
    print("\n## B. classic task graphs, cpsat (targets: 10 tasks optimal <= 2 s; 21-30 tasks >= 95 % optimal in 30 s)")
    print(f"{'n':>3s} {'procs':>5s} {'ccr':>5s} {'seed':>4s} {'status':>8s} {'makespan':>9s} {'bound':>9s} {'time':>7s}")
    groups = {"10": [], "21-30": []}
    for n, lim, key in [(10, 2.0, "10"), (21, 30.0, "21-30"), (25, 30.0, "21-30"), (30, 30.0, "21-30")]:
        for procs in (2, 4, 8, 16):
            for ccr in (0.1, 1.0, 10.0):
                for seed in range(seeds):
                    inst = task_graph(n, procs, ccr, seed=seed)
                    t0 = time.perf_counter()
                    res = dplace.solve(inst, "cpsat", time_limit_s=lim, progress=False)
                    t = time.perf_counter() - t0
                    ok = res.status == "optimal" and t <= lim + 0.5
                    groups[key].append((ok, t))
                    print(f"{n:3d} {procs:5d} {ccr:5g} {seed:4d} {res.status:>8s} {res.makespan:9.1f} "
                          f"{res.lower_bound:9.1f} {t:6.2f}s", flush=True)
    for key, rows in groups.items():
        k = sum(ok for ok, _ in rows)
        print(f"{key:>6s} tasks: {k}/{len(rows)} proven optimal within the limit ({100 * k / max(1, len(rows)):.1f} %), "
              f"max time {max(t for _, t in rows):.2f}s")


def part_c(budget: float) -> None:
    print(f"\n## C. refine / portfolio vs the best heuristic on bundled real graphs (budget {budget:g} s)")
    print(f"{'instance':30s} {'method':10s} {'makespan':>12s} {'bound':>12s} {'gap':>7s} {'time':>7s}  note")
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "..", "instances", "*.json"))):
        inst = dplace.load_instance(path)
        hs = [m for m in dplace.methods() if dplace.method_info(m).kind in ("heuristic", "baseline")]
        best = None
        for h in hs:
            t0 = time.perf_counter()
            try:
                r = dplace.solve(inst, h, time_limit_s=budget)
            except Exception as exc:  # noqa: BLE001
                print(f"{inst.name[:30]:30s} {h:10s} error: {exc}", file=sys.stderr)
                continue
            if r.makespan is not None and r.memory_ok and r.instance is inst and (best is None or r.makespan < best[1].makespan):
                best = (h, r, time.perf_counter() - t0)
        if best is not None:
            h, r, t = best
            print(f"{inst.name[:30]:30s} {'best heur.':10s} {r.makespan:12.1f} {r.lower_bound:12.1f} "
                  f"{100 * r.gap:6.1f}% {t:6.1f}s  {h}", flush=True)
        for meth in ("refine", "portfolio"):
            t0 = time.perf_counter()
            r = dplace.solve(inst, meth, time_limit_s=budget)
            t = time.perf_counter() - t0
            note = f"start {r.extra.get('start_method')}, coarse {r.extra.get('coarse_nodes')} nodes " \
                   f"({r.extra.get('coarse_makespan', float('nan')):.1f}), LNS {r.extra.get('lns_improvements')}/" \
                   f"{r.extra.get('lns_steps')} steps improved"
            print(f"{inst.name[:30]:30s} {meth:10s} {r.makespan:12.1f} {r.lower_bound:12.1f} {100 * r.gap:6.1f}% "
                  f"{t:6.1f}s  {note}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", default=["A", "B", "C"])
    ap.add_argument("--limit", type=float, default=30.0, help="time limit per solve in part A (s)")
    ap.add_argument("--budget", type=float, default=60.0, help="time budget per method in part C (s)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--comm", choices=["parallel", "sequential", "both"], default="parallel")
    a = ap.parse_args(argv)
    comms = ["parallel", "sequential"] if a.comm == "both" else [a.comm]
    print(f"bench_exact: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for p in a.parts:
        {"A": lambda: part_a(a.limit, a.seeds, comms), "B": lambda: part_b(a.seeds),
         "C": lambda: part_c(a.budget)}[p.upper()]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
