"""HiGHS in a long-lived child Python, reused across solves.

highspy and OR-Tools ship clashing HiGHS symbols: whichever loads first breaks the other in one process
(OR-Tools is loaded by cpsat), so HiGHS runs in a child Python that imports only highspy. Starting that
child costs ~0.5 s on a quiet machine and several seconds on a loaded one, which a 2-s solve cannot
afford; so one child per process is started once (:func:`prestart` lets a caller start it while it does
other work) and answers one request after another.

A request is the path of a JSON file: the MPS model (written by PuLP), an absolute deadline
(``time.time()``; the child's start-up counts against it), presolve, seed, threads, the MIP start by
column name, a stop file (HiGHS's MIP callback polls it: Ctrl-C and overruns ask HiGHS to stop and answer
with its incumbent), the log file, the answer file and (optional, ``options``) further HiGHS options by
name. The child answers with one line on stdout once the answer file is written. A child that has not
answered within the limit and a grace is asked to stop, and killed when it has not answered a grace later
(no answer, never an overrun); the next request
starts a new one. A child serves the process that started it, one request at a time: a forked process,
or a second thread while the first waits, gets a child of its own for that request.

    solve(args, limit_s, on_stop) -> (dict | None, interrupted)  # the answer; None: none within the limit
    prestart()                                     # start the shared child now (no-op if it runs)
    limit_within(total_s)                          # the limit whose worst case (+ two graces) fits total_s
    shutdown()                                     # end the shared child (atexit does it too)
"""
from __future__ import annotations

import atexit
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Callable

__all__ = ["CHILD", "grace_s", "limit_within", "prestart", "shutdown", "solve"]

CHILD = r"""
import json, os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which asks us to stop (stop file)
import highspy

def run(a):
    h = highspy.Highs()
    h.setOptionValue("output_flag", True)
    h.setOptionValue("log_to_console", False)
    h.setOptionValue("log_file", a["log_file"])
    h.setOptionValue("mip_rel_gap", 0.0)
    h.setOptionValue("mip_abs_gap", 1e-9)
    h.setOptionValue("random_seed", int(a["seed"]))
    if a["threads"]:
        h.setOptionValue("threads", int(a["threads"]))
    if not a["presolve"]:
        h.setOptionValue("presolve", "off")
    h.readModel(a["mps"])
    for k, v in (a.get("options") or {}).items():  # e.g. an LP's solver = ipm, run_crossover = off
        h.setOptionValue(k, v)
    h.setOptionValue("time_limit", max(0.01, float(a["deadline"]) - time.time()))  # start-up counts too
    def _stop(e):
        if os.path.exists(a["stop"]):
            e.interrupt()
    h.cbMipInterrupt += _stop
    names = list(h.getLp().col_names_)
    if a["hint"] is not None:
        sol = highspy.HighsSolution()
        sol.col_value = [float(a["hint"].get(nm, 0.0)) for nm in names]
        sol.value_valid = True
        h.setSolution(sol)
    h.run()
    info = h.getInfo()
    out = {"status": h.modelStatusToString(h.getModelStatus()), "objective": info.objective_function_value,
           "bound": info.mip_dual_bound, "primal_status": int(info.primal_solution_status)}
    if info.primal_solution_status == 2:
        out["values"] = dict(zip(names, h.getSolution().col_value))
    h.setOptionValue("log_file", "")  # closes the log before the parent reads it
    with open(a["out"] + ".tmp", "w") as fh:
        json.dump(out, fh)
    os.replace(a["out"] + ".tmp", a["out"])

print("ready", flush=True)
for line in sys.stdin:
    path = line.strip()
    if not path:
        continue
    try:
        run(json.load(open(path)))
        print("done", flush=True)
    except Exception as exc:
        print("error " + repr(exc).replace("\n", " ")[:500], flush=True)
"""


class _Child:
    """One child Python serving requests; its stdout carries one line per request."""

    def __init__(self) -> None:
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True, bufsize=1, env=dict(os.environ))
        self.pid = os.getpid()
        self.buf = ""
        self.ready = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def read_line(self, until: float) -> str | None:
        """The child's next line, None when ``until`` (perf_counter) passes first, an ``error`` line when
        the child died."""
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while "\n" not in self.buf:
                left = until - time.perf_counter()
                if left <= 0 or not sel.select(timeout=left):
                    return None
                chunk = os.read(fd, 65536)
                if not chunk:  # the child closed its stdout: it died
                    return "error the HiGHS child died: " + self.stderr_tail(wait=True)
                self.buf += chunk.decode("utf-8", "replace")
        line, self.buf = self.buf.split("\n", 1)
        return line

    def stderr_tail(self, wait: bool = False) -> str:
        try:
            if wait:
                self.proc.wait(timeout=2)
            self.err.seek(0)
            return self.err.read()[-300:].strip()
        except (OSError, ValueError, subprocess.TimeoutExpired):
            return ""

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        for fh in (self.proc.stdin, self.proc.stdout, self.err):
            try:
                fh.close()
            except OSError:
                pass


_lock = threading.Lock()
_shared: _Child | None = None


def prestart() -> None:
    """Start the shared child now (its highspy import then overlaps with the caller's work)."""
    if not _lock.acquire(blocking=False):
        return  # in use: it is running
    try:
        _ensure()
    finally:
        _lock.release()


def _ensure() -> _Child:
    """The shared child, started when there is none (or it died, or it is a forked parent's); lock held."""
    global _shared
    if _shared is None or _shared.pid != os.getpid() or not _shared.alive():
        if _shared is not None and _shared.pid == os.getpid():
            _shared.close()  # (a forked copy leaves its parent's child alone)
        _shared = _Child()
    return _shared


def shutdown() -> None:
    """End the shared child of this process (if any)."""
    global _shared
    with _lock:
        if _shared is not None and _shared.pid == os.getpid():
            _shared.close()
        _shared = None


atexit.register(shutdown)


def grace_s(limit_s: float) -> float:
    """How long past its limit a request may still answer before it is asked to stop (and again before
    the child is killed): a request of ``limit_s`` ends within ``limit_s + 2 * grace_s(limit_s)``."""
    return max(0.25, 0.025 * limit_s)


def limit_within(total_s: float) -> float:
    """The largest limit whose worst case (the limit and two graces) ends within ``total_s`` (0 if none)."""
    return max(0.0, min(total_s - 2 * 0.25, total_s / (1 + 2 * 0.025)))


class SolverFailed(RuntimeError):
    """The child answered with an error or died (its stderr's tail is the message)."""


def solve(args: dict[str, Any], limit_s: float, on_stop: Callable[[Callable[[], None]], Any],
          ) -> tuple[dict[str, Any] | None, bool]:
    """Run one request (``args``: see the module docstring; ``args["stop"]`` and ``args["out"]`` are paths
    in a folder the caller owns) within ``limit_s`` seconds. Returns (the answer file's content, or None
    when the child gave no answer within the limit and its grace: it is killed then; whether a Ctrl-C
    asked it to stop). ``on_stop(stop)`` wraps the wait: a context manager that calls ``stop()`` on a
    user's interrupt (:func:`dplace.interrupt.on_request`). Raises :class:`SolverFailed` when the child
    answers with an error or dies."""
    global _shared
    req = args["out"] + ".req.json"
    with open(req, "w") as fh:
        json.dump(args, fh)
    own = _lock.acquire(blocking=False)
    try:
        child = _ensure() if own else _Child()  # not own: another thread is using the shared child
        answer, interrupted = _request(child, req, args, limit_s, on_stop)
        ok = answer is not None and not answer.startswith("error")
        if not ok or not own:
            child.close()
            if own:
                _shared = None
        if answer is None:
            return None, interrupted
        if not ok:
            raise SolverFailed(answer)
        with open(args["out"]) as fh:
            return json.load(fh), interrupted
    finally:
        if own:
            _lock.release()


def _request(child: _Child, req: str, args: dict[str, Any], limit_s: float, on_stop) -> tuple[str | None, bool]:
    """Send ``req`` and wait for the answer line: the limit, then (asked to stop) a grace, then None."""
    try:
        child.proc.stdin.write(req + "\n")
        child.proc.stdin.flush()
    except (BrokenPipeError, OSError):
        return "error the HiGHS child is gone: " + child.stderr_tail(), False

    def stop() -> None:
        open(args["stop"], "w").close()

    grace = grace_s(limit_s)  # asked to stop at limit + grace, killed at limit + 2 grace
    end = time.perf_counter() + limit_s + grace
    stopped = interrupted = False
    with on_stop(stop):
        while True:
            try:
                line = child.read_line(end)
            except KeyboardInterrupt:  # library use: Ctrl-C raises here; HiGHS answers with its incumbent
                interrupted = True
                stop()
                continue
            if line is None:
                if not stopped:  # past the limit (on a loaded machine the start-up alone can take that long)
                    stop()
                    stopped = True
                    end = time.perf_counter() + grace
                    continue
                return None, interrupted
            if line == "ready":
                continue
            return line, interrupted
