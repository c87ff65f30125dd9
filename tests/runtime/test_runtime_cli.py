"""``dplace profile`` / ``dplace execute`` bad input: one line, exit 2, before TensorFlow is imported."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dplace.cli import main

PROFILE = ["profile", "--model", "lstm", "--batch", "2", "--quiet"]


@pytest.mark.parametrize("extra, needle", [
    (["--model", "nope"], "--model: unknown model 'nope'"),
    (["--batch", "0"], "--batch must be >= 1, got 0"),
    (["--width", "-3"], "--width must be >= 1, got -3"),
    (["--seq-len", "0"], "--seq-len must be >= 1, got 0"),
    (["--steps", "0"], "--steps must be >= 1, got 0"),
    (["--warmup", "-1"], "--warmup must be >= 0, got -1"),
    (["--memory", "0"], "--memory must be >= 1, got 0"),
    (["--latency", "-1"], "--latency must be >= 0, got -1.0"),
    (["--bandwidth", "nan"], "--bandwidth must be finite, got nan"),
    (["--regress-from", "a,b"], "--regress-from must be distinct batch sizes"),
    (["--regress-from", "2,2"], "--regress-from must be distinct batch sizes"),
])
def test_profile_bad_arguments(tmp_path, capsys, extra, needle):
    out = tmp_path / "p.json"
    assert main([*PROFILE, *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not out.exists()


def _result(tmp_path, device):
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format": "dplace-result/1", "status": "heuristic", "placement": {"a": device}}))
    return p


@pytest.mark.parametrize("extra, needle", [
    (["--steps", "0"], "--steps must be >= 1, got 0"),
    (["--model", "nope"], "--model: unknown model"),
    ([], "device 'd0' is not a TensorFlow device name"),
])
def test_execute_bad_arguments(tmp_path, capsys, extra, needle):
    r = _result(tmp_path, "d0")
    assert main(["execute", "--result", str(r), "--model", "lstm", "--batch", "2", *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


def test_bad_arguments_do_not_start_tensorflow(tmp_path):
    """The checks run before TensorFlow is imported: no start-up lines, no seconds spent."""
    code = ("import sys; from dplace.cli import main; "
            f"rc = main({[*PROFILE, '--batch', '0', '--out', str(tmp_path / 'p.json')]!r}); "
            "sys.exit(rc if 'tensorflow' not in sys.modules else 99)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
