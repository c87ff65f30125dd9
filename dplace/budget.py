"""One time budget, made once and handed down: every "how much time is left" goes through it.

:func:`dplace.solve` makes a :class:`Budget` from ``time_limit_s`` when the call starts and hands it to
the method (``budget=``), which hands children of it to its phases (heuristics, model building, search,
confirmation, clean-up). A phase never computes remaining time by hand: it asks its budget::

    budget = Budget(20.0)                 # 20 s from now; Budget(None) / Budget.unlimited(): no limit
    budget.left()                         # seconds left (math.inf without a limit), never negative
    budget.expired()                      # no time left
    hints = budget.share(0.2)             # a child ending at now + 0.2 * left
    search = budget.child(reserve=0.5)    # a child ending 0.5 s before its parent (clean-up kept)
    quick = budget.child(seconds=2.0)     # ... ending in 2 s, or with the parent if that is sooner
    with budget.on_expiry(solver.stop_search):   # called from a timer thread at the deadline
        solver.solve(model)

A child never ends after its parent. ``deadline`` is a :func:`time.monotonic` value (``math.inf``
without a limit). The clock can be injected (``clock=``, any zero-argument function returning
seconds; children share it) so tests check budgets without waiting or timing anything.
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
from typing import Callable, Iterator

__all__ = ["Budget", "within"]

Clock = Callable[[], float]


class Budget:
    """A deadline on a clock, with the limit it was made from (see the module docstring)."""

    __slots__ = ("_clock", "_deadline", "_start", "limit_s")

    def __init__(self, seconds: float | None = None, *, clock: Clock = time.monotonic,
                 _deadline: float | None = None) -> None:
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                    or math.isnan(seconds)):
            raise ValueError(f"Budget: seconds must be a number or None, got {seconds!r}")
        self._clock = clock
        self._start = clock()
        if _deadline is None:
            _deadline = math.inf if seconds is None else self._start + max(0.0, float(seconds))
        self._deadline = _deadline
        #: the seconds this budget was made with (None: unlimited); for messages ("the limit (20 s) ...")
        self.limit_s: float | None = None if math.isinf(_deadline) else max(0.0, _deadline - self._start)

    # ---------------------------------------------------------------- making budgets
    @classmethod
    def unlimited(cls, *, clock: Clock = time.monotonic) -> "Budget":
        """A budget with no deadline."""
        return cls(None, clock=clock)

    @classmethod
    def resolve(cls, budget: "Budget | None" = None, time_limit_s: float | None = None,
                default_s: float | None = None) -> "Budget":
        """The budget a method works under: ``budget`` when given (no later than ``time_limit_s`` from now
        when that is given too; ``default_s`` from now when it is unlimited), else one of ``time_limit_s``
        seconds from now, else of ``default_s`` (None: unlimited). What a method does with its ``budget=`` and ``time_limit_s=`` keywords."""
        if budget is not None:
            if time_limit_s is None and not budget.limited:
                time_limit_s = default_s
            return budget if time_limit_s is None else budget.child(seconds=time_limit_s)
        return cls(time_limit_s if time_limit_s is not None else default_s)

    def _at(self, deadline: float) -> "Budget":
        b = Budget.__new__(Budget)
        b._clock, b._start = self._clock, self._clock()
        b._deadline = min(deadline, self._deadline)
        b.limit_s = None if math.isinf(b._deadline) else max(0.0, b._deadline - b._start)
        return b

    def child(self, seconds: float | None = None, reserve: float = 0.0) -> "Budget":
        """A budget ending ``seconds`` from now (None: with this one), never after this one, less
        ``reserve`` seconds kept back for what follows it (clean-up, reading an answer back)."""
        now = self._clock()
        end = self._deadline - max(0.0, reserve)
        if seconds is not None:
            end = min(end, now + max(0.0, float(seconds)))
        return self._at(max(now, end) if not math.isinf(end) else end)

    def share(self, fraction: float) -> "Budget":
        """A child ending at now + ``fraction`` × :meth:`left` (0 <= fraction <= 1); an unlimited budget's
        share is unlimited."""
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"Budget.share: fraction must be in [0, 1], got {fraction!r}")
        if math.isinf(self._deadline):
            return self._at(math.inf)
        return self._at(self._clock() + fraction * self.left())

    # ---------------------------------------------------------------- asking
    @property
    def deadline(self) -> float:
        """When it ends, on its clock (:func:`time.monotonic` by default); ``math.inf`` without a limit."""
        return self._deadline

    @property
    def limited(self) -> bool:
        return not math.isinf(self._deadline)

    @property
    def clock(self) -> Clock:
        return self._clock

    def now(self) -> float:
        return self._clock()

    def left(self) -> float:
        """Seconds left, never negative; ``math.inf`` without a limit."""
        if math.isinf(self._deadline):
            return math.inf
        return max(0.0, self._deadline - self._clock())

    def expired(self) -> bool:
        return self._clock() >= self._deadline

    def elapsed(self) -> float:
        """Seconds since this budget was made."""
        return self._clock() - self._start

    def seconds(self, floor: float = 0.0, cap: float | None = None) -> float:
        """:meth:`left` as a solver's time limit: at least ``floor`` (solvers refuse 0), at most ``cap``
        (what a solver is given without a limit, e.g. CP-SAT's ``max_time_in_seconds``)."""
        s = self.left()
        if cap is not None:
            s = min(s, cap)
        return max(floor, s)

    @contextlib.contextmanager
    def on_expiry(self, callback: Callable[[], object]) -> Iterator[None]:
        """Call ``callback`` once, from a timer thread, if the block is still running at the deadline
        (e.g. ``solver.stop_search``: solvers overrun their own limits, dplace does not). Uses the real
        clock: with an injected clock the timer waits :meth:`left` real seconds."""
        if math.isinf(self._deadline):
            yield
            return
        timer = threading.Timer(self.left(), _quiet(callback))
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()

    def __repr__(self) -> str:
        return "Budget(unlimited)" if math.isinf(self._deadline) else f"Budget({self.left():.3f} s left)"


def _quiet(callback: Callable[[], object]) -> Callable[[], None]:
    def call() -> None:
        try:
            callback()
        except Exception:  # noqa: BLE001 - a stop that fails must not kill the timer thread loudly
            pass
    return call


def within(limit_s: float, elapsed_s: float) -> bool:
    """The promise every method keeps: ``elapsed_s`` within max(1.1 × limit, limit + 1 s)."""
    return elapsed_s <= max(1.1 * limit_s, limit_s + 1.0)
