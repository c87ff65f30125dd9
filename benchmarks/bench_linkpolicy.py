"""What HEFT's speed in sequential comm would cost (issue 25 item 1): HEFT under two link policies that dplace's
timing model does not have, beside dplace's exact HEFT, in one process.

dplace's rule (``dplace.simulate``, Baechi's): the sends on a link run in the order their producers run on the
source device. A list scheduler commits an input's send when it places the consumer, so a new send often joins
its link ahead of sends already committed and delays them (and what waits for them): HEFT's exact state re-times
those (``benchmarks/bench_cascades.py``: 14.6M op moves at 36k ops, ~n^1.8), which is why heft takes 5.4x its
parallel-comm time there. Two policies under which a committed send never moves, each a HEFT loop here (EFT with
insertion, ranks and placement rules as ``heft``; devices through the compiled parallel state, whose insertions
into idle gaps move nothing):

- ``idle``: a new send goes into its link's earliest idle interval after its producer ends that holds it
  (Sinnen's edge scheduling with insertion): the schedule it plans is exact only under a model whose schedule
  carries each link's order;
- ``stale``: a new send goes where dplace's rule puts it (after the send of the producer just before its own) and
  the sends behind it keep their times: decisions on times that are not the simulation's.

Beside them dplace's ``heft`` under its own link policy (``dplace.kernels.LINK_MOVES``: exact re-timing up to
LINK_MOVES x n moves, then frozen links with exact replays), the rule adopted after this comparison.

Each loop's placement and per-device order are then timed by ``dplace.simulate`` (dplace's rule), the makespan
this prints as ``simulated``; ``planned`` is the loop's own figure under its policy, not a dplace makespan. A send
carries the largest tensor its producer sends anywhere (one send per producer and device, sized before its other
consumers are placed). Times are CPU seconds of the loops alone (compiled on a small graph first), beside
dplace's ``heft`` on the same graph in both comm modes. Memory rules are kept (``rules_candidates``).

    .venv/bin/python benchmarks/bench_linkpolicy.py --ops 36000
    .venv/bin/python benchmarks/bench_linkpolicy.py nas_seq.json incv3_seq.json

Instance files are run in sequential comm whatever their ``comm``.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from numba import njit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dplace.instance.io import load_instance  # noqa: E402
from dplace.kernels import lists as kl  # noqa: E402
from dplace.kernels.state import ArrayState, commit_at, est_at, rules_assign, rules_candidates  # noqa: E402
from dplace.schedule.simulate import simulate  # noqa: E402

IDLE, STALE = 0, 1
POLICIES = {"idle": IDLE, "stale": STALE}


@njit(cache=False)  # a script: no disk cache (a cache keyed to this module's name does not load from a test)
def _first_above(x, n, l, t):
    """The first i < n with x[l, i] > t (row l sorted), else n."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) >> 1
        if x[l, mid] <= t:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=False)
def _idle_slot(ls, le, ln, l, t, c):
    """(s, i): the earliest s >= t with [s, s + c) free on link l (busy intervals ls / le[l, :ln[l]], sorted),
    and the index the interval goes to."""
    n = ln[l]
    lo = _first_above(le, n, l, t)
    s = t
    for i in range(lo, n):
        if s + c <= ls[l, i]:
            return s, i
        if le[l, i] > s:
            s = le[l, i]
    return s, n


@njit(cache=False)
def _stale_slot(le, lk, ln, l, key, t):
    """(s, i): dplace's place for a send whose producer starts at ``key`` (after the sends of producers that
    start no later) and its start, max(t, the arrival of the send before it); the sends after it unmoved."""
    lo = _first_above(lk, ln[l], l, key)
    s = t
    if lo > 0 and le[l, lo - 1] > s:
        s = le[l, lo - 1]
    return s, lo


@njit(cache=False)
def _arrival(I, S, p, d, ls, le, lk, ln, arr, bmax, pol, put):
    """When p's output reaches device d (its send planned under ``pol``; committed when ``put``)."""
    m = I.lat.shape[0]
    dp = S.placement[p]
    if dp == d:
        return S.end[p]
    y = p * m + d
    if arr[y] >= 0.0:
        return arr[y]
    l = dp * m + d
    c = I.lat[dp, d] + bmax[p] / I.bw[dp, d]
    if pol == IDLE:
        s, i = _idle_slot(ls, le, ln, l, S.end[p], c)
    else:
        s, i = _stale_slot(le, lk, ln, l, S.start[p], S.end[p])
    if put:
        n = ln[l]
        for a in range(n, i, -1):
            ls[l, a], le[l, a], lk[l, a] = ls[l, a - 1], le[l, a - 1], lk[l, a - 1]
        ls[l, i], le[l, i], lk[l, i] = s, s + c, S.start[p]
        ln[l] = n + 1
        arr[y] = s + c
    return s + c


@njit(cache=False)
def _ready(I, S, o, d, ls, le, lk, ln, arr, bmax, pol, put):
    r = 0.0
    for j in range(I.pred_ptr[o], I.pred_ptr[o + 1]):
        a = _arrival(I, S, I.esrc[I.pred_edge[j]], d, ls, le, lk, ln, arr, bmax, pol, put)
        if a > r:
            r = a
    return r


@njit(cache=False)
def policy_heft_loop(I, S, R, order, pol, bmax, ls, le, lk, ln, arr):
    """HEFT's loop (``dplace.kernels.lists.heft_loop``'s choice: smallest EFT with insertion, first on ties) with
    the sends planned under ``pol`` (link l's sends: busy intervals ``ls`` / ``le[l, :ln[l]]``, their producers'
    starts ``lk``; ``arr[p * m + d]``: when p's output reaches d, -1 before its send); returns the planned
    makespan."""
    m = I.lat.shape[0]
    n = len(order)
    cand = np.empty(m, dtype=np.int64)
    for k in range(n):
        o = order[k]
        nc = rules_candidates(I, R, o, cand)
        best_d, best_f = -1, np.inf
        for i in range(nc):
            d = cand[i]
            f = est_at(I, S, o, d, _ready(I, S, o, d, ls, le, lk, ln, arr, bmax, pol, False), True) + I.dur[o, d]
            if f < best_f:
                best_d, best_f = d, f
        r = _ready(I, S, o, best_d, ls, le, lk, ln, arr, bmax, pol, True)
        commit_at(I, S, o, best_d, r, est_at(I, S, o, best_d, r, True), True)
        rules_assign(I, R, o, best_d)
    return S.end.max()


def plan(inst, pol: int) -> dict:
    """The loop under ``pol`` on ``inst``: its compiled state and link arrays (``I``, ``S``, ``ls``, ``le``,
    ``ln``, ``arr``, ``bmax``), ``cpu`` (CPU s of the loop) and ``planned`` (its makespan)."""
    a, _, order, I, S, R, _ = kl._prepare(inst.replace(comm="parallel"), "mean", "mean")
    bmax = np.zeros(a.n)
    np.maximum.at(bmax, a.esrc, a.ebytes)
    k = a.m * a.m
    got = dict(I=I, S=S, bmax=bmax, ls=np.zeros((k, a.n + 1)), le=np.zeros((k, a.n + 1)), lk=np.zeros((k, a.n + 1)),
               ln=np.zeros(k, dtype=np.int64), arr=np.full(a.n * a.m, -1.0))
    t = time.process_time()
    got["planned"] = float(policy_heft_loop(I, S, R, order, pol, bmax, got["ls"], got["le"], got["lk"], got["ln"],
                                            got["arr"]))
    got["cpu"] = time.process_time() - t
    return got


def run_policy(inst, pol: int) -> tuple[float, float, float]:
    """(CPU s of the loop, planned makespan, dplace.simulate's makespan of its placement and order)."""
    got = plan(inst, pol)
    st = ArrayState(got["I"], got["S"])
    return got["cpu"], got["planned"], simulate(inst, st.placement, st.order()).makespan


def run_exact(inst, moves: float = -1.0) -> tuple[float, float]:
    """dplace's heft kernel on ``inst``: (CPU s, dplace.simulate's makespan); ``moves``: its link policy's
    ``dplace.kernels.LINK_MOVES`` (-1, the default here: exact re-timing throughout; None: dplace's policy)."""
    from dplace import kernels

    old = kernels.LINK_MOVES
    kernels.LINK_MOVES = old if moves is None else moves
    try:
        t = time.process_time()
        st = kl.run_heft(inst)
        cpu = time.process_time() - t
    finally:
        kernels.LINK_MOVES = old
    return cpu, simulate(inst, st.placement, st.order()).makespan


def _generate(ops: int, tmp: str) -> str:
    path = os.path.join(tmp, f"t{ops}.json")
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "dplace"), "generate", "transformer", "--ops",
                    str(ops), "--devices", "4", "--comm", "sequential", "--out", path], check=True, capture_output=True)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instances", nargs="*", help="instance files (run in sequential comm)")
    ap.add_argument("--ops", type=int, default=0, help="also a generated Transformer of about this many ops")
    ap.add_argument("--no-exact", action="store_true",
                    help="skip dplace's heft in sequential comm (slow past 100k ops)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = list(args.instances) + ([_generate(args.ops, tmp)] if args.ops else [])
        if not paths:
            ap.error("give instance files or --ops")
        small = load_instance(_generate(300, tmp))
        for pol in POLICIES.values():  # compile
            run_policy(small, pol)
        run_exact(small)
        run_exact(small, None)
        run_exact(small.replace(comm="parallel"))
        print("| graph | ops | heft parallel CPU s | heft sequential, exact: CPU s, simulated µs "
              "| heft sequential, dplace's link policy: CPU s, simulated µs | idle: CPU s, planned, simulated "
              "| stale: CPU s, planned, simulated | load |")
        print("|---|---|---|---|---|---|---|---|")
        for path in paths:
            inst = load_instance(path).replace(comm="sequential")
            par_cpu, _ = run_exact(inst.replace(comm="parallel"))
            ex = "-" if args.no_exact else "{:.2f}, {:,.0f}".format(*run_exact(inst))
            ours = "{:.2f}, {:,.0f}".format(*run_exact(inst, None))
            cells = ["{:.2f}, {:,.0f}, {:,.0f}".format(*run_policy(inst, pol)) for pol in POLICIES.values()]
            print(f"| {inst.name} | {inst.n:,} | {par_cpu:.2f} | {ex} | {ours} | {cells[0]} | {cells[1]} | "
                  f"{' '.join(open('/proc/loadavg').read().split()[:3])} |", flush=True)


if __name__ == "__main__":
    main()
