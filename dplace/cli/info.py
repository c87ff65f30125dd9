"""``dplace info`` (an instance's size, memory and proven lower bound) and ``dplace methods``."""
from __future__ import annotations

import argparse
import json
from typing import Any

from ..errors import InvalidInstanceError
from .common import add_command, add_json_arg, console, fmt, fmt_bytes, load


def add_info(subparsers: Any) -> argparse.ArgumentParser:
    s = add_command(subparsers, "info", cmd_info, "describe an instance: size, memory, lower bound")
    s.add_argument("--coarsen", action="store_true", help="also report nodes and CCR before/after Celeritas fusion")
    s.add_argument("--R", type=int, default=None, help="fusion exploration range (default 200)")
    s.add_argument("--M", type=float, default=None, help="cluster memory limit as a fraction of device memory (default 0.25)")
    s.add_argument("--bounds", action="store_true", help="every proven bound with its time, exactly solved "
                   "segments of the critical path included, and on two parts tied op by op that begin with chains "
                   "the twin-stem bound (runs CP-SAT)")
    s.add_argument("--bounds-time", type=float, default=30.0, metavar="S", help="time for --bounds' segments, and as much again for the twin-stem bound where it applies (default 30)")
    add_json_arg(s, "text")
    return s


def cmd_info(args: argparse.Namespace) -> int:
    """Describe an instance: ops, edges, devices, work, memory and the proven lower bound with its parts
    (critical path, work over capacity, longest op, pinned load). A malformed file is one line naming the field
    and value, exit 2."""
    from ..bounds import lower_bound_parts

    inst = load(args.instance)
    parts = lower_bound_parts(inst)
    timed = None
    if args.bounds:
        from ..bounds import bound_portfolio

        timed = bound_portfolio(inst, segments=True, time_limit_s=args.bounds_time)
        parts = {b.name: b.value for b in timed}
    total_time = sum(min(r) for r in inst.dur)
    info: dict[str, Any] = {
        "name": inst.name, "ops": inst.n, "edges": inst.n_edges, "devices": inst.m, "comm": inst.comm,
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
            from dplace.heuristics.celeritas import coarsen_report
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
    c = console()
    c.print(f"[bold]{inst.name}[/]: {inst.n} ops, {inst.n_edges} edges, {inst.m} devices, comm {inst.comm}")
    c.print(f"  work (fastest device)  {fmt(total_time)} µs")
    c.print(f"  memory                 {fmt_bytes(sum(inst.mem))} of {fmt_bytes(sum(inst.capacity))} "
            f"(largest device {fmt_bytes(max(inst.capacity))})")
    c.print(f"  colocation groups      {len(inst.groups)}; pinned ops {info['pinned_ops']}")
    c.print("  lower bound            " + fmt(info["lower_bound"]) + f" µs  (proven; source {info['bound_source']})")
    if timed is None:
        c.print("    " + ", ".join(f"{k} {fmt(v)}" for k, v in parts.items()) + "  (--bounds: each with its time)")
    else:
        for b in timed:
            more = "" if not b.detail else "  " + ", ".join(f"{k} {v}" for k, v in b.detail.items())
            c.print(f"    {b.name:<14} {fmt(b.value):>16} µs  {b.time_s:8.3f} s{more}")
    if "coarsen" in info:
        c.print("  coarsening             " + json.dumps(info["coarsen"]))
    return 0


def add_methods(subparsers: Any) -> argparse.ArgumentParser:
    s = add_command(subparsers, "methods", cmd_methods, "list registered methods and their options",
                    instance=None)
    add_json_arg(s, "a table")
    return s


def cmd_methods(args: argparse.Namespace) -> int:
    """List every registered method: kind (heuristic, exact, baseline), the paper and sections it follows (a
    method named after a paper runs it with the paper's settings; a dplace variant says which paper method it
    departs from, its summary what differs), options with their defaults (give them to solve as -o KEY=VALUE)
    and a one-line summary."""
    import dataclasses

    from ..registry import method_info, methods

    rows = []
    for name in methods():
        info = method_info(name)
        opts = {}
        if info.options is not None:
            for f in dataclasses.fields(info.options):
                default = f.default if f.default is not dataclasses.MISSING else None
                opts[f.name] = default
        follows = info.paper + (f"; dplace variant of {info.variant_of}" if info.variant_of else "")
        rows.append({"name": name, "kind": info.kind, "summary": info.summary, "options": opts, "follows": follows})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    from rich.table import Table

    t = Table(title="dplace methods")
    for col in ("method", "kind", "follows", "options (defaults)", "summary"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["name"], r["kind"], r["follows"], ", ".join(f"{k}={v}" for k, v in r["options"].items()),
                  r["summary"])
    console().print(t)
    return 0
