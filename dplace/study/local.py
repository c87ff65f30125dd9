"""The local executors: a pool of worker processes (:func:`run_local`) and in-process runs (:func:`run_inline`).

The pool is written here, not taken from :mod:`concurrent.futures` or :class:`multiprocessing.Pool`:
a pair that overruns its hard limit must be killed alone — with the solver processes it started — while
the other workers go on, and neither pool can stop one running task (``Future.cancel`` does not stop
a running call; killing a worker breaks a ``ProcessPoolExecutor`` and makes ``Pool`` lose the task
silently). So each worker is a ``python -c`` process in a session of its own, killed by process group;
its clock starts when it says it has begun the pair (after importing dplace), and Ctrl-C reaches only
the parent, which kills the busy workers. Spawn-based ``multiprocessing`` would also re-run a caller's
main script that lacks an ``if __name__ == "__main__"`` guard."""
from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Iterator, Sequence

from .. import interrupt
from .pair import POLL_S, failed_row, init_worker, one_line, run_pair


_WORKER_START_S = 120.0  # a fresh worker gets this long to import dplace before its pair's clock starts
_WORKER_BOOT = (
    "import json, os, sys; sys.path[:0] = [p for p in json.loads(os.environ.pop('DPLACE_BENCH_PATH', '[]')) "
    "if p not in sys.path]; from dplace.study.local import _worker_main; _worker_main(int(sys.argv[1]))"
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
        init_error = one_line(exc)
    else:
        init_error = None
    from ..registry import methods

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
            ready = wait([s.conn for s in busy], timeout=min(timeout, POLL_S))
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
