"""Ctrl-C for long commands: the first one asks the work to stop with its best answer, the second exits.

A command wraps its work in :func:`handling`; inside, SIGINT no longer raises ``KeyboardInterrupt`` in
the middle of things. Instead:

* the first Ctrl-C sets a process-wide flag, writes one line on stderr and calls every stop callback
  registered with :func:`on_request` (e.g. a CP-SAT solver's ``stop_search``); long loops poll
  :func:`requested` and finish with the best answer so far, which the command marks
  ``interrupted=True``, writes (atomically) and exits with code 130;
* the second Ctrl-C exits at once with code 130 (``os._exit``: no cleanup; files are written by
  temp-file + rename, so none is left half-written).

The signal is seen by a watcher thread through :func:`signal.set_wakeup_fd`, so it is acted on at once
even while the main thread sits in native code (CP-SAT's ``Solve``), where a Python-level handler would
only run after the call returns. Code that does not poll the flag is not stopped by the first Ctrl-C
unless it runs outside a :func:`polling` block: there, the first Ctrl-C raises ``KeyboardInterrupt`` in
the main thread as usual (nothing to return yet), which the CLI turns into exit 130.

For solver code (cpsat, milp, refine)::

    from dplace import interrupt

    with interrupt.on_request(solver.stop_search):   # called from the watcher thread, once
        status = solver.solve(model)
    if interrupt.requested(): ...                   # finish with what you have

    with interrupt.polling():                       # this loop polls: Ctrl-C must not raise here
        while not interrupt.requested(): ...

CP-SAT must not catch SIGINT itself: its handler is a thread-local ``std::function`` (a signal delivered
to another thread calls an empty one: ``std::bad_function_call``), and every solve with
``catch_sigint_signal`` on (OR-Tools' default) resets SIGINT to the default action when it ends, so the
next Ctrl-C would kill the process with no answer written. Inside :func:`handling`, therefore, every
``CpSolver.solve`` (cpsat, refine, pipeline, hint completion, ...) runs with ``catch_sigint_signal =
False`` and inside ``on_request(solver.stop_search)``: Ctrl-C stops any CP-SAT search, which returns its
best solution so far, and the solver code needs no change.

Without :func:`handling` (library use, tests) nothing is installed: :func:`requested` is False unless
:func:`request` was called, and :func:`on_request` just registers the callback.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from typing import Callable, Iterator

__all__ = ["abandon", "abandoned", "clear", "ends_with_os_exit", "handling", "on_request", "os_exit_ahead", "polling",
           "request", "requested", "signalled", "stop_point"]

EXIT_CODE = 130
MESSAGE = "dplace: interrupted — stopping with the best answer so far (Ctrl-C again to exit now)"

_flag = threading.Event()
_lock = threading.RLock()
_callbacks: dict[int, Callable[[], object]] = {}
_next_id = 0
_count = 0
_polling = 0
_abandoned: list[threading.Thread] = []
_os_exit = False
_raised = False  # the SIGINT handler raised KeyboardInterrupt in the main thread (cleared with the flag)


def os_exit_ahead() -> None:
    """Say that this process ends with ``os._exit`` once its ``atexit`` functions ran (``dplace.cli.run``):
    no C++ teardown follows, so exit-time waits for native threads (abandoned CP-SAT searches) are not
    needed there."""
    global _os_exit
    _os_exit = True


def ends_with_os_exit() -> bool:
    """Whether :func:`os_exit_ahead` was called."""
    return _os_exit


def requested() -> bool:
    """True once the first Ctrl-C came (or :func:`request` was called)."""
    return _flag.is_set()


def signalled() -> bool:
    """True once a Ctrl-C came, as :func:`requested`, or once the handler raised its ``KeyboardInterrupt``
    (before the watcher thread has counted the signal): what the CLI asks of an error that a library made of
    a Ctrl-C without keeping it in the exception's chain (TensorFlow's graph tracing, seen in a test run)."""
    return _flag.is_set() or _raised


def stop_point() -> None:
    """Raise ``KeyboardInterrupt`` once a stop was requested: for loops that have no answer to stop with
    (the steps of ``execute`` and ``profile``). The handler's own ``KeyboardInterrupt`` can be lost: raised
    while a finalizer runs (TensorFlow's, between steps), Python prints "Exception ignored" and goes on;
    the flag set by the watcher is not lost (seen in CI: a run went on after its Ctrl-C)."""
    if _flag.is_set():
        raise KeyboardInterrupt


def abandon(thread: threading.Thread) -> None:
    """Note a daemon thread given up on while it sits in native code (a TensorFlow call to a cluster
    whose worker died: :mod:`dplace.runtime.watched`). It is left running; nothing it holds may be used."""
    with _lock:
        _abandoned.append(thread)


def abandoned() -> list[threading.Thread]:
    """The threads given up on that are still running."""
    with _lock:
        _abandoned[:] = [t for t in _abandoned if t.is_alive()]
        return list(_abandoned)


def request() -> None:
    """Ask the running work to stop with its best answer (what the first Ctrl-C does, minus the line)."""
    with _lock:
        _flag.set()
        cbs = list(_callbacks.values())
    for cb in cbs:
        _call(cb)


def clear() -> None:
    """Forget an earlier request (a new command in the same process starts clean)."""
    global _count
    global _raised
    with _lock:
        _flag.clear()
        _count = 0
        _raised = False


def _call(cb: Callable[[], object]) -> None:
    try:
        cb()
    except Exception:  # noqa: BLE001 - a stop callback that fails must not break the others
        pass


@contextlib.contextmanager
def on_request(callback: Callable[[], object]) -> Iterator[None]:
    """Call ``callback`` (once, from any thread) when an interrupt is requested inside the block; at
    once if one already was. Marks the block as :func:`polling` too."""
    global _next_id
    with _lock:
        key = _next_id
        _next_id += 1
        _callbacks[key] = callback
        already = _flag.is_set()
    if already:
        _call(callback)
    try:
        with polling():
            yield
    finally:
        with _lock:
            _callbacks.pop(key, None)


@contextlib.contextmanager
def polling() -> Iterator[None]:
    """Inside this block the work polls :func:`requested`: the first Ctrl-C only sets the flag."""
    global _polling
    with _lock:
        _polling += 1
    try:
        yield
    finally:
        with _lock:
            _polling -= 1


def _signalled() -> None:
    """Count one SIGINT (from the watcher thread): the first requests a stop, the second exits."""
    global _count
    with _lock:
        _count += 1
        n = _count
    try:
        sys.stderr.write("\n" + (MESSAGE if n == 1 else "dplace: interrupted again — exiting now") + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if n >= 2:
        os._exit(EXIT_CODE)
    request()


_CP_MODEL = "ortools.sat.python.cp_model"


def _patch_cpsat() -> Callable[[], None]:
    """Make every ``CpSolver.solve`` leave SIGINT to us and stop on a request; returns the undo. OR-Tools
    not imported yet (0.3 s of CPU with pandas: a run of heuristics never needs it) is patched when it is
    (:class:`_PatchOnImport`)."""
    if _CP_MODEL in sys.modules:
        return _patch_module(sys.modules[_CP_MODEL])
    hook = _PatchOnImport()
    sys.meta_path.insert(0, hook)

    def undo() -> None:
        if hook in sys.meta_path:
            sys.meta_path.remove(hook)
        hook.undo()

    return undo


class _PatchOnImport:
    """A meta-path finder that lets OR-Tools' ``cp_model`` be found as usual and patches it once loaded."""

    def __init__(self) -> None:
        self.undo: Callable[[], None] = lambda: None

    def find_spec(self, name, path=None, target=None):
        if name != _CP_MODEL:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:  # pragma: no cover - ortools is a dependency
            return spec
        load = spec.loader.exec_module

        def exec_module(module) -> None:
            load(module)
            self.undo = _patch_module(module)

        spec.loader.exec_module = exec_module
        return spec


def _patch_module(cp_model) -> Callable[[], None]:
    orig = cp_model.CpSolver.solve

    def solve(self, *args, **kwargs):
        self.parameters.catch_sigint_signal = False
        with on_request(self.stop_search):
            if requested():  # stop_search before the solve starts is lost: give it no time instead
                self.parameters.max_time_in_seconds = min(self.parameters.max_time_in_seconds, 0.01)
            return orig(self, *args, **kwargs)

    cp_model.CpSolver.solve = solve
    return lambda: setattr(cp_model.CpSolver, "solve", orig)


_active = False


@contextlib.contextmanager
def handling(cpsat: bool = True) -> Iterator[None]:
    """Install the two-stage SIGINT handling for the block (main thread only; elsewhere, or inside another
    ``handling`` block, a no-op). ``cpsat``: also route every CP-SAT solve through it (imports OR-Tools)."""
    global _active
    if _active or threading.current_thread() is not threading.main_thread():
        yield
        return
    _active = True
    try:
        with _handling(cpsat):
            yield
    finally:
        _active = False


@contextlib.contextmanager
def _handling(cpsat: bool) -> Iterator[None]:
    clear()
    rsock, wsock = socket.socketpair()
    wsock.setblocking(False)
    def handler(signum: int, frame: object) -> None:
        # runs in the main thread between bytecodes (the watcher counts the signal): code that does not
        # poll the flag is stopped the usual way
        global _raised
        if _polling == 0:
            _raised = True
            raise KeyboardInterrupt

    def watch() -> None:
        while True:
            try:
                data = rsock.recv(64)
            except OSError:
                return
            if not data:
                return
            for b in data:
                if b == signal.SIGINT:
                    _signalled()

    unpatch = _patch_cpsat() if cpsat else (lambda: None)
    old_handler = signal.signal(signal.SIGINT, handler)
    try:
        old_fd = signal.set_wakeup_fd(wsock.fileno(), warn_on_full_buffer=False)
    except ValueError:  # pragma: no cover - not the main thread of the main interpreter
        signal.signal(signal.SIGINT, old_handler)
        unpatch()
        rsock.close()
        wsock.close()
        yield
        return
    watcher = threading.Thread(target=watch, name="dplace-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(old_fd)
        signal.signal(signal.SIGINT, old_handler)
        unpatch()
        wsock.close()
        try:
            rsock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        rsock.close()
        watcher.join(timeout=1.0)
