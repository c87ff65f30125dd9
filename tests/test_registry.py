"""The registry: one door to every method, and one error type for every option mistake."""
import dataclasses
import pickle
import typing

import pytest

import dplace
from dplace.cli import main
from dplace.errors import InvalidInstanceError, OptionError, bad_option
from dplace.registry import validate_options

WITH_OPTIONS = [m for m in dplace.methods() if dplace.method_info(m).options is not None
                and dataclasses.fields(dplace.method_info(m).options)]
TINY = "instances/tiny/diamond.json"


def test_unknown_method_lists_the_valid_names():
    with pytest.raises(InvalidInstanceError, match=r"unknown method 'nope'; valid: .*heft"):
        dplace.method_info("nope")


def test_every_method_is_reachable_with_one_signature():
    for name in dplace.methods():
        info = dplace.method_info(name)
        assert info.kind in ("heuristic", "exact", "baseline"), name
        params = typing.get_type_hints(info.func)
        assert params.get("return") in (dplace.Result, "Result"), name


@pytest.mark.parametrize("method", WITH_OPTIONS)
def test_option_of_the_wrong_type_is_an_option_error(method):
    """Every option of every method, given an object of no declared type: an OptionError naming the
    method, the option and the value, never a TypeError from inside the method."""
    for f in dataclasses.fields(dplace.method_info(method).options):
        with pytest.raises(OptionError, match=rf"method '{method}': option '{f.name}' must be .*, got \[\]"):
            validate_options(method, {f.name: []})


def test_strings_from_the_command_line_are_converted():
    assert validate_options("celeritas", {"R": "7", "M": "0.5"}) == {"R": 7, "M": 0.5}
    assert validate_options("m_etf_capped", {"unit_cap": "0.5", "fusion": "off"}) == {"unit_cap": 0.5, "fusion": False}
    assert validate_options("os_dpos", {"max_dpos_runs": "none"}) == {"max_dpos_runs": None}
    with pytest.raises(OptionError, match=r"option 'R' must be an integer, got 'seven'"):
        validate_options("celeritas", {"R": "seven"})


@pytest.mark.parametrize("method, option, value, words", [
    ("celeritas", "R", 0, "an integer >= 1"), ("m_sct", "threshold", 1.5, "in (0, 1)"),
    ("os_dpos", "max_dpos_runs", -1, ">= 0"), ("refine", "coarse_share", 2.0, "in [0, 1]"),
    ("milp", "solver", "glpk", "cbc or highs"), ("metis", "ufactor", 0, "in 1..10000"),
])
def test_a_range_mistake_reads_the_same_in_every_method(method, option, value, words):
    msg = str(bad_option(option, words, value))
    with pytest.raises(OptionError) as ei:
        validate_options(method, {option: value})
    assert str(ei.value) == f"method '{method}': {msg}"


def test_unknown_option_and_no_options():
    with pytest.raises(OptionError, match=r"method 'celeritas': unknown option 'r'; valid: M, R$"):
        validate_options("celeritas", {"r": 1})
    no_opts = [m for m in dplace.methods() if dplace.method_info(m).options is None]
    for m in no_opts[:1]:
        with pytest.raises(OptionError, match="takes no options"):
            validate_options(m, {"x": 1})


def test_option_error_is_picklable_and_an_invalid_input():
    exc = pickle.loads(pickle.dumps(bad_option("R", ">= 1", 0)))
    assert isinstance(exc, OptionError) and isinstance(exc, InvalidInstanceError) and isinstance(exc, ValueError)
    assert str(exc) == "option 'R' must be >= 1, got 0"


def test_cli_one_line_and_exit_2(capsys):
    assert main(["solve", TINY, "--method", "celeritas", "-o", "R=0"]) == 2
    err = capsys.readouterr().err
    assert err == "dplace: error: method 'celeritas': option 'R' must be an integer >= 1, got 0\n"
