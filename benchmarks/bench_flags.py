"""Alternated whole ``dplace solve`` processes under module settings: the A/B comparisons behind dplace's
tuning constants (session 22: ``dplace.kernels.LINK_MOVES`` / ``LINK_REPLAYS``, the sequential-comm list
schedulers' link policy; ``dplace.formulations.large.PAR_FIRST_AS_PARALLEL``).

Each ``--set`` is one variant: comma-separated ``module.NAME=value`` assignments (a Python literal; the
module's attribute must exist) applied in a fresh process before ``dplace solve GRAPH --method M --out R``
runs there; ``--set ''`` is the shipped code. The variants run in turn, ``--rounds`` times (old and new
alternated, so that the load falls on both alike). Per run: wall and CPU s (user + system of the process),
the makespan of R as ``dplace.result_from_dict`` rebuilds it (simulated again), its proven bound, and the
fields named by ``--extra`` (dotted paths into R's ``extra``, e.g. ``anneal_parallel.parallel_makespan``).

    .venv/bin/python benchmarks/bench_flags.py t36k_seq.json --method heft \\
        --set dplace.kernels.LINK_MOVES=-1 --set '' --set dplace.kernels.LINK_MOVES=0,dplace.kernels.LINK_REPLAYS=0
    .venv/bin/python benchmarks/bench_flags.py nas_seq.json --method portfolio --time-limit 60 --rounds 5 \\
        --set dplace.formulations.large.PAR_FIRST_AS_PARALLEL=True \\
        --set dplace.formulations.large.PAR_FIRST_AS_PARALLEL=False --extra anneal_parallel.parallel_makespan
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# the child: apply the settings, then the dplace program in this process
_CHILD = """
import importlib, sys
for name, value in {sets!r}:
    mod, attr = name.rsplit(".", 1)
    m = importlib.import_module(mod)
    if not hasattr(m, attr):
        sys.exit(f"bench_flags: {{mod}} has no {{attr}}")
    setattr(m, attr, value)
from dplace.cli import run
sys.argv = ["dplace"] + {argv!r}
run()
"""


def parse_set(text: str) -> list[tuple[str, object]]:
    """``a.b.C=1,a.D=True,a.E=(1,2)`` -> [("a.b.C", 1), ("a.D", True), ("a.E", (1, 2))]; '' -> []."""
    out = []
    parts, depth, cur = [], 0, ""
    for ch in text:  # commas inside brackets belong to the value: SEQUENTIAL_T=(3e-4,1e-5)
        depth += (ch in "([{") - (ch in ")]}")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    for item in filter(None, (x.strip() for x in parts)):
        name, sep, value = item.partition("=")
        if not sep or "." not in name:
            raise SystemExit(f"bench_flags: --set wants module.NAME=value, got {item!r}")
        out.append((name.strip(), ast.literal_eval(value.strip())))
    return out


def _dig(d, path: str):
    for k in path.split("."):
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def run_one(graph: str, method: str, sets, out: str, extra_args: list[str]) -> dict:
    """One ``dplace solve`` process under ``sets``: wall, cpu, makespan (re-simulated), bound, the result dict."""
    from dplace.instance.io import load_instance
    from dplace.result import result_from_dict

    argv = ["solve", graph, "--method", method, "--out", out, "--quiet", *extra_args]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", _CHILD.format(sets=sets, argv=argv)], env=env, cwd=str(ROOT),
                       capture_output=True, text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"bench_flags: exit {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}")
    data = json.loads(Path(out).read_text())
    res = result_from_dict(load_instance(graph), data)
    return {"wall": wall, "cpu": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, "makespan": res.makespan,
            "bound": res.lower_bound, "data": data}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--method", required=True)
    ap.add_argument("--set", dest="sets", action="append", required=True,
                    help="a variant: module.NAME=value[,...] ('' = the shipped code); give two or more")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--time-limit", type=float, default=None)
    ap.add_argument("--extra", default="", help="comma-separated dotted paths into the result's extra")
    args = ap.parse_args(argv)
    variants = [(s, parse_set(s)) for s in args.sets]
    extras = [e for e in args.extra.split(",") if e]
    more = ["--time-limit", str(args.time_limit)] if args.time_limit is not None else []
    print(f"{args.graph} --method {args.method} {' '.join(more)}; load {open('/proc/loadavg').read().split()[:3]}")
    print("| round | variant | wall s | CPU s | makespan µs | bound µs | " + " | ".join(extras) + " |")
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for i, (label, sets) in enumerate(variants):
                got = run_one(args.graph, args.method, sets, os.path.join(tmp, f"r{r}_{i}.json"), more)
                cells = [str(_dig(got["data"].get("extra", {}), e)) for e in extras]
                bound = "-" if got["bound"] is None else f"{got['bound']:,.0f}"
                print(f"| {r + 1} | {label or '(shipped)'} | {got['wall']:.2f} | {got['cpu']:.2f} | "
                      f"{got['makespan']:,.0f} | {bound} | " + " | ".join(cells) + " |", flush=True)
    print(f"load {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
