import json

import pytest

import dplace
from dplace.cli import main
from dplace.instance.io import instance_to_dict, save_instance
from dplace.testing import colocated, diamond


@pytest.fixture
def inst_file(tmp_path):
    p = tmp_path / "inst.json"
    save_instance(diamond("sequential"), p)
    return p


def test_roundtrip_json(tmp_path):
    inst = colocated()
    p = tmp_path / "c.json"
    save_instance(inst, p)
    back = dplace.load_instance(p)
    assert instance_to_dict(back) == instance_to_dict(inst)
    assert back.groups == inst.groups


def test_unknown_fields_are_kept(tmp_path):
    d = instance_to_dict(diamond())
    d["ops"][0]["forward_of"] = "x"
    d["ops"][0]["split"] = {"dims": {"batch": 4}}
    d["extra_top"] = 1
    inst = dplace.instance_from_dict(d)
    assert inst.ops[0].extra["forward_of"] == "x"
    assert instance_to_dict(inst)["extra_top"] == 1


def test_solve_then_evaluate_agree(inst_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["solve", str(inst_file), "--method", "heft", "--json", "--out", str(out),
                 "--gantt", str(tmp_path / "g.png"), "--trace", str(tmp_path / "t.json")]) == 0
    solved = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(inst_file), str(out), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["makespan"] == pytest.approx(solved["makespan"]) and ev["makespan_agrees"]
    assert ev["check"] == "valid"
    assert (tmp_path / "g.png").stat().st_size > 1000
    trace = json.loads((tmp_path / "t.json").read_text())
    assert any(e.get("cat") == "transfer" for e in trace["traceEvents"])


def test_evaluate_rejects_tampered_schedule(inst_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    main(["solve", str(inst_file), "--method", "heft", "--out", str(out)])
    data = json.loads(out.read_text())
    data["schedule"][-1]["start"] -= 0.5
    data["schedule"][-1]["end"] -= 0.5
    out.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["evaluate", str(inst_file), str(out), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["check"] != "valid"


def test_compare_table(inst_file, capsys):
    assert main(["compare", str(inst_file), "--methods", "single,heft"]) == 0
    out = capsys.readouterr().out
    assert "heft" in out and "single" in out and "gap" in out


def test_compare_json(inst_file, capsys):
    assert main(["compare", str(inst_file), "--methods", "single,heft", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in data["rows"]] == ["single", "heft"]
    assert all(r["makespan"] >= data["best_lower_bound"] for r in data["rows"])


def test_compare_out_saves_the_rows(inst_file, tmp_path, capsys):
    out = tmp_path / "cmp.json"
    assert main(["compare", str(inst_file), "--methods", "single,heft", "--time-limit", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["format"] == "dplace-compare/1" and data["interrupted"] is False and data["time_limit_s"] == 5
    assert [r["method"] for r in data["rows"]] == ["single", "heft"] and "heft" in printed
    heft = dplace.solve(dplace.load_instance(inst_file), "heft")
    assert data["rows"][1]["makespan"] == pytest.approx(heft.makespan) and data["rows"][1]["check"] == "valid"
    # an unwritable --out: one line, exit 2, nothing left behind
    (tmp_path / "adir").mkdir()
    assert main(["compare", str(inst_file), "--methods", "heft", "--out", str(tmp_path / "adir")]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "cmp.json", "inst.json"]


def test_info_and_methods(inst_file, capsys):
    assert main(["info", str(inst_file), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["ops"] == 4 and info["lower_bound"] > 0
    assert main(["methods", "--json"]) == 0
    names = [m["name"] for m in json.loads(capsys.readouterr().out)]
    assert "heft" in names and "single" in names


def test_single_says_no_solution_when_no_device_holds_everything(tmp_path, capsys):
    from dplace.testing import tight_memory

    res = dplace.solve(tight_memory(), "single")  # a split fits: not "infeasible", only single's failure
    assert res.status == "no_solution" and res.placement is None and "no device holds" in res.message


def test_default_instance_heft_solve_evaluate_check_agree(tmp_path, capsys):
    """Issue #2 done-when: solve the make-run instance with heft; evaluate and check accept it, same makespan."""
    from pathlib import Path

    default = Path(__file__).resolve().parents[2] / "instances" / "bert12_training_4dev.json"
    out = tmp_path / "r.json"
    assert main(["solve", str(default), "--method", "heft", "--json", "--out", str(out)]) == 0
    solved = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(default), str(out), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["makespan"] == solved["makespan"] and ev["check"] == "valid" and ev["memory_ok"]
    inst = dplace.load_instance(default)
    assert dplace.check(inst, json.loads(out.read_text())).ok


def _one_error_line(capsys, *needles):
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


@pytest.mark.parametrize("bad", ["--out", "--gantt", "--trace"])
def test_solve_output_is_a_directory_writes_nothing(inst_file, tmp_path, capsys, bad):
    """One unwritable output: exit 2, one line naming it, and none of the other outputs written."""
    d = tmp_path / "adir"
    d.mkdir()
    paths = {"--out": tmp_path / "r.json", "--gantt": tmp_path / "g.png", "--trace": tmp_path / "t.json"}
    paths[bad] = d
    argv = ["solve", str(inst_file), "--method", "heft"]
    for flag, p in paths.items():
        argv += [flag, str(p)]
    assert main(argv) == 2
    _one_error_line(capsys, "adir", "is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "inst.json"]
    assert list(d.iterdir()) == []


def test_output_under_a_file_is_one_line(inst_file, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["solve", str(inst_file), "--method", "heft", "--out", str(tmp_path / "f" / "r.json")]) == 2
    _one_error_line(capsys, "cannot write")


def test_evaluate_gantt_into_directory(inst_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["solve", str(inst_file), "--method", "heft", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(inst_file), str(out), "--gantt", str(tmp_path)]) == 2
    _one_error_line(capsys, "is a directory")


@pytest.mark.parametrize("opt, flag", [("seed=1", "--seed"), ("time_limit_s=3", "--time-limit")])
def test_option_that_is_a_flag(inst_file, capsys, opt, flag):
    assert main(["solve", str(inst_file), "--method", "metis", "-o", opt]) == 2
    _one_error_line(capsys, flag)


def test_nan_option_value_rejected(inst_file, capsys):
    assert main(["solve", str(inst_file), "--method", "os_dpos", "-o", "split_overhead_us=nan"]) == 2
    _one_error_line(capsys, "split_overhead_us", "nan")


@pytest.mark.parametrize("argv, needle", [
    (["--methods", "heft", "--time-limit", "-1"], "--time-limit: must be a finite number of seconds > 0"),
    (["--methods", "heft", "--time-limit", "0"], "--time-limit: must be a finite number of seconds > 0"),
    (["--methods", "heft", "--time-limit", "inf"], "got 'inf'"),
    (["--methods", ","], "--methods: no method named"),
])
def test_compare_bad_options_exit_2(inst_file, capsys, argv, needle):
    assert main(["compare", str(inst_file), *argv]) == 2
    _one_error_line(capsys, needle)


def test_evaluate_does_not_pass_on_the_files_bound(inst_file, tmp_path, capsys):
    """A result file's lower bound is a claim: evaluate prints the bound it proves itself."""
    out = tmp_path / "r.json"
    assert main(["solve", str(inst_file), "--method", "heft", "--json", "--out", str(out)]) == 0
    solved = json.loads(capsys.readouterr().out)
    data = json.loads(out.read_text())
    data["lower_bound"] = data["makespan"]  # tampered: would make the result look optimal
    out.write_text(json.dumps(data))
    assert main(["evaluate", str(inst_file), str(out), "--json"]) == 0
    ev = json.loads(capsys.readouterr().out)
    assert ev["lower_bound"] == pytest.approx(dplace.lower_bound(dplace.load_instance(inst_file)))
    assert ev["lower_bound"] == pytest.approx(solved["lower_bound"]) and ev["lower_bound"] < ev["makespan"]
    assert ev["recorded_lower_bound"] == data["makespan"] and ev["gap"] > 0


def test_compare_best_bound_ignores_transformed_graphs(tmp_path, capsys):
    """OS-DPOS solves a split graph: its bound is not a bound of the instance compared, so the table's
    best bound comes from the other rows only."""
    from dplace.instance.model import Device, Edge, Instance, Link, Op

    split = {"dims": {"batch": 3}}
    ops = [Op("a", 10.0, 1), Op("H", 90.0, 6, type="MatMul", extra={"split": split}), Op("b", 10.0, 1)]
    inst = Instance("hand", [Device(f"g{i}", 1000) for i in range(3)], ops,
                    [Edge("a", "H", 0.0), Edge("H", "b", 0.0)], link=Link(5.0, 1000.0))
    p = tmp_path / "hand.json"
    save_instance(inst, p)
    assert main(["compare", str(p), "--methods", "heft,os_dpos", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    rows = {r["method"]: r for r in d["rows"]}
    assert rows["os_dpos"]["transformed"] and not rows["heft"]["transformed"]
    assert rows["os_dpos"]["makespan"] < rows["heft"]["lower_bound"]  # 60 on the split graph, below 110
    assert d["best_lower_bound"] == pytest.approx(rows["heft"]["lower_bound"])


MALFORMED_RESULTS = {
    "schedule_not_a_list": (lambda d: d.update(schedule="x"), 1, None),
    "schedule_row_not_an_object": (lambda d: d["schedule"].__setitem__(0, "x"), 1, None),
    "start_not_a_number": (lambda d: d["schedule"][0].update(start="x"), 1, None),
    "transfers_not_objects": (lambda d: d.update(transfers=[[1]]), 1, None),
    "order_not_lists": (lambda d: d.update(order=[1, 2]), 2, "order: expected one list of ops per device"),
    "order_device_not_a_list": (lambda d: d.update(order={"d0": 1}), 2, "order: device 'd0' must map to a list"),
    "makespan_not_a_number": (lambda d: d.update(makespan="x"), 2, "makespan must be a number or null"),
    "solve_time_not_a_number": (lambda d: d.update(solve_time_s="x"), 2, "solve_time_s must be a number"),
    "options_not_an_object": (lambda d: d.update(options=[1]), 2, "options must be an object"),
    "extra_not_an_object": (lambda d: d.update(extra=[1]), 2, "extra must be an object"),
    "transform_unknown": (lambda d: d.update(transform={"kind": "zoom", "params": {}}), 2,
                          "transform.kind must be one of fastt, got 'zoom'"),
    "transform_splits_not_a_list": (lambda d: d.update(transform={"kind": "fastt", "params": {"splits": "x"}}), 2,
                                    "splits must be a list of [op, dim, n]"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED_RESULTS))
def test_evaluate_malformed_result_file(inst_file, tmp_path, capsys, case):
    """Wrong JSON types in a result file: either a one-line error (exit 2) or an invalid check (exit 1),
    never a traceback."""
    mutate, code, needle = MALFORMED_RESULTS[case]
    out = tmp_path / "r.json"
    assert main(["solve", str(inst_file), "--method", "heft", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    mutate(data)
    out.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["evaluate", str(inst_file), str(out), "--json"]) == code
    if code == 2:
        _one_error_line(capsys, needle)
    else:
        ev = json.loads(capsys.readouterr().out)
        assert ev["check"] != "valid" and ev["check_resimulated"] == "valid"
        assert not dplace.check(dplace.load_instance(inst_file), data).ok


def test_every_command_and_argument_has_help():
    """`dplace COMMAND --help` explains every command, positional and flag."""
    import argparse

    from dplace.cli import build_parser

    missing = []

    def walk(p, path):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                helps = {c.dest: c.help for c in a._choices_actions}
                for name, sp in a.choices.items():
                    if not helps.get(name) or not sp.description:
                        missing.append(f"{path} {name}")
                    walk(sp, f"{path} {name}")
            elif not a.help or a.help == argparse.SUPPRESS:
                missing.append(f"{path} {a.option_strings or a.dest}")

    walk(build_parser(), "dplace")
    assert missing == []


def test_a_path_not_built_yet_is_one_line_exit_2(monkeypatch, capsys):
    import dplace.cli as cli

    def unbuilt(args):
        raise NotImplementedError("execute: split results not yet with --workers\n(detail)")

    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with_func(parser(), unbuilt))
    assert main(["methods"]) == 2
    err = capsys.readouterr().err
    assert err == "dplace: error: not implemented yet: execute: split results not yet with --workers\n"


def _with_func(p, func):
    p.set_defaults(func=func)
    sub = next(a for a in p._actions if a.dest == "command")
    for sp in sub.choices.values():
        sp.set_defaults(func=func)
    return p


def _program(tmp_path, *args: str, before: str = ""):
    """Run the ``dplace`` program (``dplace.cli.run``) in a process of its own, with ``before`` run first."""
    import subprocess
    import sys

    code = (f"import atexit, sys\n{before}\nfrom dplace.cli import run; "
            f"atexit.register(lambda: print('atexit ran', flush=True)); sys.argv = ['dplace', *{list(args)!r}]; run()")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)


def test_the_program_exits_with_main_code_after_atexit_and_flushed_output(tmp_path, inst_file):
    out = tmp_path / "r.json"
    p = _program(tmp_path, "solve", str(inst_file), "--method", "heft", "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "method heft" in p.stdout and p.stdout.rstrip().endswith("atexit ran")  # printed, flushed, in order
    assert json.loads(out.read_text())["method"] == "heft"
    p = _program(tmp_path, "solve", str(tmp_path / "missing.json"), "--method", "heft")
    assert p.returncode == 2 and "no such file" in p.stderr and "atexit ran" in p.stdout


def test_the_program_waits_for_a_thread_that_is_not_a_daemon(tmp_path):
    # the fast exit would kill it: the usual exit joins it, so its last line is written
    before = ("import threading, time; threading.Thread(target=lambda: (time.sleep(1.0), print('thread done', "
              "flush=True)), daemon=False).start()")
    p = _program(tmp_path, "methods", before=before)
    assert p.returncode == 0, p.stderr
    assert "thread done" in p.stdout


def test_the_program_keeps_freed_memory_where_the_c_library_is_glibc():
    """``dplace`` (``cli.run``) asks glibc's ``mallopt`` to keep freed memory for reuse (fewer page faults on
    large runs); elsewhere it changes nothing. Run in a process of its own."""
    import platform
    import subprocess
    import sys

    code = "from dplace.cli import _keep_freed_memory as k; print(k())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(platform.libc_ver()[0] == "glibc")
