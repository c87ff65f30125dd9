"""The OR-Tools release pinned in pyproject.toml solves these CP-SAT models right.

Each fixture is a model dplace built (cut down by removing constraints while the wrong answer stayed) and
an assignment of every variable that satisfies it. OR-Tools 9.15.6755 proved both infeasible: the first
(a sequential-comm model, composed seed 1021112) with its default probing, the second (a 6-op parallel-comm
model, fuzz seed 2022115) with every setting tried (presolve, probing, linearization, search, workers), where
9.14.6206 and 9.12.4544 find a solution. dplace ran 9.15 until session 21, so an upgrade of the pin must keep
these passing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from ortools.sat.python import cp_model as cp

from dplace.formulations.cpsat.search import PROBING_LEVEL, run_search, status_name

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpsat"
NAMES = ["sequential-1021112", "parallel-2022115"]


def _model(name: str, fix: list[int] | None = None) -> cp.CpModel:
    """The fixture's model; ``fix``: every variable's domain set to that one value."""
    from google.protobuf import text_format
    from ortools.sat import cp_model_pb2

    P = text_format.Parse((FIXTURES / f"{name}.pbtxt").read_text(), cp_model_pb2.CpModelProto())
    if fix is not None:
        assert len(fix) == len(P.variables)
        for var, v in zip(P.variables, fix):
            var.domain[:] = [v, v]
    md = cp.CpModel()
    if hasattr(md.proto, "parse_text_format"):  # OR-Tools 9.15: a wrapper of the C++ proto
        md.proto.parse_text_format(text_format.MessageToString(P))
    else:  # 9.14: the protobuf message itself
        md.proto.CopyFrom(P)
    return md


@pytest.mark.parametrize("name", NAMES)
def test_the_assignment_satisfies_the_model(name):
    md = _model(name, fix=json.loads((FIXTURES / f"{name}.solution.json").read_text()))
    sv = cp.CpSolver()
    sv.parameters.num_workers = 1
    assert status_name(run_search(sv, md).status) == "OPTIMAL"


@pytest.mark.parametrize("presolve", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_the_pinned_cp_sat_finds_a_solution(name, presolve):
    """As dplace runs CP-SAT (``run_search``: probing at ``PROBING_LEVEL``), with and without presolve."""
    md = _model(name)
    sv = cp.CpSolver()
    sv.parameters.num_workers = 1
    sv.parameters.max_time_in_seconds = 30.0  # both are solved in milliseconds by a release without the defect
    sv.parameters.cp_model_presolve = presolve
    got = run_search(sv, md)
    assert sv.parameters.cp_model_probing_level == PROBING_LEVEL
    assert status_name(got.status) in ("OPTIMAL", "FEASIBLE"), status_name(got.status)
