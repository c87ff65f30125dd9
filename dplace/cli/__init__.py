"""The ``dplace`` command line: one table of commands, each added to the parser by a function of its own module.

A new command is one row of :data:`COMMANDS`: its name, ``"module:function"`` (the function takes argparse's
subparsers, adds the command's parser and sets ``func``) and whether it runs solvers. A command from another
package (the runtime, the pipeline, the study) is added the same way, by one row here that names its module.
Building the parser imports those modules, so they must stay light at import time: TensorFlow, CP-SAT and
the solvers load inside the command's function, only when it runs.

User mistakes (a DplaceError) print one line on stderr and exit with code 2, with no traceback and no
half-written output file (every file is written to a temporary name, then renamed).

Long commands show progress on stderr (:mod:`dplace.progress`) and handle Ctrl-C (:mod:`dplace.interrupt`):
the first one returns the best answer so far, marked ``interrupted: true``, writes it and exits with 130;
the second exits at once (130).
"""
from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Sequence

from ..errors import DplaceError
from . import common
from .common import Parser, say_interrupted, seconds

__all__ = ["COMMANDS", "Command", "build_parser", "main", "run", "seconds"]


@dataclass(frozen=True)
class Command:
    """One ``dplace`` sub-command: ``add`` is ``"module:function"``; ``solver=False`` for a command that never
    runs a solver (its Ctrl-C handling then spares the CP-SAT import)."""

    name: str
    add: str
    solver: bool = True


COMMANDS: tuple[Command, ...] = (
    Command("info", "dplace.cli.info:add_info", solver=False),
    Command("methods", "dplace.cli.info:add_methods", solver=False),
    Command("solve", "dplace.cli.solve:add_solve"),
    Command("evaluate", "dplace.cli.solve:add_evaluate", solver=False),
    Command("compare", "dplace.cli.compare:add_compare"),
    Command("generate", "dplace.formats.cli:add_generate", solver=False),
    Command("convert", "dplace.formats.cli:add_convert", solver=False),
    Command("bench", "dplace.study.cli:add_bench"),
    Command("warm", "dplace.cli.warm:add_warm"),
    Command("pipeline", "dplace.pipeline.cli:add_cli"),
    Command("profile", "dplace.runtime.cli:add_profile"),
    Command("execute", "dplace.runtime.cli:add_execute"),
)

_EPILOG = ("examples:\n"
           "  dplace info instances/bert12_training_4dev.json\n"
           "  dplace compare instances/bert12_training_4dev.json --methods heft,m_etf,celeritas,cpsat --time-limit 30\n"
           "  dplace solve instances/tiny/diamond.json --method cpsat --out r.json --gantt r.png\n"
           "  dplace evaluate instances/tiny/diamond.json r.json\n"
           "  dplace bench instances/suites --out study --time-limit 10\n"
           "'dplace COMMAND --help' explains each command; user errors exit with code 2.")


def _adder(cmd: Command):
    """The function that adds ``cmd``'s parser, or None when its module is not installed."""
    mod_name, _, func = cmd.add.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (mod_name + ".").startswith(exc.name + "."):  # it or its package is absent
            return None
        raise
    return getattr(mod, func)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dplace", description="Place and schedule ML operator graphs on devices: exact solvers, "
               "paper heuristics, one simulator that judges them all. Time in µs, memory in bytes.",
               formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_EPILOG)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    for cmd in COMMANDS:
        add = _adder(cmd)
        if add is not None:
            add(sub)
            if cmd.name not in sub.choices:  # a row whose function adds another command
                raise RuntimeError(f"dplace.cli.COMMANDS: {cmd.add} did not add the command {cmd.name!r}")
    for action in sub._choices_actions:  # a sub-command without a description shows its help
        sp = sub.choices[action.dest]
        if not sp.description:
            sp.description = action.help
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from .. import interrupt

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (already printed, one line) or --help
        return exc.code if isinstance(exc.code, int) else 2
    solver = next((c.solver for c in COMMANDS if c.name == args.command), True)
    try:
        with interrupt.handling(cpsat=solver):
            return int(args.func(args) or 0)
    except DplaceError as exc:
        sys.stderr.write(f"dplace: error: {exc}\n")
        return 2
    except NotImplementedError as exc:  # a path the project has not built yet: said in one line, not a traceback
        first = (str(exc).strip().splitlines() or ["not implemented"])[0]
        sys.stderr.write(f"dplace: error: not implemented yet: {first}\n")
        return 2
    except KeyboardInterrupt:
        say_interrupted("stopped before there was an answer; nothing written")
        return 130
    except Exception as exc:
        if not (_from_interrupt(exc) or interrupt.signalled()):
            raise
        # Ctrl-C landed where Python wraps it (3.11: in a class body's __set_name__, as when a module is
        # imported on first use: RuntimeError "Error calling __set_name__"), or where a library makes an
        # error of its own of it without the chain (TensorFlow tracing a graph): still a Ctrl-C
        say_interrupted("stopped before there was an answer; nothing written")
        return 130


def _from_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` was caused by a KeyboardInterrupt (its ``__cause__`` / ``__context__`` chain)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def _keep_freed_memory() -> bool:
    """Where the C library is glibc (``mallopt``; True): blocks up to 256 MB come from the heap, and
    freed memory stays there for the next ones instead of going back to the system, so a large run's
    arrays and buffers reuse pages rather than fault in new ones (360k-op heft with JSON in and out:
    464k -> 384k page faults, ~0.3 CPU s less, all system time; 4 runs alternated, load ~4).
    Elsewhere nothing changes (False)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    return bool(mallopt(-3, 256 << 20)) & bool(mallopt(-1, 1 << 30))  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD


def run() -> None:
    """The ``dplace`` program (``python -m dplace.cli``): :func:`main`, in a process of its own.

    Such a process keeps what it loads (the modules, numba, the instance) until it ends, so it skips the
    work that only pays in a long-lived one: the cyclic collector runs less often and leaves out what
    the instance loaded (``common.PROCESS_OWNED``), and the exit skips Python's teardown of every object
    (0.25 CPU s after a 36k-op solve, measured with ``/usr/bin/time``): the ``atexit`` functions run and
    the streams are flushed, then the process ends. Where a thread that is not a daemon is still alive
    the usual exit joins it."""
    import gc
    import os
    import threading

    common.PROCESS_OWNED = True
    gc.set_threshold(10_000, 50, 50)  # from 700, 10, 10: fewer passes over the loaded modules and kernels
    _keep_freed_memory()
    code = main()
    if any(not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(code)
    import atexit

    from .. import interrupt

    interrupt.os_exit_ahead()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be said on it
            code = code or 120  # what Python's own exit gives when the final flush fails
    os._exit(code)
