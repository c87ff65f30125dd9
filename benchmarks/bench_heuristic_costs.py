"""CPU cost of each heuristic that hints the exact methods, per (op x device): the figures behind
``HEURISTIC_US`` / ``_COMPILED_US`` / ``_FIRST_US`` / ``_NUMBA_S`` in ``formulations/heuristic_start.py``.

Each heuristic runs in a fresh Python process (after loading the instance and importing the methods), twice:
``first`` pays the instance's lazy indexes and, for a compiled kernel, importing numba and loading the
kernel from its on-disk cache; ``warm`` is the heuristic alone. CPU seconds (``time.process_time``) are what
the table uses: on a loaded machine wall time is several times larger. Run it twice after a kernel changed
(the first run of a changed kernel compiles it).

  .venv/bin/python benchmarks/bench_heuristic_costs.py t36k.json

t36k.json: `.venv/bin/dplace generate transformer --ops 36000 --devices 4 --out t36k.json`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def _child(path: str, name: str) -> None:
    import dplace
    from dplace.registry import method_info

    inst = dplace.load_instance(path)
    func = method_info(name).func
    out: dict = {"n": inst.n, "m": inst.m}
    for k in ("first", "warm"):
        t, c = time.perf_counter(), time.process_time()
        res = func(inst, time_limit_s=1.0, seed=0)
        out[k] = [time.process_time() - c, time.perf_counter() - t]
    out["makespan"] = res.makespan
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("--methods", default="", help="comma-separated (default: every heuristic that hints cpsat)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(args.instance, args.child)
        return 0
    from rich.console import Console
    from rich.table import Table

    from dplace.formulations.heuristic_start import _COMPILED_US, HEURISTIC_US, hint_heuristics

    names = [m for m in args.methods.split(",") if m] or hint_heuristics()
    try:
        load = f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    except OSError:  # pragma: no cover
        load = ""
    t = Table(title=f"heuristic CPU cost, {os.path.basename(args.instance)} ({load})")
    for c in ("heuristic", "first CPU s", "warm CPU s", "first wall s", "µs/(op·dev) first", "µs/(op·dev) warm",
              "table µs", "makespan"):
        t.add_column(c, justify="left" if c == "heuristic" else "right")
    for nm in names:
        p = subprocess.run([sys.executable, __file__, args.instance, "--child", nm], capture_output=True, text=True)
        try:
            d = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            t.add_row(nm, "failed: " + (p.stderr.strip().splitlines() or ["?"])[-1][:60], *[""] * 6)
            continue
        k = 1e6 / (d["n"] * d["m"])
        table = HEURISTIC_US.get(nm)
        table_s = f"{table:g}" + (f" / {_COMPILED_US[nm]:g} compiled" if nm in _COMPILED_US else "") if table else "-"
        t.add_row(nm, f"{d['first'][0]:.2f}", f"{d['warm'][0]:.2f}", f"{d['first'][1]:.2f}",
                  f"{k * d['first'][0]:.2f}", f"{k * d['warm'][0]:.2f}", table_s, f"{d['makespan']:.6g}")
    Console(width=160).print(t)
    return 0


if __name__ == "__main__":
    sys.exit(main())
