"""``benchmarks/bench_mirror_pairs.py``: pieces and their mirrored partners, bounded together."""
from __future__ import annotations

import os
import subprocess
import sys

from dplace.instance.io import save_instance
from dplace.instance.model import Device, Edge, Instance, Link, Op

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench_mirror_pairs.py"), *args],
                          capture_output=True, text=True, timeout=300)


def _forward_backward() -> Instance:
    """Two diamonds forward (f0 -> f1, f2 -> f3 -> f4, f5 -> f6), the same backward (g6 -> ... -> g0) after
    f6, f_i and g_i colocated: on the critical path (f0 f1 f3 f4 f6 g6 g4 g3 g1 g0) piece f0-f3 (0-2) has the
    partner g3-g0 (7-9), piece f3-f6 (2-4) g6-g3 (5-7)."""
    times = [4, 6, 3, 2, 5, 4, 1]
    ops = [Op(f"f{i}", t, 1, colocation=f"t{i}") for i, t in enumerate(times)]
    ops += [Op(f"g{i}", 2 * t, 1, colocation=f"t{i}") for i, t in enumerate(times)]
    fwd = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (3, 5), (4, 6), (5, 6)]
    edges = [Edge(f"f{u}", f"f{v}", 3.0) for u, v in fwd] + [Edge(f"g{v}", f"g{u}", 3.0) for u, v in fwd]
    edges.append(Edge("f6", "g6", 1.0))
    return Instance("fwdbwd", [Device(f"d{d}", 100, 1.0) for d in range(3)], ops, edges, link=Link(1.0, 1.0))


def test_pairs_are_printed_with_gains_never_negative_nor_above_cpsat(tmp_path):
    path = str(tmp_path / "fb.json")
    save_instance(_forward_backward(), path)
    out = _run(path, "--window", "12", "--seconds", "5", "--cpsat", "5")
    assert out.returncode == 0, out.stderr
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in out.stdout.splitlines()
            if line.startswith("| ") and line[2].isdigit()]
    assert [(r[0], r[3]) for r in rows] == [("0-2", "7-9"), ("2-4", "5-7")], out.stdout  # f0-f3 / g3-g0, f3-f6 / g6-g3
    num = lambda x: float(x.replace(",", ""))  # noqa: E731
    for r in rows:
        la, lb, gain = num(r[2]), num(r[5]), num(r[6])
        cp_best = num(r[7].split("/")[1].split("(")[0])
        assert gain >= 0 and la + lb + gain <= cp_best * (1 + 1e-9), r
    assert "2 pairs: mirror gains 2 µs" in out.stdout  # the first pair gains: one placement costs it


def test_bad_options_are_refused_with_exit_code_2(tmp_path):
    path = str(tmp_path / "fb.json")
    save_instance(_forward_backward(), path)
    for args, msg in ((("--window", "-2"), "--window: must be >= 0, got -2"),
                      (("--cpsat", "0"), "--cpsat: must be > 0 seconds, got 0.0")):
        out = _run(path, *args)
        assert out.returncode == 2 and msg in out.stderr, out.stderr
