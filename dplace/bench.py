"""``dplace bench``: run a study of (instance, method, repeat) pairs and compare optimality gaps.

Each pair runs ``dplace.solve`` in a worker with its own time limit and a hard wall limit (the worker is
killed on overrun: a ``timeout`` row). A method that raises, a worker that dies, an instance that cannot
be read by the worker: each is a row with its error, never a crash of the study. Every finished pair is
written atomically as ``OUT/rows/<pair>.json``; re-running with the same ``--out`` skips the pairs whose
row was made with the same settings — method and its options, time limit, seed, instance file (sha256)
and dplace version (:data:`RESUME_KEY`) — and reruns the others, saying so on stderr. At the end
:mod:`dplace.report` regenerates ``results.csv``, ``results.json``, ``report.md`` and the plots from the
rows of the pairs asked for.

Ctrl-C (or SIGTERM): the pairs running are stopped (local workers killed, Ray tasks cancelled, an
in-process pair's solver stopped through :mod:`dplace.interrupt`) and not recorded — a resumed run reruns
them —, the reports are written from the finished rows and say the study was interrupted; the command
exits with 130. A second Ctrl-C exits at once.

Executors: ``local`` keeps a pool of worker processes (one per core by default; a worker killed on a
timeout is replaced); ``ray`` submits each pair as a Ray task (a local Ray with ``--workers`` CPUs, or
an existing cluster with ``--address``) and cancels it with force on overrun. ``workers=0`` runs the
pairs in this process (no hard limit; for tests and debugging). Local workers write their stdout/stderr
(solver logs) to ``OUT/logs/worker-<i>.log``. On a Ray cluster every node needs dplace installed.

Methods: ``--methods a,b`` (default: every registered method, each left out of instances larger than its
registered ``max_ops``); a spec may carry options, ``heft:insertion=false``, so one study sweeps them.
Issue #9 ("Compare optimality gaps at scale"); definitions of the gaps in :mod:`dplace.report`.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import re
import socket
import sys
import time
import traceback
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from . import __version__, interrupt
from .errors import DplaceError, InvalidInstanceError
from .io import instance_from_dict, save_json

EXECUTORS = ("local", "ray")
DEFAULT_TIME_LIMIT_S = 60.0
_WORKER_START_S = 120.0  # a fresh worker gets this long to import dplace before its pair's clock starts
_RAY_SLACK_S = 30.0  # Ray cannot tell when a task starts: its wall limit counts from submission plus this
# what a saved row must share with the planned pair to be reused on resume (the method spec carries its options)
RESUME_KEY = ("method", "time_limit_s", "seed", "instance_sha", "dplace_version")
_POLL_S = 0.5  # how often the pool loops look at the Ctrl-C flag


# ---------------------------------------------------------------------------------------------- study
@dataclass(frozen=True)
class SuiteInstance:
    """One instance file of the study, validated once here; workers get its JSON text."""

    path: str
    label: str  # unique short name used in rows and reports
    group: str  # the folder it was found in (e.g. "small", "real"): reports summarise per group too
    name: str  # the instance's own name
    sha: str  # sha256 of the file's bytes (a changed file is a new instance)
    text: str
    n_ops: int
    n_edges: int
    n_devices: int
    comm: str


def find_instance_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    """Files as given, and every ``*.json`` under each directory (recursively, sorted)."""
    if not paths:
        raise InvalidInstanceError("instances: give at least one file or directory")
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(q for q in p.rglob("*.json") if q.is_file() and not q.name.startswith("."))
            if not found:
                raise InvalidInstanceError(f"instances: directory {str(p)!r} holds no *.json file")
            files += found
        elif p.is_file():
            files.append(p)
        else:
            raise InvalidInstanceError(f"instances: {str(p)!r}: no such file or directory")
    seen: dict[Path, Path] = {}
    for f in files:  # the same file twice (e.g. through a link): the first path named wins
        seen.setdefault(f.resolve(), f)
    return list(seen.values())


def _labels(files: Sequence[Path]) -> list[str]:
    """Short unique labels: the file stem, prefixed by parent folders only where stems collide."""
    labels = [f.stem for f in files]
    depth = 1
    while len(set(labels)) < len(labels) and depth < 8:
        dup = {lab for lab in labels if labels.count(lab) > 1}
        labels = ["/".join(f.with_suffix("").parts[-depth - 1:]) if lab in dup else lab
                  for f, lab in zip(files, labels)]
        depth += 1
    return labels


def load_suite(paths: Sequence[str | os.PathLike]) -> list[SuiteInstance]:
    """Read and validate every instance of the study (a bad file is a one-line error naming it)."""
    files = find_instance_files(paths)
    out = []
    for f, label in zip(files, _labels(files)):
        try:
            raw = f.read_bytes()
            data = json.loads(raw)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, huge ints
            raise InvalidInstanceError(f"instance {str(f)!r}: cannot read as JSON ({exc.__class__.__name__})") from None
        try:
            inst = instance_from_dict(data)
        except InvalidInstanceError as exc:
            raise InvalidInstanceError(f"instance {str(f)!r}: {exc}") from None
        out.append(SuiteInstance(str(f), label, f.parent.name or ".", inst.name, hashlib.sha256(raw).hexdigest(), raw.decode(),
                                 inst.n, len(inst.edges), inst.m, inst.comm))
    return out


def parse_method_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"name"`` or ``"name:key=value:key=value"`` (a point of an option sweep) -> (name, options)."""
    name, *items = [x.strip() for x in spec.split(":")]
    opts: dict[str, str] = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise InvalidInstanceError(f"--methods: {spec!r}: options are written name:key=value, got {item!r}")
        opts[k.strip()] = v.strip()
    return name, opts


def parse_methods(spec: str | Sequence[str] | None) -> list[str]:
    """``"a,b,c"`` (or a list) -> validated method specs; ``None``/``"all"`` -> every registered method.

    A spec is a method name, optionally with options: ``heft:insertion=false`` (rows are labelled by
    the spec, so one study can sweep a method's options)."""
    from .registry import method_info, methods, validate_options

    if spec is None or spec == "all" or spec == ["all"]:
        names = methods()
    else:
        items = spec.split(",") if isinstance(spec, str) else list(spec)
        names = [s.strip() for s in items if s.strip()]
        if not names:
            raise InvalidInstanceError(f"--methods: no method named in {spec!r}")
    for n in names:
        name, opts = parse_method_spec(n)
        method_info(name)  # unknown -> one-line error listing the valid names
        validate_options(name, opts)  # unknown option / bad value -> one-line error
    return list(dict.fromkeys(names))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def pair_key(inst: SuiteInstance, method: str, repeat: int) -> str:
    """File-name-safe, stable id of one pair: a changed instance file gets a new key."""
    m = _safe(method)
    if m != method:  # e.g. "heft:insertion=false": keep distinct specs distinct after sanitising
        m += "-" + hashlib.sha1(method.encode()).hexdigest()[:6]
    return f"{_safe(inst.label)}-{inst.sha[:10]}__{m}__r{repeat}"


def oversize(inst: SuiteInstance, method: str) -> int | None:
    """The method's ``max_ops`` when ``inst`` is larger than what the method is meant for, else None."""
    from .registry import method_info

    cap = method_info(parse_method_spec(method)[0]).max_ops
    return cap if cap is not None and inst.n_ops > cap else None


def plan(suite: Sequence[SuiteInstance], methods: Sequence[str], *, repeat: int = 1, seed: int = 0,
         time_limit_s: float | None = DEFAULT_TIME_LIMIT_S, respect_max_ops: bool = False) -> list[dict[str, Any]]:
    """Every (instance, method, repeat) as a task dict (instance-major order; repeat r uses seed+r).

    ``respect_max_ops``: leave out pairs where the instance is larger than the method's registered
    ``max_ops`` (as ``dplace compare`` does for its default methods)."""
    tasks = []
    for inst in suite:
        for m in methods:
            if respect_max_ops and oversize(inst, m) is not None:
                continue
            for r in range(repeat):
                tasks.append({
                    "key": pair_key(inst, m, r), "instance": inst.label, "group": inst.group,
                    "instance_name": inst.name,
                    "instance_file": inst.path, "instance_sha": inst.sha, "n_ops": inst.n_ops,
                    "n_edges": inst.n_edges, "n_devices": inst.n_devices, "comm": inst.comm, "method": m,
                    "repeat": r, "seed": seed + r, "time_limit_s": time_limit_s, "dplace_version": __version__,
                })
    return tasks


# ---------------------------------------------------------------------------------------------- one pair
_INIT_DONE: set[str] = set()
_INST_CACHE: "OrderedDict[str, Any]" = OrderedDict()


def init_worker(spec: str | None) -> None:
    """Import ``module`` or call ``module:function`` once per process (e.g. to register extra methods)."""
    if not spec or spec in _INIT_DONE:
        return
    mod_name, _, func = spec.partition(":")
    mod = importlib.import_module(mod_name)
    if func:
        getattr(mod, func)()
    _INIT_DONE.add(spec)


def _instance(sha: str, text: str):
    inst = _INST_CACHE.get(sha)
    if inst is None:
        inst = instance_from_dict(json.loads(text))
        _INST_CACHE[sha] = inst
        while len(_INST_CACHE) > 2:
            _INST_CACHE.popitem(last=False)
    return inst


def _one_line(exc: BaseException) -> str:
    msg = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__


def base_row(task: dict[str, Any]) -> dict[str, Any]:
    row = {k: task.get(k) for k in ("key", "instance", "group", "instance_name", "instance_file", "instance_sha", "n_ops",
                                     "n_edges", "n_devices", "comm", "method", "repeat", "seed", "time_limit_s",
                                     "dplace_version")}
    row.update(status=None, makespan=None, lower_bound=None, project_bound=None, claimed_makespan=None,
               memory_ok=None, check_ok=None,
               check_errors=None, peak_memory=None, transformed=False, time_s=None, wall_s=None,
               host=socket.gethostname(), error=None)
    return row


def run_pair(task: dict[str, Any], text: str | None = None, *, worker_init: str | None = None) -> dict[str, Any]:
    """Solve one pair and return its row. Never raises (except KeyboardInterrupt/SystemExit)."""
    from .bounds import lower_bound
    from .check import check
    from .registry import solve

    t0 = time.perf_counter()
    row = base_row(task)
    try:
        init_worker(worker_init)
        inst = _instance(task["instance_sha"], text if text is not None else task["text"])
        try:
            row["project_bound"] = lower_bound(inst)
        except DplaceError:  # memory cannot fit: solve says so as an "infeasible" row
            pass
        name, opts = parse_method_spec(task["method"])
        res = solve(inst, name, time_limit_s=task.get("time_limit_s"), seed=task.get("seed", 0), **opts)
        row["status"] = res.status
        row["time_s"] = res.solve_time_s
        row["transformed"] = res.instance is not inst
        if not row["transformed"]:
            row["lower_bound"] = res.lower_bound
        row["claimed_makespan"] = res.claimed_makespan
        if res.interrupted:
            row["interrupted"] = True  # cut short by Ctrl-C: run_bench does not record it
        if res.schedule is not None:
            row["makespan"] = res.makespan
            row["memory_ok"] = res.memory_ok
            row["peak_memory"] = max(res.schedule.memory) if res.schedule.memory else 0
            rep = check(res.instance, res)
            row["check_ok"] = rep.ok
            if not rep.ok:
                row["check_errors"] = "; ".join(rep.errors[:3])
        elif res.message:
            row["error"] = " ".join(str(res.message).split())
    except Exception as exc:  # a method's bug is a row, not a crash of the study
        row["status"] = "error"
        row["error"] = _one_line(exc)
        row["traceback"] = "".join(traceback.format_exception(exc)[-6:])
    row["wall_s"] = time.perf_counter() - t0
    return row


def failed_row(task: dict[str, Any], status: str, error: str, wall_s: float | None) -> dict[str, Any]:
    row = base_row(task)
    row.update(status=status, error=error, wall_s=wall_s, time_s=wall_s, host=None)
    return row


def hard_limit_for(time_limit_s: float | None) -> float | None:
    """Default wall limit of one pair: 1.5 x its time limit + 10 s for loading, simulating and checking."""
    return None if time_limit_s is None else 1.5 * time_limit_s + 10.0


# ---------------------------------------------------------------------------------------------- local pool
# A worker is a fresh ``python -c`` process (not multiprocessing's spawn, which re-runs the caller's
# main script when it lacks an ``if __name__ == "__main__"`` guard), in a session of its own (a kill
# takes solver child processes with it; Ctrl-C reaches only the parent), talking over a socket pair.
_WORKER_BOOT = (
    "import json, os, sys; sys.path[:0] = [p for p in json.loads(os.environ.pop('DPLACE_BENCH_PATH', '[]')) "
    "if p not in sys.path]; from dplace.bench import _worker_main; _worker_main(int(sys.argv[1]))"
)


def _worker_main(fd: int) -> None:
    """Body of a local pool worker: ``worker_init`` once, then pairs until told to stop or orphaned."""
    import signal
    from multiprocessing.connection import Connection

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
    conn = Connection(fd)
    worker_init = conn.recv()
    try:
        init_worker(worker_init)
    except Exception as exc:  # noqa: BLE001 - reported with each pair below
        init_error = _one_line(exc)
    else:
        init_error = None
    from .registry import methods

    methods()  # import every method module once, before any pair's clock starts
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task, text = msg
        conn.send(("start", task["key"]))
        if init_error:
            row = failed_row(task, "error", f"worker init {worker_init!r}: {init_error}", 0.0)
        else:
            row = run_pair(task, text)
        conn.send(("row", row))


class _Slot:
    """One worker process of the local pool and the pair it is running."""

    def __init__(self, worker_init: str | None, log_path: str | None = None) -> None:
        import subprocess
        from multiprocessing.connection import Connection

        mine, theirs = socket.socketpair()
        env = dict(os.environ, DPLACE_BENCH_PATH=json.dumps([p for p in sys.path if p]))
        log = open(log_path, "ab") if log_path else None
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _WORKER_BOOT, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT if log else None,
                start_new_session=True, env=env,
            )
        finally:
            theirs.close()
            if log is not None:
                log.close()
        self.log_path = log_path
        self.conn = Connection(mine.detach())
        self.conn.send(worker_init)
        self.task: dict[str, Any] | None = None
        self.deadline = float("inf")
        self.started = 0.0

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError, OSError):
            try:
                self.proc.kill()
            except OSError:
                pass
        try:
            self.proc.wait(10)
        except Exception:  # noqa: BLE001 - a zombie we cannot reap is not worth a crash
            pass
        self.conn.close()

    def stop(self) -> None:
        """Ask an idle worker to exit; kill it if it does not within 2 s."""
        try:
            self.conn.send(None)
            self.proc.wait(2)
            self.conn.close()
        except Exception:  # noqa: BLE001
            self.kill()


def run_local(tasks: Sequence[dict[str, Any]], texts: dict[str, str], *, workers: int,
              hard_limit_s: float | None, worker_init: str | None = None,
              log_dir: str | os.PathLike | None = None) -> Iterator[dict[str, Any]]:
    """Yield one row per task from a pool of ``workers`` processes; kill a worker on overrun.

    With ``log_dir``, worker ``i`` appends its stdout/stderr to ``log_dir/worker-<i>.log``."""
    from multiprocessing.connection import wait

    pending = deque(tasks)
    slots: list[_Slot | None] = [None] * max(1, min(workers, len(tasks)))
    try:
        while pending or any(s is not None and s.task is not None for s in slots):
            if interrupt.requested():
                return  # the finally below kills the busy workers
            now = time.monotonic()
            for i, s in enumerate(slots):
                if pending and (s is None or s.task is None):
                    if s is None:
                        log = str(Path(log_dir) / f"worker-{i}.log") if log_dir is not None else None
                        s = slots[i] = _Slot(worker_init, log)
                    task = pending.popleft()
                    s.task, s.started, s.deadline = task, now, now + _WORKER_START_S
                    try:
                        s.conn.send((task, texts[task["instance_sha"]]))
                    except OSError:  # died while idle: noticed as EOF below
                        pass
            busy = [s for s in slots if s is not None and s.task is not None]
            timeout = max(0.0, min(s.deadline for s in busy) - time.monotonic())
            ready = wait([s.conn for s in busy], timeout=min(timeout, _POLL_S))
            for s in busy:
                if s.conn not in ready:
                    continue
                try:
                    kind, payload = s.conn.recv()
                except (EOFError, OSError):
                    s.kill()
                    code = s.proc.returncode
                    slots[slots.index(s)] = None
                    where = f"; its output is in {s.log_path}" if s.log_path else ""
                    yield failed_row(s.task, "crashed", f"worker died (exit code {code}){where}",
                                     time.monotonic() - s.started)
                    continue
                if kind == "start":
                    s.started = time.monotonic()
                    s.deadline = s.started + hard_limit_s if hard_limit_s is not None else float("inf")
                else:
                    task, s.task = s.task, None
                    yield payload
            now = time.monotonic()
            for i, s in enumerate(slots):
                if s is not None and s.task is not None and now > s.deadline:
                    s.kill()
                    slots[i] = None
                    yield failed_row(s.task, "timeout", f"killed after {now - s.started:.1f} s wall "
                                     f"(limit {hard_limit_s} s, time limit {s.task.get('time_limit_s')} s)",
                                     now - s.started)
    finally:
        for s in slots:
            if s is not None:
                s.kill() if s.task is not None else s.stop()


def run_inline(tasks: Sequence[dict[str, Any]], texts: dict[str, str], *,
               worker_init: str | None = None) -> Iterator[dict[str, Any]]:
    """Run the pairs one by one in this process (no hard limit: the method's own time limit only)."""
    for task in tasks:
        if interrupt.requested():
            return
        yield run_pair(task, texts[task["instance_sha"]], worker_init=worker_init)


# ---------------------------------------------------------------------------------------------- ray
def _ray_task(task: dict[str, Any], text: str, worker_init: str | None, sys_path: list[str]) -> dict[str, Any]:
    for p in sys_path:  # lets a local cluster import the driver's helper modules (e.g. test methods)
        if p not in sys.path:
            sys.path.append(p)
    return run_pair(task, text, worker_init=worker_init)


def run_ray(tasks: Sequence[dict[str, Any]], texts: dict[str, str], *, workers: int | None,
            hard_limit_s: float | None, address: str | None = None,
            worker_init: str | None = None) -> Iterator[dict[str, Any]]:
    """Yield one row per task, each pair a Ray task (``max_retries=0``); overrun -> cancelled, a timeout row.

    Uses the running Ray if this process already called ``ray.init``; else starts a local one with
    ``workers`` CPUs (or joins ``address``) and shuts it down at the end."""
    try:
        import ray
    except ImportError:
        raise InvalidInstanceError("--executor ray: the 'ray' package is not installed (pip install 'dplace[ray]')") from None
    started_here = False
    if not ray.is_initialized():
        kw: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False, "logging_level": "warning"}
        try:
            if address:
                ray.init(address=address, **kw)
            else:
                ray.init(num_cpus=workers or os.cpu_count() or 1, **kw)
        except Exception as exc:  # noqa: BLE001 - a cluster we cannot reach is the user's to fix
            raise InvalidInstanceError(f"--executor ray: cannot start/join Ray ({_one_line(exc)})") from None
        started_here = True
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task)
        capacity = workers or int(ray.cluster_resources().get("CPU", 1)) or 1
        refs_text = {sha: ray.put(t) for sha, t in texts.items() if any(k["instance_sha"] == sha for k in tasks)}
        pending = deque(tasks)
        inflight: dict[Any, tuple[dict[str, Any], float, float]] = {}
        sys_path = [p for p in sys.path if p and os.path.isdir(p)]
        while pending or inflight:
            if interrupt.requested():
                for ref in inflight:
                    try:
                        ray.cancel(ref, force=True)
                    except Exception:  # noqa: BLE001
                        pass
                return
            while pending and len(inflight) < capacity:
                task = pending.popleft()
                ref = remote.remote(task, refs_text[task["instance_sha"]], worker_init, sys_path)
                t = time.monotonic()
                deadline = t + hard_limit_s + _RAY_SLACK_S if hard_limit_s is not None else float("inf")
                inflight[ref] = (task, t, deadline)
            timeout = max(0.0, min(v[2] for v in inflight.values()) - time.monotonic())
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=min(timeout, _POLL_S))
            for ref in ready:
                task, t, _ = inflight.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - worker crash, OOM kill, ...
                    yield failed_row(task, "crashed", _one_line(exc)[:500], time.monotonic() - t)
            now = time.monotonic()
            for ref in [r for r, v in inflight.items() if now > v[2]]:
                task, t, _ = inflight.pop(ref)
                try:
                    ray.cancel(ref, force=True)
                except Exception:  # noqa: BLE001
                    pass
                yield failed_row(task, "timeout", f"cancelled after {now - t:.1f} s wall (limit {hard_limit_s} s "
                                 f"+ {_RAY_SLACK_S:.0f} s Ray slack, time limit {task.get('time_limit_s')} s)", now - t)
    finally:
        if started_here:
            ray.shutdown()


# ---------------------------------------------------------------------------------------------- the study
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


# ---------------------------------------------------------------------------------------------- CLI
def add_cli(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``dplace bench`` on the main CLI's subparsers."""
    p = subparsers.add_parser(
        "bench", help="run a study: every instance x method x repeat, gaps to the best proven bound",
        description="Run every (instance, method, repeat) pair with a time limit each, record one row per run "
                    "in OUT/rows (resumable), and write results.csv, results.json, report.md and plots in OUT.",
    )
    p.add_argument("instances", nargs="+", help="instance files, or directories of *.json (searched recursively)")
    p.add_argument("--methods", default=None, help="comma-separated method names, each optionally with options as name:key=value:key=value "
                        "(default: all registered methods, each on the instances up to its max_ops)")
    p.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S, metavar="S",
                   help=f"time limit per run in seconds, given to the method (default {DEFAULT_TIME_LIMIT_S:g})")
    p.add_argument("--hard-limit", type=float, default=None, metavar="S",
                   help="wall limit per run before the worker is killed (default 1.5 x time limit + 10)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="runs per pair, seeds seed..seed+N-1 (default 1)")
    p.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    p.add_argument("--out", default="bench-out", metavar="DIR",
                   help="output folder; reused to resume: pairs whose row has the same method, options, time limit, "
                   "seed, instance file and dplace version are skipped, the others rerun (default bench-out)")
    p.add_argument("--executor", choices=EXECUTORS, default="local", help="local process pool or Ray tasks")
    p.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--workers", type=int, default=None, metavar="N",
                   help="parallel runs (default: the machine's cores; 0 = in this process, no hard limit)")
    p.add_argument("--retry-failed", action="store_true", help="rerun pairs whose row is an error/timeout/crash")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--quiet", action="store_true", help="no progress (bar, or lines when not on a terminal) and no summary table")
    p.set_defaults(func=cmd_bench)
    return p


def cmd_bench(args: argparse.Namespace) -> int:
    run = run_bench(
        args.instances, args.methods, out=args.out, time_limit_s=args.time_limit, repeat=args.repeat,
        seed=args.seed, executor=args.executor, address=args.address, workers=args.workers,
        hard_limit_s=args.hard_limit, retry_failed=args.retry_failed, plots=not args.no_plots,
        progress=False if args.quiet else (True if sys.stderr.isatty() else "plain"),
    )
    if not args.quiet:
        from rich.console import Console
        from rich.table import Table

        from .report import summary_table_rows

        header, lines = summary_table_rows(run.summary, short=True)
        table = Table(title=f"dplace bench: {len(run.rows)} runs ({run.ran} run now, {run.skipped} resumed"
                            + (f", {run.rerun} of them rerun with new settings" if run.rerun else "")
                            + ("; INTERRUPTED" if run.interrupted else "") + "); gap = to the best proven bound")
        for h in header:
            table.add_column(h, justify="left" if h == "method" else "right", no_wrap=True)
        for line in lines:
            table.add_row(*line)
        console = Console(highlight=False)
        if console.width < 132:
            console = Console(highlight=False, width=132)
        console.print(table)
        console.print(f"wrote {Path(args.out) / 'report.md'} and {len(run.files) - 1} more file(s) in {args.out}")
    return interrupt.EXIT_CODE if run.interrupted else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dplace.bench ...``: the same command without the main CLI."""
    parser = argparse.ArgumentParser(prog="dplace")
    sub = parser.add_subparsers(dest="command", required=True)
    add_cli(sub)
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    try:
        with interrupt.handling():
            return args.func(args)
    except DplaceError as exc:
        print(f"dplace bench: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
