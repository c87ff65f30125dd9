"""A clean clone is self-contained: the README's examples and instances/README.md's commands run in a fresh
``git clone`` of this repository (committed files only, nothing beside it: no ``../shared``), with this
environment's ``dplace``; the conversion commands reproduce the bundled instances byte for byte; docs and
``--help`` name no absolute path of one machine."""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DOCS = ["README.md", "instances/README.md", "instances/chains/README.md", "instances/tf/README.md"]


def _blocks(text: str, lang: str = "") -> list[str]:
    return re.findall(r"^```" + lang + r"\n(.*?)^```", text, flags=re.S | re.M)


def _commands(text: str) -> list[str]:
    """The command lines of a document's code blocks (``.venv/bin/...``), comments cut off."""
    out = []
    for block in _blocks(text):
        for line in block.splitlines():
            line = line.strip()
            if line.startswith(".venv/bin/"):
                out.append(line.split("  #")[0].strip())
    return out


def _run(cmd: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = shlex.split(cmd)
    argv[0] = str(BIN / argv[0][len(".venv/bin/"):])
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    dest = tmp_path_factory.mktemp("clone") / "dplace"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(dest)], check=True)
    assert not (dest.parent / "shared").exists()
    return dest


def _env(clone: Path) -> dict[str, str]:
    env = dict(os.environ, MPLBACKEND="Agg", DPLACE_PROGRESS="quiet")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def test_docs_and_help_name_no_absolute_path():
    texts = {p: (ROOT / p).read_text() for p in DOCS if (ROOT / p).exists()}
    for cmd in ("convert", "generate", "solve", "info", "compare", "bench", "pipeline"):
        r = subprocess.run([str(BIN / "dplace"), cmd, "--help"], capture_output=True, text=True)
        texts[f"dplace {cmd} --help"] = r.stdout
    for where, text in texts.items():
        assert "/work/" not in text and "../shared" not in text, where


@pytest.mark.slow
def test_readme_examples_run_in_a_clean_clone(clone):
    env = _env(clone)
    cmds = _commands((clone / "README.md").read_text())
    assert any(c.split()[1] == "convert" for c in cmds) and len(cmds) >= 6
    for cmd in cmds:
        r = _run(cmd, clone, env)
        assert r.returncode == 0, f"{cmd}\n{r.stderr[-2000:]}"
    for f in ("r.json", "g.png", "t.json", "big.json", "bert.json"):
        assert (clone / f).stat().st_size > 0, f
    (python,) = _blocks((clone / "README.md").read_text(), "python")
    r = subprocess.run([sys.executable, "-c", python], cwd=clone, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(r.stdout.split()) == 3


@pytest.mark.slow
def test_instance_commands_reproduce_the_bundled_files(clone):
    """instances/README.md's and instances/chains/README.md's commands, run in the clone from the
    bundled sources, write exactly the committed files (``git status`` stays clean). The chains README's
    benchmark command writes no committed file: its command line runs as written, on one chain and one
    processor count with a 1 s limit (the full sweep is up to 66 CP-SAT calls of 10 s)."""
    env = _env(clone)
    text = (clone / "instances" / "README.md").read_text()
    (block,) = [b for b in _blocks(text) if "dplace convert" in b]
    r = subprocess.run(["bash", "-ec", block.replace(".venv/bin/", f"{BIN}/")], cwd=clone, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    chains = [c for c in (clone / "instances" / "chains" / "README.md").read_text().splitlines()
              if c.strip().startswith(".venv/bin/")]
    assert chains
    assert any("benchmarks/" in c for c in chains)
    for cmd in chains:
        cmd = cmd.strip() + (" --chains alexnet --processors 2 --time-limit 1" if "benchmarks/" in cmd else "")
        r = subprocess.run(["bash", "-ec", cmd.replace(".venv/bin/", f"{BIN}/")], cwd=clone, env=env,
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
    st = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=clone, capture_output=True, text=True, check=True)
    assert st.stdout == "", st.stdout
