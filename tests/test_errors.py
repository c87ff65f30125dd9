"""Every malformed input of issue #2 §2: exit code 2, one line naming the field and value, no output file."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from dplace.cli import main

BASE = {
    "format": "dplace-instance/1", "name": "e",
    "devices": [{"name": "g0", "memory": 100, "speed": 1.0}, {"name": "g1", "memory": 100}],
    "links": {"latency": 1, "bandwidth": 10},
    "comm": "parallel",
    "ops": [{"id": "a", "time": 1, "memory": 10}, {"id": "b", "time": 2, "memory": 10}, {"id": "c", "time": 3}],
    "edges": [{"src": "a", "dst": "b", "bytes": 5}, {"src": "b", "dst": "c", "bytes": 5}],
}


def mutate(fn):
    d = json.loads(json.dumps(BASE))
    fn(d)
    return d


CASES = {
    "cycle": (lambda d: d["edges"].append({"src": "c", "dst": "a", "bytes": 1}), "cycle through edge"),
    "self_loop": (lambda d: d["edges"].append({"src": "c", "dst": "c"}), "cycle through edge 'c'->'c'"),
    "unknown_edge_op": (lambda d: d["edges"].append({"src": "a", "dst": "zz"}), "unknown op 'zz'"),
    "duplicate_op": (lambda d: d["ops"].append({"id": "a", "time": 1}), "duplicate op id 'a'"),
    "duplicate_device": (lambda d: d["devices"].append({"name": "g0", "memory": 1}), "duplicate device name 'g0'"),
    "negative_time": (lambda d: d["ops"][0].update(time=-3), "op 'a': time must be >= 0, got -3"),
    "nan_time": (lambda d: d["ops"][1].update(time=math.nan), "op 'b': time must be finite"),
    "inf_bytes": (lambda d: d["edges"][0].update(bytes=math.inf), "edge 'a'->'b': bytes must be finite"),
    "negative_memory": (lambda d: d["ops"][0].update(memory=-1), "op 'a': memory must be >= 0"),
    "zero_bandwidth": (lambda d: d["links"].update(bandwidth=0), "links: bandwidth must be > 0"),
    "bad_speed": (lambda d: d["devices"][0].update(speed=0), "device 'g0': speed must be > 0"),
    "unknown_pin": (lambda d: d["ops"][0].update(device="gpu9"), "op 'a': device 'gpu9' does not exist"),
    "group_too_big": (lambda d: [o.update(colocation="g", memory=60) for o in d["ops"][:2]],
                      "colocation 'g': memory 120 is larger than every device"),
    "op_too_big": (lambda d: d["ops"][2].update(memory=1000), "op 'c': memory 1000 is larger than every device"),
    "bad_comm": (lambda d: d.update(comm="broadcast"), "comm must be one of parallel, sequential, got 'broadcast'"),
    "bad_format": (lambda d: d.update(format="other/1"), "format must be 'dplace-instance/1'"),
    "time_string": (lambda d: d["ops"][0].update(time="fast"), "op 'a': time must be a number, got 'fast'"),
    "hetero_missing_device": (lambda d: d["ops"][0].update(time={"g0": 1}), "op 'a': time has no entry for device 'g1'"),
    "missing_ops": (lambda d: d.pop("ops"), "missing field 'ops'"),
    # value limits (README "Value limits"): every sum a method forms stays representable
    "huge_time": (lambda d: d["ops"][0].update(time=1e308), "op 'a': time must be <= 1e+18 µs, got 1e+308"),
    "huge_int_time": (lambda d: d["ops"][0].update(time=10**400), "op 'a': time must be <= 1e+18 µs, got an integer of 401 digits"),
    "huge_hetero_time": (lambda d: d["ops"][0].update(time={"g0": 1, "g1": 1e300}), "op 'a': time['g1'] must be <= 1e+18 µs"),
    "huge_bytes": (lambda d: d["edges"][0].update(bytes=1e308), "edge 'a'->'b': bytes must be <= 1e+18, got 1e+308"),
    "tiny_bandwidth": (lambda d: d["links"].update(bandwidth=1e-320), "links: bandwidth must be >= 1e-06 bytes/µs, got 1e-320"),
    "tiny_pair_bandwidth": (lambda d: d["links"].update(pairs=[{"src": "g0", "dst": "g1", "bandwidth": 1e-9}]),
                            "links.pairs g0->g1: bandwidth must be >= 1e-06"),
    "huge_latency": (lambda d: d["links"].update(latency=1e19), "links: latency must be <= 1e+18 µs, got 1e+19"),
    "huge_memory": (lambda d: d["devices"][0].update(memory=1e300), "device 'g0': memory must be <= 9.0072e+15 bytes"),
    "huge_op_memory": (lambda d: d["ops"][0].update(memory=2**60), "op 'a': memory must be <= 9.0072e+15 bytes, got 1.15e+18"),
    "tiny_speed": (lambda d: d["devices"][1].update(speed=1e-9), "device 'g1': speed must be >= 1e-06, got 1e-09"),
    "serial_too_long": (lambda d: d.update(ops=[{"id": f"o{i}", "time": 1e18} for i in range(2)], edges=[],
                                           devices=[{"name": "g0", "memory": 1, "speed": 0.5}]),
                        "instance: ops and transfers one after another take 4e+18 µs"),
    "empty_ops": (lambda d: d.update(ops=[], edges=[]), "ops: at least one op is required, got an empty list"),
    "pinned_too_big": (lambda d: [o.update(device="g0", memory=60) for o in d["ops"][:2]],
                       "device 'g0': the ops pinned to it need 120 bytes of memory, it has 100"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_instance_exit_2_one_line(case, tmp_path, capsys):
    fn, expect = CASES[case]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(mutate(fn)))
    out = tmp_path / "out.json"
    code = main(["solve", str(p), "--method", "heft", "--out", str(out), "--gantt", str(tmp_path / "g.png"),
                 "--trace", str(tmp_path / "t.json")])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert expect in lines[0]
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [p]  # nothing half-written


def test_not_json(tmp_path, capsys):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    assert main(["info", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not JSON" in err[0]


def test_missing_file(tmp_path, capsys):
    assert main(["info", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_unknown_method_lists_valid(tmp_path, capsys):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(BASE))
    assert main(["solve", str(p), "--method", "nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'nope'" in err and "heft" in err


def test_unknown_option(tmp_path, capsys):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(BASE))
    assert main(["solve", str(p), "--method", "heft", "-o", "zap=1"]) == 2
    assert "unknown option 'zap'" in capsys.readouterr().err


def test_real_entry_point_no_traceback(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(mutate(CASES["cycle"][0])))
    exe = Path(sys.executable).with_name("dplace")
    proc = subprocess.run([str(exe), "info", str(p)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("case", ["pinned_too_big", "empty_ops", "huge_bytes"])
@pytest.mark.parametrize("argv", [["info"], ["solve", "--method", "cpsat", "--gantt", "g.png"],
                                  ["compare", "--methods", "heft,cpsat,refine"]])
def test_every_command_rejects_at_load(case, argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps(mutate(CASES[case][0])))
    assert main([argv[0], "bad.json", *argv[1:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and CASES[case][1] in err[0], err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["bad.json"]


@pytest.mark.parametrize("text, expect", [
    ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
    ('{"format": "dplace-instance/1", "ops": [{"id": "a", "time": ' + "9" * 5000 + "}]}", "JSON value out of range"),
])
def test_json_beyond_the_parser(text, expect, tmp_path, capsys):
    p = tmp_path / "deep.json"
    p.write_text(text)
    assert main(["solve", str(p), "--method", "heft", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expect in err[0] and "deep.json" in err[0], err
    assert list(tmp_path.iterdir()) == [p]


@pytest.mark.parametrize("flag", ["--out", "--gantt", "--trace"])
def test_output_equal_to_the_input_is_refused(flag, tmp_path, capsys):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(BASE))
    before = p.read_text()
    assert main(["solve", str(p), "--method", "heft", flag, str(tmp_path / "." / "ok.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag} " in err[0] and "is the input instance file" in err[0], err
    assert p.read_text() == before and list(tmp_path.iterdir()) == [p]


def test_two_outputs_on_one_file_are_refused(tmp_path, capsys):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(BASE))
    assert main(["solve", str(p), "--method", "heft", "--out", str(tmp_path / "r.json"), "--trace",
                 str(tmp_path / "r.json")]) == 2
    assert "--trace" in capsys.readouterr().err and list(tmp_path.iterdir()) == [p]


def test_evaluate_result_equal_to_output_is_refused(tmp_path, capsys):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(BASE))
    assert main(["solve", str(p), "--method", "heft", "--out", str(tmp_path / "r.json")]) == 0
    before = (tmp_path / "r.json").read_text()
    assert main(["evaluate", str(p), str(tmp_path / "r.json"), "--trace", str(tmp_path / "r.json")]) == 2
    assert "is the input result file" in capsys.readouterr().err
    assert (tmp_path / "r.json").read_text() == before


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-2", "soon"])
def test_time_limit_must_be_finite_and_positive(value, tmp_path, capsys):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(BASE))
    assert main(["solve", str(p), "--method", "heft", "--time-limit", value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--time-limit" in err[0] and repr(value) in err[0], err


def _claimed(tmp_path, capsys, changes):
    p = tmp_path / "ok.json"
    p.write_text(json.dumps(BASE))
    r = tmp_path / "r.json"
    assert main(["solve", str(p), "--method", "heft", "--out", str(r)]) == 0
    data = json.loads(r.read_text())
    data.update(changes(data))
    r.write_text(json.dumps(data))
    capsys.readouterr()
    code = main(["evaluate", str(p), str(r), "--gantt", str(tmp_path / "g.png")])
    return code, capsys.readouterr().err.strip().splitlines(), data


def test_evaluate_rejects_a_bound_above_the_makespan(tmp_path, capsys):
    code, err, data = _claimed(tmp_path, capsys, changes=lambda d: {"status": "optimal",
                                                                    "lower_bound": d["makespan"] * 1.125})
    assert code == 2 and len(err) == 1, err
    assert f"lower_bound {data['lower_bound']:g} is above the makespan {data['makespan']:g}" in err[0]
    assert not (tmp_path / "g.png").exists()


def test_evaluate_rejects_optimal_without_a_closing_bound(tmp_path, capsys):
    code, err, data = _claimed(tmp_path, capsys, changes=lambda d: {"status": "optimal",
                                                                    "lower_bound": d["makespan"] * 0.5})
    assert code == 2 and len(err) == 1, err
    assert "status 'optimal' but lower_bound" in err[0] and "gap of 50.0 %" in err[0]


def test_evaluate_rejects_a_nan_bound(tmp_path, capsys):
    code, err, _ = _claimed(tmp_path, capsys, changes=lambda d: {"lower_bound": math.nan})
    assert code == 2 and len(err) == 1 and "lower_bound must be finite, got nan" in err[0], err


def test_evaluate_accepts_an_optimal_claim_that_holds(tmp_path, capsys):
    code, err, _ = _claimed(tmp_path, capsys, changes=lambda d: {"status": "optimal", "lower_bound": d["makespan"]})
    assert code == 0, err


def test_python_api_type_errors_are_dplace_errors(tmp_path):
    import dplace

    inst = dplace.instance_from_dict(BASE)
    with pytest.raises(dplace.InvalidInstanceError, match="time_limit_s must be a number of seconds, got '5'"):
        dplace.solve(inst, "cpsat", time_limit_s="5")
    with pytest.raises(dplace.InvalidInstanceError, match="time_limit_s must be a finite number"):
        dplace.solve(inst, "heft", time_limit_s=math.inf)
    with pytest.raises(dplace.InvalidInstanceError, match=r"instance must be a dplace.Instance, got str 'path.json'"):
        dplace.solve("path.json", "heft")
    with pytest.raises(dplace.InvalidInstanceError, match="seed must be an integer"):
        dplace.solve(inst, "heft", seed="1")
    with pytest.raises(dplace.InvalidInstanceError, match="method must be a method name"):
        dplace.solve(inst, None)


def test_convert_out_equal_to_its_input_is_refused(tmp_path, capsys):
    src = tmp_path / "g.dot"
    src.write_text("digraph g { a [Weight=3]; b [Weight=2]; a -> b [Weight=1]; }\n")
    before = src.read_text()
    assert main(["convert", "dot", str(src), "--out", str(src)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is the input graph file" in err[0], err
    assert src.read_text() == before
