"""The MILP's two solvers: HiGHS (in a child process, :mod:`dplace.heuristics.highs_worker`) and CBC (PuLP's
binary, its log read for status and bound); both stopped by dplace at the budget's deadline."""
from __future__ import annotations

import atexit
import contextlib
import functools
import math
import os
import re
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..cpsat import (  # noqa: I001 — OR-Tools before PuLP (see below)
    Ticks, build_model, confirm_bound, energetic_bound, horizon_ticks, reachability, tick_schedule,
)
from ..frame import OutOfTime, check_time, fallback, homogeneous_links, run_guarded  # noqa: I001

import pulp  # noqa: E402

from dplace.verify import claims
from dplace import interrupt
from dplace.budget import Budget
from dplace.errors import InfeasibleError, SolverError, bad_option
from dplace.instance.model import Instance
from dplace.registry import register
from dplace.result import Result, make_result, no_solution
from . import model as _model
from .model import MilpModel, MilpOptions


def _assessed_feasible(text: str) -> bool:
    """HiGHS's check of the user's solution (before presolve): zero infeasibilities of every kind."""
    rows = re.findall(r"^(Col|Integer|Row)\s+infeasibilities\s+(\d+)", text, flags=re.M)
    return bool(rows) and all(int(k) == 0 for _, k in rows[:3])


def _solve_highs(P: MilpModel, opts: MilpOptions, limit: float, warm: bool, seed: int,
                 presolve: bool = True) -> dict[str, Any]:
    """HiGHS in its child Python (:mod:`highs_worker`; highspy cannot share a process with OR-Tools)."""
    from dplace.heuristics import highs_worker

    prob = P.prob
    with tempfile.TemporaryDirectory(prefix="dplace_highs_") as tmp:
        mps = os.path.join(tmp, "model.mps")
        prob.writeMPS(mps)
        args = {"mps": mps, "deadline": time.time() + limit, "threads": opts.threads, "seed": seed,
                "presolve": presolve, "stop": os.path.join(tmp, "stop"),
                "log_file": os.path.join(tmp, "highs.log"), "out": os.path.join(tmp, "out.json"),
                "hint": {v.name: float(v.varValue) for v in prob.variables() if v.varValue is not None} if warm else None}
        try:
            out, interrupted = highs_worker.solve(args, limit, interrupt.on_request)
        except highs_worker.SolverFailed as exc:
            raise SolverError(f"milp: HiGHS child failed: {exc}") from None
        interrupted = interrupted or interrupt.requested()
        if out is None:  # no answer within the limit: nothing to read back
            for v in prob.variables():
                v.varValue = None
            prob.status, prob.sol_status = pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
            return {"solver_result": "HiGHS gave no answer within the time limit", "proven_optimal": False,
                    "interrupted": interrupted, "warm_start_used": None, "warm_start_feasible": None,
                    "bound": None}
        with open(args["log_file"], encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    if opts.log:
        print(text)
    values = out.get("values")
    for v in prob.variables():
        v.varValue = None if values is None else values.get(v.name)
    st = out["status"]
    info: dict[str, Any] = {"solver_result": st, "proven_optimal": st == "Optimal", "interrupted": interrupted,
                            "warm_start_used": "MIP start solution is feasible" in text,
                            "warm_start_feasible": _assessed_feasible(text) if warm else None}
    b = out.get("bound")
    info["bound"] = float(b) if b is not None and math.isfinite(b) else None
    if st == "Optimal" and not any(v.cat == pulp.LpInteger for v in prob.variables()):
        # an LP (every placement and order fixed): HiGHS reports a MIP dual bound of 0; its optimum is the bound
        obj = out.get("objective")
        info["bound"] = float(obj) if obj is not None and math.isfinite(obj) else None
    if values is not None:
        prob.status = pulp.LpStatusOptimal if st == "Optimal" else pulp.LpStatusNotSolved
        prob.sol_status = pulp.LpSolutionOptimal if st == "Optimal" else pulp.LpSolutionIntegerFeasible
    else:
        infeasible = st == "Infeasible"
        prob.status = pulp.LpStatusInfeasible if infeasible else pulp.LpStatusNotSolved
        prob.sol_status = pulp.LpSolutionInfeasible if infeasible else pulp.LpSolutionNoSolutionFound
    return info


def _printed_floor(text: str, digits: int | None = None) -> float:
    """The least value a number CBC printed rounded may stand for: its lower bound comes with 3 decimals
    (``4965.637``), its objective with 8, an LP's optimum with ``digits`` = 10 significant digits (``90``);
    a bound read as printed could exceed the solver's own by half a unit in the last place."""
    v = float(text)
    if digits is not None:
        return v - (0.5 * 10.0 ** (math.floor(math.log10(abs(v))) - digits + 1) if v else 0.0)
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.split(".")[1]) if "." in mant else 0
    return v - 0.5 * 10.0 ** (int(exp or 0) - decimals)


def cbc_increment(P: MilpModel) -> float:
    """CBC's cutoff increment (model units): it looks only for solutions better than its incumbent by this
    much, so its "optimal" objective may lie this much above the model's optimum (default 1e-5: with an
    objective of 1-10 units up to 1e-5 relative, above the claims' tolerance). Set to 1e-8 x M (at most
    the default) and read off every bound it gives (:func:`_solve`)."""
    return min(1e-5, 1e-8 * P.M)


CBC_PREFIX = "dplace_cbc_"  # CBC's files: <temp dir>/dplace_cbc_<pid>_<random>/ (model, start, solution, log)
_LIVE_FOLDERS: set[str] = set()  # this process's CBC folders in use


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def sweep_cbc_folders(where: str | None = None) -> list[str]:
    """Remove the CBC folders (:data:`CBC_PREFIX`) left behind in ``where`` (default: the temp dir) by
    processes that no longer run (killed while CBC ran: their own clean-up never came); a folder of a live
    process, or not named with a process id, is left alone. Returns the folders removed."""
    import shutil

    where = where or tempfile.gettempdir()
    gone = []
    try:
        names = os.listdir(where)
    except OSError:
        return gone
    for name in names:
        pid = name[len(CBC_PREFIX):].split("_", 1)[0]
        if name.startswith(CBC_PREFIX) and pid.isdigit() and int(pid) != os.getpid() and not _pid_alive(int(pid)):
            shutil.rmtree(os.path.join(where, name), ignore_errors=True)
            gone.append(name)
    return gone


def _remove_live_folders() -> None:
    """At exit (``dplace.cli.run`` runs the ``atexit`` functions before ``os._exit``): a CBC run still in
    a thread when the process ends leaves no folder."""
    import shutil

    for path in list(_LIVE_FOLDERS):
        shutil.rmtree(path, ignore_errors=True)


atexit.register(_remove_live_folders)


@contextlib.contextmanager
def cbc_folder():
    """A new folder for one CBC run, removed after it (also at the process's exit, and by a later run's
    :func:`sweep_cbc_folders` when the process was killed)."""
    import shutil

    sweep_cbc_folders()
    path = tempfile.mkdtemp(prefix=f"{CBC_PREFIX}{os.getpid()}_")
    _LIVE_FOLDERS.add(path)
    try:
        yield path
    finally:
        _LIVE_FOLDERS.discard(path)
        shutil.rmtree(path, ignore_errors=True)


def _run_cbc(P: MilpModel, opts: MilpOptions, limit: float, warm: bool, presolve: bool,
             stop_by: Budget | None = None, cbc_sec: float | None = None, preprocess: bool = True,
             ) -> tuple[str, bool]:
    """CBC (PuLP's bundled binary, PuLP's own files and parsers) with ``limit`` seconds and gone by
    the end of ``stop_by`` (a Budget; default: the limit). CBC checks its own ``-sec`` only
    between nodes and cut passes (on a loaded machine it answered 1-5 s late, and a kill then loses its
    answer: its log and solution are written at the end), so it gets ``-sec`` = the limit (less two graces
    when ``stop_by`` leaves no room: grace = 2.5 % of the limit, 0.1 s at least, a quarter of it at most),
    SIGINT a grace later (CBC stops at its next check and writes its incumbent), and is killed at
    ``stop_by`` (no answer: the caller keeps its warm start). A user's Ctrl-C asks it to stop the same way.
    ``cbc_sec``: CBC's own limit instead (tests). ``presolve`` False: neither presolve nor preprocessing;
    ``preprocess`` False: no preprocessing (Cgl). Sets the variables' values and the problem's status as
    ``prob.solve`` would; returns (CBC's log, interrupted)."""
    import signal
    import subprocess
    import threading

    t_call = time.perf_counter()
    prob = P.prob
    grace = min(max(0.1, 0.025 * limit), 0.25 * limit)
    t_kill = t_call + limit if stop_by is None else t_call + max(stop_by.left(), 2 * grace)
    sec = max(0.01, min(limit, t_kill - t_call - 2 * grace)) if cbc_sec is None else cbc_sec
    t_int = min(t_call + limit + grace, t_kill - grace)
    with warnings.catch_warnings():  # PuLP 3 marks its bundled CBC as deprecated (still shipped)
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=sec, gapRel=0.0, gapAbs=1e-9, warmStart=warm,
                                   threads=opts.threads, presolve=None if presolve else False,
                                   options=[f"increment {cbc_increment(P):.3g}", f"integerT {_model.INTEGRALITY:.3g}"]
                                   + ([] if presolve and preprocess else ["preprocess off"]))
    if not solver.available():
        raise SolverError(f"milp: CBC is not available at {solver.path}")
    with cbc_folder() as tmp:
        mps, mst, sol, logp = (os.path.join(tmp, f) for f in ("model.mps", "start.mst", "out.sol", "cbc.log"))
        vs, vnames, cnames, _ = prob.writeMPS(mps, rename=1)
        cmd = [solver.path, mps]
        if warm:
            solver.writesol(mst, prob, vs, vnames, cnames)
            cmd += ["-mips", mst]
        cmd += ["-sec", f"{sec:.6f}"]
        if not presolve:
            cmd += ["-presolve", "off"]
        for option in solver.options + solver.getOptions():
            cmd += ("-" + option).split()
        cmd += ["-solve", "-printingOptions", "all", "-solution", sol]
        interrupted = stopped = False
        asked = threading.Event()  # a user's Ctrl-C (from the interrupt watcher thread)
        with open(logp, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
            end = t_int
            with interrupt.on_request(asked.set):
                while True:
                    try:
                        proc.wait(timeout=max(0.0, min(0.05, end - time.perf_counter())))
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    except KeyboardInterrupt:  # library use: Ctrl-C raises here; CBC got it too
                        asked.set()
                    if asked.is_set():
                        interrupted = True
                    if stopped and time.perf_counter() >= end:  # no answer by stop_by: killed
                        proc.kill()
                        proc.wait()
                        break
                    if not stopped and (asked.is_set() or time.perf_counter() >= end):
                        proc.send_signal(signal.SIGINT)  # CBC stops at its next check and writes its answer
                        stopped = True
                        end = t_kill if not asked.is_set() else min(t_kill, time.perf_counter() + grace)
        interrupted = interrupted or interrupt.requested()
        with open(logp, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if proc.returncode == 0 and os.path.exists(sol):
            status, values, _, _, _, sol_status = solver.readsol_MPS(sol, prob, vs, vnames, cnames)
            prob.assignVarsVals(values)
            prob.assignStatus(status, sol_status)
        else:
            for v in prob.variables():
                v.varValue = None
            prob.status, prob.sol_status = pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound
            if not stopped and not interrupted:
                raise SolverError(f"milp: CBC exited with code {proc.returncode}: {text[-300:].strip()}")
            text += "\nResult - Stopped by dplace (no answer by the end of its time)\n"
    return text, interrupted


def _cbc_bound(text: str, increment: float) -> tuple[str, float | None, bool]:
    """From CBC's log: (its result line, the bound it proves in model units or None, proven optimal).
    Printed numbers are read down to the least value they may stand for (:func:`_printed_floor`), less
    what CBC's search leaves open: its cutoff ``increment`` (:func:`cbc_increment`) and the absolute gap."""
    m = re.search(r"Result - (.*)", text)
    lp = None if m else re.search(r"^Optimal objective\s+([-+0-9.eE]+)", text, flags=re.M)
    result = m.group(1).strip() if m else "Optimal (an LP: no integer variable)" if lp else "?"
    bound = None
    if m and m.group(1).startswith("Optimal solution found"):
        mo = re.search(r"Objective value:\s*([-+0-9.eE]+)", text)
        bound = _printed_floor(mo.group(1)) - max(increment, 1e-9) if mo else None
    elif m:
        mb = re.search(r"Lower bound:\s*([-+0-9.eE]+)", text)
        bound = _printed_floor(mb.group(1)) - increment if mb else None
    elif lp:  # every placement and order fixed: CBC solved the LP and prints no "Result" line
        bound = _printed_floor(lp.group(1), digits=10)
    proven = bool(m and m.group(1).startswith("Optimal solution found")) or bool(lp)
    return result, bound, proven


def _has_solution(P: MilpModel) -> bool:
    return P.prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)


def _placed(P: MilpModel) -> bool:
    """The solver's vector places every op (one placement binary at 1 for each op with a choice)."""
    return all(max(P.x[o, d].varValue or 0.0 for d in P.allowed[o]) > 0.5
               for o in range(P.inst.n) if len(P.allowed[o]) > 1)


def _solve(P: MilpModel, opts: MilpOptions, limit: float, warm: bool, seed: int = 0,
           presolve: bool = True, stop_by: Budget | None = None) -> dict[str, Any]:
    """Solve ``P`` with the chosen solver; the bound in ``info["bound"]`` is in model units. ``stop_by``:
    CBC may run past ``limit`` (it answers late on a loaded machine) until then (:func:`_run_cbc`)."""
    prob = P.prob
    info: dict[str, Any] = {}
    budget = Budget(limit)
    if opts.solver == "cbc":
        start = {v.name: v.varValue for v in prob.variables()}  # the warm start (a run overwrites it)
        text, interrupted = _run_cbc(P, opts, limit, warm, presolve, stop_by)
        inc = cbc_increment(P)
        result, bound, proven = _cbc_bound(text, inc)
        if (presolve and not interrupted and _has_solution(P) and not _placed(P)
                and budget.left() > 0.05):
            # CBC's preprocessing lost its answer ("Postprocessed model is infeasible": mapped back, its
            # solution broke the original rows at tolerance): CBC still said optimal and wrote a vector that
            # places no op. Its claim stands (confirmed like any); the schedule is asked for again
            # without preprocessing, from the same warm start.
            for v in prob.variables():
                v.varValue = start[v.name]
            text2, interrupted = _run_cbc(P, opts, budget.left(), warm, presolve, stop_by,
                                          preprocess=False)
            info["cbc_again"] = (f"CBC's answer ({result}) placed no op (its preprocessing lost it): solved again "
                                 "without preprocessing")
            result2, bound2, proven2 = _cbc_bound(text2, inc)
            result = f"{result2} (again without preprocessing; first: {result})"
            bound = max((b for b in (bound, bound2) if b is not None), default=None)  # claims on one model
            proven = proven or proven2
            text += "\n" + text2
        if opts.log:
            print(text)
        info["interrupted"] = interrupted
        info["warm_start_used"] = "MIPStart provided solution" in text
        info["warm_start_feasible"] = info["warm_start_used"] if warm else None
        info["solver_result"] = result
        info["bound"] = None if interrupted else bound
        info["proven_optimal"] = proven
    else:
        info = _solve_highs(P, opts, limit, warm, seed, presolve)
        left = budget.left()
        if presolve and info["solver_result"] == "Optimal" and info["bound"] is None and left > 0.3:
            # HiGHS's presolve called the model infeasible (it is not: seed 41257, the same model without
            # presolve is solved) and HiGHS kept the warm start as "Optimal" with a dual bound of -inf:
            # asked again without presolve, from its answer
            info = dict(_solve_highs(P, opts, left, True, seed, presolve=False),
                        highs_again="HiGHS said Optimal without a dual bound (presolve): solved again without presolve")
    info["pulp_status"] = pulp.LpStatus[prob.status]
    info["sol_status"] = prob.sol_status
    return info
