"""The value limits of the problem model and the one check every number of an instance goes through
(:func:`check_number`: a one-line error naming the field and the value). Re-exported by
:mod:`dplace.instance.model`."""
from __future__ import annotations

import math
from typing import Any

from ..errors import InvalidInstanceError, show_value

# Value limits, checked when an Instance is built. The real guard is MAX_SERIAL_US: every op on its
# slowest device plus every transfer at the slowest link, one after another, is the longest horizon any
# method forms (a trivial schedule; CP-SAT's horizon in integer ticks, the MILP's big-M, which HiGHS would
# read as infinity from 1e20), and fusing ops or edges never makes it longer. The per-value limits name the
# field at fault for values no instance needs. Documented in the README ("Value limits").
MAX_SERIAL_US = 1e18  # µs, about 31,700 years
MAX_TIME_US = 1e18  # an op's time (µs at speed 1, or per device), a link's latency
SPEED_RANGE = (1e-6, 1e6)  # relative device speed
MIN_BANDWIDTH = 1e-6  # bytes / µs (1 byte per second)
MAX_BYTES = 1e18  # one edge's tensor
MAX_MEMORY = 2**53  # bytes, an op's or a device's memory (8 PiB; exact as a float)


def check_number(value: Any, where: str, *, positive: bool = False, lo: float | None = None,
                 hi: float | None = None, unit: str = "") -> float:
    """Return ``value`` as a finite float >= 0 (or > 0 with ``positive``) inside ``[lo, hi]`` when
    given, else raise :class:`InvalidInstanceError` naming ``where`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInstanceError(f"{where} must be a number, got {show_value(value)}")
    unit = f" {unit}" if unit else ""
    try:
        v = float(value)
    except OverflowError:  # an integer beyond every float
        limit = f"<= {hi:g}{unit}" if hi is not None else "finite"
        raise InvalidInstanceError(f"{where} must be {limit}, got {show_value(value)}") from None
    if math.isnan(v) or math.isinf(v):
        raise InvalidInstanceError(f"{where} must be finite, got {show_value(value)}")
    if positive and v <= 0:
        raise InvalidInstanceError(f"{where} must be > 0, got {show_value(value)}")
    if v < 0:
        raise InvalidInstanceError(f"{where} must be >= 0, got {show_value(value)}")
    if lo is not None and v < lo:
        raise InvalidInstanceError(f"{where} must be >= {lo:g}{unit}, got {show_value(value)}")
    if hi is not None and (v > hi or (isinstance(value, int) and value > hi)):  # ints exactly
        raise InvalidInstanceError(f"{where} must be <= {hi:g}{unit}, got {show_value(value)}")
    return v
