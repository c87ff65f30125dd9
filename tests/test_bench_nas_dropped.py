"""``benchmarks/bench_nas.py --dropped``: what the ops the segment bound's windows drop could add to it, as energy
over ranges of pieces and as delays between ops of one piece."""
from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import pytest

import dplace
from dplace.instance.io import save_instance
from dplace.instance.model import Device, Edge, Instance, Link, Op

ROOT = Path(__file__).resolve().parents[1]
BENCH = str(ROOT / "benchmarks")  # bench_nas imports its sibling bench_seqcomm


def detour(x_time: float = 15.0, m: int = 2) -> Instance:
    """A path c0..c5 (ops of time 10); u beside c0->c2, y beside c1->c3 and v beside c2->c4 (each may run beside
    one path op, so none of c1..c3 is a cut at window 1), and x between u and v, beside c1..c3 (window 3): window 1
    drops x and keeps u and v in one piece."""
    ops = [Op(f"c{j}", 10.0) for j in range(6)] + [Op(n, 1.0) for n in ("u", "y", "v")] + [Op("x", x_time)]
    edges = [(f"c{j}", f"c{j + 1}") for j in range(5)]
    edges += [("c0", "u"), ("u", "c2"), ("c1", "y"), ("y", "c3"), ("c2", "v"), ("v", "c4"), ("u", "x"), ("x", "v")]
    return Instance("detour", [Device(f"d{i}", 10**6, 1.0) for i in range(m)], ops,
                    [Edge(a, b, 1.0) for a, b in edges], link=Link(1.0, 1.0))


def test_the_pieces_counted_are_the_narrower_ones_where_they_add_up(benchmark_script, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    kids = [{"window": 24, "a": -1, "b": 5, "bound_us": 4.0}, {"window": 24, "a": 5, "b": 10, "bound_us": 7.0}]
    up = {"window": 48, "a": -1, "b": 10, "bound_us": 11.0}
    assert mod.counted_pieces(kids + [up]) == kids
    assert mod.counted_pieces(kids + [dict(up, bound_us=12.0)]) == [dict(up, bound_us=12.0)]


def test_range_energy_is_the_brute_force_over_every_range(benchmark_script, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    from dplace.formulations.bounds_segments import _path_windows, segments

    inst = detour(m=1)
    path, segs = segments(inst, 0)
    leaves = [{"window": 0, "a": s.a, "b": s.b, "bound_us": 1.0 + k} for k, s in enumerate(segs)]
    got = mod.range_energy(inst, path, leaves)
    A, D = _path_windows(inst, path)
    best = None
    for i, j in itertools.combinations_with_replacement(range(len(leaves)), 2):
        a, b = leaves[i]["a"], leaves[j]["b"]
        work = sum(min(inst.dur[o]) for o in range(inst.n)
                   if A[o] >= a and (D[o] + (o in path)) <= b)
        bounds = sum(p["bound_us"] for p in leaves[i:j + 1])
        if best is None or work / bounds > best[0]:
            best = (work / bounds, work - bounds, (a, b))
    assert got["ratio"] == pytest.approx(best[0]) and got["range"] == best[2]
    assert got["margin"] == pytest.approx(best[1])
    assert got["margin"] > 0  # one device: x's work alone passes the small bounds given


def test_a_path_through_a_dropped_op_is_a_delay_inside_its_piece(benchmark_script, monkeypatch):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    from dplace.formulations.bounds_segments import segments

    inst = detour()
    ids = [o.id for o in inst.ops]
    seg = next(s for s in segments(inst, 1)[1] if ids.index("u") in s.ops)
    assert ids.index("x") not in seg.ops and ids.index("v") in seg.ops  # dropped, between two ops of the piece
    got = mod.piece_delays(inst, seg)
    assert got["pairs"] == 1 and got["over_latency"] == 1 and got["largest"] == 15.0 and got["broken"] is None
    members = [seg.first] + seg.ops + [seg.last]
    start = {"c0": 0.0, "u": 10.0, "c1": 10.0, "c2": 20.0, "y": 20.0, "v": 30.0, "c3": 30.0, "c4": 40.0}
    sol = {"members": members, "placement": [0] * len(members), "start": [start[ids[o]] for o in members]}
    assert mod.piece_delays(inst, seg, sol)["broken"] == 0  # v starts 19 after u ends: the delay holds
    start["v"] = 25.5
    sol["start"] = [start[ids[o]] for o in members]
    assert mod.piece_delays(inst, seg, sol)["broken"] == 1  # 14.5 after u's end (11): x's 15 do not fit
    short = mod.piece_delays(detour(x_time=0.5), seg)
    assert short["pairs"] == 1 and short["over_latency"] == 0


def spanned(n: int = 60) -> Instance:
    """A path of ``n`` ops, a two-op side branch beside each path op, and one op beside the whole path (it may run
    beside more than 48 path ops: every window of the segment bound drops it)."""
    ops = [Op(f"c{j}", 10.0) for j in range(n)] + [Op(f"s{j}", 4.0) for j in range(n - 2)] + [Op("x", 30.0)]
    edges = [(f"c{j}", f"c{j + 1}") for j in range(n - 1)] + [("c0", "x"), ("x", f"c{n - 1}")]
    edges += [(f"c{j}", f"s{j}") for j in range(n - 2)] + [(f"s{j}", f"c{j + 2}") for j in range(n - 2)]
    return Instance("spanned", [Device(f"d{i}", 10**6, 1.0) for i in range(2)], ops,
                    [Edge(a, b, 1.0) for a, b in edges], link=Link(1.0, 1.0))


@pytest.mark.solver
def test_dropped_reports_the_ops_dropped_and_the_margins(benchmark_script, monkeypatch, tmp_path, capsys):
    monkeypatch.syspath_prepend(BENCH)
    mod = benchmark_script("bench_nas")
    for inst, dropped in ((detour(), 0), (spanned(), 1)):
        path = tmp_path / f"{inst.name}.json"
        save_instance(inst, path)
        res = dplace.solve(inst, "heft")
        answer = tmp_path / f"{inst.name}.result.json"
        answer.write_text(json.dumps(res.to_dict()))
        out = mod.dropped(argparse.Namespace(instance=str(path), comm="parallel", bound_s=5.0, answer=str(answer),
                                             losses=3))
        spans = out["answer"]["pieces"]
        assert sum(sp for _, _, sp, _ in spans) == pytest.approx(res.makespan)  # the pieces' spans tile the answer
        assert all(sp >= lb - 1e-6 for _, _, sp, lb in spans)  # each span at least the piece's proven bound
        assert "above the pieces' bounds" in capsys.readouterr().out
        out = mod.dropped(argparse.Namespace(instance=str(path), comm="parallel", bound_s=5.0, answer=None))
        text = capsys.readouterr().out
        assert out["dropped"] >= dropped and (dropped or out["dropped"] == 0), out
        assert "dropped ops" in text and "energy" in text
        assert out["sum"] <= out["bound"] + 1e-6 and out["energy"]["ratio"] > 0
        # the range's own bounds, with every op it confines: at least its work over the devices
        assert out["energy"]["whole_range"] >= out["energy"]["work_m"] - 1e-6
