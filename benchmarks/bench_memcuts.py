"""The cuts memory forces on the critical path, old code beside new (issue #25 item 4, session 25): ``memory_cuts``,
``segments_memory`` and the proven lower bound with its source, per graph and comm mode, and the gap of a
result file's makespan against each bound.

Session 25 changed both bounds (``dplace/bounds/memory.py``): in sequential comm a run boundary also waits for
the sends that the run's path ops make to the next run's units, one at a time on the link in the order the
producers finish (``sequential_cut_cost``); and the segment bound counts a forced boundary in every segment,
less the segment's slack (before: in trivial segments only).

    .venv/bin/python benchmarks/bench_memcuts.py --old 7689dff                     # PipeDream graphs, both modes
    .venv/bin/python benchmarks/bench_memcuts.py --graphs resnext50,vgg16 --comm sequential --answer r.json

Each cell runs ``dplace info F --bounds --bounds-time S --json`` as its own process (the segment bound's
CP-SAT is given ``--bounds-time``: a loaded machine may prove less in it; the load is printed).

``--audit N``: both bounds against the brute-force optimum (:func:`dplace.verify.oracle.brute_force`, written
from the model text) on N memory-tight chains with skip edges per comm mode (:func:`dplace.testing.chain_with_skips`,
magnitudes 1e-3..1e10): how many lie above it (goal 0), and how often the link queue and the slack rule raise
them above the bounds before (the parallel cut cost; forced cuts in trivial segments only).

    .venv/bin/python benchmarks/bench_memcuts.py --audit 2000 --graphs ""
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_nas import convert  # noqa: E402
from bench_seqcomm import NEW, _old_exe  # noqa: E402

GRAPHS = "resnext50,resnet50,resnet101,vgg16,inception_v3,nasnetamobile"


def run_json(exe: str, args: list[str], timeout: float) -> dict | None:
    """``exe args`` in its own process (this venv's PYTHONPATH dropped), its stdout read as JSON; None on failure."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    try:
        p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    if p.returncode != 0:
        return None
    return json.loads(p.stdout)


def bounds(exe: str, graph: str, seconds: float, timeout: float) -> dict | None:
    """``dplace info --bounds --json`` of ``graph`` by ``exe``: its parts and lower bound; None on failure."""
    return run_json(exe, ["info", graph, "--bounds", "--bounds-time", str(seconds), "--json"], timeout)


def instance_files(graphs: str, instances: str, comms: list[str], tmp: str) -> list[tuple[str, str, str]]:
    """(name, comm, path) per comm mode: the PipeDream ``graphs`` converted as the issue says, the ``instances``
    (files, comma-separated) written in each mode."""
    files = []
    for g in [g for g in graphs.split(",") if g]:
        files.extend((g, c, convert(g, c, tmp)) for c in comms)
    for path in [p for p in instances.split(",") if p]:
        with open(path) as f:
            d = json.load(f)
        name = os.path.splitext(os.path.basename(path))[0]
        for c in comms:
            out = os.path.join(tmp, f"{name}_{c}.json")
            with open(out, "w") as f:
                json.dump(dict(d, comm=c), f)
            files.append((name, c, out))
    return files


def audit(n: int, start: int) -> None:
    """The ``--audit`` table (module docstring)."""
    import math

    from dplace.bounds import memory_cuts_bound
    from dplace.bounds.memory import _guard, forced_cut_cost, path_edge_costs, segment_cut_costs
    from dplace.errors import InvalidInstanceError
    from dplace.formulations.bounds_segments import segment_bound
    from dplace.instance.graph import critical_path_ops
    from dplace.testing import chain_with_skips
    from dplace.verify.oracle import brute_force

    print("| comm | instances | memory_cuts above the optimum | segments_memory above | queue raises memory_cuts | "
          "every segment raises segments_memory | optimum reached by either |")
    print("|---|---|---|---|---|---|---|")
    for comm in ("sequential", "parallel"):
        checked = wrong_mc = wrong_sb = queue = slack = reached = 0
        for seed in range(start, start + n):
            try:
                inst = chain_with_skips(seed, comm)
            except InvalidInstanceError:
                continue
            orc = brute_force(inst)
            if orc.optimum is None:
                continue
            opt, tol = orc.optimum, 1e-6 * max(1.0, abs(orc.optimum))
            path = critical_path_ops(inst)
            mc = memory_cuts_bound(inst)
            base = sum(min(inst.dur[o]) for o in path)
            par = forced_cut_cost(inst, path, _guard(inst, path, path_edge_costs(inst, path)))
            sb = segment_bound(inst, time_limit_s=2.0)
            widest = [p for p in sb.pieces if p["window"] == sb.window]
            old = [(p["a"], p["b"], p["bound_us"] if p["b"] == p["a"] + 1 and p["ops"] == 2 else math.inf, False)
                   for p in widest]
            before = segment_cut_costs(inst.replace(comm="parallel"), path, old)
            checked += 1
            wrong_mc += mc > opt + tol
            wrong_sb += sb.best[0] > opt + tol
            queue += mc > base + (par if par < math.inf else 0.0) + tol
            slack += sb.memory_cuts > before + tol
            reached += max(mc, sb.best[0]) >= opt - tol
        print(f"| {comm} | {checked} | {wrong_mc} | {wrong_sb} | {queue} | {slack} | {reached} |", flush=True)


def num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def gap(makespan: float | None, bound: float | None) -> str:
    if makespan is None or not bound:
        return "-"
    return f"{100 * (makespan - bound) / makespan:.1f} %"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default=GRAPHS, help="PipeDream profiles (instances/sources/pipedream-profiles)")
    ap.add_argument("--instances", default="", help="instance files, comma-separated (taken in their own comm "
                                                      "mode and in the other)")
    ap.add_argument("--comm", default="parallel,sequential")
    ap.add_argument("--old", default=None, help="dplace executable of the old code, or a git revision")
    ap.add_argument("--bounds-time", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--answer", action="append", default=[],
                    help="GRAPH:COMM=result.json: a makespan whose gap to each bound is printed (repeatable)")
    ap.add_argument("--audit", type=int, default=0, help="N: the bounds against brute force (module docstring)")
    ap.add_argument("--start", type=int, default=0, help="--audit: the first seed")
    args = ap.parse_args(argv)
    if args.audit:
        audit(args.audit, args.start)
        if not args.graphs and not args.instances:
            return 0
    answers = {}
    for a in args.answer:
        key, path = a.split("=", 1)
        with open(path) as f:
            answers[key] = json.load(f)["makespan"]
    comms = [c for c in args.comm.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp:
        old = args.old
        if old and not os.path.isfile(old):
            old = _old_exe(old, tmp)
        files = instance_files(args.graphs, args.instances, comms, tmp)
        cols = ["graph", "comm", "memory_cuts old", "new", "segments_memory old", "new", "bound old (source)",
                "bound new (source)"] + (["answer", "gap old", "gap new"] if answers else [])
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        for name, comm, path in files:
            new = bounds(NEW, path, args.bounds_time, args.timeout)
            was = bounds(old, path, args.bounds_time, args.timeout) if old else None

            def part(r: dict | None, key: str) -> float | None:
                return None if r is None else r["lower_bound_parts"].get(key)

            def lb(r: dict | None) -> str:
                return "-" if r is None else f"{num(r['lower_bound'])} ({r['bound_source']})"

            row = [name, comm, num(part(was, "memory_cuts")), num(part(new, "memory_cuts")),
                   num(part(was, "segments_memory")), num(part(new, "segments_memory")), lb(was), lb(new)]
            if answers:
                mk = answers.get(f"{name}:{comm}")
                row += [num(mk), gap(mk, was and was["lower_bound"]), gap(mk, new and new["lower_bound"])]
            print("| " + " | ".join(row) + " |", flush=True)
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
