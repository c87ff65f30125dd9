"""Straight-line least squares for the runtime's measured models: the small-batch regression of op
times and memory (:mod:`dplace.runtime.profile`, FastT §4.2.1) and the link model ``latency + bytes /
bandwidth`` (:mod:`dplace.runtime.commfit`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """``(a, b)`` minimising ``sum (a + b x - y)^2`` over the points; ``(mean y, 0)`` when every x is
    the same (no slope can be told). Centred normal equations, in numpy."""
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"fit_line needs as many x as y values and at least one, got {x.size} and {y.size}")
    mx, my = x.mean(), y.mean()
    dx = x - mx
    sxx = float(dx @ dx)
    if sxx == 0.0:
        return float(my), 0.0
    b = float(dx @ (y - my)) / sxx
    return float(my - b * mx), b
