"""Pesto-style MILP for placement and scheduling, solved with CBC or HiGHS through PuLP.

Source: Pesto (Hafeez et al., Middleware'21, §4): placement binaries, start times, ordering binaries only
for pairs of ops with no path between them, big-M disjunctions; with memory limits per device as in its
K-device generalisation (Moirai). Times are continuous µs (no rounding).

  x[o, d]   op o on device d (binary)           s[o]  start (µs), e[o] = s[o] + sum_d dur[o][d] x[o, d]
  q[a, b]   a and b on one device: q >= x[a, d] + x[b, d] - 1                    -> _add_same_device
  y[a, b]   a before b if on one device (only pairs with no path between them)   -> _add_ordering
            s[b] >= e[a] - M (1 - y) - M (1 - q),  s[a] >= e[b] - M y - M (1 - q)
  z_uv >= x[u, d] - x[v, d],  s[v] >= e[u] + c_uv z_uv  (per device pair when links differ): exact for
            parallel comm; for sequential comm a valid row (a transfer takes at least c_uv), and
  sequential: transfer (p, d1, d2) with start ts >= e[p], end te >= ts + len_pv (x[p,d1] + x[v,d2] - 1),
            s[v] >= te - M (2 - x[p,d1] - x[v,d2]); transfers of one link in the order of their
            producers on d1 (y), the simulator's FIFO rule                         -> _add_transfers
  receive cost r (``transfer_cpu``): per producer p and device d, with p's consumers c_1, c_2, ... in
            topological order, seen_i <= seen_(i-1) + x[c_i, d], pay_i >= x[c_i, d] - x[p, d] - seen_(i-1)
            (in [0, 1]); e[c] and d's load grow by r x c's pays                     -> _add_receives
  sum_o mem[o] x[o, d] <= capacity[d];  mk >= e[o];  mk >= sum_o dur[o][d] x[o, d] (device load);
  M = heuristic makespan, every duration and transfer coefficient capped at M, and left out below 1e-7 M
  (``RESOLUTION``, CLP's tolerances: times of 1e-8..1e-7 M in big-M rows let its reduced-cost fixing
  prune the optimum; CBC's integer tolerance is set 10x below it, ``INTEGRALITY``: at its default 1e-7 a
  binary 1e-7 from 0/1 let big-M rows drop such times and CBC pruned the nodes it then rejected);
  interchangeable devices (:func:`device_classes`) used in first-use order      -> _add_symmetry
  mk >= max(lower_bound, energetic-reasoning bound of cpsat.energetic_bound).

Times are in units of a power of ten (:func:`time_unit`) that keeps the big-M at most 1e4: with times
of 1e8 µs and more HiGHS answered wrong optima and even INFEASIBLE. The solver's bound (or INFEASIBLE)
is a claim: it counts only as far as CP-SAT without presolve (or brute force on small graphs) confirms
it; a re-solve without presolve by the same solver may only weaken it (:mod:`dplace.verify.claims`).

Warm start: every variable gets the value of the best heuristic's simulated schedule (CBC: PuLP's mst
file, checked in CBC's log; HiGHS: ``Highs.setSolution`` before ``run``). Status and bound are read from
the solver itself (CBC's log, HiGHS's ``mip_dual_bound``): PuLP says "Optimal" after a time limit.
"""
from __future__ import annotations

from .model import INTEGRALITY, MilpModel, MilpOptions, RESOLUTION, build_milp, device_classes, time_unit, warm_values  # noqa: I001
from .backends import cbc_increment
from .solve import cross_check, milp

__all__ = ["INTEGRALITY", "MilpModel", "MilpOptions", "RESOLUTION", "build_milp", "cbc_increment", "cross_check", "device_classes", "milp",
           "time_unit", "warm_values"]
