"""``benchmarks/bench_flags.py``: a setting reaches the child process (and only it), and each run's makespan is the
simulator's."""
from __future__ import annotations

import json

import pytest

import dplace
from dplace.formats.generate import transformer_training


def test_settings_parse_and_bad_ones_are_refused(benchmark_script):
    mod = benchmark_script("bench_flags")
    assert mod.parse_set("") == []
    assert mod.parse_set("dplace.kernels.LINK_MOVES=-1, a.b.C=True") == [("dplace.kernels.LINK_MOVES", -1),
                                                                          ("a.b.C", True)]
    assert mod.parse_set("a.T=(3e-4, 1e-5),a.L=[1,2],a.K=1") == [("a.T", (3e-4, 1e-5)), ("a.L", [1, 2]), ("a.K", 1)]
    with pytest.raises(SystemExit):
        mod.parse_set("LINK_MOVES=1")


def test_a_setting_changes_the_child_s_run_and_the_makespan_is_simulated(benchmark_script, tmp_path):
    """The link policy on from the start (LINK_MOVES=0) against exact re-timing (-1): different schedules of the
    same sequential Transformer (its cascades pass any budget), each run's makespan dplace.simulate's."""
    from dplace.instance.io import save_instance

    mod = benchmark_script("bench_flags")
    inst = transformer_training(600, 4, comm="sequential")
    path = str(tmp_path / "t.json")
    save_instance(inst, path)
    got = {}
    for label, sets in (("exact", [("dplace.kernels.LINK_MOVES", -1)]), ("frozen", [("dplace.kernels.LINK_MOVES", 0)])):
        r = mod.run_one(path, "heft", sets, str(tmp_path / f"{label}.json"), [])
        data = json.loads((tmp_path / f"{label}.json").read_text())
        dev = {d.name: i for i, d in enumerate(inst.devices)}
        pl = [dev[data["placement"][op.id]] for op in inst.ops]
        order = [[inst.op_index[o] for o in data["order"][d.name]] for d in inst.devices]
        sim = dplace.simulate(inst, pl, order).makespan
        assert r["makespan"] == sim and r["cpu"] > 0
        got[label] = data["placement"], data["order"]
    assert got["exact"] != got["frozen"]
    with pytest.raises(SystemExit):
        mod.run_one(path, "heft", [("dplace.kernels.NO_SUCH", 1)], str(tmp_path / "x.json"), [])
