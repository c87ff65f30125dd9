"""One CP-SAT solve with dplace's deadline: :func:`run_search` (used by every CP-SAT solve of the package).

CP-SAT is told its limit, and dplace stops the search at the budget's deadline (``stop_search``), since CP-SAT
overruns ``max_time_in_seconds`` on large NoOverlap models; when CP-SAT does not stop either (a long step that
does not check its stop flag), dplace stops waiting for it and keeps the last solution a
:class:`KeepingCallback` saw (:class:`KeptAnswer`). Ctrl-C stops the search the same way.
"""
from __future__ import annotations

import atexit
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.sat.python import cp_model as cp
from ortools.sat.python import cp_model_helper as cmh

from dplace import interrupt
from dplace.budget import Budget

__all__ = ["ABANDONED", "KeepingCallback", "KeptAnswer", "PROBING_LEVEL", "Search", "grace_s", "run_search",
           "status_name", "wait_abandoned"]

# CP-SAT's ``cp_model_probing_level`` for every search dplace runs (CP-SAT's default is 2). With probing on,
# OR-Tools 9.15.6755 proved wrong bounds on dplace's models: 19.2939 on composed seed 1021112 where a schedule
# of makespan 17.0642 satisfies every constraint of the same model (CP-SAT accepts it as a full assignment),
# 22.8666 / 14000060 on fuzz seeds 61 / 1143 against optima 21.9460 / 14000045, INFEASIBLE on composed seed
# 1002732; and 9.14.6206, pinned since (9.15 also proved a 6-op model infeasible with every setting:
# tests/formulations/test_cpsat_pinned.py), answers INFEASIBLE on a 7-op instance's model with start windows
# whose optimum satisfies it (tests/formulations/test_cpsat.py). Without probing both releases solve all of
# them right. What it costs in proven rate and gap: benchmarks/bench_proven_rate.py --probing.
PROBING_LEVEL = 0


class KeepingCallback(cp.CpSolverSolutionCallback):
    """A solution callback that keeps the solver's last solution (``kept``: a copy of its response, made
    in C++; cheap even on large models), so a search that does not stop when told still has an answer:
    see :func:`run_search`. Subclasses put their own work in :meth:`on_solution`."""

    def __init__(self) -> None:
        super().__init__()
        self.kept: Any = None

    def on_solution_callback(self) -> None:
        self.kept = self.response_proto
        self.on_solution()

    def on_solution(self) -> None:
        """Called after the solution is kept (the solver's thread: keep it short)."""


class KeptAnswer:
    """The answer of an abandoned search, read like a finished ``CpSolver`` (snake_case and PascalCase):
    ``value`` (of a variable, literal or linear expression) and ``objective_value`` of the last solution its
    :class:`KeepingCallback` saw. ``best_objective_bound`` is ``-inf``: an abandoned search proves nothing
    (the bound a solution carries is a claim made mid-search, and no status confirms it)."""

    def __init__(self, response: Any) -> None:
        self.response = response

    def value(self, expression: Any) -> int:
        """``expression`` (an int, a variable or literal, a linear expression) in the kept solution."""
        sol = self.response.solution
        if isinstance(expression, (int, np.integer)):
            return int(expression)
        idx = getattr(expression, "index", None)
        if isinstance(idx, int):  # a variable, or a negated literal (index -i - 1)
            return int(sol[idx]) if idx >= 0 else 1 - int(sol[-idx - 1])
        flat = cmh.FlatIntExpr(expression)
        return int(flat.offset) + sum(int(c) * int(sol[v.index]) for v, c in zip(flat.vars, flat.coeffs))

    @property
    def objective_value(self) -> float:
        return self.response.objective_value

    @property
    def best_objective_bound(self) -> float:
        return -math.inf

    def status_name(self, status: Any) -> str:
        return status_name(status)

    Value = value

    def ObjectiveValue(self) -> float:  # noqa: N802 — CpSolver's PascalCase
        return self.objective_value

    def BestObjectiveBound(self) -> float:  # noqa: N802
        return self.best_objective_bound

    def StatusName(self, status: Any) -> str:  # noqa: N802
        return self.status_name(status)


@dataclass
class Search:
    """What :func:`run_search` ends with. ``answer`` is read like a finished solver (``value``,
    ``objective_value``, ``best_objective_bound``): the solver itself, or, when dplace stopped waiting for
    it (``abandoned``), the last solution its callback kept (``status`` FEASIBLE; UNKNOWN without one)."""

    status: int
    interrupted: bool
    answer: Any
    abandoned: bool = False


#: searches dplace stopped waiting for (see :func:`run_search`); each ends when CP-SAT next checks its
#: stop flag. Kept so their solver and model outlive the thread, and so tests can wait for them.
ABANDONED: list[threading.Thread] = []

#: the longest a process's exit waits for its abandoned searches (:func:`_wait_at_exit`)
EXIT_WAIT_S = 60.0


def _wait_at_exit() -> None:
    """At the interpreter's exit (``atexit``), wait up to :data:`EXIT_WAIT_S` for the abandoned searches.

    A CP-SAT search told to stop, still running in its daemon thread while Python's exit tears the
    process down, ends it with ``terminate called without an active exception`` (SIGABRT, exit -6 instead
    of the program's code): reproduced with a 60-interval NoOverlap model solved in a daemon thread,
    ``stop_search`` and ``sys.exit(0)`` 0.5 s later (exit 134; 0 with this wait). It was seen once in
    three CI runs, ``tests/test_interrupt.py::test_refine_portfolio_ctrl_c`` (an LNS step's search
    abandoned after its grace, then the command's ``sys.exit(130)``). A told-to-stop search ends when
    CP-SAT next checks its flag (seconds at most so far). Not waited for where the process ends with
    ``os._exit`` (:func:`dplace.interrupt.ends_with_os_exit`: the ``dplace`` program, whose time after the
    answer is written counts, and where no C++ teardown runs)."""
    if ABANDONED and not interrupt.ends_with_os_exit():
        wait_abandoned(EXIT_WAIT_S)


atexit.register(_wait_at_exit)


def grace_s(budget: Budget | None) -> float:
    """How long :func:`run_search` waits, once it told CP-SAT to stop, before it stops waiting: 5 % of the
    budget's limit, between 0.05 and 1 s."""
    limit = budget.limit_s if budget is not None and budget.limit_s is not None else 1.0
    return min(1.0, max(0.05, 0.05 * limit))


def wait_abandoned(timeout_s: float) -> bool:
    """Wait (up to ``timeout_s`` in all) for abandoned searches to end; True when none is left running."""
    budget = Budget(timeout_s)
    for th in list(ABANDONED):
        th.join(budget.left())
    ABANDONED[:] = [th for th in ABANDONED if th.is_alive()]
    return not ABANDONED


def status_name(status: Any) -> str:
    """A CP-SAT status's name (``OPTIMAL``, ...): an enum member in OR-Tools 9.15, a plain int in 9.14."""
    name = getattr(status, "name", None)
    if isinstance(name, str):
        return name
    from ortools.sat import cp_model_pb2

    return cp_model_pb2.CpSolverStatus.Name(int(status))


def run_search(sv: cp.CpSolver, model: cp.CpModel, cb: Any = None, budget: Budget | None = None,
               grace: float | None = None) -> Search:
    """``sv.solve(model, cb)`` with the budget's deadline and Ctrl-C stopping the search.

    ``budget``: at its deadline the search is told to stop (``stop_search``), whatever CP-SAT's own
    ``max_time_in_seconds``, and the best solution found by then is kept; that is not an interruption.
    CP-SAT checks its stop flag only between steps, and some steps run for tens of seconds (loading a
    large NoOverlap model's linear relaxation: ``ComputeFullPrecedences``, measured 30 s past the stop on
    BERT-12 with one worker, OR-Tools 9.15). So if the search has not ended ``grace`` seconds after the
    stop (default :func:`grace_s`), dplace stops waiting: the search is *abandoned* (it runs on in its
    daemon thread, told to stop, until CP-SAT next checks; see :data:`ABANDONED`), and the answer is the
    last solution ``cb`` kept (a :class:`KeepingCallback`; made here when ``cb`` is None). The bound of an
    abandoned search is not used (a solution's bound is a claim made mid-search).

    The search runs in a worker thread while this (main) thread waits; a KeyboardInterrupt here calls
    ``stop_search`` and the solver returns its best solution so far. Under the CLI's two-stage Ctrl-C
    (:mod:`dplace.interrupt`) the stop comes through its callback instead; both count as interrupted. CP-SAT's own SIGINT handler is
    turned off (``catch_sigint_signal``): with a Python solution callback it could abort the process
    (``std::bad_function_call``). Probing is set to :data:`PROBING_LEVEL` (wrong proofs with it on)."""
    sv.parameters.catch_sigint_signal = False
    sv.parameters.cp_model_probing_level = PROBING_LEVEL
    if cb is None:
        cb = KeepingCallback()
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            box["st"] = sv.solve(model, cb)
        except BaseException as exc:  # noqa: BLE001 — handed to the caller below
            box["exc"] = exc
        finally:
            done.set()

    th = threading.Thread(target=work, name="cpsat-search", daemon=True)
    interrupted = False
    th.start()
    # wait on an Event, not Thread.join(timeout): an interrupted join can mark a running thread as stopped
    wait = grace_s(budget) if grace is None else grace
    after_stop: Budget | None = None  # the grace, on the real clock (the budget's clock may be a test's)
    while not done.is_set():
        try:
            done.wait(0.02)
            if budget is not None and after_stop is None and budget.expired():
                after_stop = Budget(wait)
                sv.stop_search()
            if after_stop is not None and not done.is_set() and after_stop.expired():
                ABANDONED.append(th)
                kept = getattr(cb, "kept", None)
                if kept is None:
                    return Search(cp.UNKNOWN, interrupted or interrupt.requested(), None, abandoned=True)
                return Search(cp.FEASIBLE, interrupted or interrupt.requested(), KeptAnswer(kept), abandoned=True)
        except KeyboardInterrupt:
            interrupted = True
            sv.stop_search()
    th.join()
    if "exc" in box:
        raise box["exc"]
    return Search(box["st"], interrupted or interrupt.requested(), sv)
