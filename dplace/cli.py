"""The ``dplace`` command line.

User mistakes (a DplaceError) print one line on stderr and exit with code 2, with no traceback and no
half-written output file (every file is written to a temporary name, then renamed).

Long commands show progress on stderr (:mod:`dplace.progress`) and handle Ctrl-C (:mod:`dplace.interrupt`):
the first one returns the best answer so far, marked ``interrupted: true``, writes it and exits with 130;
the second exits at once (130).
"""
from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from typing import Any, Sequence

from .errors import DplaceError, InvalidInstanceError
from .viz import COLOR_BY

# modules that add their own sub-commands through ``add_cli(subparsers)``
_PLUGINS = (
    "dplace.generate",
    "dplace.convert",
    "dplace.bench",
    "dplace.formulations.pipeline_cli",
    "dplace.runtime.cli",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors: one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞"
        return f"{x:,.{digits}f}"
    return str(x)


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def _bytes(x: float | None) -> str:
    if x is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:,.1f} {unit}" if unit != "B" else f"{int(x)} B"
        x /= 1024
    return str(x)  # pragma: no cover


def _console(stderr: bool = False):
    import shutil

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else max(shutil.get_terminal_size((160, 24)).columns, 160)
    return Console(stderr=stderr, highlight=False, width=width)


def _parse_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for item in getattr(args, "option", None) or []:
        if "=" not in item:
            raise InvalidInstanceError(f"--option must look like KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        flag = {"seed": "--seed", "time_limit_s": "--time-limit"}.get(k.strip())
        if flag:
            raise InvalidInstanceError(f"--option {k.strip()!r}: give it as {flag}")
        opts[k.strip()] = v.strip()
    for name in ("R", "M", "solver"):
        v = getattr(args, name, None)
        if v is not None:
            opts[name] = v
    return opts


def seconds(text: str) -> float:
    """argparse type of ``--time-limit``: a finite number of seconds > 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not (v > 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0 (leave it out for no limit), "
                                         f"got {text!r}")
    return v


def _window(text: str) -> tuple[float, float]:
    """argparse type of ``--gantt-window``."""
    from .viz import parse_window

    try:
        return parse_window(text)
    except InvalidInstanceError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--gantt-window").lstrip(": ")) from None


def _check_outputs(args: argparse.Namespace, *inputs: str) -> None:
    """Before any work: no output file may be an input file (or another output of the same command)."""
    from .io import check_outputs

    outs = {flag: getattr(args, flag.lstrip("-"), None) for flag in ("--out", "--gantt", "--trace")}
    check_outputs({k: v for k, v in outs.items() if v}, {name: getattr(args, name) for name in inputs})


def _load(path: str):
    from .io import load_instance

    return load_instance(path)


def _instance_for_result(inst, data: dict):
    """The instance a saved result refers to (rebuilds OS-DPOS split graphs)."""
    from .model import check_number

    extra = data.get("extra") or {}
    if not isinstance(extra, dict):
        raise InvalidInstanceError(f"result: extra must be an object, got {extra!r:.60}")
    if extra.get("splits"):
        from .heuristics.fastt import split_instance

        if not isinstance(extra["splits"], list) or not all(isinstance(s, list) for s in extra["splits"]):
            raise InvalidInstanceError(f"result: extra.splits must be a list of [op, dim, n], got {extra['splits']!r:.60}")
        bw = extra.get("split_copy_bytes_per_us")
        return split_instance(inst, [tuple(s) for s in extra["splits"]],
                              overhead_us=check_number(extra.get("split_overhead_us", 0.0), "result: extra.split_overhead_us"),
                              copy_bytes_per_us=None if bw is None else check_number(bw, "result: extra.split_copy_bytes_per_us"))
    return inst


def _write_outputs(args: argparse.Namespace, res, data: dict | None = None) -> None:
    """Write --out (``data``), --gantt and --trace together: all of them or, on an error, none."""
    files: list[tuple[str, str | bytes]] = []
    if data is not None and getattr(args, "out", None):
        files.append((args.out, json.dumps(data, indent=1) + "\n"))
    if getattr(args, "gantt", None):
        from .viz import gantt_png

        files.append((args.gantt, gantt_png(res, color_by=args.gantt_color, window=args.gantt_window)))
    if getattr(args, "trace", None):
        from .viz import chrome_trace

        files.append((args.trace, json.dumps(chrome_trace(res))))
    if files:
        from .io import write_atomic_many

        write_atomic_many(files)


def _print_result(res, check_rep, console) -> None:
    console.print(f"[bold]{res.instance.name}[/] — method [bold]{res.method}[/]: status {res.status}")
    if res.makespan is None:
        console.print(f"  no schedule: {res.message}")
        return
    console.print(f"  makespan     {_fmt(res.makespan)} µs  (simulated)")
    if res.claimed_makespan is not None:
        console.print(f"  claimed      {_fmt(res.claimed_makespan)} µs  (the method's own objective)")
    console.print(f"  lower bound  {_fmt(res.lower_bound)} µs  (proven)   gap {_pct(res.gap)}")
    mem = res.schedule.memory
    cap = res.instance.capacity
    used = ", ".join(f"{d.name} {_bytes(mem[i])}/{_bytes(cap[i])}" for i, d in enumerate(res.instance.devices))
    console.print(f"  memory       {used}  ({'ok' if res.memory_ok else 'EXCEEDED'})")
    console.print(f"  solve time   {res.solve_time_s:.3f} s   check: {check_rep.summary()}")


# ---------------------------------------------------------------------------------------- commands
def cmd_info(args: argparse.Namespace) -> int:
    from .bounds import lower_bound_parts

    inst = _load(args.instance)
    parts = lower_bound_parts(inst)
    timed = None
    if args.bounds:
        from .bounds import bound_portfolio

        timed = bound_portfolio(inst, segments=True, time_limit_s=args.bounds_time)
        parts = {b.name: b.value for b in timed}
    total_time = sum(min(r) for r in inst.dur)
    info: dict[str, Any] = {
        "name": inst.name, "ops": inst.n, "edges": len(inst.edges), "devices": inst.m, "comm": inst.comm,
        "total_time_us": total_time, "total_memory": sum(inst.mem), "capacity": sum(inst.capacity),
        "colocation_groups": len(inst.groups), "pinned_ops": sum(1 for p in inst.pinned if p >= 0),
        "lower_bound_parts": parts, "lower_bound": max(parts.values()),
        "bound_source": max(parts, key=lambda k: parts[k]),
    }
    if timed is not None:
        info["bounds"] = [{"name": b.name, "value": b.value, "time_s": b.time_s, **({"detail": b.detail} if b.detail
                          else {})} for b in timed]
    if args.coarsen:
        try:
            from .heuristics.celeritas import coarsen_report
        except ImportError as exc:  # pragma: no cover - depends on what is installed
            raise InvalidInstanceError(f"--coarsen: Celeritas fusion is not available ({exc})") from None
        kw = {}
        if args.R is not None:
            kw["R"] = int(args.R)
        if args.M is not None:
            kw["M"] = float(args.M)
        info["coarsen"] = coarsen_report(inst, **kw)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    c = _console()
    c.print(f"[bold]{inst.name}[/]: {inst.n} ops, {len(inst.edges)} edges, {inst.m} devices, comm {inst.comm}")
    c.print(f"  work (fastest device)  {_fmt(total_time)} µs")
    c.print(f"  memory                 {_bytes(sum(inst.mem))} of {_bytes(sum(inst.capacity))} "
            f"(largest device {_bytes(max(inst.capacity))})")
    c.print(f"  colocation groups      {len(inst.groups)}; pinned ops {info['pinned_ops']}")
    c.print("  lower bound            " + _fmt(info["lower_bound"]) + f" µs  (proven; source {info['bound_source']})")
    if timed is None:
        c.print("    " + ", ".join(f"{k} {_fmt(v)}" for k, v in parts.items()) + "  (--bounds: each with its time)")
    else:
        for b in timed:
            more = "" if not b.detail else "  " + ", ".join(f"{k} {v}" for k, v in b.detail.items())
            c.print(f"    {b.name:<14} {_fmt(b.value):>16} µs  {b.time_s:8.3f} s{more}")
    if "coarsen" in info:
        c.print("  coarsening             " + json.dumps(info["coarsen"]))
    return 0


def cmd_methods(args: argparse.Namespace) -> int:
    import dataclasses

    from .registry import method_info, methods

    rows = []
    for name in methods():
        info = method_info(name)
        opts = {}
        if info.options is not None:
            for f in dataclasses.fields(info.options):
                default = f.default if f.default is not dataclasses.MISSING else None
                opts[f.name] = default
        rows.append({"name": name, "kind": info.kind, "summary": info.summary, "options": opts})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.table import Table

    t = Table(title="dplace methods")
    for col in ("method", "kind", "options (defaults)", "summary"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], r["kind"], ", ".join(f"{k}={v}" for k, v in r["options"].items()), r["summary"])
    _console().print(t)
    return 0


def _progress_mode(args: argparse.Namespace) -> str:
    return "quiet" if getattr(args, "quiet", False) else "auto"


def _say_interrupted(what: str) -> None:
    sys.stderr.write(f"dplace: interrupted: {what}\n")
    sys.stderr.flush()


def cmd_solve(args: argparse.Namespace) -> int:
    from . import interrupt, progress
    from .check import check
    from .registry import solve

    _check_outputs(args, "instance")
    inst = _load(args.instance)
    opts = _parse_options(args)
    with progress.reporting(f"solve {args.method} on {inst.name}", mode=_progress_mode(args)):
        progress.phase("running")
        # a method that polls the flag returns its best answer on Ctrl-C; one that does not is stopped by
        # KeyboardInterrupt (main: exit 130, nothing written)
        res = solve(inst, args.method, time_limit_s=args.time_limit, seed=args.seed, **opts)
        with interrupt.polling():  # an answer exists: from here on Ctrl-C only marks it interrupted
            progress.phase("check")
            rep = check(res.instance, res)
            res.interrupted = res.interrupted or interrupt.requested()
            data = res.to_dict()
            data["check"] = rep.summary()
            progress.phase("write")
            _write_outputs(args, res, data)
    if args.json:
        print(json.dumps(data))
    else:
        _print_result(res, rep, _console())
    if res.interrupted:
        _say_interrupted(f"{args.method} was cut short; its best answer so far is shown"
                         + (f" and written to {args.out}" if getattr(args, "out", None) else "")
                         + f" (status {res.status}, interrupted: true)")
        return interrupt.EXIT_CODE
    return 0 if rep.ok else 1


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .bounds import lower_bound
    from .check import check
    from .errors import InfeasibleError
    from .io import read_json
    from .result import result_from_dict

    _check_outputs(args, "instance", "result")
    inst = _load(args.instance)
    data = read_json(args.result, "result")
    if not isinstance(data, dict):
        raise InvalidInstanceError(f"result {args.result!r}: must be a JSON object")
    target = _instance_for_result(inst, data)  # first: an OS-DPOS result names its split graph
    if data.get("instance") not in (None, target.name):
        raise InvalidInstanceError(
            f"result {args.result!r}: instance {data.get('instance')!r} does not match {target.name!r}")
    res = result_from_dict(target, data)
    # the file's bound and status are claims this command cannot re-prove: show the bound proven here
    recorded_lb = data.get("lower_bound")
    try:
        res.lower_bound = lower_bound(target)
    except InfeasibleError:
        res.lower_bound = None
    _check_claims(args.result, data, res)
    rep = check(target, data)  # the file as written: its schedule must be valid
    rep_sim = check(target, res)
    recorded = data.get("makespan")
    agree = recorded is None or res.makespan is None or math.isclose(recorded, res.makespan, rel_tol=1e-9, abs_tol=1e-6)
    out = {"instance": inst.name, "method": res.method, "status": res.status, "makespan": res.makespan,
           "recorded_makespan": recorded, "makespan_agrees": agree, "lower_bound": res.lower_bound,
           "recorded_lower_bound": recorded_lb,
           "gap": res.gap, "memory_ok": res.memory_ok, "check": rep.summary(), "check_resimulated": rep_sim.summary()}
    _write_outputs(args, res)
    if args.json:
        print(json.dumps(out))
    else:
        c = _console()
        _print_result(res, rep_sim, c)
        c.print(f"  recorded makespan {_fmt(recorded)} µs — {'agrees' if agree else 'DIFFERS'}; "
                f"file's schedule: {rep.summary()}")
        c.print(f"  recorded lower bound {_fmt(recorded_lb)} µs and status {res.status!r}: the file's claims, "
                "not re-proven here")
    return 0 if (rep.ok and rep_sim.ok and agree) else 1


CLAIM_TOL = 1e-5  # relative (and absolute below 1 µs): float noise allowed between a bound and a makespan


def _check_claims(path: str, data: dict, res) -> None:
    """A saved result's bound and status must be possible for its own (re-simulated) schedule: a proven
    lower bound is never above a valid makespan, and ``optimal`` means the bound reaches the makespan.
    A file that breaks either is an input error (one line, exit 2)."""
    mk, lb = res.makespan, data.get("lower_bound")
    if mk is None:
        return
    tol = CLAIM_TOL * max(1.0, abs(mk))
    if lb is not None and not math.isfinite(lb):
        raise InvalidInstanceError(f"result {path!r}: lower_bound must be finite, got {lb!r}")
    if lb is not None and lb > mk + tol:
        raise InvalidInstanceError(
            f"result {path!r}: lower_bound {lb:g} is above the makespan {mk:g} µs of its own schedule "
            "(a proven bound never is)")
    if data.get("status") == "optimal" and (lb is None or lb < mk - tol):
        why = "no lower_bound" if lb is None else f"lower_bound {lb:g}, a gap of {100 * (mk - lb) / mk:.1f} %"
        raise InvalidInstanceError(
            f"result {path!r}: status 'optimal' but {why} to the makespan {mk:g} µs (optimal needs a bound "
            "that reaches the makespan)")


def default_compare_methods(inst) -> list[str]:
    """Every registered method that is meant for an instance of this size."""
    from .registry import method_info, methods

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
           "peak_memory": None, "memory_ok": None, "check": "", "message": message, "transformed": False,
           "interrupted": False}
    row.update(kw)
    return row


def cmd_compare(args: argparse.Namespace) -> int:
    import time

    from . import interrupt, progress
    from .check import check
    from .registry import check_time_limit, method_info, solve

    check_time_limit(args.time_limit)
    inst = _load(args.instance)
    names = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else default_compare_methods(inst)
    if not names:
        raise InvalidInstanceError(f"--methods: no method named in {args.methods!r}" if args.methods
                                   else f"no registered method suits {inst.name!r} ({inst.n} ops)")
    for n in names:
        method_info(n)  # unknown names fail before anything runs
    rows = []
    with progress.reporting(f"compare {inst.name}", mode=_progress_mode(args)) as rep:
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
                    memory_ok=res.memory_ok, check=chk.summary(),
                    # solved a transformed graph (OS-DPOS splits): its bound is not one of this instance
                    transformed=res.instance is not inst,
                    interrupted=bool(res.interrupted or interrupt.requested())))
        interrupted = interrupt.requested()
        with interrupt.polling():
            best_lb, best_src = None, None
            for r in rows:
                if r["lower_bound"] is not None and not r["transformed"] and (best_lb is None or r["lower_bound"] > best_lb):
                    best_lb, best_src = r["lower_bound"], f"{r['bound_source'] or 'unnamed'} (from {r['method']})"
            for r in rows:  # also a proven optimum is a lower bound for everyone
                if r["status"] == "optimal" and r["makespan"] is not None and not r["transformed"]:
                    if best_lb is None or r["makespan"] > best_lb:
                        best_lb, best_src = r["makespan"], f"proven optimum of {r['method']}"
            for r in rows:
                r["gap_to_best_bound"] = None
                if r["makespan"] and best_lb is not None:
                    r["gap_to_best_bound"] = max(0.0, (r["makespan"] - best_lb) / r["makespan"])
            data = {"format": "dplace-compare/1", "instance": inst.name, "instance_file": args.instance,
                    "time_limit_s": args.time_limit, "seed": args.seed, "best_lower_bound": best_lb,
                    "best_bound_source": best_src, "interrupted": interrupted, "rows": rows}
            if args.out:
                from .io import write_atomic

                write_atomic(args.out, json.dumps(data, indent=1) + "\n")
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        _print_compare(inst, rows, best_lb, best_src)
    if interrupted:
        done = sum(1 for r in rows if r["status"] not in ("not run", "interrupted"))
        _say_interrupted(f"{done} of {len(rows)} method(s) gave an answer (the one running was cut short: "
                         "interrupted: true)" + (f"; rows written to {args.out}" if args.out else ""))
        return interrupt.EXIT_CODE
    return 0


def _print_compare(inst, rows: list[dict[str, Any]], best_lb: float | None, best_src: str | None) -> None:
    from rich.table import Table

    t = Table(title=f"{inst.name}: {inst.n} ops, {inst.m} devices, comm {inst.comm} — best proven bound {_fmt(best_lb)} µs")
    for col, just in (("method", "left"), ("status", "left"), ("makespan µs", "right"), ("lower bound µs", "right"),
                      ("gap", "right"), ("time s", "right"), ("peak memory", "right"), ("check", "left")):
        t.add_column(col, justify=just)
    for r in rows:
        mem = _bytes(r["peak_memory"]) + ("" if r["memory_ok"] in (True, None) else " (over)")
        status = r["status"] + (" (interrupted)" if r["interrupted"] and r["status"] != "interrupted" else "")
        t.add_row(r["method"], status, _fmt(r["makespan"]), _fmt(r["lower_bound"]), _pct(r["gap_to_best_bound"]),
                  _fmt(r["time_s"], 3), mem, r["check"] if r["makespan"] is not None else (r["message"] or "")[:60])
    _console().print(t)
    _console().print(f"best proven bound: {_fmt(best_lb)} µs, source {best_src}")
    _console().print("gap = (makespan − best proven lower bound over all methods) / makespan; makespans are the simulator's.")


# ---------------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dplace", description="Place and schedule ML operator graphs on devices: exact solvers, "
                "paper heuristics, one simulator that judges them all. Time in µs, memory in bytes.",
                formatter_class=argparse.RawDescriptionHelpFormatter,
                epilog="examples:\n"
                "  dplace info instances/bert12_training_4dev.json\n"
                "  dplace compare instances/bert12_training_4dev.json --methods heft,m_etf,celeritas,cpsat --time-limit 30\n"
                "  dplace solve instances/tiny/diamond.json --method cpsat --out r.json --gantt r.png\n"
                "  dplace evaluate instances/tiny/diamond.json r.json\n"
                "  dplace bench instances/suites --out study --time-limit 10\n"
                "'dplace COMMAND --help' explains each command; user errors exit with code 2.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")

    s = sub.add_parser("info", help="describe an instance: size, memory, lower bound",
                       description="Describe an instance: ops, edges, devices, work, memory and the proven lower "
                       "bound with its parts (critical path, work over capacity, longest op, pinned load). "
                       "A malformed file is one line naming the field and value, exit 2.")
    s.add_argument("instance", help="dplace-instance/1 JSON file")
    s.add_argument("--coarsen", action="store_true", help="also report nodes and CCR before/after Celeritas fusion")
    s.add_argument("--R", type=int, default=None, help="fusion exploration range (default 200)")
    s.add_argument("--M", type=float, default=None, help="cluster memory limit as a fraction of device memory (default 0.25)")
    s.add_argument("--bounds", action="store_true", help="every proven bound with its time, exactly solved "
                   "segments of the critical path included (runs CP-SAT)")
    s.add_argument("--bounds-time", type=float, default=30.0, metavar="S", help="time for --bounds' segments (default 30)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.set_defaults(func=cmd_info)

    s = sub.add_parser("methods", help="list registered methods and their options",
                       description="List every registered method: kind (heuristic, exact, baseline), options "
                       "with their defaults (give them to solve as -o KEY=VALUE) and a one-line summary.")
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.set_defaults(func=cmd_methods)

    def add_common_solve(s: argparse.ArgumentParser) -> None:
        s.add_argument("--time-limit", type=seconds, default=None, metavar="S",
                       help="seconds per method (default: each method's own; exact solvers stop there with "
                       "their best answer and proven bound)")
        s.add_argument("--seed", type=int, default=0, help="random seed given to the method (default 0)")
        s.add_argument("--json", action="store_true", help="print JSON instead of a table")
        s.add_argument("--quiet", action="store_true",
                       help="no progress on stderr (default: a live line on a terminal, timestamped lines otherwise; "
                       "DPLACE_PROGRESS=live|plain|quiet overrides)")

    def add_pictures(s: argparse.ArgumentParser, what: str) -> None:
        s.add_argument("--gantt", metavar="FILE.png",
                       help=f"draw {what} as a Gantt chart: a lane per device and per link; past a few hundred ops "
                       "in view, columns show how busy each device is per op type")
        s.add_argument("--gantt-color", choices=COLOR_BY, default="auto",
                       help="colour ops by type, colocation group or op (default auto: type if the ops have "
                       "several types, else colocation groups, else ops)")
        s.add_argument("--gantt-window", type=_window, metavar="T0:T1", default=None,
                       help="zoom the Gantt chart on this time window in µs, e.g. 0:5000 or 2e6: (open end)")
        s.add_argument("--trace", metavar="FILE.json",
                       help="write Chrome trace events (open in https://ui.perfetto.dev): a track per device and "
                       "per link, concurrent transfers on tracks of their own")

    s = sub.add_parser("solve", help="run one method, print and save its result",
                       description="Run one method on an instance. The makespan printed is the simulator's "
                       "(dplace.simulate); a method's own objective is shown as 'claimed'; the lower bound is "
                       "proven. --out, --gantt and --trace are written together or not at all (temporary files, "
                       "renamed; missing parent directories are created; an input file is never overwritten). "
                       "Exit 0: a valid schedule or a proven 'infeasible'; 1: the checker found a problem; 2: an input "
                       "error.")
    s.add_argument("instance", help="dplace-instance/1 JSON file")
    s.add_argument("--method", required=True, help="a registered method (see: dplace methods)")
    add_common_solve(s)
    s.add_argument("--out", metavar="FILE.json",
                   help="write the dplace-result/1 JSON here (parent directories are created)")
    s.add_argument("-o", "--option", action="append", metavar="KEY=VALUE", help="a method option (repeatable)")
    s.add_argument("--R", type=int, default=None, help="celeritas: fusion exploration range")
    s.add_argument("--M", type=float, default=None, help="celeritas: cluster memory limit (fraction of device memory)")
    s.add_argument("--solver", default=None, help="milp: cbc or highs")
    add_pictures(s, "the schedule")
    s.set_defaults(func=cmd_solve)

    s = sub.add_parser("evaluate", help="re-simulate and check a saved result",
                       description="Re-simulate a saved result on its instance and check it. The file's bound "
                       "and status are claims: a lower_bound above the schedule's makespan, or status optimal "
                       "with a bound that does not reach the makespan, is an error (exit 2). Exit 1 when the "
                       "file's schedule is invalid or its makespan differs from the re-simulation.")
    s.add_argument("instance", help="the dplace-instance/1 JSON file the result was made for")
    s.add_argument("result", help="dplace-result/1 JSON file (from solve --out)")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_pictures(s, "the re-simulated schedule")
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("compare", help="run several methods on one instance and print a table",
                       description="Run several methods on one instance, one after another, and print a table: "
                       "status, simulated makespan, proven bound, gap to the best bound any method proved, "
                       "time, peak memory and the checker's verdict. A method that fails is a row, not an abort.")
    s.add_argument("instance", help="dplace-instance/1 JSON file")
    s.add_argument("--methods", default=None, help="comma-separated (default: every method suited to the size)")
    add_common_solve(s)
    s.add_argument("--out", metavar="FILE.json", help="write the rows (dplace-compare/1 JSON) here")
    s.set_defaults(func=cmd_compare)

    for mod_name in _PLUGINS:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:
            if exc.name == mod_name:
                continue
            raise
        add = getattr(mod, "add_cli", None)
        if add is not None:
            add(sub)
    for action in sub._choices_actions:  # a plug-in sub-command without a description shows its help
        sp = sub.choices[action.dest]
        if not sp.description:
            sp.description = action.help
    return p


# commands that never run a solver: Ctrl-C handling without routing CP-SAT through it (spares the import)
_LIGHT = ("info", "methods", "evaluate", "generate", "convert")


def main(argv: Sequence[str] | None = None) -> int:
    from . import interrupt

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (already printed, one line) or --help
        return exc.code if isinstance(exc.code, int) else 2
    try:
        with interrupt.handling(cpsat=args.command not in _LIGHT):
            return int(args.func(args) or 0)
    except DplaceError as exc:
        sys.stderr.write(f"dplace: error: {exc}\n")
        return 2
    except KeyboardInterrupt:
        _say_interrupted("stopped before there was an answer; nothing written")
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
