"""Proven-optimum rate of the exact methods with the claims' checks as shipped, or as before issue 29.

Issue 29 made the other formulation confirm claims at every size (was: up to 9 ops, a second search of the
same model above) and a same-solver re-solve never confirm alone. That costs time in the run and turns
claims no independent check confirms into ``feasible``: this prints how many runs end ``optimal`` on

  suites  every ``instances/suites/**/*.json`` (the small classic graphs and the bundled real graphs),
          methods cpsat, milp (HiGHS), refine, portfolio;
  tasks   classic task graphs (``formulations._brute.task_graph``: 10/21/25/30 tasks, 2 and 4
          processors, CCR 0.1/1/10), cpsat;

each under ``--time-limit`` seconds, with ``--claims new`` (as shipped) or ``old`` (``CROSS_MAX_OPS`` 9,
``SAME_SOLVER_CONFIRMS`` on: the settings before issue 29, on today's code). Rows go to ``--out`` (JSONL,
resumes). Run both settings at the same time so they share the machine's load:

  .venv/bin/python benchmarks/bench_proven_rate.py --claims old --out rate-old.jsonl &
  .venv/bin/python benchmarks/bench_proven_rate.py --claims new --out rate-new.jsonl

``--probing LEVEL`` sets CP-SAT's ``cp_model_probing_level`` in every search (``formulations/cpsat/search.py``
``PROBING_LEVEL``: 0 as shipped, since OR-Tools 9.15's probing proves wrong bounds; 2 is CP-SAT's default):
what turning probing off costs, e.g. ``--probing 2 --out p2.jsonl &`` beside ``--probing 0 --out p0.jsonl``.
``--methods`` keeps only the runs of those methods.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from pathlib import Path

import dplace
from dplace.verify import claims
from dplace.formulations._brute import task_graph

SUITE_METHODS = (("cpsat", {"progress": False}), ("milp", {"solver": "highs"}), ("refine", {}), ("portfolio", {}))


def cases(root: str) -> list[tuple[str, str, str, dict, object]]:
    """(group, instance name, method, options, instance loader) for every run."""
    out = []
    for path in sorted(glob.glob(os.path.join(root, "instances", "suites", "**", "*.json"), recursive=True)):
        for m, o in SUITE_METHODS:
            out.append(("suites", os.path.relpath(path, root), m, o, lambda p=path: dplace.load_instance(p)))
    for n in (10, 21, 25, 30):
        for procs in (2, 4):
            for ccr in (0.1, 1.0, 10.0):
                out.append(("tasks", f"task_graph({n},{procs},{ccr},seed=0)", "cpsat", {"progress": False},
                            lambda n=n, p=procs, c=ccr: task_graph(n, p, c, seed=0)))
    return out


def _gap(row: dict) -> float:
    """Proven gap in % (100 without an answer or a bound)."""
    mk, lb = row.get("makespan"), row.get("lower_bound")
    if mk is None or lb is None or not mk > 0:
        return 100.0
    return max(0.0, 100.0 * (mk - lb) / mk)


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", choices=("new", "old"), default="new")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--out", default="proven_rate.jsonl")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--probing", type=int, default=None, help="CP-SAT cp_model_probing_level (default: as shipped)")
    ap.add_argument("--methods", default=None, help="comma-separated: only runs of these methods")
    args = ap.parse_args(argv)
    if args.probing is not None:
        from dplace.formulations.cpsat import search

        search.PROBING_LEVEL = args.probing
    keep = set(args.methods.split(",")) if args.methods else None
    if args.claims == "old":
        claims.CROSS_MAX_OPS, claims.SAME_SOLVER_CONFIRMS = 9, True
    root = str(Path(__file__).resolve().parents[1])
    out = Path(args.out)
    rows = [json.loads(x) for x in out.read_text().splitlines() if x.strip()] if out.exists() else []
    done = {(r["instance"], r["method"]) for r in rows}
    if not args.summary_only:
        with out.open("a") as f:
            for group, name, method, opts, load in cases(root):
                if (name, method) in done or (keep is not None and method not in keep):
                    continue
                inst = load()
                t0 = time.perf_counter()
                try:
                    res = dplace.solve(inst, method, time_limit_s=args.time_limit, seed=0, **opts)
                    row = {"group": group, "instance": name, "n": inst.n, "method": method, "status": res.status,
                           "makespan": res.makespan, "lower_bound": res.lower_bound, "bound_source": res.bound_source,
                           "time_s": round(time.perf_counter() - t0, 3)}
                except Exception as exc:  # noqa: BLE001 — counted, not fatal
                    row = {"group": group, "instance": name, "n": inst.n, "method": method, "status": "error",
                           "error": repr(exc)[:200], "time_s": round(time.perf_counter() - t0, 3)}
                f.write(json.dumps(row) + "\n")
                f.flush()
                rows.append(row)
                print(f"{group:6s} {name[:44]:44s} {method:9s} {row['status']:9s} {row['time_s']:7.2f}s", flush=True)
    if keep is not None:
        rows = [r for r in rows if r["method"] in keep]
    probing = args.probing if args.probing is not None else "as shipped"
    print(f"\nprobing {probing}, claims {args.claims}, limit {args.time_limit:g} s, "
          f"loadavg {open('/proc/loadavg').read().split()[0]}")
    for group in ("suites", "tasks"):
        for method in sorted({r["method"] for r in rows if r["group"] == group}):
            rs = [r for r in rows if r["group"] == group and r["method"] == method]
            k = sum(r["status"] == "optimal" for r in rs)
            print(f"{group:6s} {method:9s} {k:3d}/{len(rs):3d} optimal ({100 * k / len(rs):5.1f} %)  "
                  f"mean {_mean(r['time_s'] for r in rs):6.2f} s  mean gap {_mean(_gap(r) for r in rs):6.2f} %")
        rs = [r for r in rows if r["group"] == group]
        if rs:
            k = sum(r["status"] == "optimal" for r in rs)
            print(f"{group:6s} {'all':9s} {k:3d}/{len(rs):3d} optimal ({100 * k / len(rs):5.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
