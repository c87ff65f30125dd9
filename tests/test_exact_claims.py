"""The exact methods never claim more than brute force allows (benchmarks/check_exact_claims.py on a few
seeds, including the one where CP-SAT with start windows was wrong)."""
import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.solver


def _audit():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "check_exact_claims.py"
    spec = importlib.util.spec_from_file_location("check_exact_claims", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_no_wrong_optimal_or_bound_claims(capsys):
    assert _audit().main(["--seeds", "1030:1042", "--methods", "cpsat,milp", "--time-limit", "5"]) == 0
    out = capsys.readouterr().out
    assert "cpsat" in out and "milp" in out
