"""Busy time of one resource (a device or a directed link) kept as its idle gaps: the insertion
queries of :class:`dplace.schedule.state.ScheduleState` (HEFT's insertion policy)."""
from __future__ import annotations

from bisect import bisect_left, bisect_right

from ..errors import InvalidInstanceError


class Timeline:
    """Busy time of one resource (a device or a directed link), kept as its idle gaps.

    Gaps before ``free`` (the end of the last busy interval) are stored sorted, in chunks of at most
    ``2 * _CH`` with each chunk's largest gap, so an insertion query skips whole chunks of gaps that are
    too small: amortised O(sqrt(gaps)) instead of a walk over every gap.
    """

    __slots__ = ("free", "_gs", "_ge", "_mx", "_last")
    _CH = 64

    def __init__(self) -> None:
        self.free = 0.0
        self._gs: list[list[float]] = []  # per chunk: gap starts
        self._ge: list[list[float]] = []  # per chunk: gap ends
        self._mx: list[float] = []  # per chunk: largest gap
        self._last: list[float] = []  # per chunk: end of its last gap (sorted across chunks)

    def earliest(self, ready: float, length: float, insertion: bool) -> float:
        free = self.free
        if insertion and self._gs:
            last = self._last
            c = bisect_right(last, ready)
            nch = len(last)
            while c < nch:
                if self._mx[c] >= length:
                    gs, ge = self._gs[c], self._ge[c]
                    for k in range(bisect_right(ge, ready), len(gs)):
                        t = gs[k] if gs[k] > ready else ready
                        if ge[k] - t >= length:
                            return t
                c += 1
        return ready if ready > free else free

    def truncate(self, t0: float, free: float) -> None:
        """Forget the gaps that end at or after ``t0``; ``free`` becomes the end of the busy time kept
        (work from ``t0`` on is then added again in order)."""
        last = self._last
        c = bisect_left(last, t0)
        if c < len(last):
            ge = self._ge[c]
            k = bisect_left(ge, t0)
            del self._gs[c + 1:], self._ge[c + 1:], self._mx[c + 1:], last[c + 1:]
            del self._gs[c][k:], ge[k:]
            self._recount(c)
        self.free = free

    def _recount(self, c: int) -> None:
        gs, ge = self._gs[c], self._ge[c]
        if not gs:
            del self._gs[c], self._ge[c], self._mx[c], self._last[c]
            return
        self._mx[c] = max(b - a for a, b in zip(gs, ge))
        self._last[c] = ge[-1]
        if len(gs) > 2 * self._CH:  # split a chunk that grew too long
            h = len(gs) // 2
            self._gs.insert(c + 1, gs[h:])
            self._ge.insert(c + 1, ge[h:])
            del gs[h:], ge[h:]
            self._mx.insert(c + 1, 0.0)
            self._last.insert(c + 1, 0.0)
            self._recount(c + 1)
            self._recount(c)

    def add(self, s: float, f: float) -> None:
        free = self.free
        eps = 1e-9 * max(1.0, abs(s))
        if s >= free - eps:
            if s > free:
                if not self._gs or len(self._gs[-1]) >= self._CH:
                    self._gs.append([])
                    self._ge.append([])
                    self._mx.append(0.0)
                    self._last.append(0.0)
                self._gs[-1].append(free)
                self._ge[-1].append(s)
                if s - free > self._mx[-1]:
                    self._mx[-1] = s - free
                self._last[-1] = s
            if f > free:
                self.free = f
            return
        c = bisect_left(self._last, s - eps)
        k = bisect_left(self._ge[c], s - eps) if c < len(self._last) else 0
        for _ in range(4):  # the containing gap is this one or a following one (zero-length ops)
            if c >= len(self._last):
                break
            gs, ge = self._gs[c], self._ge[c]
            if k >= len(gs):
                c, k = c + 1, 0
                continue
            if gs[k] > s + eps:
                break
            if f > ge[k] + eps:
                k += 1
                continue
            a, b = gs[k], ge[k]
            del gs[k], ge[k]
            if b > f + eps:
                gs.insert(k, f)
                ge.insert(k, b)
            if s > a + eps:
                gs.insert(k, a)
                ge.insert(k, s)
            self._recount(c)
            return
        raise InvalidInstanceError(f"ScheduleState: interval [{s}, {f}] overlaps work already committed")
