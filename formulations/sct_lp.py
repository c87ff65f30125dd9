"""The SCT favorite-child LP relaxation (Hanen & Munier's SCT as given in Baechi, SoCC'20, §2.4 eq. (2)).

Variables (one-line meanings):
  s[i] >= 0       start time of task i (infinitely many devices)
  w               makespan
  x[i,j] in [0,1] relaxed "j is NOT i's favorite child" (0 = favorite: no transfer delay)

  min w
  s[i] + k[i] <= w                              for every sink i (other tasks are covered by precedence)
  s[i] + k[i] + c[i,j] x[i,j] <= s[j]           for every edge (i, j)
  sum_j x[i,j] >= |succ(i)| - 1                 every task has at most one favorite child
  sum_i x[i,j] >= |pred(j)| - 1                 every task is the favorite child of at most one parent

The optimum is a lower bound of the *SCT relaxation* (infinite devices, one fixed delay per edge),
not of dplace's problem: callers store it as ``extra["sct_lp_objective"]``, never as ``lower_bound``.

Solvers. ``ipm`` (Baechi's "interior point method"): HiGHS's interior-point solver with crossover off,
through highspy in :mod:`highs_worker`'s child Python. The LP is often degenerate (several favourite
children reach the optimum); a simplex method returns one vertex of that optimal face, chosen by its
pivoting, so the favourites depend on the solver and on the order of rows and columns. An interior point
without crossover converges towards the middle of the face, where tied children share x, so none of
them falls under the threshold and the rounding does not depend on the LP's order (tested by permuting
it). ``highs`` (OR-Tools' bundled HiGHS, dual simplex) and ``glop`` (OR-Tools' simplex): faster vertex
solutions, kept for ``m_sct_capped`` and comparison; never a commercial solver.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass

from dplace.budget import Budget
from dplace.errors import SolverError

__all__ = ["SctLpSolution", "favorite_children", "solve_sct_lp", "solve_sct_lp_windows"]


@dataclass
class SctLpSolution:
    objective: float | None  # LP optimum w (None when the solver gave no solution)
    x: list[float]  # per edge, in the order given
    s: list[float]  # per task
    status: str  # "optimal", "time_limit" (x is then a greedy fallback) or the solver's word
    time_s: float


def _greedy_x(n: int, edges: list[tuple[int, int, float]]) -> list[float]:
    """Fallback when the LP is not solved: each task's heaviest out-edge whose head has no favorite
    parent yet becomes the favorite (x = 0); every other x = 1."""
    x = [1.0] * len(edges)
    has_child = [False] * n
    has_parent = [False] * n
    for idx in sorted(range(len(edges)), key=lambda i: (-edges[i][2], i)):
        a, b, _ = edges[idx]
        if not has_child[a] and not has_parent[b]:
            has_child[a] = has_parent[b] = True
            x[idx] = 0.0
    return x


def _rows(n: int, k: list[float], edges: list[tuple[int, int, float]]):
    """Constraint rows as (lower bound, [(column, coefficient), ...]); columns: s 0..n-1, w n, x n+1+e."""
    outdeg = [0] * n
    indeg = [0] * n
    out_e: list[list[int]] = [[] for _ in range(n)]
    in_e: list[list[int]] = [[] for _ in range(n)]
    for e, (a, b, _) in enumerate(edges):
        outdeg[a] += 1
        indeg[b] += 1
        out_e[a].append(e)
        in_e[b].append(e)
    w = n
    xcol = n + 1
    rows = []
    for i in range(n):  # _add_makespan: w - s_i >= k_i for sinks
        if outdeg[i] == 0:
            rows.append((k[i], [(w, 1.0), (i, -1.0)]))
    for e, (a, b, c) in enumerate(edges):  # _add_precedence: s_b - s_a - c x_ab >= k_a
        rows.append((k[a], [(b, 1.0), (a, -1.0), (xcol + e, -c)]))
    for i in range(n):  # _add_one_favorite_child / _add_one_favorite_parent
        if outdeg[i] >= 2:
            rows.append((outdeg[i] - 1.0, [(xcol + e, 1.0) for e in out_e[i]]))
        if indeg[i] >= 2:
            rows.append((indeg[i] - 1.0, [(xcol + e, 1.0) for e in in_e[i]]))
    return rows


def solve_sct_lp(k: list[float], edges: list[tuple[int, int, float]], *, solver: str = "ipm",
                 time_limit_s: float | None = None) -> SctLpSolution:
    """Solve eq. (2)'s LP relaxation for tasks with times ``k`` and edges (i, j, c_ij), no parallel edges."""
    t0 = time.perf_counter()
    n = len(k)
    ncol = n + 1 + len(edges)
    if n == 0:
        return SctLpSolution(0.0, [], [], "optimal", 0.0)
    backend = {"glop": "GLOP", "highs": "HIGHS_LP"}.get(solver)
    if solver == "ipm":
        # in units of the LP's largest time: unscaled (µs from 1 to 1e5 in one window) IPX reported this
        # always-feasible LP primal infeasible (transformer_training(12000, 4), window of 2,000 clusters)
        unit = max([*k, *(c for _, _, c in edges), 0.0]) or 1.0
        rows = _rows(n, [x / unit for x in k], [(a, b, c / unit) for a, b, c in edges])
        obj, vals, status = _solve_ipm(ncol, n, rows, time_limit_s)
        if vals is not None:
            obj, vals = obj * unit, [v * unit if j <= n else v for j, v in enumerate(vals)]
    elif backend is not None:
        obj, vals, status = _solve(backend, ncol, n, _rows(n, k, edges), time_limit_s)
    else:
        raise SolverError(f"sct_lp: solver must be ipm, highs or glop, got {solver!r}")
    if vals is None:
        return SctLpSolution(None, _greedy_x(n, edges), [0.0] * n, status, time.perf_counter() - t0)
    x = [min(1.0, max(0.0, v)) for v in vals[n + 1:]]
    return SctLpSolution(obj, x, list(vals[:n]), status, time.perf_counter() - t0)


@contextlib.contextmanager
def _quiet_stdout():
    """HiGHS prints a banner on the C-level stdout even with output off; keep it out of CLI output."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        yield
        return
    sys.stdout.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


def _solve(backend: str, ncol: int, n: int, rows, time_limit_s):
    """Through OR-Tools' pywraplp: backend "GLOP" or "HIGHS_LP" (OR-Tools' bundled HiGHS).

    highspy itself is not used: its extension and OR-Tools' library export clashing HiGHS symbols, so
    whichever is imported second fails to load, and other dplace modules import OR-Tools.
    """
    from ortools.linear_solver import pywraplp

    solver = pywraplp.Solver.CreateSolver(backend)
    if solver is None:
        raise SolverError(f"sct_lp: {backend} is not available in this OR-Tools build")
    if time_limit_s is not None:
        solver.SetTimeLimit(max(1, int(time_limit_s * 1000)))
    inf = solver.infinity()
    v = [solver.NumVar(0.0, inf if j <= n else 1.0, "") for j in range(ncol)]
    for lb, terms in rows:
        ct = solver.Constraint(lb, inf)
        for col, coef in terms:
            ct.SetCoefficient(v[col], coef)
    obj = solver.Objective()
    obj.SetCoefficient(v[n], 1.0)
    obj.SetMinimization()
    with _quiet_stdout() if backend.startswith("HIGHS") else contextlib.nullcontext():
        st = solver.Solve()
    if st == pywraplp.Solver.OPTIMAL:
        return float(obj.Value()), [x.solution_value() for x in v], "optimal"
    return None, None, {pywraplp.Solver.NOT_SOLVED: "time_limit"}.get(st, f"status_{st}")


def _mps(ncol: int, n: int, rows) -> str:
    """The LP as free-format MPS: columns s0..s{n-1} (>= 0), w (>= 0), x0.. in [0, 1]; rows r0.. (>=)."""
    def name(j: int) -> str:
        return f"s{j}" if j < n else ("w" if j == n else f"x{j - n - 1}")

    cols: list[list[str]] = [[] for _ in range(ncol)]
    cols[n].append("obj 1")
    out = ["NAME sct", "ROWS", " N obj"]
    out.extend(f" G r{i}" for i in range(len(rows)))
    for i, (_, terms) in enumerate(rows):
        for j, coef in terms:
            cols[j].append(f"r{i} {coef!r}")
    out.append("COLUMNS")
    for j in range(ncol):
        out.extend(f" {name(j)} {entry}" for entry in (cols[j] or ["obj 0"]))
    out.append("RHS")
    out.extend(f" rhs r{i} {lb!r}" for i, (lb, _) in enumerate(rows) if lb != 0)
    out.append("BOUNDS")
    out.extend(f" UP bnd x{e} 1" for e in range(ncol - n - 1))
    out.append("ENDATA")
    return "\n".join(out) + "\n"


IPM_OPTIONS = {"solver": "ipm", "run_crossover": "off"}  # Baechi §2.4: interior point, no vertex sought


def _solve_ipm(ncol: int, n: int, rows, time_limit_s):
    """HiGHS's interior-point method without crossover (highspy, in :mod:`highs_worker`'s child Python:
    highspy cannot share a process with OR-Tools). No answer within the limit: (None, None, "time_limit")."""
    import tempfile

    from dplace import interrupt

    from . import highs_worker

    limit = 3600.0 if time_limit_s is None else max(0.05, highs_worker.limit_within(time_limit_s))
    with tempfile.TemporaryDirectory(prefix="dplace_sct_") as tmp:
        path = os.path.join(tmp, "sct.mps")
        with open(path, "w") as fh:
            fh.write(_mps(ncol, n, rows))
        args = {"mps": path, "deadline": time.time() + limit, "threads": 1, "seed": 0, "presolve": True,
                "stop": os.path.join(tmp, "stop"), "log_file": os.path.join(tmp, "highs.log"),
                "out": os.path.join(tmp, "out.json"), "hint": None, "options": IPM_OPTIONS}
        try:
            out, _ = highs_worker.solve(args, limit, interrupt.on_request)
        except highs_worker.SolverFailed as exc:
            raise SolverError(f"sct_lp: HiGHS child failed: {exc}") from None
    if out is None:
        return None, None, "time_limit"
    values = out.get("values")
    if out["status"] != "Optimal" or values is None:
        return None, None, "time_limit" if out["status"] == "Time limit reached" else out["status"]
    return float(out["objective"]), [values[f"s{j}"] if j < n else (values["w"] if j == n else values[f"x{j - n - 1}"])
                                     for j in range(ncol)], "optimal"


@dataclass
class SctLpWindows:
    x: list[float]  # per edge; edges between windows get 1.0 (never favorite)
    objective: float | None  # the LP optimum when solved as one window, else None
    window_objectives: list[float | None]
    statuses: list[str]
    time_s: float

    @property
    def status(self) -> str:
        bad = sorted({s for s in self.statuses if s != "optimal"})
        return "optimal" if not bad else ",".join(bad)


def solve_sct_lp_windows(k: list[float], edges: list[tuple[int, int, float]], *, window: int = 0,
                         solver: str = "ipm", time_limit_s: float | None = None,
                         budget: Budget | None = None) -> SctLpWindows:
    """Solve the LP on consecutive windows of ``window`` tasks (tasks numbered in a topological order).

    ``window <= 0`` or ``window >= len(k)`` solves the one global LP. Otherwise each window's LP only
    sees the edges inside it; an edge between windows gets x = 1 (not a favorite), which keeps the
    degree constraints of eq. (2) satisfied. This is a speed device for very large graphs (the simplex
    time grows faster than linearly): the per-window optima are reported, never a global value.
    Windows left when the budget (``budget``, or ``time_limit_s`` from now) runs out get the greedy fallback.
    """
    t0 = time.perf_counter()
    budget = Budget.resolve(budget, time_limit_s)
    n = len(k)
    if window <= 0 or window >= n:
        sol = solve_sct_lp(k, edges, solver=solver, time_limit_s=budget.left() if budget.limited else None)
        return SctLpWindows(sol.x, sol.objective, [sol.objective], [sol.status], time.perf_counter() - t0)
    x = [1.0] * len(edges)
    by_window: dict[int, list[int]] = {}
    for idx, (a, b, _) in enumerate(edges):
        if a // window == b // window:
            by_window.setdefault(a // window, []).append(idx)
    objs: list[float | None] = []
    statuses: list[str] = []
    for wi, lo in enumerate(range(0, n, window)):
        hi = min(n, lo + window)
        ids = by_window.get(wi, [])
        sub = [(edges[i][0] - lo, edges[i][1] - lo, edges[i][2]) for i in ids]
        left = budget.left() if budget.limited else None
        if budget.expired():
            sol = SctLpSolution(None, _greedy_x(hi - lo, sub), [], "time_limit", 0.0)
        else:
            sol = solve_sct_lp(k[lo:hi], sub, solver=solver, time_limit_s=left)
        for i, v in zip(ids, sol.x):
            x[i] = v
        objs.append(sol.objective)
        statuses.append(sol.status)
    return SctLpWindows(x, None, objs, statuses, time.perf_counter() - t0)


def favorite_children(n: int, edges: list[tuple[int, int, float]], x: list[float],
                      threshold: float = 0.1) -> tuple[list[int], list[int]]:
    """Round the LP (Baechi §2.4): j is i's favorite child iff x_ij < threshold.

    The degree constraints allow at most one such child per task and one such parent per task when
    threshold <= 0.5; ties beyond that (possible only for larger thresholds) keep the smallest x.
    Returns (favorite child per task or -1, favorite parent per task or -1).
    """
    child = [-1] * n
    parent = [-1] * n
    for idx in sorted(range(len(edges)), key=lambda i: (x[i], i)):
        if x[idx] >= threshold:
            break
        a, b, _ = edges[idx]
        if child[a] < 0 and parent[b] < 0:
            child[a] = b
            parent[b] = a
    return child, parent
