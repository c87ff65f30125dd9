"""Boolean helpers of the CP-SAT model: a literal's negation, and literals equal to the AND / OR of others,
with constants (True/False) folded so no variable is made where none is needed."""
from __future__ import annotations

from typing import Any, Sequence

from ortools.sat.python import cp_model as cp


def _neg(lit):
    return lit.Not() if hasattr(lit, "Not") else (not lit)


def _and(md: cp.CpModel, lits: Sequence[Any], name: str) -> Any:
    """A literal equal to the AND of ``lits`` (constants folded; a new bool only where needed)."""
    lits = [b for b in lits if b is not True]
    if any(b is False for b in lits):
        return False
    if len(lits) <= 1:
        return lits[0] if lits else True
    b = md.new_bool_var(name)
    for lit in lits:
        md.add_implication(b, lit)
    md.add_bool_or([b] + [_neg(lit) for lit in lits])
    return b


def _or(md: cp.CpModel, lits: Sequence[Any], name: str) -> Any:
    """A literal equal to the OR of ``lits``: NOT the AND of their negations (constants folded)."""
    return _neg(_and(md, [_neg(lit) for lit in lits], name))
