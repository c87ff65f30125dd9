"""CP-SAT models of the allocation problem: contiguous (1F1B* NCA model) and general (load relaxation,
then the position-NCA model) allocations (§5-6 of Beaumont, Eyraud-Dubois, Shilova, Euro-Par 2021).

A model's objective and status are claims: every answer is a pattern checked by
:func:`~.pattern.validate_pattern`, and its status comes from :func:`~.solution._claim`."""
from __future__ import annotations

import math
import time
from typing import Sequence

from dplace.verify import claims
from dplace.budget import Budget
from dplace.errors import InfeasibleError, SolverError

from .chain import Chain, communication_time
from .bounds import _check_cost
from .dp import _needed_period, contiguous_dp
from .pattern import _REL, Pattern, _tol, expand_communication, packed_pattern, pattern_from_times, validate_pattern
from .solution import ONE_PERIODIC_CONTIGUOUS, PipelineSolution, _claim, _finish
from .star import one_f_one_b_star


def _int_scale(values: Sequence[float]) -> tuple[float, bool]:
    """Scale making times integers: 1 if they already are, else 1000 (rounded; flagged)."""
    if all(abs(v - round(v)) <= 1e-9 * max(1.0, abs(v)) for v in values):
        return 1.0, False
    return 1000.0, True


def _solver(budget: Budget, seed: int):
    from ortools.sat.python import cp_model

    s = cp_model.CpSolver()
    if budget.limited:
        s.parameters.max_time_in_seconds = budget.seconds(0.01)
    s.parameters.num_workers = 2
    s.parameters.random_seed = int(seed)
    return s


def _start(chain: Chain, processors: int | None, memory: float | None, time_limit_s: float | None,
           budget: Budget | None) -> tuple[float, Budget, int, float | None]:
    """What both models begin with: (the clock at the start, the budget, processors, memory), the chain's
    costs checked; ``processors`` and ``memory`` default to the chain's."""
    t0 = time.perf_counter()
    budget = Budget.resolve(budget, time_limit_s)
    _check_cost(chain)
    return t0, budget, processors or chain.processors, memory if memory is not None else chain.memory


def _solve_alloc(m, b, L: int, P: int, budget: Budget, seed: int, presolve: bool = True):
    """Solve an allocation model within ``budget`` (the search is stopped by dplace at its deadline):
    (the answer to read values from: the solver, or the last solution kept of a search dplace abandoned, whose
    bound is -inf; status; allocation or None when no solution was found)."""
    from ortools.sat.python import cp_model

    from dplace.formulations.cpsat.search import run_search

    solver = _solver(budget, seed)
    solver.parameters.cp_model_presolve = presolve
    got = run_search(solver, m, budget=budget)
    st, ans = got.status, (got.answer if got.answer is not None else solver)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ans, st, None
    return ans, st, [next(p for p in range(P) if ans.Value(b[l, p])) for l in range(L)]


def contiguous_cpsat(chain: Chain, processors: int | None = None, memory: float | None = None, *,
                    time_limit_s: float | None = 30.0, seed: int = 0,
                    budget: Budget | None = None) -> PipelineSolution:
    """CP-SAT model of the contiguous problem with the **1F1B* NCA model**: layer l's NCA is the
    number z_l of its group (groups of consecutive stages counted from the end, each group's summed
    u_F + u_B ≤ T), so memory of stage p is Σ_l [l in p](W_l + z_l·a_l) ≤ M; minimise T ≥ every stage
    load. With β the communication layer of each cut (2·a_l/β, on its own link) counts in T and in
    the load of one of the groups around the cut (or of a group of its own: z may jump by 2 there).
    Same optimum as :func:`contiguous_dp` (both are exact for this model)."""
    from ortools.sat.python import cp_model

    t0, budget, P, M = _start(chain, processors, memory, time_limit_s, budget)
    L = chain.L
    cf = [communication_time(chain, l) for l in range(L - 1)]
    sc, rounded = _int_scale(chain.u + cf)
    u = [int(round(x * sc)) for x in chain.u]
    cm = [int(round(x * sc)) for x in cf]  # comm time of cut l | l+1 (0 without β)
    W = [int(math.ceil(x)) for x in chain.w]
    A = [int(math.ceil(x)) for x in chain.a]
    need_groups = M is not None and any(A)
    G = P if not any(cm) else 2 * P - 1  # largest group number
    m = cp_model.CpModel()
    total = sum(u) + sum(cm)
    T = m.NewIntVar(max(u) if u else 0, max(total, 1), "T")  # the period
    b = {(l, p): m.NewBoolVar(f"b{l}_{p}") for l in range(L) for p in range(P)}  # layer l on stage p
    y = [m.NewIntVar(0, P - 1, f"y{l}") for l in range(L)]  # stage of layer l
    for l in range(L):
        m.AddExactlyOne(b[l, p] for p in range(P))
        m.Add(y[l] == sum(p * b[l, p] for p in range(P)))
    m.Add(y[0] == 0)
    cut = []
    for l in range(L - 1):  # contiguity: stage index grows by 0 or 1
        cv = m.NewBoolVar(f"cut{l}")
        m.Add(y[l + 1] - y[l] == cv)
        cut.append(cv)
    for p in range(P):  # stage load ≤ T
        m.Add(sum(u[l] * b[l, p] for l in range(L)) <= T)
    for l in range(L - 1):  # a link's load ≤ T
        if cm[l]:
            m.Add(cm[l] * cut[l] <= T)
    if M is not None:
        Mi = int(math.floor(M))
        if need_groups:
            z = [m.NewIntVar(1, G, f"z{l}") for l in range(L)]  # group number (= NCA) of layer l
            m.Add(z[L - 1] == 1)
            for l in range(L - 1):
                m.Add(z[l] - z[l + 1] >= 0)
                m.Add(z[l] - z[l + 1] <= (2 if cm[l] else 1) * cut[l])  # groups change only at stage cuts
                m.Add(z[l] - z[l + 1] <= (2 if cm[l] else 1))
            gb = {(l, g): m.NewBoolVar(f"gb{l}_{g}") for l in range(L) for g in range(1, G + 1)}
            for l in range(L):
                m.AddExactlyOne(gb[l, g] for g in range(1, G + 1))
                m.Add(z[l] == sum(g * gb[l, g] for g in range(1, G + 1)))
            cg = {}  # cg[l, g]: the comm layer of cut l is in group g
            for l in range(L - 1):
                if not cm[l]:
                    continue
                zc = m.NewIntVar(1, G, f"zc{l}")  # its group: between the groups of layers l+1 and l
                m.Add(zc >= z[l + 1])
                m.Add(zc <= z[l])
                bs = [m.NewBoolVar(f"zcb{l}_{g}") for g in range(1, G + 1)]
                m.AddExactlyOne(bs)
                m.Add(zc == sum(g * bs[g - 1] for g in range(1, G + 1)))
                for g in range(1, G + 1):
                    v = m.NewBoolVar(f"cg{l}_{g}")
                    m.AddBoolAnd([bs[g - 1], cut[l]]).OnlyEnforceIf(v)
                    m.AddBoolOr([bs[g - 1].Not(), cut[l].Not()]).OnlyEnforceIf(v.Not())
                    cg[l, g] = v
            for g in range(1, G + 1):  # group load ≤ T
                m.Add(sum(u[l] * gb[l, g] for l in range(L))
                      + sum(cm[l] * cg[l, g] for l in range(L - 1) if cm[l]) <= T)
            e = {}
            for l in range(L):
                for p in range(P):
                    e[l, p] = m.NewIntVar(0, G, f"e{l}_{p}")  # z_l if layer l is on p, else 0
                    m.Add(e[l, p] >= z[l]).OnlyEnforceIf(b[l, p])
            for p in range(P):
                m.Add(sum(W[l] * b[l, p] + A[l] * e[l, p] for l in range(L)) <= Mi)
        else:
            for p in range(P):
                m.Add(sum((W[l] + A[l]) * b[l, p] for l in range(L)) <= Mi)
    m.Minimize(T)
    solver, st, alloc = _solve_alloc(m, b, L, P, budget, seed)
    if st == cp_model.INFEASIBLE:
        raise InfeasibleError(f"chain {chain.name!r}: no contiguous allocation on {P} processors fits in memory {M}")
    if alloc is None:
        raise SolverError(f"contiguous_cpsat: no solution within {time_limit_s} s (status {solver.StatusName(st)})")
    stages: list[tuple[int, int]] = []
    for l in range(L):
        if l == 0 or alloc[l] != alloc[l - 1]:
            stages.append((l, l + 1))
        else:
            stages[-1] = (stages[-1][0], l + 1)
    claimed = solver.Value(T) / sc
    Tpat = _needed_period(chain, stages, M)
    star = one_f_one_b_star(chain, stages, Tpat)
    sol = PipelineSolution("contiguous_cpsat", chain, P, M, "feasible", alloc, stages, claimed_period=claimed,
                           extra={"bound": solver.BestObjectiveBound() / sc, "rounded_times": rounded})
    _finish(sol, star.pattern, star.origin)
    # CP-SAT's OPTIMAL is a claim: exact over 1-periodic contiguous patterns only when no time or byte
    # was rounded and the DP (an independent method) finds no shorter period
    exact = st == cp_model.OPTIMAL and not rounded and _integral_memory(chain)
    if exact:
        dp_period = contiguous_dp(chain, P, M, use_chain_memory=False).period
        exact = sol.period <= dp_period + _tol(dp_period)
        if not exact:
            sol.extra["claim_notes"] = [f"CP-SAT said OPTIMAL at {sol.period:.9g}, the contiguous DP finds "
                                        f"{dp_period:.9g}: not claimed"]
    sol.solve_time_s = time.perf_counter() - t0
    return _claim(sol, "contiguous", exact_over=ONE_PERIODIC_CONTIGUOUS if exact else None)


def _integral_memory(chain: Chain) -> bool:
    """Weights and activations are whole bytes, so the CP-SAT models' rounding up of them is exact."""
    return all(float(x).is_integer() for x in chain.w + chain.a)


def general_cpsat(chain: Chain, processors: int | None = None, memory: float | None = None, *,
                 time_limit_s: float | None = 30.0, seed: int = 0, hint: bool = True,
                 max_position_size: int = 2000, budget: Budget | None = None) -> PipelineSolution:
    """CP-SAT models of general (non-contiguous) allocations: a processor may hold any set of layers;
    minimise the period T subject to memory. Two NCA models:

    1. **load model** (§6): T ≥ every processor (and link) load, memory Σ_l (W_l + 1·a_l) ≤ M — every
       NCA is at least 1, so this is a relaxation valid for every k-periodic pattern (T/k can never be
       below the largest load). Its allocation gets :func:`packed_pattern` (no idle time on the busiest
       processor); if that pattern fits in memory, it is optimal. Without a memory limit or activations
       this is the whole story.
    2. **position NCA** (otherwise, when 2·L·P ≤ ``max_position_size``): the model places every F_l and
       B_l in the pattern — start s ∈ [0, T), integer q with single-batch time τ = s + q·T (shift −q),
       τ following the Figure-1 chain, circular one-op-at-a-time per processor — and takes NCA_l =
       q_B − q_F + [s_B ≥ s_F] (s_B > s_F if u_B = 0), the exact count of the resulting 1-periodic
       pattern (§3.2, as :func:`validate_pattern` counts it). Exact
       over 1-periodic patterns whose times lie on the integer µs grid. Larger chains skip it (CP-SAT
       does not keep its time limit on them) and return the best valid pattern found, with the load
       model's bound.

    With β, a cut l | l+1 between processors adds a communication op of a_l/β each way, on a link of
    its own (one op at a time on it), between the two layers' ops (§3.1).
    With ``hint`` the contiguous DP solution seeds the search and is returned if nothing better is
    found (it is a general allocation too)."""
    t0, budget, P, M = _start(chain, processors, memory, time_limit_s, budget)
    L = chain.L
    half = [communication_time(chain, l) / 2.0 for l in range(L - 1)]  # each way
    sc, rounded = _int_scale(chain.uf + chain.ub + half)
    data = dict(P=P, L=L, sc=sc, uf=[int(round(x * sc)) for x in chain.uf], ub=[int(round(x * sc)) for x in chain.ub],
                hc=[int(round(x * sc)) for x in half], W=[int(math.ceil(x)) for x in chain.w],
                A=[int(math.ceil(x)) for x in chain.a], M=None if M is None else int(math.floor(M)))
    seed_sol = None
    if hint:
        try:
            seed_sol = contiguous_dp(chain, P, M)
        except InfeasibleError:
            seed_sol = None
    sol = PipelineSolution("general_cpsat", chain, P, M, "unknown", extra={"rounded_times": rounded})
    # 1. load model (half the budget when the position model may follow)
    notes: list[str] = []
    activ = M is not None and any(data["A"])
    got = _load_model(data, seed_sol, budget.share(0.5) if activ and 2 * L * P <= max_position_size else budget,
                      seed, notes)
    best: tuple[Pattern, list[int], list[int | None], str, float] | None = None  # pattern, alloc, origin, model, claim
    bound = None
    exact = not rounded and _integral_memory(chain)  # the load model is then a relaxation of the real problem
    proven = False
    if got == "infeasible":
        if seed_sol is None:
            raise InfeasibleError(f"chain {chain.name!r}: no allocation on {P} processors fits in memory {M}")
    elif got is not None:
        alloc, claim, bound = got
        pat = packed_pattern(chain, alloc, P)
        origin = expand_communication(chain, alloc, P)[2]
        if validate_pattern(pat, M).ok:
            best = (pat, alloc, origin, "load model + packed pattern", claim)
            proven = exact and bound is not None and claims.reaches(pat.period, bound)
    sol.extra["bound"] = bound
    # 2. position model
    if not proven and activ:
        if 2 * L * P <= max_position_size:
            incumbent = min([x for x in (best and best[0].period, seed_sol.period if seed_sol and seed_sol.ok else None)
                             if x is not None], default=None)
            got2 = _position_model(chain, data, seed_sol, budget, seed, incumbent)
            if got2 == "infeasible" and best is None and seed_sol is None:
                raise InfeasibleError(f"chain {chain.name!r}: no allocation on {P} processors fits in memory {M}")
            if isinstance(got2, tuple):
                pat, alloc, origin, claim, bnd, optimal = got2
                # The position model is exact only over 1-periodic patterns on the integer µs grid: a
                # k-periodic pattern (Theorem 4) or fractional start times may do better, so its optimum
                # and bound are reported as such and never as a proven bound of the general problem.
                sol.extra["position_model_bound"] = bnd
                sol.extra["position_model_optimal"] = bool(optimal and not rounded)
                if validate_pattern(pat, M).ok and (best is None or pat.period < best[0].period - _tol(pat.period)):
                    best = (pat, alloc, origin, "position", claim)
        else:
            sol.extra["position_model"] = f"skipped: 2·L·P = {2 * L * P} > max_position_size {max_position_size}"
    if seed_sol is not None and seed_sol.ok and (best is None or seed_sol.period < best[0].period - _tol(seed_sol.period)):
        sol.allocation = list(seed_sol.allocation)
        sol.extra["nca_model"] = "contiguous 1F1B* (hint kept)"
        sol.claimed_period = seed_sol.period
        sol.pattern, sol.report = seed_sol.pattern, seed_sol.report
        sol.nca, sol.memory_used = list(seed_sol.nca), list(seed_sol.memory_used)
    elif best is not None:
        pat, alloc, origin, model, claim = best
        sol.allocation = alloc
        sol.claimed_period = claim
        sol.extra["nca_model"] = model
        _finish(sol, pat, origin)
    else:
        raise SolverError(f"general_cpsat: no valid pattern found within {time_limit_s} s for chain {chain.name!r}")
    sol.solve_time_s = time.perf_counter() - t0
    if notes:
        sol.extra["claim_notes"] = notes
    # optimal over every k-periodic pattern when T reaches the load relaxation's proven bound
    return _claim(sol, "general", relaxation_bound=bound if exact else None)


def _alloc_vars(m, data):
    P, L = data["P"], data["L"]
    b = {(l, p): m.NewBoolVar(f"b{l}_{p}") for l in range(L) for p in range(P)}  # layer l on processor p
    for l in range(L):
        m.AddExactlyOne(b[l, p] for p in range(P))
    m.Add(b[0, 0] == 1)  # identical processors: layer 1 on the first
    return b


def _cut_vars(m, data, b, T):
    """cut[l] ⇔ layers l and l+1 on different processors (only where a comm op has a duration)."""
    cut = {}
    for l in range(data["L"] - 1):
        if data["hc"][l] <= 0:
            continue
        cut[l] = m.NewBoolVar(f"cut{l}")
        for p in range(data["P"]):
            m.Add(cut[l] >= b[l, p] - b[l + 1, p])
            m.Add(cut[l] <= 2 - b[l, p] - b[l + 1, p])
        m.Add(2 * data["hc"][l] * cut[l] <= T)  # the link's load
    return cut


def _hint_alloc(m, b, seed_sol, data):
    if seed_sol is not None and seed_sol.ok:
        for l in range(data["L"]):
            for p in range(data["P"]):
                m.AddHint(b[l, p], int(seed_sol.allocation[l] == p))


def _load_cp(data, seed_sol, below: int | None = None):
    """The load relaxation (every NCA = 1) as a CP-SAT model: (model, T, b); ``below``: T ≤ below."""
    from ortools.sat.python import cp_model

    P, L, uf, ub, W, A = data["P"], data["L"], data["uf"], data["ub"], data["W"], data["A"]
    u = [uf[l] + ub[l] for l in range(L)]
    m = cp_model.CpModel()
    total = sum(u) + 2 * sum(data["hc"])
    T = m.NewIntVar(_load_floor(data), max(total, 1), "T")  # the period
    b = _alloc_vars(m, data)
    for p in range(P):
        m.Add(sum(u[l] * b[l, p] for l in range(L)) <= T)
        if data["M"] is not None:
            m.Add(sum((W[l] + A[l]) * b[l, p] for l in range(L)) <= data["M"])
    _cut_vars(m, data, b, T)
    if below is not None:
        m.Add(T <= below)
    _hint_alloc(m, b, seed_sol, data)
    m.Minimize(T)
    return m, T, b


def _load_floor(data) -> int:
    """max(largest layer, ⌈Σu/P⌉) in ticks: dplace's own arithmetic, no solver."""
    u = [f + b for f, b in zip(data["uf"], data["ub"])]
    return max(max(u), -(-sum(u) // data["P"]))


def _load_model(data, seed_sol, budget: Budget, seed, notes: list[str]):
    """Relaxation with every NCA = 1: (allocation, T, confirmed bound or None) | "infeasible" | None.

    CP-SAT's verdicts are claims: INFEASIBLE counts only when a search without presolve agrees, and its
    bound only when the arithmetic floor reaches it or a search without presolve finds no T below it
    (the independent check of :mod:`dplace.verify.claims`)."""
    from ortools.sat.python import cp_model

    L, P, sc = data["L"], data["P"], data["sc"]
    m, T, b = _load_cp(data, seed_sol)
    solver, st, alloc = _solve_alloc(m, b, L, P, budget, seed)
    if st == cp_model.INFEASIBLE:  # the check without presolve: at most 5 s
        m, T, b = _load_cp(data, None)
        solver, st, alloc = _solve_alloc(m, b, L, P, budget.child(5.0), seed, presolve=False)
        if st == cp_model.INFEASIBLE:
            return "infeasible"
        notes.append("load model: INFEASIBLE with presolve not confirmed by a search without it")
    if alloc is None:
        return None
    bound_ticks = solver.BestObjectiveBound()
    floor = _load_floor(data)
    confirmed = None
    if bound_ticks <= floor:
        confirmed = float(floor)
    else:
        below = int(math.ceil(bound_ticks - 1e-9)) - 1
        m2, _, b2 = _load_cp(data, None, below=below)
        solver2, st2, _ = _solve_alloc(m2, b2, L, P, budget.child(5.0), seed, presolve=False)
        if st2 == cp_model.INFEASIBLE:
            confirmed = float(below + 1)
        else:
            notes.append(f"load model: CP-SAT bound {bound_ticks / sc:.9g} not confirmed by a search without "
                         f"presolve ({solver2.StatusName(st2)}): not used")
    return alloc, solver.Value(T) / sc, None if confirmed is None else confirmed / sc


def _position_model(chain, data, seed_sol, budget: Budget, seed, incumbent):
    """The position-NCA model: (pattern, allocation, origin, T, bound, optimal) | "infeasible" | None."""
    from ortools.sat.python import cp_model

    P, L, uf, ubk, hc, W, A, sc = (data[k] for k in ("P", "L", "uf", "ub", "hc", "W", "A", "sc"))
    u = [uf[l] + ubk[l] for l in range(L)]
    m = cp_model.CpModel()
    total = sum(u) + 2 * sum(hc)
    ub_T = max(total, 1)  # T = total allows NCA 1 everywhere (one batch at a time)
    if incumbent is not None:
        ub_T = max(1, min(ub_T, int(math.floor(incumbent * sc))))
    T = m.NewIntVar(min(ub_T, max(max(u), -(-sum(u) // P))), ub_T, "T")  # the period
    b = _alloc_vars(m, data)
    for p in range(P):
        m.Add(sum(u[l] * b[l, p] for l in range(L)) <= T)
    cut = _cut_vars(m, data, b, T)
    ops: list[tuple[str, int]] = []  # one batch's ops in order; "f"/"b" = comm of cut l
    for l in range(L):
        ops.append(("F", l))
        if l in cut:
            ops.append(("f", l))
    for l in reversed(range(L)):
        if l in cut:
            ops.append(("b", l))
        ops.append(("B", l))
    dur = {("F", l): uf[l] for l in range(L)} | {("B", l): ubk[l] for l in range(L)}
    dur |= {("f", l): hc[l] for l in cut} | {("b", l): hc[l] for l in cut}
    Q = 2 * len(ops) + 1
    horizon = int(max(total, 1))
    sv, qv, tau, shifted = {}, {}, {}, {}
    for op in ops:
        sv[op] = m.NewIntVar(0, horizon, f"s{op}")  # start in the pattern
        qv[op] = m.NewIntVar(0, Q, f"q{op}")  # whole periods before it in one batch's life
        m.Add(sv[op] <= T - 1)
        prod = m.NewIntVar(0, Q * horizon, f"pq{op}")
        m.AddMultiplicationEquality(prod, [T, qv[op]])
        tau[op] = m.NewIntVar(0, (Q + 1) * horizon, f"tau{op}")  # single-batch time τ = s + q·T
        m.Add(tau[op] == sv[op] + prod)
        shifted[op] = m.NewIntVar(0, 2 * horizon, f"s2{op}")
        m.Add(shifted[op] == sv[op] + T)
    for a, c in zip(ops, ops[1:]):  # Figure-1 dependencies (a comm op only delays when cut)
        m.Add(tau[c] >= tau[a] + (dur[a] if a[0] in "FB" else dur[a] * cut[a[1]]))
    m.Add(qv["F", 0] == 0)

    def pair(op, present):  # circular one-at-a-time: [s, s+d) and [s+T, s+T+d) in one NoOverlap
        if dur[op] == 0:
            return []
        return [m.NewOptionalFixedSizeIntervalVar(sv[op], dur[op], present, f"i{op}"),
                m.NewOptionalFixedSizeIntervalVar(shifted[op], dur[op], present, f"j{op}")]

    for p in range(P):
        m.AddNoOverlap([iv for op in ops if op[0] in "FB" for iv in pair(op, b[op[1], p])])
    for l in cut:
        m.AddNoOverlap(pair(("f", l), cut[l]) + pair(("b", l), cut[l]))
    nca = []
    for l in range(L):
        f_, b_ = ("F", l), ("B", l)
        ge = m.NewBoolVar(f"ge{l}")  # B_l ends after F_l starts in the pattern: s_B + [u_B = 0] > s_F
        z = 1 if ubk[l] == 0 else 0  # a zero-time B_l at s_F has freed its activation (validator's rule)
        m.Add(sv[b_] >= sv[f_] + z).OnlyEnforceIf(ge)
        m.Add(sv[b_] <= sv[f_] + z - 1).OnlyEnforceIf(ge.Not())
        n = m.NewIntVar(1, Q + 1, f"nca{l}")  # NCA_l (§3.2)
        m.Add(n == qv[b_] - qv[f_] + ge)
        nca.append(n)
    for p in range(P):
        e = []
        for l in range(L):
            v = m.NewIntVar(0, Q + 1, f"e{l}_{p}")  # NCA_l if layer l is on p, else 0
            m.Add(v >= nca[l]).OnlyEnforceIf(b[l, p])
            e.append(v)
        m.Add(sum(W[l] * b[l, p] + A[l] * e[l] for l in range(L)) <= data["M"])
    _hint_alloc(m, b, seed_sol, data)
    if (seed_sol is not None and seed_sol.ok and sc == 1.0 and chain.bandwidth is None
            and float(seed_sol.period).is_integer() and seed_sol.period <= ub_T):
        Ts = seed_sol.period
        m.AddHint(T, int(Ts))
        for op in seed_sol.pattern.ops:
            tau_v = op.start - op.shift * Ts
            q = int(math.floor(tau_v / Ts + _REL))
            m.AddHint(sv[op.kind, op.layer], int(round(tau_v - q * Ts)))
            m.AddHint(qv[op.kind, op.layer], q)
    m.Minimize(T)
    # CP-SAT's presolve overruns the time limit on the larger models
    solver, st, alloc = _solve_alloc(m, b, L, P, budget, seed, presolve=2 * L * P <= 400)
    if st == cp_model.INFEASIBLE:
        return "infeasible"
    if alloc is None:
        return None
    Tv = solver.Value(T)
    ech, ealloc, origin, resources = expand_communication(chain, alloc, P)

    def at(op):
        return solver.Value(sv[op]) + solver.Value(qv[op]) * Tv

    tf, tb = [], []
    for e, o in enumerate(origin):
        if o is not None:
            tf.append(at(("F", o)))
            tb.append(at(("B", o)))
        else:  # communication layer after layer origin[e - 1]
            l = origin[e - 1]
            if l in cut:
                tf.append(at(("f", l)))
                tb.append(at(("b", l)))
            else:  # zero-time comm layer
                tf.append(at(("F", l)) + uf[l])
                tb.append(at(("B", l + 1)) + ubk[l + 1])
    pat = pattern_from_times(ech, ealloc, [x / sc for x in tf], [x / sc for x in tb], Tv / sc, resources, P)
    return pat, alloc, origin, Tv / sc, solver.BestObjectiveBound() / sc, st == cp_model.OPTIMAL
