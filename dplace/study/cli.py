"""``dplace bench`` (a row of the command table in :mod:`dplace.cli`) and ``python -m dplace.study``."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from .. import interrupt
from ..errors import DplaceError
from .plan import DEFAULT_TIME_LIMIT_S
from .run import EXECUTORS, run_bench


def add_bench(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``dplace bench`` on the main CLI's subparsers."""
    p = subparsers.add_parser(
        "bench", help="run a study: every instance x method x repeat, gaps to the best proven bound",
        description="Run every (instance, method, repeat) pair with a time limit each, record one row per run "
                    "in OUT/rows (resumable), and write results.csv, results.json, report.md and plots in OUT.",
    )
    p.add_argument("instances", nargs="+", help="instance files, or directories of *.json (searched recursively)")
    p.add_argument("--methods", default=None, help="comma-separated method names, each optionally with options as name:key=value:key=value "
                        "(default: all registered methods, each on the instances up to its max_ops)")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S, metavar="S",
                   help=f"time limit per run in seconds, given to the method (default {DEFAULT_TIME_LIMIT_S:g})")
    p.add_argument("--hard-limit", type=float, default=None, metavar="S",
                   help="wall limit per run before the worker is killed (default 1.5 x time limit + 10)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per pair, seeds seed..seed+N-1 (default 1)")
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--out", default="bench-out", metavar="DIR",
                   help="output folder; reused to resume: pairs whose row has the same method, options, time limit, "
                   "seed, instance file and dplace version are skipped, the others rerun (default bench-out)")
    p.add_argument("--executor", choices=EXECUTORS, default="local", help="local process pool or Ray tasks")
    p.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="parallel runs (default: the machine's cores; 0 = in this process, no hard limit)")
    p.add_argument("--retry-failed", action="store_true", help="rerun pairs whose row is an error/timeout/crash")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress (bar, or lines when not on a terminal) and no summary table")
    p.set_defaults(func=cmd_bench)
    return p


def cmd_bench(args: argparse.Namespace) -> int:
    run = run_bench(
        args.instances, args.methods, out=args.out, time_limit_s=args.time_limit, repeat=args.repeat,
        seed=args.seed, executor=args.executor, address=args.address, workers=args.workers,
        hard_limit_s=args.hard_limit, retry_failed=args.retry_failed, plots=not args.no_plots,
        progress=False if args.quiet else (True if sys.stderr.isatty() else "plain"),
    )
    if not args.quiet:
        from rich.console import Console
        from rich.table import Table

        from .report import summary_table_rows

        header, lines = summary_table_rows(run.summary, short=True)
        table = Table(title=f"dplace bench: {len(run.rows)} runs ({run.ran} run now, {run.skipped} resumed"
                            + (f", {run.rerun} of them rerun with new settings" if run.rerun else "")
                            + ("; INTERRUPTED" if run.interrupted else "") + "); gap = to the best proven bound")
        for h in header:
            table.add_column(h, justify="left" if h == "method" else "right", no_wrap=True)
        for line in lines:
            table.add_row(*line)
        console = Console(highlight=False)
        if console.width < 132:
            console = Console(highlight=False, width=132)
        console.print(table)
        console.print(f"wrote {Path(args.out) / 'report.md'} and {len(run.files) - 1} more file(s) in {args.out}")
    return interrupt.EXIT_CODE if run.interrupted else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dplace.study ...``: the same command without the main CLI."""
    parser = argparse.ArgumentParser(prog="dplace")
    sub = parser.add_subparsers(dest="command", required=True)
    add_bench(sub)
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    try:
        with interrupt.handling():
            return args.func(args)
    except DplaceError as exc:
        print(f"dplace bench: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
