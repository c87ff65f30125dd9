"""Exact placement and scheduling with OR-Tools CP-SAT.

Modules: :mod:`.ticks` (integer time), :mod:`.model` (the constraint model, one solve), :mod:`.hint`
(heuristic start as a complete hint), :mod:`.solve` (the registered ``cpsat`` method and its claims).
"""
from __future__ import annotations

from .hint import (
    _SKIP_HINT, HEURISTIC_US, Interrupted, _add_hint, best_heuristic, complete_hint, heuristic_cost_s, hint_heuristics,
    hinted_model, memory_fits, relabel_symmetric, run_heuristics, slowdown_guess,
)
from .model import (
    CpModelVars, OutOfTime, _check_time, build_model, energetic_bound, model_cost_s, reachability, run_search,
    stop_building_on_interrupt, time_windows, will_break_symmetry,
)
from .solve import (
    CLAIM_STAGES, CpsatOptions, SolveOutcome, _asdict, _cleanup_s, confirm_bound, cpsat, fallback, finish, run_guarded,
    solve_model, stage_limit,
)
from .ticks import MAX_HORIZON_TICKS, MAX_SERIAL_TICKS, MIN_TICK_EXP, Ticks, _homogeneous, horizon_ticks, tick_schedule

__all__ = [
    "CLAIM_STAGES", "CpModelVars", "CpsatOptions", "Interrupted", "OutOfTime", "SolveOutcome", "Ticks", "best_heuristic",
    "build_model", "complete_hint", "confirm_bound", "cpsat", "energetic_bound", "fallback", "finish",
    "hinted_model", "horizon_ticks", "memory_fits", "reachability", "relabel_symmetric", "run_guarded",
    "run_search", "HEURISTIC_US", "heuristic_cost_s", "hint_heuristics", "model_cost_s", "run_heuristics",
    "slowdown_guess", "stop_building_on_interrupt", "solve_model", "stage_limit", "tick_schedule", "time_windows", "will_break_symmetry",
    "MAX_HORIZON_TICKS", "MAX_SERIAL_TICKS", "MIN_TICK_EXP", "_SKIP_HINT", "_add_hint", "_asdict", "_check_time",
    "_cleanup_s", "_homogeneous",
]
