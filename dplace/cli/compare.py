"""``dplace compare``: several methods on one instance, one after another, in one table."""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import DplaceError, InvalidInstanceError
from .common import add_command, add_run_args, console, fmt, fmt_bytes, load, pct, progress_mode, say_interrupted


def add_compare(subparsers: Any) -> argparse.ArgumentParser:
    s = add_command(subparsers, "compare", cmd_compare, "run several methods on one instance and print a table")
    s.add_argument("--methods", default=None, help="comma-separated (default: every method suited to the size)")
    add_run_args(s)
    s.add_argument("--out", metavar="FILE.json", help="write the rows (dplace-compare/1 JSON) here")
    s.add_argument("--bound-time", type=_seconds_or_zero, default=None, metavar="S",
                   help="seconds of CP-SAT for the segment bound computed beside the methods' own (default: a "
                   "quarter of --time-limit, at most 10, on graphs of 50 to 20,000 ops; 0: none)")
    return s


def cmd_compare(args: argparse.Namespace) -> int:
    """Run several methods on one instance, one after another, and print a table: status, simulated makespan,
    proven bound, gap to the best bound any method proved, time, peak memory and the checker's verdict. A method
    that fails is a row, not an abort."""
    import time

    from .. import interrupt, progress
    from ..verify.check import check
    from ..verify.claims import Bound, best_bound
    from ..registry import check_time_limit, method_info, solve
    from ..result import compute_gap

    check_time_limit(args.time_limit)
    inst = load(args.instance)
    names = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else default_compare_methods(inst)
    if not names:
        raise InvalidInstanceError(f"--methods: no method named in {args.methods!r}" if args.methods
                                   else f"no registered method suits {inst.name!r} ({inst.n} ops)")
    for n in names:
        method_info(n)  # unknown names fail before anything runs
    rows = []
    with progress.reporting(f"compare {inst.name}", mode=progress_mode(args)) as rep:
        for i, name in enumerate(names):
            if interrupt.requested():
                rows.append(_compare_row(name, "not run", "interrupted before it started"))
                continue
            rep.task(f"[{i + 1}/{len(names)}] {name}")
            t0 = time.perf_counter()
            try:
                res = solve(inst, name, time_limit_s=args.time_limit, seed=args.seed)
            except KeyboardInterrupt:  # a method that does not poll the flag: stopped with no answer
                interrupt.request()
                rows.append(_compare_row(name, "interrupted", "interrupted before it had an answer",
                                         time_s=time.perf_counter() - t0, interrupted=True))
                continue
            except DplaceError as exc:
                rows.append(_compare_row(name, "error", str(exc)))
                continue
            with interrupt.polling():
                rep.phase("check")
                chk = check(res.instance, res)
                rows.append(_compare_row(
                    name, res.status, res.message, makespan=res.makespan, lower_bound=res.lower_bound,
                    bound_source=res.bound_source, gap=res.gap,
                    time_s=res.solve_time_s, peak_memory=max(res.schedule.memory) if res.schedule else None,
                    memory_ok=res.memory_ok, check=chk.summary(), ok=bool(res.memory_ok and chk.ok),
                    # solved a rewritten graph (OS-DPOS splits): its bound is not one of this instance
                    transformed=res.transform is not None,
                    interrupted=bool(res.interrupted or interrupt.requested())))
        strong = None if interrupt.requested() else _strong_bound(inst, args, rep)
        interrupted = interrupt.requested()
        with interrupt.polling():
            best = best_bound(rows, base=None if strong is None else
                              Bound(strong.value, f"{strong.name} (bound portfolio, {strong.time_s:.1f} s)"))
            best_lb, best_src = (None, None) if best is None else (best.value, best.source)
            for r in rows:
                r["gap_to_best_bound"] = compute_gap(r["makespan"], best_lb)
            data = {"format": "dplace-compare/1", "instance": inst.name, "instance_file": args.instance,
                    "time_limit_s": args.time_limit, "seed": args.seed, "best_lower_bound": best_lb,
                    "best_bound_source": best_src, "interrupted": interrupted, "rows": rows,
                    "bound_portfolio": None if strong is None else
                    {"source": strong.name, "value": strong.value, "time_s": strong.time_s}}
            if args.out:
                from ..instance.io import write_atomic

                write_atomic(args.out, json.dumps(data, indent=1) + "\n")
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        _print_compare(inst, rows, best_lb, best_src)
    if interrupted:
        done = sum(1 for r in rows if r["status"] not in ("not run", "interrupted"))
        say_interrupted(f"{done} of {len(rows)} method(s) gave an answer (the one running was cut short: "
                        "interrupted: true)" + (f"; rows written to {args.out}" if args.out else ""))
        return interrupt.EXIT_CODE
    return 0


def _seconds_or_zero(text: str) -> float:
    """argparse type of ``--bound-time``: a finite number of seconds >= 0."""
    import math

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (v >= 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, got {text!r}")
    return v


def _strong_bound(inst, args: argparse.Namespace, rep: Any):
    """dplace.bounds.strong_bound within --bound-time (its default: a quarter of the time limit, at most
    10 s, on graphs of 50 to 20,000 ops, where the segment bound is worth its cost); None when off, or
    when the instance has no bound to give (infeasible memory: the rows say so)."""
    from .. import interrupt
    from ..bounds import strong_bound

    budget = args.bound_time
    if budget is None:
        budget = min(10.0, 0.25 * (args.time_limit or 10.0)) if 50 <= inst.n <= 20000 else 0.0
    if budget <= 0:
        return None
    rep.task("segment bound")
    try:
        with interrupt.polling():
            return strong_bound(inst, time_limit_s=budget, should_stop=interrupt.requested)
    except DplaceError:
        return None


def default_compare_methods(inst) -> list[str]:
    """Every registered method that is meant for an instance of this size."""
    from ..registry import method_info, methods

    out = []
    for name in methods():
        info = method_info(name)
        if info.max_ops is not None and inst.n > info.max_ops:
            continue
        out.append(name)
    return out


def _compare_row(name: str, status: str, message: str | None = None, **kw: Any) -> dict[str, Any]:
    row = {"method": name, "status": status, "makespan": None, "lower_bound": None, "bound_source": None,
           "gap": None, "time_s": None,
           "peak_memory": None, "memory_ok": None, "check": "", "ok": False, "message": message, "transformed": False,
           "interrupted": False}
    row.update(kw)
    return row


def _print_compare(inst, rows: list[dict[str, Any]], best_lb: float | None, best_src: str | None) -> None:
    from rich.table import Table

    t = Table(title=f"{inst.name}: {inst.n} ops, {inst.m} devices, comm {inst.comm} — best proven bound {fmt(best_lb)} µs")
    for col, just in (("method", "left"), ("status", "left"), ("makespan µs", "right"), ("lower bound µs", "right"),
                      ("gap", "right"), ("time s", "right"), ("peak memory", "right"), ("check", "left")):
        t.add_column(col, justify=just)
    for r in rows:
        mem = fmt_bytes(r["peak_memory"]) + ("" if r["memory_ok"] in (True, None) else " (over)")
        status = r["status"] + (" (interrupted)" if r["interrupted"] and r["status"] != "interrupted" else "")
        t.add_row(r["method"], status, fmt(r["makespan"]), fmt(r["lower_bound"]), pct(r["gap_to_best_bound"]),
                  fmt(r["time_s"], 3), mem, r["check"] if r["makespan"] is not None else (r["message"] or "")[:60])
    console().print(t)
    console().print(f"best proven bound: {fmt(best_lb)} µs, source {best_src}")
    console().print("gap = (makespan − best proven lower bound over all methods) / makespan; makespans are the simulator's.")
