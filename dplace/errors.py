"""One error hierarchy for the whole project.

Messages name the field and the value, e.g. ``op 'conv1': time must be >= 0, got -3``.
The CLI turns any :class:`DplaceError` into one line on stderr and exit code 2.

    DplaceError
    ├── InvalidInstanceError (also a ValueError): malformed input (instance, result, chain, file)
    │   └── OptionError: a method's option unknown, mistyped or out of range (:func:`bad_option`)
    ├── InfeasibleError: the problem has no solution
    └── SolverError: a solver failed or returned something unusable
"""
from __future__ import annotations

from typing import Any


def show_value(value: Any) -> str:
    """``repr(value)`` kept short enough for a one-line message (huge integers, long strings)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**16:
        try:
            return f"{float(value):.3g}"
        except OverflowError:
            return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class DplaceError(Exception):
    """Base class of every error dplace raises on purpose."""


class InvalidInstanceError(DplaceError, ValueError):
    """The input (instance, result, chain, file) is malformed."""


class OptionError(InvalidInstanceError):
    """A method's option is unknown, of the wrong type or out of its range (raise :func:`bad_option`)."""


def bad_option(option: str, must: str, value: Any) -> OptionError:
    """The one way to word an option error: ``option 'R' must be an integer >= 1, got 0``."""
    return OptionError(f"option {option!r} must be {must}, got {show_value(value)}")


class InfeasibleError(DplaceError):
    """The problem has no solution (e.g. the ops cannot fit on the devices)."""


class SolverError(DplaceError):
    """A solver failed or returned something unusable."""
