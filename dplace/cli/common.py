"""What the ``dplace`` commands share: the one-line-error parser, number formats, the console, the
arguments of commands that run methods, and writing --out/--gantt/--trace all together or not at all."""
from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
from typing import Any, Callable

from ..errors import InvalidInstanceError
from ..viz import COLOR_BY


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # usage errors: one line, exit 2
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def fmt(x: Any, digits: int = 1) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞"
        return f"{x:,.{digits}f}"
    return str(x)


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def fmt_bytes(x: float | None) -> str:
    if x is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(x) < 1024 or unit == "TiB":
            return f"{x:,.1f} {unit}" if unit != "B" else f"{int(x)} B"
        x /= 1024
    return str(x)  # pragma: no cover


def console(stderr: bool = False):
    import shutil

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else max(shutil.get_terminal_size((160, 24)).columns, 160)
    return Console(stderr=stderr, highlight=False, width=width)


def parse_options(args: argparse.Namespace) -> dict[str, Any]:
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


def window(text: str) -> tuple[float, float]:
    """argparse type of ``--gantt-window``."""
    from ..viz import parse_window

    try:
        return parse_window(text)
    except InvalidInstanceError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--gantt-window").lstrip(": ")) from None


def check_outputs(args: argparse.Namespace, *inputs: str) -> None:
    """Before any work: no output file may be an input file (or another output of the same command)."""
    from ..instance.io import check_outputs as check_files

    outs = {flag: getattr(args, flag.lstrip("-"), None) for flag in ("--out", "--gantt", "--trace")}
    check_files({k: v for k, v in outs.items() if v}, {name: getattr(args, name) for name in inputs})


# True in the ``dplace`` program (:func:`dplace.cli.run`), False where main() runs inside another program
PROCESS_OWNED = False


def load(path: str):
    from ..instance.io import load_instance

    inst = load_instance(path)
    if PROCESS_OWNED:  # the instance lives as long as the process: no collector pass need look at it again
        import gc

        gc.freeze()
    return inst


def write_outputs(args: argparse.Namespace, res, data: dict | None = None, npz_extra: dict | None = None) -> None:
    """Write --out (``data``; a ``.npz`` --out: the result's arrays with ``npz_extra`` added), --gantt and
    --trace together: all of them or, on an error, none."""
    files: list[tuple[str, str | bytes]] = []
    if data is not None and getattr(args, "out", None) and str(args.out).endswith(".npz"):  # arrays + JSON meta
        from ..instance.npz import result_to_npz_bytes

        files.append((args.out, result_to_npz_bytes(res, data if isinstance(data, dict) else npz_extra)))
    elif data is not None and getattr(args, "out", None):  # a dict, or its JSON text in pieces
        files.append((args.out, json.dumps(data, indent=1) + "\n" if isinstance(data, dict) else data))
    if getattr(args, "gantt", None):
        from ..viz import gantt_png

        files.append((args.gantt, gantt_png(res, color_by=args.gantt_color, window=args.gantt_window)))
    if getattr(args, "trace", None):
        from ..viz import chrome_trace

        files.append((args.trace, json.dumps(chrome_trace(res))))
    if files:
        from ..instance.io import write_atomic_many

        write_atomic_many(files)


def print_result(res, check_rep, out) -> None:
    """The text report of ``dplace solve`` and ``dplace evaluate`` on the console ``out``."""
    out.print(f"[bold]{res.instance.name}[/] — method [bold]{res.method}[/]: status {res.status}")
    if res.makespan is None:
        out.print(f"  no schedule: {res.message}")
        return
    out.print(f"  makespan     {fmt(res.makespan)} µs  (simulated)")
    if res.claimed_makespan is not None:
        out.print(f"  claimed      {fmt(res.claimed_makespan)} µs  (the method's own objective)")
    out.print(f"  lower bound  {fmt(res.lower_bound)} µs  (proven)   gap {pct(res.gap)}")
    mem = res.schedule.memory
    cap = res.instance.capacity
    used = ", ".join(f"{d.name} {fmt_bytes(mem[i])}/{fmt_bytes(cap[i])}" for i, d in enumerate(res.instance.devices))
    out.print(f"  memory       {used}  ({'ok' if res.memory_ok else 'EXCEEDED'})")
    out.print(f"  solve time   {res.solve_time_s:.3f} s   check: {check_rep.summary()}")


def progress_mode(args: argparse.Namespace) -> str:
    return "quiet" if getattr(args, "quiet", False) else "auto"


def say_interrupted(what: str) -> None:
    sys.stderr.write(f"dplace: interrupted: {what}\n")
    sys.stderr.flush()


INSTANCE_FILE = "dplace-instance/1 JSON file"


def add_command(subparsers: Any, name: str, func: Callable[[argparse.Namespace], int], help: str,
                instance: str | None = INSTANCE_FILE) -> argparse.ArgumentParser:
    """The parser of the sub-command ``name``, run by ``func(args)``: ``help`` is its line in ``dplace --help``,
    ``func``'s docstring its description in ``dplace name --help``; with the positional argument ``instance``
    (its help text; None: the command takes none)."""
    s = subparsers.add_parser(name, help=help, description=inspect.getdoc(func))
    s.set_defaults(func=func)
    if instance is not None:
        s.add_argument("instance", help=instance)
    return s


def add_json_arg(s: argparse.ArgumentParser, instead_of: str) -> None:
    s.add_argument("--json", action="store_true", help=f"print JSON instead of {instead_of}")


def add_run_args(s: argparse.ArgumentParser) -> None:
    """--time-limit, --seed, --json and --quiet of the commands that run methods."""
    s.add_argument("--time-limit", type=seconds, default=None, metavar="S",
                   help="seconds per method (default: each method's own; exact solvers stop there with "
                   "their best answer and proven bound)")
    s.add_argument("--seed", type=int, default=0, help="random seed given to the method (default 0)")
    add_json_arg(s, "a table")
    s.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (default: a live line on a terminal, timestamped lines otherwise; "
                   "DPLACE_PROGRESS=live|plain|quiet overrides)")

def add_picture_args(s: argparse.ArgumentParser, what: str) -> None:
    """--gantt, --gantt-color, --gantt-window and --trace of a command that has a schedule to draw."""
    s.add_argument("--gantt", metavar="FILE.png",
                   help=f"draw {what} as a Gantt chart: a lane per device and per link; past a few hundred ops "
                   "in view, columns show how busy each device is per op type")
    s.add_argument("--gantt-color", choices=COLOR_BY, default="auto",
                   help="colour ops by type, colocation group or op (default auto: type if the ops have "
                   "several types, else colocation groups, else ops)")
    s.add_argument("--gantt-window", type=window, metavar="T0:T1", default=None,
                   help="zoom the Gantt chart on this time window in µs, e.g. 0:5000 or 2e6: (open end)")
    s.add_argument("--trace", metavar="FILE.json",
                   help="write Chrome trace events (open in https://ui.perfetto.dev): a track per device and "
                   "per link, concurrent transfers on tracks of their own")
