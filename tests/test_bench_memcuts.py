"""``benchmarks/bench_memcuts.py``: its table on an instance file (new code only) and its brute-force audit, small."""
from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_table_and_the_audit_run(tmp_path, capsys):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_memcuts
    finally:
        sys.path.pop(0)
    inst = os.path.join(ROOT, "instances", "tiny", "chain.json")
    answer = tmp_path / "a.json"
    answer.write_text(json.dumps({"makespan": 1000.0}))
    assert bench_memcuts.main(["--graphs", "", "--instances", inst, "--comm", "parallel,sequential",
                               "--bounds-time", "2", "--answer", f"chain:sequential={answer}",
                               "--audit", "12", "--start", "7"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| chain |")]
    assert len(rows) == 2 and rows[1].split("|")[-2].strip().endswith("%")  # the answer's gap to the new bound
    audit = [line for line in out.splitlines() if line.startswith("| sequential |") or line.startswith("| parallel |")]
    assert len(audit) == 2
    for line in audit:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert int(cells[1]) > 0 and cells[2] == "0" and cells[3] == "0"  # none above the optimum
