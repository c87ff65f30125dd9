"""The heuristic start of every exact method: run the registered heuristics within a budget and keep the
best (:func:`best_heuristic`, :func:`run_heuristics`), with their estimated costs (:func:`heuristic_cost_s`)
and the machine's load (:func:`slowdown_guess`). CP-SAT's hints (:mod:`.cpsat.hint`), the MILP's warm start
and the frame's fallback (:func:`.frame.run_guarded`) all start here; it imports no exact method.
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Sequence

from dplace.budget import Budget
from dplace.instance.model import Instance
from dplace.result import Result

__all__ = ["HEURISTIC_US", "Interrupted", "best_heuristic", "heuristic_cost_s", "hint_heuristics", "run_heuristics",
           "slowdown_guess"]

_SKIP_HINT = frozenset({"cpsat", "milp", "refine", "portfolio", "brute"})
# paper methods left to their dplace variant: celeritas_balanced / order_place_balanced try the paper's own
# setting among theirs; os_dpos starts from the data-parallel graph, a rewritten graph no hint can use, and
# is os_dpos_model_graph otherwise; m_sct's interior point runs in a HiGHS child process (seconds to start
# on a loaded machine, out of a hint budget), m_sct_capped stands for it. (m_topo and m_etf run beside
# their *_capped variants: neither covers the other -- benchmarks/bench_papers.py: the paper's m_etf wins
# on InceptionV3, the capped one on classic task graphs.)
_COVERED_BY_VARIANT = frozenset({"celeritas", "order_place", "os_dpos", "m_sct"})


class Interrupted(KeyboardInterrupt):
    """Ctrl-C while the heuristics ran: ``best`` is (name, Result) of the best one so far, or None."""

    def __init__(self, best: tuple[str, Result] | None) -> None:
        super().__init__()
        self.best = best


# CPU µs per (op x device) of each heuristic, run a second time in one process on the 36k-op, 4-device
# transformer (parallel comm; `dplace generate transformer --ops 36000 --devices 4 --out t36k.json`):
# `benchmarks/bench_heuristic_costs.py`.
# The first heuristic run on an instance also builds its lazy indexes (_FIRST_US); the compiled list
# schedulers (dplace.kernels: HEFT, DPOS from 5,000 ops, m-ETF from 10,000, parallel comm) cost
# _COMPILED_US, plus importing numba and loading their kernels once per process (_NUMBA_S), and otherwise
# run the pure-Python reference (HEURISTIC_US). Used only to decide what fits in a budget.
# (measured before the paper methods got the papers' settings; their dplace variants, the names the
# heuristics of refine/portfolio run, keep those settings and these costs)
HEURISTIC_US = {"standard_evaluation": 2.2, "metis": 3.0, "m_topo": 4.4, "celeritas": 6.9, "heft": 10.0,
                "dpos": 10.3, "order_place": 10.6, "m_sct": 11.4, "m_etf": 14.6, "os_dpos": 15.5,
                "m_topo_capped": 4.4, "celeritas_balanced": 6.9, "order_place_balanced": 10.6, "m_sct_capped": 11.4,
                "m_etf_capped": 14.6, "os_dpos_model_graph": 15.5}
_COMPILED_US = {"heft": 1.0, "dpos": 1.6, "os_dpos": 1.6, "m_etf": 1.2, "os_dpos_model_graph": 1.6, "m_etf_capped": 1.2}
_OTHER_US = 25.0
_FIRST_US = 3.0
_NUMBA_S = 0.5


def _compiled(inst: Instance, name: str) -> bool:
    """Whether heuristic ``name`` runs a compiled kernel on ``inst`` (asked without importing numba)."""
    if name not in _COMPILED_US:
        return False
    from dplace import kernels

    return inst.comm == "parallel" and kernels.use(inst.n, "etf" if name in ("m_etf", "m_etf_capped") else "list")


def heuristic_cost_s(inst: Instance, name: str, first: bool = False) -> float:
    """Estimated CPU seconds of heuristic ``name`` on ``inst`` (on a quiet machine)."""
    import sys

    load = 0.0
    if _compiled(inst, name):
        us = _COMPILED_US[name]
        load = 0.0 if "numba" in sys.modules else _NUMBA_S
    else:
        us = HEURISTIC_US.get(name, _OTHER_US)
    return 1e-6 * (us + (_FIRST_US if first else 0.0)) * inst.n * inst.m + load


def slowdown_guess() -> float:
    """Wall seconds per CPU second to expect before any was measured: the load per core, in [1, 3]."""
    import os

    try:
        load = os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # pragma: no cover - no load average on this platform
        load = 1.0
    return min(3.0, max(1.0, load))


def run_heuristics(inst: Instance, names: Sequence[str], *, budget: Budget | None = None, seed: int = 0,
                   time_limit_s: float | None = None, keep: dict[str, Result] | None = None,
                   ) -> tuple[dict[str, Any], tuple[str, Result] | None]:
    """Run the heuristics ``names`` within ``budget`` (None: all of them) and return (scores, the best
    (name, Result) by memory kept then simulated makespan, or None).

    Budget: a heuristic is skipped once its estimated cost (:func:`heuristic_cost_s`, times the wall/CPU
    ratio measured so far) would end past the budget, or on Ctrl-C -- unless nothing gave a placement
    yet: the answer is never empty while a heuristic can give one (a Ctrl-C during the heuristics before
    one answered lets that one finish). Order: HEFT first when it fits the
    budget (the all-rounder), else the cheapest one first (on a 36k-op graph HEFT alone takes seconds),
    then the others in the order given. Each heuristic is handed ``budget``, no longer than ``time_limit_s``
    when given. ``keep``: filled with
    every heuristic's Result. Ctrl-C outside a :func:`dplace.interrupt.polling` block raises
    :class:`Interrupted` carrying the best so far."""
    from dplace import interrupt, progress
    from dplace.registry import call_method, method_info

    budget = budget if budget is not None else Budget.unlimited()
    names = list(dict.fromkeys(names))
    slow = slowdown_guess()
    if names:
        first = "heft" if "heft" in names and heuristic_cost_s(inst, "heft", True) * slow <= budget.left() else min(
            names, key=lambda nm: heuristic_cost_s(inst, nm))
        names.remove(first)
        names.insert(0, first)
    scores: dict[str, Any] = {}
    best: tuple[tuple[bool, float], str, Result] | None = None
    wall = cpu = 0.0
    try:
        for i, nm in enumerate(names):
            if best is not None:
                if interrupt.requested():
                    scores[nm] = {"skipped": "interrupted"}
                    continue
                left = budget.left()
                need = heuristic_cost_s(inst, nm) * slow
                if need > left:
                    scores[nm] = {"skipped": f"would not end within the heuristics' budget ({max(0.0, left):.2f} s "
                                  f"left, about {need:.2f} s needed)"}
                    continue
            t0, c0 = time.perf_counter(), time.process_time()
            # until one answered, Ctrl-C lets the heuristic finish (it only sets the flag): there is then
            # an answer to return. Entered before the phase line: a Ctrl-C sent on seeing it finds the
            # heuristic polling (seen under load: one landed between the line and the block)
            answered = interrupt.polling() if best is None else contextlib.nullcontext()
            try:
                with answered:
                    progress.phase(f"heuristic {i + 1}/{len(names)}: {nm}")
                    res = call_method(method_info(nm).func, inst, budget.child(time_limit_s), seed)
            except Exception as exc:  # noqa: BLE001 — a failing heuristic is reported, not fatal
                scores[nm] = {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
                continue
            finally:
                wall += time.perf_counter() - t0
                cpu += time.process_time() - c0
                if cpu > 0.05:
                    slow = max(1.0, wall / cpu)
            if res.transform is not None or res.placement is None or res.makespan is None:
                scores[nm] = {"skipped": "transformed graph or no placement"}
                continue
            scores[nm] = {"makespan": res.makespan, "memory_ok": res.memory_ok, "time_s": round(time.perf_counter() - t0, 4)}
            if keep is not None:
                keep[nm] = res
            key = (not res.memory_ok, res.makespan)
            if best is None or key < best[0]:
                best = (key, nm, res)
                progress.update(incumbent=res.makespan)
    except KeyboardInterrupt:
        raise Interrupted(None if best is None else (best[1], best[2])) from None
    return scores, (None if best is None else (best[1], best[2]))


def hint_heuristics(which: str = "best", exclude: Sequence[str] = ()) -> list[str]:
    """The heuristics that hint the exact methods: ``heft`` only (which="heft"), or every registered
    heuristic and baseline that is not itself an exact method, except the paper methods whose dplace
    variant covers them (:data:`_COVERED_BY_VARIANT`)."""
    from dplace.registry import method_info, methods, paper_variants

    if which == "heft":
        return ["heft"]
    names = [nm for nm in methods() if method_info(nm).kind in ("heuristic", "baseline") and nm not in _SKIP_HINT
             and nm not in _COVERED_BY_VARIANT and nm not in exclude]
    # the paper methods with a variant last: where the budget runs out, the heuristics run before them
    # are those the hints had before the paper methods got the papers' settings
    return sorted(names, key=lambda nm: method_info(nm).paper != "" and nm in paper_variants())


def best_heuristic(inst: Instance, which: str = "best", *, time_limit_s: float | None = None, seed: int = 0,
                   exclude: Sequence[str] = (), budget: Budget | None = None) -> tuple[str, Result] | None:
    """The best of :func:`hint_heuristics` by simulated makespan among those that keep memory on the
    same Instance (else the best of all), run by :func:`run_heuristics` within ``budget`` (none: all)."""
    return run_heuristics(inst, hint_heuristics(which, exclude), budget=budget, seed=seed,
                          time_limit_s=time_limit_s)[1]
