"""Link model from measurements (FastT §4: transfer time linear in the bytes, fitted per device pair).

For each ordered pair (a, b) of devices, a tensor of 1 KB ... 64 MB is created on ``a`` and copied to
``b`` inside a ``tf.function``; the time of a same-device call of the same size is subtracted (call
overhead, not transfer). ``latency + bytes / bandwidth`` is fitted by least squares per pair and
written into the instance's ``links.pairs``. Logical CPUs share host memory: there the fitted
bandwidth is huge or unbounded (clamped to ``MAX_BANDWIDTH``) — a CPU cannot show real GPU links.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Callable, Iterable

from dplace.instance.model import Instance, Link

from .fit import fit_line as _line
from .zoo import _tf, tf_device

SIZES = tuple(1024 * 4 ** k for k in range(9))  # 1 KB, 4 KB, ..., 64 MB
MAX_BANDWIDTH = 1e9  # bytes/µs (1 PB/s): "no measurable per-byte cost"


@dataclass
class PairFit:
    src: str
    dst: str
    latency: float  # µs
    bandwidth: float  # bytes/µs
    samples: list[tuple[int, float]]  # (bytes, µs) after subtracting the same-device call
    residual_us: float  # root mean square residual of the fit

    @property
    def link(self) -> Link:
        return Link(self.latency, self.bandwidth)


def _time_copy(src: str, dst: str, nbytes: int, reps: int) -> float:
    """Median µs of copying ``nbytes`` float32 from ``src`` to ``dst`` and touching one element there."""
    tf = _tf()
    n = max(1, nbytes // 4)
    with tf.device(tf_device(src)):
        x = tf.random.uniform((n,), dtype=tf.float32) + 0.0

    @tf.function
    def copy(t):
        with tf.device(tf_device(dst)):
            y = tf.identity(t)
            return y[n - 1] + 1.0

    copy(x).numpy()  # trace and warm up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        copy(x).numpy()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def fit_line(samples: list[tuple[int, float]]) -> tuple[float, float, float]:
    """Least squares ``t = latency + bytes / bandwidth`` -> (latency ≥ 0, bandwidth, rms residual)."""
    xs = [float(b) for b, _ in samples]
    ys = [t for _, t in samples]
    lat, slope = _line(xs, ys)
    if slope <= 1.0 / MAX_BANDWIDTH:  # refit the intercept under the clamped slope
        slope = 1.0 / MAX_BANDWIDTH
        lat = sum(ys) / len(ys) - slope * sum(xs) / len(xs)
    lat = max(0.0, lat)
    rms = (sum((lat + slope * x - y) ** 2 for x, y in zip(xs, ys)) / len(xs)) ** 0.5
    return lat, 1.0 / slope, rms


def fit_links(devices: Iterable[str], *, sizes: Iterable[int] = SIZES, reps: int = 5,
              progress: Callable[[str, int, int], None] | None = None) -> list[PairFit]:
    """Measure and fit every ordered pair of ``devices`` (names like 'CPU:0', 'GPU:1')."""
    devs = list(devices)
    sizes = list(sizes)
    pairs = [(a, b) for a in devs for b in devs if a != b]
    total = len(sizes) * (len(devs) + len(pairs))
    done = 0
    base: dict[tuple[str, int], float] = {}
    for a in devs:
        for s in sizes:
            base[(a, s)] = _time_copy(a, a, s, reps)
            done += 1
            if progress:
                progress("commfit", done, total)
    fits = []
    for a, b in pairs:
        samples = []
        for s in sizes:
            t = _time_copy(a, b, s, reps) - base[(b, s)]
            samples.append((s, max(0.0, t)))
            done += 1
            if progress:
                progress("commfit", done, total)
        lat, bw, rms = fit_line(samples)
        fits.append(PairFit(a, b, lat, bw, samples, rms))
    return fits


def with_links(inst: Instance, fits: Iterable[PairFit]) -> Instance:
    """A copy of ``inst`` whose ``links.pairs`` hold the fitted links (devices not in it are skipped)."""
    pairs = dict(inst.pairs)
    for f in fits:
        if f.src in inst.device_index and f.dst in inst.device_index:
            pairs[(f.src, f.dst)] = Link(round(f.latency, 3), round(f.bandwidth, 3))
    return inst.replace(pairs=pairs)
