"""Paper settings vs dplace's variants (issue 27): makespan and time of each paper method beside its
registered improvement, and the papers' own comparisons reproduced.

Run: ``.venv/bin/python benchmarks/bench_papers.py [--real 'instances/*.json'] [--ample] [--classic N]
[--time-limit S] [--markdown]``

Prints:
1. per bundled real graph (``--real``; ``--ample``: also each with device memory raised so one device
   holds the model, where Baechi places only the forward graph) and per pair (paper method, variant):
   both makespans (simulator), variant / paper, and both wall times of ``dplace.solve``;
2. on the exact-solvable suite ``instances/suites/small`` and on classic task graphs with unlimited
   memory (``formulations._brute.task_graph``: 10 tasks, 2/4 processors, CCR 0.1/1/10, ``--classic`` seeds
   each): the mean makespan / best-of-all-methods ratio per method;
3. the papers' comparisons on the same graphs: Celeritas' Adjusting Placement (``celeritas``) against
   Order-Place (§5.2's proof that AP is no later than Order-Place node by node on the coarse model;
   Table 3: 5.8 % faster steps on Transformer), and m-SCT against m-ETF (Baechi §2.4: SCT's bound is
   strictly better than ETF's; Celeritas §7: "m-SCT performs the best" of Baechi's), counted as
   wins / ties / losses, for the paper settings and the variants.
"""
from __future__ import annotations

import argparse
import glob
import os
import time

from rich.console import Console
from rich.table import Table

import dplace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAIRS = [("celeritas", "celeritas_balanced"), ("order_place", "order_place_balanced"),
         ("standard_evaluation", None), ("m_topo", "m_topo_capped"), ("m_etf", "m_etf_capped"),
         ("m_sct", "m_sct_capped"), ("dpos", None), ("os_dpos", "os_dpos_model_graph")]
# the papers' own comparisons: (claimed better, than), paper settings and the variants
CLAIMS = [("celeritas", "order_place"), ("celeritas_balanced", "order_place_balanced"),
          ("m_sct", "m_etf"), ("m_sct_capped", "m_etf_capped")]


def _run(inst, method: str, time_limit: float) -> tuple[float | None, float, bool]:
    t0 = time.perf_counter()
    res = dplace.solve(inst, method, time_limit_s=time_limit)
    return res.makespan, time.perf_counter() - t0, bool(res.memory_ok)


def _ample(inst):
    """``inst`` with every device holding the whole model (Baechi's "memory is sufficient")."""
    from dplace.model import Device

    total = sum(inst.mem)
    devs = [Device(d.name, max(d.memory, total), d.speed) for d in inst.devices]
    return inst.replace(name=inst.name + "+ample", devices=devs)


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def real_table(paths: list[str], ample: bool, time_limit: float) -> tuple[Table, list[list[str]]]:
    tab = Table(title="paper setting vs dplace variant on the bundled real graphs (makespan µs, simulator; "
                      "time s, dplace.solve wall)")
    cols = ["graph", "paper method", "makespan", "time", "variant", "makespan ", "time ", "variant / paper"]
    for c in cols:
        tab.add_column(c, justify="right")
    rows: list[list[str]] = []
    for p in paths:
        base = dplace.load_instance(p)
        for inst in ([base, _ample(base)] if ample else [base]):
            for paper, variant in PAIRS:
                mp, tp, okp = _run(inst, paper, time_limit)
                row = [inst.name, paper, _fmt(mp) + ("" if okp else " (mem!)"), f"{tp:.2f}"]
                if variant is None:
                    row += ["-", "-", "-", "-"]
                else:
                    mv, tv, okv = _run(inst, variant, time_limit)
                    ratio = f"{mv / mp:.3f}" if mp and mv else "-"
                    row += [variant, _fmt(mv) + ("" if okv else " (mem!)"), f"{tv:.2f}", ratio]
                tab.add_row(*row)
                rows.append(row)
    return tab, rows


def _suite(classic: int) -> list:
    from dplace.formulations._brute import task_graph

    out = [dplace.load_instance(p) for p in sorted(glob.glob(os.path.join(ROOT, "instances", "suites", "small", "*.json")))]
    for procs in (2, 4):
        for ccr in (0.1, 1.0, 10.0):
            out.extend(task_graph(10, procs, ccr, seed=s) for s in range(classic))
    return out


def small_tables(classic: int, time_limit: float) -> tuple[Table, Table, list[list[str]], list[list[str]]]:
    insts = _suite(classic)
    names = [m for pair in PAIRS for m in pair if m]
    ms: dict[str, list[float]] = {m: [] for m in names}
    secs: dict[str, float] = {m: 0.0 for m in names}
    for inst in insts:
        got = {}
        for m in names:
            mk, dt, _ = _run(inst, m, time_limit)
            got[m] = mk
            secs[m] += dt
        best = min(v for v in got.values() if v is not None)
        for m in names:
            ms[m].append(got[m] / best if got[m] is not None else float("nan"))
    n = len(insts)
    t1 = Table(title=f"suite + classic task graphs ({n} graphs: instances/suites/small and 10-task graphs, "
                     "unlimited memory): makespan / best of these methods")
    for c in ("method", "mean ratio", "max ratio", "best on", "total time s"):
        t1.add_column(c, justify="right")
    rows1 = []
    for m in names:
        r = ms[m]
        row = [m, f"{sum(r) / n:.3f}", f"{max(r):.3f}", str(sum(1 for x in r if x < 1 + 1e-9)), f"{secs[m]:.2f}"]
        t1.add_row(*row)
        rows1.append(row)
    t2 = Table(title=f"the papers' comparisons on the same {n} graphs (wins / ties / losses of the first)")
    for c in ("claim", "wins", "ties", "losses", "mean first / second"):
        t2.add_column(c, justify="right")
    rows2 = []
    for a, b in CLAIMS:
        w = t = l = 0
        rs = []
        for ra, rb in zip(ms[a], ms[b]):
            rs.append(ra / rb)
            if abs(ra - rb) <= 1e-9 * max(ra, rb):
                t += 1
            elif ra < rb:
                w += 1
            else:
                l += 1
        row = [f"{a} vs {b}", str(w), str(t), str(l), f"{sum(rs) / len(rs):.3f}"]
        t2.add_row(*row)
        rows2.append(row)
    return t1, t2, rows1, rows2


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(h.strip() for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", default=os.path.join(ROOT, "instances", "*.json"), help="glob of real graphs")
    ap.add_argument("--ample", action="store_true", help="also each real graph with memory for the whole model")
    ap.add_argument("--classic", type=int, default=3, help="seeds per classic task-graph setting (0: none)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="per method and graph (s)")
    ap.add_argument("--markdown", action="store_true", help="also print the tables as Markdown")
    args = ap.parse_args(argv)
    con = Console(width=max(Console().width, 160))
    paths = sorted(glob.glob(args.real))
    t0, rows0 = real_table(paths, args.ample, args.time_limit)
    con.print(t0)
    t1, t2, rows1, rows2 = small_tables(args.classic, args.time_limit)
    con.print(t1)
    con.print(t2)
    if args.markdown:
        con.print(_markdown([c.header for c in t0.columns], rows0), markup=False, highlight=False, soft_wrap=True)
        con.print(_markdown([c.header for c in t1.columns], rows1), markup=False, highlight=False, soft_wrap=True)
        con.print(_markdown([c.header for c in t2.columns], rows2), markup=False, highlight=False, soft_wrap=True)
    try:
        con.print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
