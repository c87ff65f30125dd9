"""Celeritas' score of per-op memory estimates against a measured step (:func:`op_memory_score`): a leaf
that :mod:`.remote` (execute, profile) and :mod:`.memory` (re-exported there) both import.
"""
from __future__ import annotations

import statistics
from typing import Any

__all__ = ["op_memory_score"]


def op_memory_score(inst, record) -> dict[str, Any]:
    """Celeritas-style score of ``inst``'s per-op memory against a :class:`~dplace.runtime.remote.StepRecord`:
    ``median_rel_error`` over ops whose outputs allocated memory (measured = output bytes, plus the op's
    recorded temporaries where TF gives them), ``n`` such ops, and the totals."""
    errs, est_tot, meas_tot = [], 0, 0
    for op in inst.ops:
        node = op.extra.get("tf_node", op.id)
        meas = record.out_bytes.get(node, 0) + record.temp_bytes.get(node, 0)
        if meas <= 0:
            continue
        errs.append(abs(op.memory - meas) / meas)
        est_tot += op.memory
        meas_tot += meas
    return {"median_rel_error": statistics.median(errs) if errs else None, "n": len(errs),
            "estimate_bytes": est_tot, "measured_bytes": meas_tot,
            "temporaries_recorded": bool(record.temp_bytes)}
