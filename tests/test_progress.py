"""Progress: a nested solve reports under its own label and never moves the parent's incumbent or
bound; native libraries do not write to the terminal."""
import io

import dplace
from dplace import progress
from dplace.model import Device, Edge, Instance, Op


def test_a_nested_solve_keeps_its_numbers_to_itself():
    rep = progress.Reporter("solve portfolio", mode="plain", stream=io.StringIO(), delay_s=1e9)
    progress._current = rep
    try:
        progress.update(incumbent=1_700_000.0, bound=1_633_341.0)
        progress.phase("segment bound")
        with progress.nested("segment of 40 ops"):
            progress.phase("heuristic 1/1: heft")
            progress.update(incumbent=84_130.0, bound=80_000.0)  # the segment's, not the graph's
            line = rep._text()
            assert rep.incumbent == 1_700_000.0 and rep.bound == 1_633_341.0
            assert "segment of 40 ops: heuristic 1/1: heft" in line
            assert "its incumbent 84,130.0 µs" in line and "gap 0.0%" not in line
        assert "segment of 40" not in rep._text() and rep._phase == "segment bound"
    finally:
        progress._current = None


def test_nested_without_a_reporter_does_nothing():
    with progress.nested("x"):
        progress.update(incumbent=1.0)


def test_segment_bound_reports_its_segments_as_nested(monkeypatch):
    """The segment bound's CP-SAT solves (and the heuristics that hint them) run inside
    ``progress.nested``: the parent's incumbent is never a segment's."""
    from dplace.bounds_segments import segment_bound
    from dplace.testing import stemmed_twins

    inst = stemmed_twins(1)
    seen = []
    rep = progress.Reporter("t", mode="plain", stream=io.StringIO(), delay_s=1e9)
    orig = rep.update

    def update(**kw):
        seen.append((len(rep._nest), kw.get("incumbent")))
        orig(**kw)

    rep.update = update
    progress._current = rep
    try:
        segment_bound(inst, time_limit_s=5.0, segment_time_s=0.5)
    finally:
        progress._current = None
    assert seen, "the segments' heuristics reported nothing"
    assert all(depth >= 1 for depth, _ in seen)  # every update came from inside a nested solve
    assert rep.incumbent is None and rep.bound is None


def test_metis_does_not_print_on_the_terminal(capfd):
    """pymetis asked for more parts than vertices prints "***Cannot bisect a graph with 0 vertices!" on
    the C-level stdout; dplace keeps it off the terminal."""
    devs = [Device(f"d{i}", 10**9) for i in range(8)]
    inst = Instance("few-ops", devs, [Op("a", 1.0), Op("b", 2.0), Op("c", 3.0)], [Edge("a", "b", 4), Edge("b", "c", 4)])
    res = dplace.solve(inst, "metis")
    assert res.placement is not None
    out, err = capfd.readouterr()
    assert "Cannot bisect" not in out + err and "too many parts" not in out + err
