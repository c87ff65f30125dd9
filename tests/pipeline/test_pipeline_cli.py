"""``dplace pipeline``: text, JSON and Gantt output, statuses with their scope, one-line user errors."""
from __future__ import annotations

import argparse
import json

import pytest

from dplace import pipeline as pl
from dplace.errors import InfeasibleError, InvalidInstanceError
from dplace.pipeline import make_chain, save_chain


def _cli(argv):
    from dplace.pipeline.cli import add_cli

    ap = argparse.ArgumentParser(prog="dplace")
    add_cli(ap.add_subparsers(dest="command", required=True))
    args = ap.parse_args(argv)
    return args.func(args)


def test_cli_text_json_gantt(tmp_path, capsys):
    f = tmp_path / "c.json"
    save_chain(make_chain([(1, 1), (2, 2), (1, 1)], weights=[1, 2, 1], activations=[1, 1, 1], processors=2), f)
    assert _cli(["pipeline", str(f), "--memory", "8"]) == 0
    out = capsys.readouterr().out
    assert "period 6" in out and "NCA per layer: l1=2 l2=1 l3=1" in out and "p1 |" in out
    assert _cli(["pipeline", str(f), "--allocation", "general", "--k", "2", "--json",
                 "--gantt", str(tmp_path / "g.png")]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["period"] == 12 and d["normalised_period"] == 6 and (tmp_path / "g.png").stat().st_size > 1000
    assert _cli(["pipeline", str(f), "--bandwidth", "1", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert any(r.startswith("link") for r in d["pattern"]["resources"])
    assert _cli(["pipeline", str(f), "--bandwidth", "1", "--processors", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)  # 4 processors, fewer stages: unused ones hold nothing
    assert len(d["memory_used"]) == 4 and d["memory_used"][3] == 0


def test_cli_statuses_say_their_scope(tmp_path, capsys):
    f = tmp_path / "t4.json"
    save_chain(pl.theorem4_chain(3), f)
    assert _cli(["pipeline", str(f)]) == 0
    out = capsys.readouterr().out
    assert "k = 3, normalised period T/k 2.66667 µs" in out and "status feasible; proven T/k >= 2 µs" in out
    assert "period 4 µs, optimal over 1-periodic contiguous patterns" in out
    assert _cli(["pipeline", str(f), "--k", "1"]) == 0
    out = capsys.readouterr().out
    assert "status optimal over 1-periodic patterns of contiguous allocations only" in out
    assert _cli(["pipeline", str(f), "--k", "4", "--json"]) == 0  # 4 groups at most: k = 4 gains nothing
    d = json.loads(capsys.readouterr().out)
    assert d["status"] == "feasible" and d["optimal_over"] is None and d["normalised_period"] == 5
    assert "above the 1-periodic 4" in d["extra"]["worse_than_1_periodic"]
    assert _cli(["pipeline", str(f), "--k", "4"]) == 0
    assert "warning: T/k 5 with k = 4 is above the 1-periodic 4" in capsys.readouterr().out


def test_cli_user_errors(tmp_path):
    from dplace.errors import DplaceError

    f = tmp_path / "c.json"
    save_chain(make_chain([1, 2, 1], weights=[1, 2, 1], processors=2), f)
    with pytest.raises(InfeasibleError):
        _cli(["pipeline", str(f), "--memory", "2"])
    with pytest.raises(DplaceError, match="--memory must be"):
        _cli(["pipeline", str(f), "--memory", "lots"])
    with pytest.raises(DplaceError, match="--bandwidth must be a number > 0 or none, got '0'"):
        _cli(["pipeline", str(f), "--bandwidth", "0"])
    with pytest.raises(DplaceError, match="--max-k must be >= 1, got 0"):
        _cli(["pipeline", str(f), "--max-k", "0"])
    for t in ("-1", "0", "nan"):
        with pytest.raises(DplaceError, match="--time-limit must be a number of seconds > 0"):
            _cli(["pipeline", str(f), "--allocation", "general", "--time-limit", t])
    (tmp_path / "bad.json").write_text('{"layers": [{"id": "a", "forward": -3, "backward": 0}]}')
    with pytest.raises(InvalidInstanceError, match="forward must be >= 0, got -3"):
        _cli(["pipeline", str(tmp_path / "bad.json")])


def test_main_cli_wires_pipeline(tmp_path, capsys):
    from dplace.cli import main

    f = tmp_path / "c.json"
    save_chain(make_chain([1, 2, 1], weights=[1, 2, 1], processors=2), f)
    assert main(["pipeline", str(f), "--allocation", "general", "--memory", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["period"] == 2
    assert main(["pipeline", str(f), "--memory", "2"]) == 2  # no contiguous allocation fits
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no contiguous allocation" in err


def test_cli_method_cpsat_and_its_other_name_milp(tmp_path, capsys):
    f = tmp_path / "c.json"
    save_chain(make_chain([1, 2, 1], processors=2), f)
    for method in ("cpsat", "milp"):
        assert _cli(["pipeline", str(f), "--method", method, "--k", "1", "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["method"] == "contiguous_cpsat" and d["period"] == 3
    with pytest.raises(InvalidInstanceError, match="method must be cpsat for general allocations, got 'dp'"):
        _cli(["pipeline", str(f), "--allocation", "general", "--method", "dp"])
