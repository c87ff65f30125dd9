"""Exact placement and scheduling with OR-Tools CP-SAT.

Modules: :mod:`.ticks` (integer time), :mod:`.model` (the constraint model), :mod:`.search` (one solve, within
dplace's deadline), :mod:`.windows`
(start windows, energetic bound on ticks), :mod:`.hint` (the heuristic start of :mod:`..heuristic_start` as
a complete hint), :mod:`.solve` (the registered ``cpsat`` method and its claims).
"""
from __future__ import annotations

from .hint import complete_hint, hinted_model, memory_fits, relabel_symmetric
from .model import CpModelVars, build_model, model_cost_s, reachability, will_break_symmetry
from .search import ABANDONED, KeepingCallback, KeptAnswer, Search, grace_s, run_search, wait_abandoned
from .solve import (
    CLAIM_STAGES, CpsatOptions, SolveOutcome, confirm_bound, cpsat, finish, solve_model, stage_limit,
)
from .windows import energetic_bound, time_windows
from .ticks import (
    MAX_HORIZON_TICKS, MAX_SERIAL_TICKS, MIN_TICK_EXP, Ticks, horizon_ticks, receive_count,
    tick_schedule,
)

__all__ = [
    "ABANDONED", "KeepingCallback", "KeptAnswer", "Search", "grace_s", "wait_abandoned",
    "CLAIM_STAGES", "CpModelVars", "CpsatOptions", "SolveOutcome", "Ticks", "build_model", "complete_hint",
    "confirm_bound", "cpsat", "energetic_bound", "finish", "hinted_model", "horizon_ticks", "memory_fits",
    "model_cost_s", "reachability", "receive_count", "relabel_symmetric", "run_search", "solve_model",
    "stage_limit", "tick_schedule", "time_windows", "will_break_symmetry",
    "MAX_HORIZON_TICKS", "MAX_SERIAL_TICKS", "MIN_TICK_EXP",
]
