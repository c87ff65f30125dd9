"""The command table: every row adds its command, in the table's order, and only light modules load."""
import subprocess
import sys

import pytest

from dplace.cli import COMMANDS, Command, build_parser, main


def _choices(parser):
    return list(parser._subparsers._group_actions[0].choices)


def test_every_row_adds_its_command_in_order():
    names = [c.name for c in COMMANDS]
    assert len(set(names)) == len(names)
    assert _choices(build_parser()) == names
    assert {"info", "methods", "solve", "evaluate", "compare", "generate", "convert", "bench", "pipeline",
            "profile", "execute"} <= set(names)


def test_a_row_that_adds_another_command_is_caught(monkeypatch):
    import dplace.cli as cli

    monkeypatch.setattr(cli, "COMMANDS", (Command("status", "dplace.cli.info:add_info"),))
    with pytest.raises(RuntimeError, match="did not add the command 'status'"):
        build_parser()


def test_a_row_whose_module_is_not_installed_is_left_out(monkeypatch):
    import dplace.cli as cli

    monkeypatch.setattr(cli, "COMMANDS", (cli.COMMANDS[0], Command("x", "dplace_no_such_module:add"),
                                          Command("y", "dplace_no_such_package.cli:add")))
    assert _choices(build_parser()) == [cli.COMMANDS[0].name]


def test_building_the_parser_loads_no_solver_or_tensorflow():
    code = ("import sys, dplace.cli; dplace.cli.build_parser(); "
            "print(sorted(m for m in ('tensorflow', 'pulp', 'highspy', 'ray') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_python_dash_m_runs_the_same_command(capsys):
    proc = subprocess.run([sys.executable, "-m", "dplace.cli", "info"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == "dplace info: error: the following arguments are required: instance\n"
    assert main(["info"]) == 2
    assert capsys.readouterr().err == proc.stderr
