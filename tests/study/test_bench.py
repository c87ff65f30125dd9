"""``dplace bench``: rows, resume, failures as rows, hard timeouts, local vs Ray, reports and CLI."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

import dplace
from dplace import registry, study as bench
from dplace.study import aggregate, report_markdown, summarize
from dplace.study import pair

SMALL = Path(__file__).resolve().parents[2] / "instances" / "suites" / "small"
THREE = ["small_01_lowccr.json", "small_06_coloc_pin.json", "small_07_sequential.json"]
INIT = "tests.study.test_bench:register_test_methods"
TEST_METHODS = ("_bench_roundrobin", "_bench_fail", "_bench_hang", "_bench_print", "_bench_crash")
# fields that legitimately differ between two runs of the same pair
VOLATILE = {"time_s", "wall_s", "host", "traceback"}


# ---------------------------------------------------------------------------------------------- helpers
def register_test_methods() -> None:
    """Called in bench workers (``worker_init``) and by the fixture below; idempotent."""
    if "_bench_roundrobin" not in registry._METHODS:

        @registry.register("_bench_roundrobin", summary="test: ops round-robin over the devices", kind="baseline")
        def _roundrobin(inst, *, time_limit_s=None, seed=0):
            pl = [inst.pinned[o] if inst.pinned[o] >= 0 else o % inst.m for o in range(inst.n)]
            for members in inst.groups:  # keep colocation groups together
                for o in members:
                    pl[o] = pl[members[0]]
            return dplace.make_result(inst, "_bench_roundrobin", pl)

    if "_bench_fail" not in registry._METHODS:

        @registry.register("_bench_fail", summary="test: always raises", kind="baseline")
        def _fail(inst, *, time_limit_s=None, seed=0):
            raise RuntimeError(f"boom on {inst.name}")

    if "_bench_print" not in registry._METHODS:

        @registry.register("_bench_print", summary="test: prints like a solver log", kind="baseline")
        def _print(inst, *, time_limit_s=None, seed=0):
            print("chatty method", flush=True)
            return dplace.make_result(inst, "_bench_print", [0] * inst.n)

    if "_bench_crash" not in registry._METHODS:

        @registry.register("_bench_crash", summary="test: kills its own process", kind="baseline")
        def _crash(inst, *, time_limit_s=None, seed=0):
            import os

            os._exit(3)

    if "_bench_hang" not in registry._METHODS:

        @registry.register("_bench_hang", summary="test: ignores its time limit", kind="baseline")
        def _hang(inst, *, time_limit_s=None, seed=0):
            time.sleep(120)
            raise AssertionError("not killed")


@pytest.fixture
def test_methods():
    registry.methods()  # load the real ones first
    register_test_methods()
    yield
    for name in TEST_METHODS:
        registry._METHODS.pop(name, None)
    pair._INIT_DONE.discard(INIT)


@pytest.fixture
def suite(tmp_path):
    d = tmp_path / "suite"
    d.mkdir()
    for f in THREE:
        shutil.copy(SMALL / f, d / f)
    return d


def comparable(rows):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def assert_rows_sound(rows):
    for r in rows:
        if r["makespan"] is not None:
            assert r["check_ok"], r
        if r["ok"]:
            assert r["best_bound"] <= r["makespan"] * (1 + 1e-9)
            assert r["best_makespan"] <= r["makespan"] * (1 + 1e-9)
            assert 0.0 <= r["gap_to_bound"] < 1.0


METHODS3 = ["single", "heft", "_bench_roundrobin"]


# ---------------------------------------------------------------------------------------------- executors
@pytest.fixture(scope="module")
def local_rows(tmp_path_factory):
    """3 instances x 3 methods on the local process pool (2 workers)."""
    src = tmp_path_factory.mktemp("suite")
    for f in THREE:
        shutil.copy(SMALL / f, src / f)
    out = tmp_path_factory.mktemp("local")
    try:  # worker_init also registers the test methods here (checked before any pair runs)
        run = bench.run_bench([src], METHODS3, out=out, time_limit_s=5, workers=2, worker_init=INIT,
                              progress=False, plots=False)
    finally:
        for name in TEST_METHODS:
            registry._METHODS.pop(name, None)
        pair._INIT_DONE.discard(INIT)
    return src, out, run


def test_local_pool_rows(local_rows):
    _, out, run = local_rows
    assert run.ran == 9 and run.skipped == 0
    assert [(r["instance"], r["method"]) for r in run.rows] == [
        (Path(f).stem, m) for f in THREE for m in METHODS3
    ]
    assert all(r["status"] in ("heuristic", "feasible", "optimal") for r in run.rows)
    assert_rows_sound(run.rows)
    assert len(list((out / "rows").glob("*.json"))) == 9
    data = json.loads((out / "results.json").read_text())
    assert data["format"] == "dplace-bench/1" and len(data["rows"]) == 9
    csv_lines = (out / "results.csv").read_text().splitlines()
    assert len(csv_lines) == 10 and csv_lines[0].startswith("key,instance,")
    report = (out / "report.md").read_text()
    for m in METHODS3:
        assert f"| {m} |" in report
    assert {s["method"] for s in run.summary} == set(METHODS3)


def test_inline_matches_local_pool(local_rows, tmp_path, test_methods):
    src, _, run = local_rows
    inline = bench.run_bench([src], METHODS3, out=tmp_path / "inline", time_limit_s=5, workers=0,
                             progress=False, plots=False)
    assert comparable(inline.rows) == comparable(run.rows)


@pytest.mark.ray
def test_ray_matches_local_pool(local_rows, tmp_path):
    ray = pytest.importorskip("ray")
    src, _, run = local_rows
    assert not ray.is_initialized()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    try:
        res = bench.run_bench([src], METHODS3, out=tmp_path / "ray", time_limit_s=5, executor="ray", workers=2,
                              worker_init=INIT, progress=False, plots=False)
    finally:
        ray.shutdown()
        for name in TEST_METHODS:
            registry._METHODS.pop(name, None)
        pair._INIT_DONE.discard(INIT)
    assert res.ran == 9
    assert comparable(res.rows) == comparable(run.rows)


# ---------------------------------------------------------------------------------------------- resume
def test_resume_skips_finished_pairs(suite, tmp_path):
    out = tmp_path / "out"
    first = bench.run_bench([suite], "single,heft", out=out, workers=0, progress=False, plots=False)
    assert (first.ran, first.skipped) == (6, 0)
    again = bench.run_bench([suite], "single,heft", out=out, workers=0, progress=False, plots=False)
    assert (again.ran, again.skipped) == (0, 6)
    assert comparable(again.rows) == comparable(first.rows)
    victim = sorted((out / "rows").glob("*__heft__r0.json"))[0]
    victim.unlink()
    third = bench.run_bench([suite], "single,heft", out=out, workers=0, progress=False, plots=False)
    assert (third.ran, third.skipped) == (1, 5)
    # more repeats: only the new ones run, and repeat r uses seed + r
    more = bench.run_bench([suite], "single,heft", out=out, workers=0, repeat=2, progress=False, plots=False)
    assert (more.ran, more.skipped) == (6, 6)
    assert {(r["repeat"], r["seed"]) for r in more.rows if r["repeat"] == 1} == {(1, 1)}


def test_resume_reruns_rows_made_with_other_settings(suite, tmp_path, capsys):
    """A saved row is reused only if method (with options), time limit, seed, instance and version match."""
    out = tmp_path / "out"
    kw = dict(out=out, workers=0, progress=False, plots=False)
    bench.run_bench([suite], "heft", time_limit_s=5, **kw)
    capsys.readouterr()
    run = bench.run_bench([suite], "heft", time_limit_s=3, **kw)
    assert (run.ran, run.skipped, run.rerun) == (3, 0, 3)
    err = capsys.readouterr().err
    assert "rerunning 3 finished pair(s)" in err and "time_limit_s 5 -> 3 (3 pairs)" in err
    assert {r["time_limit_s"] for r in run.rows} == {3}
    assert "time limit 3 s per run" in (out / "report.md").read_text()
    # a row written by another dplace version, and one with another seed: those two rerun, the third is kept
    rows = sorted((out / "rows").glob("*.json"))
    old = json.loads(rows[0].read_text())
    old["dplace_version"] = "0.0.1"
    rows[0].write_text(json.dumps(old))
    run = bench.run_bench([suite], "heft", time_limit_s=3, **kw)
    assert (run.ran, run.skipped, run.rerun) == (1, 2, 1)
    err = capsys.readouterr().err
    assert "dplace_version '0.0.1' -> " in err
    run = bench.run_bench([suite], "heft", time_limit_s=3, seed=4, **kw)
    assert (run.ran, run.rerun) == (3, 3) and "seed 0 -> 4" in capsys.readouterr().err
    # another option of the method is another pair (its own key), not a rerun
    run = bench.run_bench([suite], "heft:insertion=false", time_limit_s=3, seed=4, **kw)
    assert (run.ran, run.skipped, run.rerun) == (3, 0, 0)


def test_report_labels_mixed_time_limits(suite, tmp_path):
    rows = bench.run_bench([suite], "heft", out=tmp_path / "a", time_limit_s=2, workers=0, progress=False,
                           plots=False).rows
    rows[0] = dict(rows[0], time_limit_s=9)
    md = report_markdown(rows, summarize(aggregate(rows)), {"time_limit_s": 2})
    assert "time limits differ between runs: 2 s (2 runs), 9 s (1 runs)" in md


def test_interrupt_flag_stops_the_study_and_reports_what_finished(suite, tmp_path):
    from dplace import interrupt

    out = tmp_path / "out"
    kw = dict(out=out, workers=0, progress=False, plots=False)
    try:
        run = bench.run_bench([suite], "single,heft", on_row=lambda row: interrupt.request(), **kw)
    finally:
        interrupt.clear()
    assert run.interrupted and run.ran == 1 and len(run.rows) == 1
    assert len(list((out / "rows").glob("*.json"))) == 1
    assert "**Interrupted**: 1 of 6 planned runs finished" in (out / "report.md").read_text()
    assert json.loads((out / "results.json").read_text())["params"]["interrupted"] is True
    rest = bench.run_bench([suite], "single,heft", **kw)
    assert (rest.ran, rest.skipped, rest.interrupted) == (5, 1, False)
    assert "Interrupted" not in (out / "report.md").read_text()


def test_interrupted_run_keeps_finished_rows(suite, tmp_path):
    out = tmp_path / "out"
    seen = []

    def stop_after_two(row):
        seen.append(row["key"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bench.run_bench([suite], "single,heft", out=out, workers=0, progress=False, plots=False, on_row=stop_after_two)
    assert sorted(p.stem for p in (out / "rows").glob("*.json")) == sorted(seen)
    assert len(json.loads((out / "results.json").read_text())["rows"]) == 2  # aggregates of what finished
    rest = bench.run_bench([suite], "single,heft", out=out, workers=0, progress=False, plots=False)
    assert (rest.ran, rest.skipped) == (4, 2)


def test_changed_instance_file_is_a_new_pair(suite, tmp_path):
    out = tmp_path / "out"
    bench.run_bench([suite / THREE[0]], "single", out=out, workers=0, progress=False, plots=False)
    data = json.loads((suite / THREE[0]).read_text())
    data["ops"][0]["time"] += 1
    (suite / THREE[0]).write_text(json.dumps(data))
    run = bench.run_bench([suite / THREE[0]], "single", out=out, workers=0, progress=False, plots=False)
    assert run.ran == 1


# ---------------------------------------------------------------------------------------------- failures
def test_raising_method_is_a_row_inline(suite, tmp_path, test_methods):
    run = bench.run_bench([suite], "heft,_bench_fail", out=tmp_path / "o", workers=0, progress=False, plots=False)
    bad = [r for r in run.rows if r["method"] == "_bench_fail"]
    assert len(bad) == 3
    for r in bad:
        assert r["status"] == "error" and r["error"].startswith("RuntimeError: boom on ")
        assert r["makespan"] is None and not r["ok"] and r["project_bound"] is not None
    assert all(r["ok"] for r in run.rows if r["method"] == "heft")
    s = {x["method"]: x for x in run.summary}
    assert s["_bench_fail"]["errors"] == 3 and s["_bench_fail"]["wins"] == 0 and s["heft"]["wins"] == 3
    assert "RuntimeError: boom on" in (tmp_path / "o" / "report.md").read_text()


def test_raising_and_hanging_methods_in_worker_pool(suite, tmp_path, test_methods):
    run = bench.run_bench([suite / THREE[0], suite / THREE[1]], "_bench_hang,_bench_fail,_bench_crash,heft",
                          out=tmp_path / "o",
                          time_limit_s=1, hard_limit_s=2.0, workers=2, worker_init=INIT, progress=False, plots=False)
    by = {(r["instance"], r["method"]): r for r in run.rows}
    for f in THREE[:2]:
        name = Path(f).stem
        assert by[name, "_bench_hang"]["status"] == "timeout"
        assert "killed after" in by[name, "_bench_hang"]["error"]
        assert by[name, "_bench_fail"]["status"] == "error"
        assert by[name, "_bench_crash"]["status"] == "crashed"
        assert "exit code 3" in by[name, "_bench_crash"]["error"]
        assert by[name, "heft"]["ok"]
    assert {x["method"]: x["timeouts"] for x in run.summary}["_bench_hang"] == 2
    # a timeout is a finished pair; --retry-failed runs it (and the errors) again
    again = bench.run_bench([suite / THREE[0]], "heft", out=tmp_path / "o", time_limit_s=1, workers=0,
                            progress=False, plots=False)
    assert again.ran == 0


def test_infeasible_instance_is_a_row(tmp_path):
    data = json.loads((SMALL / THREE[0]).read_text())
    biggest = max(op["memory"] for op in data["ops"])
    for d in data["devices"]:
        d["memory"] = biggest  # each op fits somewhere, all of them cannot
    (tmp_path / "bad.json").write_text(json.dumps(data))
    run = bench.run_bench([tmp_path / "bad.json"], "single,heft", out=tmp_path / "o", workers=0, progress=False)
    assert [r["status"] for r in run.rows] == ["infeasible", "infeasible"]
    assert all(r["best_bound"] is None and r["gap_to_bound"] is None for r in run.rows)
    assert "bytes" in run.rows[0]["error"]


# ---------------------------------------------------------------------------------------------- reports
def _row(inst, method, makespan, lb=None, status="heuristic", **kw):
    r = {"instance": inst, "method": method, "makespan": makespan, "lower_bound": lb, "status": status,
         "memory_ok": makespan is not None, "check_ok": makespan is not None, "time_s": 0.5, "n_ops": 10,
         "n_devices": 2, "repeat": 0, "transformed": False}
    r.update(kw)
    return r


def test_aggregate_best_bound_gaps_and_wins():
    rows = aggregate([
        _row("a", "h1", 120.0, lb=80.0),
        _row("a", "exact", 100.0, lb=90.0, status="optimal"),  # optimal: its makespan is a bound
        _row("a", "split", 95.0, lb=99.0, transformed=True),  # another problem: bound ignored, makespan counts
        _row("a", "bad", 50.0, lb=10.0, memory_ok=False),  # memory violated: not ok, no gap, no win
        _row("a", "err", None, status="error", error="x"),
        _row("b", "h1", 10.0, lb=5.0),
        _row("b", "exact", 10.0, lb=5.0, status="feasible"),
    ])
    a = {r["method"]: r for r in rows if r["instance"] == "a"}
    assert a["h1"]["best_bound"] == 100.0 and a["h1"]["best_makespan"] == 95.0
    assert a["h1"]["gap_to_bound"] == pytest.approx(20 / 120)
    assert a["exact"]["gap_to_bound"] == 0.0 and a["split"]["gap_to_bound"] == 0.0  # clamped like Result.gap
    assert a["split"]["win"] and not a["exact"]["win"] and not a["bad"]["win"]
    assert a["bad"]["gap_to_bound"] is None and not a["bad"]["ok"] and a["err"]["gap_to_best"] is None
    assert a["h1"]["bound_from"] == "exact optimal"
    tie = aggregate([_row("d", "h", 12.0, lb=10.0, project_bound=10.0), _row("d", "x", 10.0, lb=10.0, status="optimal")])
    assert tie[0]["bound_from"] == "lower_bound()" and tie[0]["best_bound"] == 10.0
    assert not any(r["below_bound"] for r in rows)
    lie = aggregate([_row("c", "h", 90.0, lb=50.0), _row("c", "liar", 100.0, lb=100.0, status="optimal")])
    assert [r["below_bound"] for r in lie] == [True, False]
    assert "Contradictions" in report_markdown(lie, summarize(lie), {})
    s = {x["method"]: x for x in summarize(rows)}
    assert s["h1"]["wins"] == 1 and s["exact"]["wins"] == 1  # tie on "b" wins for both
    assert s["exact"]["optimal"] == 1 and s["bad"]["memory_violations"] == 1 and s["err"]["errors"] == 1
    assert s["h1"]["mean_gap_to_bound"] == pytest.approx((20 / 120 + 0.5) / 2)
    assert s["h1"]["max_gap_to_bound"] == pytest.approx(0.5)


def test_plots_and_report_written(suite, tmp_path):
    out = tmp_path / "o"
    run = bench.run_bench([suite], "single,heft", out=out, workers=0, progress=False, plots=True)
    for name in ("gap_by_method.png", "time_vs_size.png", "makespan_vs_time.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"]({name})" in (out / "report.md").read_text()
    assert len(run.files) == 6


# ---------------------------------------------------------------------------------------------- CLI
def test_cli_bench(suite, tmp_path, capsys):
    from dplace.cli import main

    out = tmp_path / "o"
    assert main(["bench", str(suite), "--methods", "single,heft", "--out", str(out), "--workers", "0",
                 "--no-plots"]) == 0
    captured = capsys.readouterr()
    assert "heft" in captured.out and "report.md" in captured.out
    assert "dplace bench: 6/6 pairs" in captured.err  # not a terminal: progress as log lines
    assert (out / "report.md").exists() and len(list((out / "rows").glob("*.json"))) == 6


@pytest.mark.parametrize("argv, message", [
    (["--methods", "heft,nope"], "unknown method 'nope'"),
    (["--repeat", "0"], "--repeat must be >= 1"),
    (["--time-limit", "-1"], "--time-limit must be a finite number of seconds > 0"),
    (["--time-limit", "inf"], "--time-limit must be a finite number of seconds > 0, got inf"),
    (["--address", "x:1"], "needs --executor ray"),
])
def test_cli_user_errors(suite, tmp_path, capsys, argv, message):
    from dplace.cli import main

    assert main(["bench", str(suite), "--out", str(tmp_path / "o"), "--quiet", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_cli_bad_paths(suite, tmp_path, capsys):
    from dplace.cli import main

    assert main(["bench", str(tmp_path / "missing"), "--quiet"]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["bench", str(tmp_path / "empty"), "--quiet"]) == 2
    assert "holds no *.json" in capsys.readouterr().err
    (tmp_path / "junk.json").write_text("{")
    assert main(["bench", str(tmp_path / "junk.json"), "--quiet"]) == 2
    assert "junk.json" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")  # --out names a file: one line, not a traceback
    assert main(["bench", str(suite), "--out", str(tmp_path / "afile"), "--quiet", "--methods", "single"]) == 2
    err = capsys.readouterr().err
    assert "cannot make the output folder" in err and err.count("\n") == 1


def test_default_methods_are_all_registered():
    assert bench.parse_methods(None) == dplace.methods()
    assert bench.parse_methods(" heft , single,heft") == ["heft", "single"]


def test_method_specs_sweep_options(suite, tmp_path):
    run = bench.run_bench([suite / THREE[0]], "heft,heft:insertion=false", out=tmp_path / "o", workers=0,
                          progress=False, plots=False)
    assert [r["method"] for r in run.rows] == ["heft", "heft:insertion=false"]
    assert all(r["ok"] for r in run.rows)
    assert len({r["key"] for r in run.rows}) == 2 and all("/" not in r["key"] for r in run.rows)
    with pytest.raises(dplace.InvalidInstanceError, match="unknown option 'nope'"):
        bench.parse_methods("heft:nope=1")
    with pytest.raises(dplace.InvalidInstanceError, match="name:key=value"):
        bench.parse_methods("heft:insertion")


def test_worker_output_goes_to_log_files(suite, tmp_path, test_methods, capfd):
    out = tmp_path / "o"
    bench.run_bench([suite / THREE[0]], "_bench_print", out=out, workers=1, worker_init=INIT,
                    progress=False, plots=False)
    assert "chatty method" not in capfd.readouterr().out
    assert "chatty method" in (out / "logs" / "worker-0.log").read_text()


def test_groups_and_duplicate_names(tmp_path):
    for g in ("exact", "real"):
        (tmp_path / g).mkdir()
        shutil.copy(SMALL / THREE[0], tmp_path / g / "x.json")
    (tmp_path / "real" / "z_link.json").symlink_to(tmp_path / "real" / "x.json")  # same file twice: once
    run = bench.run_bench([tmp_path / "exact", tmp_path / "real"], "heft", out=tmp_path / "o", workers=0,
                          progress=False, plots=False)
    assert [(r["instance"], r["group"]) for r in run.rows] == [("exact/x", "exact"), ("real/x", "real")]
    report = (tmp_path / "o" / "report.md").read_text()
    assert "### Group `exact` (1 instances)" in report and "### Group `real` (1 instances)" in report
