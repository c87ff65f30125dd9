"""``benchmarks/bench_twins.py --solve-rests``: each anchored rest solved alone beside its own proven bound."""
from __future__ import annotations

import os
import subprocess
import sys

from dplace.instance.io import save_instance
from dplace.testing import stemmed_twins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_twins.py"), *args],
                          capture_output=True, text=True, timeout=300)


def test_each_rest_is_solved_in_both_comm_modes_never_below_its_bound(tmp_path):
    inst = stemmed_twins(110, k=5, r=10, m=3)
    path = str(tmp_path / "twins.json")
    save_instance(inst, path)
    out = _run(path, "--rest-s", "1", "--stems-s", "1", "--solve-rests", "2")
    assert out.returncode == 0, out.stderr
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.stdout.splitlines()
            if line.startswith("| A |") or line.startswith("| B |")]
    assert [(r[0], r[2]) for r in rows] == [("A", "parallel"), ("A", "sequential"), ("B", "parallel"),
                                           ("B", "sequential")]
    for r in rows:
        answer, bound = float(r[3].replace(",", "")), float(r[4].replace(",", ""))
        assert bound <= answer * (1 + 1e-9) and r[5].endswith("%")


def test_a_bad_time_is_refused_with_exit_code_2(tmp_path):
    path = str(tmp_path / "twins.json")
    save_instance(stemmed_twins(110, k=5, r=10, m=3), path)
    out = _run(path, "--solve-rests", "0")
    assert out.returncode == 2 and "--solve-rests: must be > 0 seconds, got 0.0" in out.stderr
