"""``dplace pipeline CHAIN.json``: best period of a pipelined chain (see :mod:`dplace.pipeline`).

Prints the period, the normalised period, the allocation, NCA per layer, memory per processor and the
pattern over two periods as text; ``--json`` prints the solution as JSON instead, ``--gantt`` draws it.
Light at import time: the solver modules load only when the command runs.
"""
from __future__ import annotations

import argparse
import json
import math
from typing import Any

from dplace.errors import InvalidInstanceError


def _memory(text: str) -> float | None:
    t = text.strip().lower()
    if t in ("none", "inf", "unlimited"):
        return None
    mult = 1.0
    for suf, f in (("kib", 2**10), ("mib", 2**20), ("gib", 2**30), ("kb", 1e3), ("mb", 1e6), ("gb", 1e9)):
        if t.endswith(suf):
            t, mult = t[: -len(suf)], f
            break
    try:
        v = float(t) * mult
    except ValueError:
        raise InvalidInstanceError(f"--memory must be a number of bytes (suffix kb/mb/gb/kib/mib/gib) or none, got {text!r}") from None
    if not math.isfinite(v) or v < 0:
        raise InvalidInstanceError(f"--memory must be >= 0 bytes, got {text!r}")
    return v


def _positive(text: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InvalidInstanceError(f"{what} must be a number > 0 or none, got {text!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise InvalidInstanceError(f"{what} must be a number > 0 or none, got {text!r}")
    return v


def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``dplace pipeline`` on the main CLI's subparsers."""
    p = subparsers.add_parser(
        "pipeline", help="least period of a pipelined chain (contiguous or general allocation, 1F1B*, k-periodic)",
        description="Pipelined model parallelism on a dplace-chain/1 file (Beaumont et al., Euro-Par 2021): the "
                    "least period T under per-processor memory, with NCA per layer and the periodic pattern.")
    p.add_argument("chain", help="dplace-chain/1 JSON file")
    p.add_argument("--processors", type=int, default=None, metavar="P", help="processor count (default: the chain's)")
    p.add_argument("--memory", default=None, metavar="M",
                   help="bytes per processor, e.g. 8gb, or none (default: the chain's)")
    p.add_argument("--bandwidth", default=None, metavar="BETA",
                   help="bytes/µs: each cut becomes a communication layer of 2·a/β (§3.1); none to drop it "
                        "(default: the chain's)")
    p.add_argument("--allocation", choices=("contiguous", "general"), default="contiguous",
                   help="contiguous: each processor runs a run of consecutive layers; general: any set of layers "
                   "(default contiguous)")
    p.add_argument("--method", choices=("dp", "cpsat", "milp"), default=None,
                   help="contiguous: dp (default, exact) or cpsat (CP-SAT model); general: cpsat; milp is another "
                        "name of cpsat")
    p.add_argument("--k", type=int, default=None, metavar="K",
                   help="K >= 2: the best K-periodic pattern of Theorem 4 (1F1B* with no idle time unrolled K+1 "
                        "times, one batch in K+1 dropped: fewer live activations, T/K = (1 + 1/K) x its period); "
                        "1: 1-periodic patterns only; default: Theorem-4 patterns for K = 2..--max-k when memory "
                        "binds, the least T/K kept")
    p.add_argument("--max-k", type=int, default=4, metavar="K",
                   help="largest K tried when --k is not given (default 4; 1 turns the search off)")
    p.add_argument("--time-limit", type=float, default=30.0, metavar="S", help="CP-SAT time limit (default 30)")
    p.add_argument("--seed", type=int, default=0, help="random seed of the CP-SAT search (default 0)")
    p.add_argument("--json", action="store_true", help="print the solution as JSON")
    p.add_argument("--gantt", metavar="FILE.png", help="draw the pattern over two periods")
    p.add_argument("--width", type=int, default=96, help="width of the text drawing (default 96)")
    p.set_defaults(func=cmd_pipeline)
    return p


def cmd_pipeline(args: argparse.Namespace) -> int:
    from .chain import load_chain
    from .draw import draw_pattern, save_gantt
    from .solution import describe_status
    from .solve import solve_pipeline

    chain = load_chain(args.chain)
    if args.processors is not None and args.processors < 1:
        raise InvalidInstanceError(f"--processors must be >= 1, got {args.processors}")
    if args.k is not None and args.k < 1:
        raise InvalidInstanceError(f"--k must be >= 1, got {args.k}")
    if args.max_k < 1:
        raise InvalidInstanceError(f"--max-k must be >= 1, got {args.max_k}")
    if not 0 < args.time_limit < math.inf:  # NaN fails too
        raise InvalidInstanceError(f"--time-limit must be a number of seconds > 0, got {args.time_limit}")
    if args.memory is not None:  # parsed here so that a bad value is a one-line DplaceError
        chain = chain.replace(memory=_memory(args.memory))
    if args.processors is not None:
        chain = chain.replace(processors=args.processors)
    if args.bandwidth is not None:
        bw = None if args.bandwidth.strip().lower() == "none" else _positive(args.bandwidth, "--bandwidth")
        chain = chain.replace(bandwidth=bw)
    sol = solve_pipeline(chain, allocation=args.allocation, method=args.method, k=args.k, max_k=args.max_k,
                         time_limit_s=args.time_limit, seed=args.seed)
    if args.gantt:
        save_gantt(sol.pattern, args.gantt, title=f"{chain.name}: {sol.method}, period {sol.period:g}")
    if args.json:
        print(json.dumps(sol.to_dict(), indent=1))
        return 0 if sol.ok else 1
    from rich.console import Console
    from rich.table import Table

    con = Console(highlight=False, soft_wrap=True)
    mem = "none" if sol.memory is None else f"{sol.memory:,.0f} B"
    con.print(f"[bold]{chain.name}[/bold]: {chain.L} layers, {sol.processors} processors, memory {mem}"
              + (f", bandwidth {chain.bandwidth:g} B/µs" if chain.bandwidth else ""))
    con.print(f"method {sol.method} ({args.allocation}), {sol.solve_time_s:.2f} s")
    con.print(f"status {describe_status(sol)}")
    con.print(f"period {sol.period:,.6g} µs, k = {sol.k}, normalised period T/k {sol.normalised_period:,.6g} µs"
              + ("" if sol.claimed_period is None else f" (model: {sol.claimed_period:,.6g})"))
    rows = sol.extra.get("k_search")
    if rows:
        con.print("patterns tried (k: T/k): " + ", ".join(
            f"{r['k']}: {r['normalised_period']:,.6g}" + ("" if r["allocation"] == args.allocation else f" ({r['allocation']})")
            + ("" if r["valid"] else " invalid") for r in rows))
    one = sol.extra.get("one_periodic")
    if one and one["optimal_over"]:
        con.print(f"the 1-periodic {one['method']} has period {one['period']:,.6g} µs, optimal over {one['optimal_over']} "
                  "patterns")
    if sol.extra.get("worse_than_1_periodic"):
        con.print(f"[bold]warning[/bold]: {sol.extra['worse_than_1_periodic']} (memory does not bind enough for "
                  "this k to pay)")
    con.print("pattern " + ("valid" if sol.ok else f"INVALID: {'; '.join(sol.report.errors[:3])}"))
    if sol.stages is not None:
        con.print("allocation: " + ", ".join(
            f"p{s}: {chain.layers[a].id}" + (f"..{chain.layers[b - 1].id}" if b - a > 1 else "")
            for s, (a, b) in enumerate(sol.stages)))
    table = Table(title="processors")
    for h in ("processor", "layers", "load µs", "weights B", "memory B", "NCA"):
        table.add_column(h, justify="right")
    for p in range(sol.processors):
        ls = [l for l in range(chain.L) if sol.allocation[l] == p]
        ncas = sorted({sol.nca[l] for l in ls})
        table.add_row(f"p{p}", _ranges(ls), f"{sum(chain.u[l] for l in ls):,.6g}",
                      f"{sum(chain.w[l] for l in ls):,.0f}", f"{sol.memory_used[p]:,.0f}",
                      ",".join(map(str, ncas)) or "—")
    con.print(table)
    con.print("NCA per layer: " + " ".join(f"{ly.id}={n}" for ly, n in zip(chain.layers, sol.nca)), soft_wrap=False)
    con.print("pattern over two periods (F/B + layer number, ^shift; = forward, - backward, . idle):")
    con.print(draw_pattern(sol.pattern, args.width), markup=False, highlight=False, soft_wrap=True)
    return 0 if sol.ok else 1


def _ranges(ls: list[int]) -> str:
    """1-based layer numbers as compact ranges: 1-3,7."""
    out, i = [], 0
    while i < len(ls):
        j = i
        while j + 1 < len(ls) and ls[j + 1] == ls[j] + 1:
            j += 1
        out.append(f"{ls[i] + 1}" if i == j else f"{ls[i] + 1}-{ls[j] + 1}")
        i = j + 1
    return ",".join(out) or "—"
