"""The receive cost in the CP-SAT model (``transfer_cpu``): which op pays each receive, as literals, and the
extra ticks in each op's interval size (:func:`add_receives`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..frame import check_time
from .literals import _and, _neg, _or

if TYPE_CHECKING:
    from .model import CpModelVars


def add_receives(V: "CpModelVars") -> None:
    """The receive cost (``transfer_cpu``, ``T.r`` ticks): each tensor received from another device costs
    that device ``r`` once per (producer p, destination device d), paid by p's consumer on d with the
    smallest topological index (the simulator's rule, :meth:`Instance.receive_times`). With p's consumers
    c_1, c_2, ... in topological order: pay[p, c_i, d] = x[c_i, d] AND NOT x[p, d] AND NOT seen[i - 1, d],
    seen[i, d] = seen[i - 1, d] OR x[c_i, d] (prefix OR); rc[c] = r * sum of c's pays (ticks, in its
    intervals' size). ``V.rc[o]`` is 0 where o can pay nothing (no term, one device, no producer)."""
    inst, md, r = V.inst, V.model, V.T.r
    V.rc = [0] * inst.n
    if not r or inst.m < 2:
        return
    pays: list[list[Any]] = [[] for _ in range(inst.n)]
    tp = inst.topo_pos
    for p in range(inst.n):
        if p % 512 == 0:
            check_time(V.budget)
        cons = sorted({inst.edst[k] for k in inst.succ[p]}, key=lambda c: tp[c])
        for d in range(inst.m):
            xp = V.lit(p, d)
            if xp is True:
                continue
            seen: Any = False
            for c in cons:
                xc = V.lit(c, d)
                if xc is False:
                    continue
                pay = _and(md, [xc, _neg(seen), _neg(xp)], f"pay{p}_{c}_{d}")
                if pay is not False:
                    pays[c].append(pay)
                seen = _or(md, [seen, xc], f"seen{p}_{c}_{d}")
    for c in range(inst.n):
        fixed = sum(1 for b in pays[c] if b is True)
        lits = [b for b in pays[c] if b is not True]
        if not lits:
            V.rc[c] = r * fixed
            continue
        rc = md.new_int_var(r * fixed, r * (fixed + len(lits)), f"rc{c}")
        md.add(rc == r * (fixed + sum(lits)))
        V.rc[c] = rc
