"""Run a study (:func:`run_bench`): plan, skip the pairs already done with the same settings, run the
others on an executor, record each row atomically as ``OUT/rows/<pair>.json``, then write the reports."""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .. import interrupt
from ..errors import InvalidInstanceError
from ..instance.io import save_json
from .local import run_inline, run_local
from .pair import init_worker
from .plan import DEFAULT_TIME_LIMIT_S, RESUME_KEY, hard_limit_for, load_suite, oversize, parse_methods, plan
from .ray_tasks import run_ray


EXECUTORS = ("local", "ray")


def read_rows(out: str | Path) -> dict[str, dict[str, Any]]:
    """Rows already written under ``out/rows`` by key (unreadable files are ignored: they rerun)."""
    rows = {}
    d = Path(out) / "rows"
    if d.is_dir():
        for f in sorted(d.glob("*.json")):
            try:
                row = json.loads(f.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if isinstance(row, dict) and row.get("key") == f.stem:
                rows[f.stem] = row
    return rows


@dataclass
class BenchRun:
    """What :func:`run_bench` did: aggregated rows of the study, summary per method, files, counts."""

    rows: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    files: list[str]
    ran: int
    skipped: int
    params: dict[str, Any]
    rerun: int = 0  # finished pairs run again because their row was made with other settings
    interrupted: bool = False  # Ctrl-C/SIGTERM stopped the study: the rows are those that finished


def run_bench(
    paths: Sequence[str | os.PathLike],
    methods: str | Sequence[str] | None = None,
    *,
    out: str | os.PathLike = "bench-out",
    time_limit_s: float | None = DEFAULT_TIME_LIMIT_S,
    repeat: int = 1,
    seed: int = 0,
    executor: str = "local",
    address: str | None = None,
    workers: int | None = None,
    hard_limit_s: float | None = None,
    worker_init: str | None = None,
    retry_failed: bool = False,
    plots: bool = True,
    progress: bool | str = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> BenchRun:
    """Run every (instance, method, repeat) pair not yet in ``out/rows``, then write the reports."""
    if executor not in EXECUTORS:
        raise InvalidInstanceError(f"--executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if address and executor != "ray":
        raise InvalidInstanceError(f"--address {address!r} needs --executor ray")
    if not isinstance(repeat, int) or repeat < 1:
        raise InvalidInstanceError(f"--repeat must be >= 1, got {repeat!r}")
    if time_limit_s is not None and not (0 < time_limit_s < float("inf")):  # NaN fails too
        raise InvalidInstanceError(f"--time-limit must be a finite number of seconds > 0, got {time_limit_s!r}")
    if workers is not None and workers < 0:
        raise InvalidInstanceError(f"--workers must be >= 0, got {workers!r}")
    if hard_limit_s is not None and not (hard_limit_s > 0):
        raise InvalidInstanceError(f"--hard-limit must be > 0, got {hard_limit_s!r}")
    if workers == 0 and executor == "ray":
        raise InvalidInstanceError("--workers 0 (in-process) works with --executor local only")
    if worker_init:
        init_worker(worker_init)  # fail early, and in-process runs need it too
    names = parse_methods(methods)
    suite = load_suite(paths)
    default_methods = methods is None or methods == "all" or methods == ["all"]
    tasks = plan(suite, names, repeat=repeat, seed=seed, time_limit_s=time_limit_s, respect_max_ops=default_methods)
    left_out = [f"{m} on {s.label} ({s.n_ops} ops > max_ops {oversize(s, m)})"
                for s in suite for m in names if default_methods and oversize(s, m) is not None]
    texts = {s.sha: s.text for s in suite}
    hard = hard_limit_s if hard_limit_s is not None else hard_limit_for(time_limit_s)
    n_workers = workers if workers is not None else (os.cpu_count() or 1)
    out = Path(out)
    params = {
        "instances": [s.path for s in suite], "methods": names, "time_limit_s": time_limit_s,
        "hard_limit_s": hard if n_workers else None, "repeat": repeat, "seed": seed, "executor": executor,
        "address": address, "workers": n_workers, "left_out": left_out,
    }
    done = read_rows(out)
    stale = _stale_rows(done, tasks)
    if stale:
        sys.stderr.write(f"dplace bench: rerunning {len(stale)} finished pair(s) in {str(out)!r} whose row was made "
                         f"with other settings: {_describe(stale)}\n")
    if retry_failed:
        done = {k: r for k, r in done.items() if r.get("status") not in ("error", "timeout", "crashed")}
    todo = [t for t in tasks if t["key"] not in done]
    # a resumed row keeps its results; where the file was found this time is refreshed from the plan
    rows = {t["key"]: {**done[t["key"]], **{k: t[k] for k in ("instance", "group", "instance_file")}}
            for t in tasks if t["key"] in done}
    try:
        (out / "rows").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidInstanceError(f"--out {str(out)!r}: cannot make the output folder "
                                   f"({exc.strerror or exc.__class__.__name__})") from None
    save_json(out / "params.json", params)

    if not todo:
        stream: Iterable[dict[str, Any]] = iter(())
    elif executor == "ray":
        stream = run_ray(todo, texts, workers=workers, hard_limit_s=hard, address=address, worker_init=worker_init)
    elif n_workers == 0:
        stream = run_inline(todo, texts, worker_init=worker_init)
    else:
        (out / "logs").mkdir(parents=True, exist_ok=True)
        stream = run_local(todo, texts, workers=n_workers, hard_limit_s=hard, worker_init=worker_init,
                           log_dir=out / "logs")

    def record(row: dict[str, Any]) -> None:
        save_json(out / "rows" / f"{row['key']}.json", row)
        rows[row["key"]] = row
        if on_row is not None:
            on_row(row)

    ran = 0
    restore = _sigterm_as_interrupt()
    cut_short = []

    def keep(row: dict[str, Any]) -> None:
        if row.get("interrupted"):  # an in-process pair stopped by Ctrl-C is no result: resume reruns it
            cut_short.append(row["key"])
        else:
            record(row)

    try:
        with interrupt.polling():
            if progress == "plain" and todo:
                ran = _consume_with_lines(stream, keep, len(todo), len(tasks) - len(todo))
            elif progress and todo:
                ran = _consume_with_progress(stream, keep, len(todo), len(tasks) - len(todo))
            else:
                for row in stream:
                    keep(row)
                    ran += 1
    finally:
        restore()
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # kills workers still running after an interrupt
        stopped = interrupt.requested()
        ran -= len(cut_short)
        if stopped:
            params = dict(params, interrupted=True, pairs_planned=len(tasks),
                          pairs_finished=sum(1 for t in tasks if t["key"] in rows))
            sys.stderr.write(f"dplace bench: interrupted: {params['pairs_finished']} of {len(tasks)} pair(s) have "
                             f"rows; the ones cut short are not recorded (run again with --out {str(out)!r} to "
                             "finish them); writing the reports of the finished rows\n")
        ordered = [rows[t["key"]] for t in tasks if t["key"] in rows]
        from .report import write_outputs

        written = write_outputs(out, ordered, params, names, plots=plots)
    return BenchRun(written["rows"], written["summary"], written["files"], ran, len(tasks) - len(todo), params,
                    rerun=len(stale), interrupted=stopped)


def _stale_rows(done: dict[str, dict[str, Any]], tasks: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """Saved rows of planned pairs that differ from the plan in a :data:`RESUME_KEY` field: removed from
    ``done`` (they rerun); returns, per key, what differs as ``"field old -> new"``."""
    stale = {}
    for t in tasks:
        row = done.get(t["key"])
        if row is None:
            continue
        diff = [f"{k} {row.get(k)!r} -> {t.get(k)!r}" for k in RESUME_KEY if row.get(k) != t.get(k)]
        if diff:
            stale[t["key"]] = diff
            del done[t["key"]]
    return stale


def _describe(stale: dict[str, list[str]]) -> str:
    from collections import Counter

    counts = Counter(d for diffs in stale.values() for d in diffs)
    return "; ".join(f"{d} ({n} pair{'s' if n > 1 else ''})" for d, n in counts.most_common(6)) + (
        "; ..." if len(counts) > 6 else "")


def _sigterm_as_interrupt() -> Callable[[], None]:
    """While a study runs, SIGTERM (a batch system's stop) acts like Ctrl-C: workers are killed and the
    aggregates of the finished rows are written. Returns the function that restores the old handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def _raise(signum: int, frame: Any) -> None:
        sys.stderr.write(f"dplace bench: signal {signum}: stopping\n")
        interrupt.request()

    old = signal.signal(signal.SIGTERM, _raise)
    return lambda: signal.signal(signal.SIGTERM, old)


def _consume_with_lines(stream: Iterable[dict[str, Any]], record: Callable[[dict[str, Any]], None],
                        total: int, skipped: int, every_s: float = 30.0) -> int:
    """Progress for logs (no terminal): one line on stderr every ``every_s`` seconds and at the end."""
    t0 = last = time.monotonic()
    if skipped:
        sys.stderr.write(f"dplace bench: resuming, {skipped} finished pair(s) with the same settings skipped\n")
    sys.stderr.write(f"dplace bench: {total} pair(s) to run\n")
    sys.stderr.flush()
    ran = 0
    for row in stream:
        record(row)
        ran += 1
        now = time.monotonic()
        if now - last >= every_s or ran == total:
            last = now
            eta = (now - t0) / ran * (total - ran)
            sys.stderr.write(f"dplace bench: {ran}/{total} pairs, {now - t0:.0f} s elapsed, eta {eta:.0f} s "
                             f"(last: {row['instance']} {row['method']} r{row['repeat']}: {row['status']})\n")
            sys.stderr.flush()
    return ran


def _consume_with_progress(stream: Iterable[dict[str, Any]], record: Callable[[dict[str, Any]], None],
                           total: int, skipped: int) -> int:
    from rich.console import Console
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    console = Console(stderr=True)
    ran = 0
    with Progress(TextColumn("[bold]bench[/]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.description}"),
                  console=console, transient=False) as bar:
        if skipped:
            console.print(f"resuming: {skipped} finished pair(s) with the same settings skipped")
        tid = bar.add_task("", total=total)
        for row in stream:
            record(row)
            ran += 1
            bar.update(tid, advance=1, description=f"{row['instance']} {row['method']} r{row['repeat']}: {row['status']}")
    return ran
