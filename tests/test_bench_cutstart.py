"""``benchmarks/bench_cutstart.py``: its table on a small PipeDream graph whose path memory cuts (new code only)."""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_table_runs_and_names_the_cut_start(capsys):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_cutstart
    finally:
        sys.path.pop(0)
    assert bench_cutstart.main(["--graphs", "resnet18", "--comm", "sequential", "--time-limit", "6"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| resnet18 |")]
    assert len(rows) == 1
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    assert cells[2] != "-" and cells[4] != "-" and cells[7].endswith("%")  # the cut start, an answer, its gap


def test_the_start_alone_is_timed_and_annealed(capsys):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_cutstart
    finally:
        sys.path.pop(0)
    assert bench_cutstart.main(["--start-only", "--graphs", "resnet18", "--comm", "parallel", "--anneal", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| resnet18 |")]
    assert len(rows) == 1 and " s); annealed " in rows[0] and rows[0].rstrip(" |").endswith("ops")
