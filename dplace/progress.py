"""Live progress of long commands: task, phase, elapsed time, incumbent and bound, on stderr.

One reporter is open at a time, process-wide. Code deep inside a method reports through the module
functions without being handed anything; with no reporter open they do nothing (library calls stay
silent)::

    from dplace import progress

    progress.phase("build CP-SAT model")           # what runs now (resets nothing else)
    progress.update(incumbent=1234.5, bound=1000)  # µs, simulated or proven; None keeps the old value
    progress.note("LNS step 4 improved")           # a one-off message (a line in plain mode)
    with progress.nested("segment of 40 ops"):      # a sub-problem: its phase, incumbent and bound
        ...                                         # show under its own label, never as the parent's

A command opens the reporter around its work::

    with progress.reporting("solve cpsat", mode="auto") as rep:
        rep.task("[2/5] heft")   # a new task: its own clock, phase, incumbent and bound
        ...

Modes: ``"live"`` — a rich Live line on stderr refreshed 4 times a second (the default of ``"auto"`` when
stderr is a terminal; cleared when the reporter closes); ``"plain"`` — timestamped lines on stderr (the
``"auto"`` default otherwise): none in the first ``delay_s`` seconds (short runs stay silent), then one
when the task or phase changed (at most one a second), at most one per ``every_s`` seconds for
incumbent/bound changes, and a heartbeat every ``heartbeat_s`` seconds while nothing changes; ``"quiet"`` — nothing. The environment variable ``DPLACE_PROGRESS`` (live, plain,
quiet) overrides ``"auto"``.

Thread-safe: CP-SAT solution callbacks may call :func:`update` from solver threads. An incumbent is a
claim of the method until the simulator judged it; callers say which in ``phase``/``note`` if it matters.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
import threading
import time
from typing import Any, Iterator, TextIO

__all__ = ["Reporter", "current", "nested", "note", "phase", "reporting", "silenced", "update"]

MODES = ("auto", "live", "plain", "quiet")


def _us(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "∞"
    return f"{x:,.1f} µs"


def resolve_mode(mode: str, stream: TextIO | None = None) -> str:
    """``auto`` -> ``DPLACE_PROGRESS`` if set, else ``live`` on a terminal and ``plain`` otherwise."""
    if mode not in MODES:
        raise ValueError(f"progress mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "auto":
        return mode
    env = os.environ.get("DPLACE_PROGRESS", "").strip().lower()
    if env in ("live", "plain", "quiet"):
        return env
    stream = stream if stream is not None else sys.stderr
    try:
        return "live" if stream.isatty() else "plain"
    except (AttributeError, ValueError):
        return "plain"


class Reporter:
    """State (task, phase, incumbent, bound, clocks) and its display; see the module docstring."""

    def __init__(self, label: str, *, mode: str = "auto", stream: TextIO | None = None,
                 every_s: float = 5.0, heartbeat_s: float = 30.0, delay_s: float = 1.0) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.mode = resolve_mode(mode, self.stream)
        self.label = label
        self.every_s, self.heartbeat_s, self.delay_s = every_s, heartbeat_s, delay_s
        self._lock = threading.RLock()
        self.t0 = time.monotonic()
        self._task: str | None = None
        self._task_t0 = self.t0
        self._phase: str | None = None
        self.incumbent: float | None = None
        self.bound: float | None = None
        self._last_line = -math.inf
        self._dirty = False  # something changed since the last line
        self._urgent = False  # ... and it was the task or the phase
        self._nest: list[_Sub] = []  # nested solves, innermost last: they take phase() and update()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None

    # ---------------------------------------------------------------- reporting API
    def task(self, name: str | None) -> None:
        with self._lock:
            self._task, self._task_t0 = name, time.monotonic()
            self._phase, self.incumbent, self.bound = None, None, None
            self._changed(urgent=True)

    def push(self, label: str) -> None:
        """A nested solve starts: until :meth:`pop`, phases and updates are its own."""
        with self._lock:
            self._nest.append(_Sub(label))
            self._changed(urgent=True)

    def pop(self) -> None:
        with self._lock:
            if self._nest:
                self._nest.pop()
                self._changed(urgent=True)

    def phase(self, name: str | None) -> None:
        with self._lock:
            if self._nest:
                self._nest[-1].phase = name
                return
            if name == self._phase:
                return
            self._phase = name
            self._changed(urgent=True)

    def update(self, *, incumbent: float | None = None, bound: float | None = None, phase: str | None = None) -> None:
        with self._lock:
            if self._nest:  # a sub-problem's numbers are not the parent's
                sub = self._nest[-1]
                sub.phase = phase if phase is not None else sub.phase
                sub.incumbent = float(incumbent) if incumbent is not None else sub.incumbent
                sub.bound = float(bound) if bound is not None else sub.bound
                return
            if phase is not None and phase != self._phase:
                self._phase = phase
                self._changed(urgent=True)
            changed = False
            if incumbent is not None and incumbent != self.incumbent:
                self.incumbent, changed = float(incumbent), True
            if bound is not None and bound != self.bound:
                self.bound, changed = float(bound), True
            if changed:
                self._changed(urgent=False)

    def note(self, message: str) -> None:
        with self._lock:
            if self.mode == "plain":
                self._write(self._text() + " — " + message)
            elif self.mode == "live" and self._live is not None:
                self._live.console.print(f"[dim]{self._stamp()}[/] {message}", highlight=False)

    # ---------------------------------------------------------------- display
    def _stamp(self) -> str:
        return f"{time.strftime('%H:%M:%S')} +{time.monotonic() - self.t0:.1f}s"

    def _text(self) -> str:
        parts = [self.label if not self._task else f"{self.label} {self._task}"]
        if self._phase:
            parts.append(self._phase)
        s = ": ".join(parts)
        if self._task:
            s += f" ({time.monotonic() - self._task_t0:.1f} s)"
        if self.incumbent is not None or self.bound is not None:
            s += f" — incumbent {_us(self.incumbent)}, bound {_us(self.bound)}"
            if self.incumbent and self.bound is not None and self.incumbent > 0 and math.isfinite(self.incumbent):
                s += f" (gap {100 * max(0.0, self.incumbent - self.bound) / self.incumbent:.1f}%)"
        for sub in self._nest:
            s += f" › {sub.label}" + (f": {sub.phase}" if sub.phase else "")
            if sub.incumbent is not None or sub.bound is not None:
                s += f" [its incumbent {_us(sub.incumbent)}, its bound {_us(sub.bound)}]"
        return s

    def __rich__(self) -> Any:
        from rich.text import Text

        with self._lock:
            return Text(f"⏱ {time.monotonic() - self.t0:6.1f} s  {self._text()}", style="cyan", no_wrap=True,
                        overflow="ellipsis")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(f"[{self._stamp()}] {text}\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed pipe must not stop the work
            pass
        self._last_line = time.monotonic()
        self._dirty = self._urgent = False

    def _due(self) -> bool:
        now = time.monotonic()
        if self.mode != "plain" or now - self.t0 < self.delay_s:
            return False
        since = now - self._last_line
        return (self._dirty and since >= (1.0 if self._urgent else self.every_s)) or since >= self.heartbeat_s

    def _changed(self, urgent: bool) -> None:
        self._dirty = True
        self._urgent = self._urgent or urgent
        if self._due():
            self._write(self._text())

    def _tick(self) -> None:  # plain mode: changes held back by the rate limit, and heartbeats
        while not self._stop.wait(0.5):
            with self._lock:
                if self._due():
                    self._write(self._text())

    def start(self) -> "Reporter":
        if self.mode == "live":
            from rich.console import Console
            from rich.live import Live

            self._live = Live(self, console=Console(stderr=True, highlight=False), refresh_per_second=4,
                              transient=True, redirect_stdout=False, redirect_stderr=True)
            self._live.start()
        elif self.mode == "plain":
            self._dirty = self._urgent = True
            self._thread = threading.Thread(target=self._tick, name="dplace-progress", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        if self._live is not None:
            try:
                self._live.stop()
            finally:
                self._live = None


class _Sub:
    """A nested solve's own line: label, phase, incumbent, bound."""

    __slots__ = ("bound", "incumbent", "label", "phase")

    def __init__(self, label: str) -> None:
        self.label = label
        self.phase: str | None = None
        self.incumbent: float | None = None
        self.bound: float | None = None


class _Null:
    """What :func:`current` returns with no reporter open: every call does nothing."""

    mode = "quiet"

    def push(self, label: str) -> None:
        pass

    def pop(self) -> None:
        pass

    def task(self, name: str | None) -> None:
        pass

    def phase(self, name: str | None) -> None:
        pass

    def update(self, **kw: Any) -> None:
        pass

    def note(self, message: str) -> None:
        pass


_NULL = _Null()
_current: Reporter | None = None


def current() -> Reporter | _Null:
    """The open reporter, or a no-op stand-in."""
    return _current if _current is not None else _NULL


def phase(name: str | None) -> None:
    current().phase(name)


def update(*, incumbent: float | None = None, bound: float | None = None, phase: str | None = None) -> None:
    current().update(incumbent=incumbent, bound=bound, phase=phase)


def note(message: str) -> None:
    current().note(message)


@contextlib.contextmanager
def silenced() -> Iterator[None]:
    """The C-level stdout sent to /dev/null for the block: libraries that print from native code (METIS's
    "***Cannot bisect a graph with 0 vertices!", HiGHS's banner) do not write to the terminal. C's own
    stdout buffer is flushed before the descriptor is given back, so nothing leaks out later."""
    fd = 1  # C's stdout, whatever Python's sys.stdout is now (a test's capture, a notebook)
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    try:
        saved = os.dup(fd)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            try:
                yield
            finally:
                _flush_c_stdout()
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _flush_c_stdout() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError):  # pragma: no cover - no C library to ask
        pass


@contextlib.contextmanager
def nested(label: str) -> Iterator[None]:
    """A nested solve (a segment's bound, a sub-problem, a confirmation) for the ``with`` block: its
    phases, incumbent and bound show under ``label`` after the parent's, and never replace the parent's
    incumbent or bound (a sub-problem's incumbent against the whole graph's bound means nothing)."""
    rep = current()
    rep.push(label)
    try:
        yield
    finally:
        rep.pop()


@contextlib.contextmanager
def reporting(label: str, *, mode: str = "auto", **kw: Any) -> Iterator[Reporter | _Null]:
    """Open the process-wide reporter for the ``with`` block. Nested: the outer one stays in charge
    (the inner call yields it, so a command run inside another reports into the same display)."""
    global _current
    if _current is not None:
        yield _current
        return
    rep = Reporter(label, mode=mode, **kw)
    if rep.mode == "quiet":
        yield _NULL
        return
    _current = rep.start()
    try:
        yield rep
    finally:
        _current = None
        rep.close()
