"""Integer time for the CP-SAT model: durations and transfer times in ticks.

The tick is a power of ten: the coarsest one that represents every time exactly, if the horizon (the
hint's makespan) then needs at most ``MAX_HORIZON_TICKS`` ticks; else the finest one within that many, so
rounding costs ~1e-8 relative, well below the claims' tolerance (1e-6). Every duration and transfer
time is rounded *up* to whole ticks (values within 1e-6 tick of an integer count as that integer: float
noise), so a schedule of the model times no shorter than the real one. A bound proven in ticks is turned
into a bound of the real problem by subtracting the most that rounding can add along one path of the
schedule (zero when nothing was rounded). Times beyond ``cap`` ticks (far beyond any horizon) are cut to
it, which can only lower the model's bounds.
"""
from __future__ import annotations

import math
from typing import Sequence

from dplace.errors import InvalidInstanceError
from dplace.instance.model import Instance

from ..frame import homogeneous_links

__all__ = ["MAX_HORIZON_TICKS", "MAX_SERIAL_TICKS", "MIN_TICK_EXP", "Ticks", "horizon_ticks", "receive_count",
           "tick_schedule"]

MIN_TICK_EXP = -15  # automatic tick: a power of ten >= 1e-15 µs, the finest for which...
MAX_HORIZON_TICKS = 1e9  # ...the horizon (the hint's makespan, else all serial) needs at most this many ticks
MAX_SERIAL_TICKS = 1e15  # ...and the trivial horizon (all serial) at most this many: int64 with room for sums
_TICK_EPS = 1e-6  # a value within this many ticks of an integer counts as that integer (float noise)


def _is_multiple(v: float, t: float) -> bool:
    q = v / t
    return abs(q - round(q)) <= _TICK_EPS


def _ceil_ticks(v: float, t: float) -> int:
    q = v / t
    r = round(q)
    if abs(q - r) <= _TICK_EPS:
        return int(r)
    return int(math.ceil(q))


def _capped(v: float, t: float, cap: float) -> int:
    return _ceil_ticks(v, t) if v / t <= cap else int(cap)


class Ticks:
    """Integer durations (``p[o][d]``), transfer times (``c[e][d1][d2]``) and receive cost (``r``: the
    instance's ``transfer_cpu``) of ``inst`` in ticks of ``tick`` µs, rounded up (at most ``cap``);
    ``slack`` is the most (in ticks) rounding can add along one schedule path; ``exact``: no time was
    rounded."""

    def __init__(self, inst: Instance, tick: float | None = None, horizon_us: float | None = None) -> None:
        self.inst = inst
        n, m = inst.n, inst.m
        vals = [v for row in inst.dur for v in row]
        tt = [[[inst.transfer_time(e, a, b) for b in range(m)] for a in range(m)] for e in range(len(inst.esrc))]
        vals += [v for M in tt for row in M for v in row]
        # the receive cost (``transfer_cpu``): paid at most once per (producer, destination device)
        tc = float(inst.transfer_cpu) if m > 1 else 0.0
        self.n_receives = receive_count(inst) if tc else 0
        vals += [tc]
        # longest time of each op and each edge: all of them one after the other is the trivial horizon
        items = [max(row) for row in inst.dur] + [max(v for row in M for v in row) for M in tt]
        items += [tc] * self.n_receives
        serial = sum(items)
        # A time longer than ``cap`` ticks (far beyond the hint's makespan) is cut to ``cap``: that only
        # shortens the model's times, so its bounds stay lower bounds (its answers are simulated anyway),
        # and the serial horizon stays within int64 with room for sums.
        ref = horizon_us if horizon_us is not None and horizon_us > 0 else None
        # without a horizon nothing says which times matter: no cap (the serial rule keeps int64 room)
        cap = max(10 * MAX_HORIZON_TICKS, MAX_SERIAL_TICKS / (len(items) + 1)) if ref is not None else math.inf
        if tick is None and ref is None:  # the coarsest tick >= 1e-6 µs that is exact, coarser for int64
            k = -6
            while k < 6 and all(_is_multiple(v, float(f"1e{k + 1}")) for v in vals):
                k += 1
            while serial / 10.0**k > MAX_SERIAL_TICKS:
                k += 1
            tick = float(f"1e{k}")
        elif tick is None:
            # the finest tick the horizon allows (least rounding), then coarser while every time stays a
            # whole number of ticks (exact data: the same model with smaller numbers)
            k = max(MIN_TICK_EXP, math.floor(math.log10(ref / MAX_HORIZON_TICKS)))
            while ref / 10.0**k > MAX_HORIZON_TICKS or sum(min(x / 10.0**k, cap) for x in items) > MAX_SERIAL_TICKS:
                k += 1
            if all(_is_multiple(v, float(f"1e{k}")) for v in vals):
                while k < 6 and all(_is_multiple(v, float(f"1e{k + 1}")) for v in vals):
                    k += 1
            tick = float(f"1e{k}")
        elif sum(min(x / tick, cap) for x in items) > MAX_SERIAL_TICKS:
            raise InvalidInstanceError(f"cpsat: tick {tick:g} µs is too fine here: the serial horizon "
                                       f"{serial:.3g} µs would need more than {MAX_SERIAL_TICKS:g} ticks")
        self.tick = float(tick)
        t = self.tick
        self.cap = cap
        self.p = [[_capped(v, t, cap) for v in row] for row in inst.dur]
        self.c = [[[_capped(v, t, cap) for v in row] for row in M] for M in tt]
        self.r = _capped(tc, t, cap)  # the receive cost in ticks (0 without it)
        # rounding excess (ticks) per op / per edge, worst device (pair); a schedule path holds at most n ops
        # and n - 1 transfers (parallel) or n (m - 1) transfers (sequential: link queues)
        op_err = sorted((max(0.0, max(self.p[o][d] - inst.dur[o][d] / t for d in range(m))) for o in range(n)),
                        reverse=True)
        tr_err = sorted((max([0.0] + [self.c[e][a][b] - tt[e][a][b] / t for a in range(m) for b in range(m)])
                         for e in range(len(tt))), reverse=True)
        n_tr = (n - 1) if inst.comm == "parallel" else n * max(0, m - 1)
        r_err = max(0.0, self.r - tc / t)  # every receive of a schedule may lie on its critical path
        self.exact = all(x <= _TICK_EPS for x in op_err[:1] + tr_err[:1] + [r_err])
        self.slack = 0.0 if self.exact else sum(op_err[:n]) + sum(tr_err[:max(0, n_tr)]) + r_err * self.n_receives

    def to_us(self, ticks: float) -> float:
        return ticks * self.tick

    def real_bound(self, bound_ticks: float) -> float:
        """A lower bound of the real problem from a proven bound of the tick model."""
        if self.exact:
            return bound_ticks * self.tick
        return max(0.0, (bound_ticks - self.slack) * self.tick)


def receive_count(inst: Instance) -> int:
    """The most receives (``transfer_cpu``) any placement pays: per producer, one per destination device
    other than its own, at most one per consumer."""
    if inst.m < 2:
        return 0
    return sum(min(inst.m - 1, len({inst.edst[k] for k in inst.succ[p]})) for p in range(inst.n))


def horizon_ticks(inst: Instance, T: Ticks) -> int:
    """Trivial upper bound: everything one after the other with every transfer and receive paid."""
    tot = sum(max(row) for row in T.p)
    tot += sum(max((v for row in M for v in row), default=0) for M in T.c)
    tot += T.r * T.n_receives
    return max(1, int(tot))


def tick_schedule(inst: Instance, T: Ticks, placement: Sequence[int], order: Sequence[Sequence[int]]):
    """:func:`dplace.simulate` of ``placement``/``order`` on the model's tick data (durations p, transfer
    times c as bytes over a link of latency 0 and bandwidth 1); None when links differ per device pair
    (then a transfer time is not bytes over one link) or the order is not valid."""
    from dplace.instance.model import MAX_MEMORY, Device, Edge, Link, Op
    from dplace.schedule.simulate import simulate

    if not homogeneous_links(inst):
        return None
    names = [d.name for d in inst.devices]
    a, b = (0, 1) if inst.m > 1 else (0, 0)
    try:
        ti = Instance(
            inst.name, [Device(nm, MAX_MEMORY, 1.0) for nm in names],
            [Op(op.id, {names[d]: float(T.p[o][d]) for d in range(inst.m)}, 0) for o, op in enumerate(inst.ops)],
            [Edge(inst.ops[inst.esrc[k]].id, inst.ops[inst.edst[k]].id, float(T.c[k][a][b]) if inst.m > 1 else 0.0)
             for k in range(len(inst.esrc))],
            link=Link(0.0, 1.0), comm=inst.comm, transfer_cpu=float(T.r))
        return simulate(ti, list(placement), [list(x) for x in order])
    except InvalidInstanceError:
        return None
