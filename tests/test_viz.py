"""Gantt chart and Chrome trace: trace slices nest on every track; the aggregation's arithmetic against
brute force; the chart's options and errors."""
import json
import random
from pathlib import Path

import numpy as np
import pytest

import dplace
from dplace import viz
from dplace.cli import main
from dplace.testing import random_instance

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"


def _nest_violations(events):
    """Slices of one (pid, tid) must nest: each one inside the open one or after it (the trace format's rule)."""
    bad = []
    by_track = {}
    for e in events:
        if e.get("ph") == "X":
            by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for track, sl in by_track.items():
        sl.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for st, en, name in sl:
            while stack and stack[-1][1] <= st:
                stack.pop()
            if stack and en > stack[-1][1]:
                bad.append((track, stack[-1][2], name))
            stack.append((st, en, name))
    return bad


def _max_clique(iv):
    """Most intervals that pairwise share time (touching ends do not), by brute force."""
    clash = lambda a, b: a[0] < b[1] and b[0] < a[1]  # noqa: E731
    best = 0
    for mask in range(1, 1 << len(iv)):
        pick = [iv[i] for i in range(len(iv)) if mask >> i & 1]
        if len(pick) > best and all(clash(a, b) for i, a in enumerate(pick) for b in pick[i + 1:]):
            best = len(pick)
    return best


@pytest.fixture(scope="module")
def bert():
    inst = dplace.load_instance(ROOT / "instances" / "bert12_training_4dev.json")
    return dplace.solve(inst, "heft")


def test_trace_nests_on_every_track_bert(bert):
    ev = viz.chrome_trace(bert)["traceEvents"]
    assert _nest_violations(ev) == []
    # the parallel-comm transfers of this schedule overlap partially on one link: they need more tracks
    links = {(t[1], t[2]) for t in bert.schedule.transfers}
    link_tracks = {e["tid"] for e in ev if e.get("ph") == "X" and e["pid"] == 1}
    assert len(link_tracks) > len(links)
    # every op and every transfer is there once, with its times
    xs = [e for e in ev if e.get("ph") == "X"]
    assert len(xs) == bert.instance.n + len(bert.schedule.transfers)
    names = {e["tid"]: e["args"]["name"] for e in ev if e.get("name") == "thread_name" and e["pid"] == 1}
    assert all(names[t].split(" #")[0].count("->") == 1 for t in link_tracks)


@pytest.mark.parametrize("seed", range(6))
def test_trace_nests_random(seed):
    inst = random_instance(random.Random(seed), n_ops=9, n_devices=3, comm="parallel" if seed % 2 else "sequential")
    res = dplace.solve(inst, "m_etf")
    assert _nest_violations(viz.chrome_trace(res)["traceEvents"]) == []


@pytest.mark.parametrize("seed", range(20))
def test_tracks_are_fewest_and_disjoint(seed):
    rng = random.Random(seed)
    iv = [(a, a + rng.choice([0, 0.5, 1, 3])) for a in (rng.randint(0, 10) for _ in range(rng.randint(0, 11)))]
    ks = viz.tracks(iv)
    for k in set(ks):
        mine = sorted(iv[i] for i in range(len(iv)) if ks[i] == k)
        assert all(b[0] >= a[1] for a, b in zip(mine, mine[1:]))
    assert len(set(ks)) == _max_clique(iv)


@pytest.mark.parametrize("seed", range(10))
def test_busy_integral_and_union_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    s = rng.uniform(0, 100, 30)
    e = s + rng.uniform(0, 20, 30)
    xs = np.linspace(-5, 130, 41)
    want = [sum(min(max(x - a, 0.0), b - a) for a, b in zip(s, e)) for x in xs]
    assert np.allclose(viz._busy_integral(s, e, xs), want)
    us, ue = viz._union(s, e)
    assert np.all(us[1:] > ue[:-1])  # disjoint, sorted
    grid = np.linspace(0, 125, 2001)
    inside = lambda a, b: np.any((grid[:, None] >= a) & (grid[:, None] <= b), axis=1)  # noqa: E731
    assert np.array_equal(inside(s, e), inside(us, ue))


def test_gantt_modes_and_options(bert):
    assert viz.gantt_png(bert).startswith(PNG)  # 2,012 ops: aggregated
    assert viz.gantt_png(bert, color_by="colocation", window=(0, 20000)).startswith(PNG)
    small = dplace.solve(dplace.load_instance(ROOT / "instances" / "tiny" / "diamond.json"), "heft")
    for color in viz.COLOR_BY:
        assert viz.gantt_png(small, color_by=color).startswith(PNG)
    with pytest.raises(dplace.InvalidInstanceError, match="color_by must be one of"):
        viz.gantt_png(small, color_by="rainbow")
    with pytest.raises(dplace.InvalidInstanceError, match="lies outside the schedule"):
        viz.gantt_png(small, window=(1e6, 2e6))


@pytest.mark.parametrize("text, ok", [("0:5000", (0.0, 5000.0)), (":10", (0.0, 10.0)), ("2e3:", (2000.0, float("inf"))),
                                      ("5:1", None), ("a:b", None), ("1", None), ("-1:4", None), ("nan:4", None)])
def test_parse_window(text, ok):
    if ok is None:
        with pytest.raises(dplace.InvalidInstanceError, match="gantt-window"):
            viz.parse_window(text)
    else:
        assert viz.parse_window(text) == ok


def test_cli_gantt_window_and_trace(tmp_path, capsys):
    inst = ROOT / "instances" / "tiny" / "diamond.json"
    g, t = tmp_path / "g.png", tmp_path / "t.json"
    assert main(["solve", str(inst), "--method", "heft", "--gantt", str(g), "--gantt-window", "1:6",
                 "--gantt-color", "op", "--trace", str(t)]) == 0
    assert g.read_bytes().startswith(PNG) and _nest_violations(json.loads(t.read_text())["traceEvents"]) == []
    capsys.readouterr()
    assert main(["solve", str(inst), "--method", "heft", "--gantt", str(tmp_path / "h.png"), "--gantt-window", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--gantt-window" in err[0] and "'x'" in err[0]
