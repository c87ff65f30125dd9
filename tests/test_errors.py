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
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_instance_exit_2_one_line(case, tmp_path, capsys):
    fn, expect = CASES[case]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(mutate(fn)))
    out = tmp_path / "out.json"
    code = main(["solve", str(p), "--method", "heft", "--out", str(out)])
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
