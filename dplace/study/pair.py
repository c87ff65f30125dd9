"""One pair of a study, run where an executor puts it: :func:`run_pair` solves it and returns its row
(never raises: a method's error is a row); :func:`failed_row` is the row of a pair that never returned
(timeout, crash). ``worker_init`` (``module`` or ``module:function``) runs once per process, e.g. to
register extra methods."""
from __future__ import annotations

import importlib
import json
import socket
import time
import traceback
from collections import OrderedDict
from typing import Any

from ..errors import DplaceError
from ..instance.io import instance_from_dict
from .plan import parse_method_spec


POLL_S = 0.5  # how often the executors look at the Ctrl-C flag
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


def one_line(exc: BaseException) -> str:
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
    from ..bounds import lower_bound
    from ..verify.check import check
    from ..registry import solve

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
        row["transformed"] = res.transform is not None
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
        row["error"] = one_line(exc)
        row["traceback"] = "".join(traceback.format_exception(exc)[-6:])
    row["wall_s"] = time.perf_counter() - t0
    return row


def failed_row(task: dict[str, Any], status: str, error: str, wall_s: float | None) -> dict[str, Any]:
    row = base_row(task)
    row.update(status=status, error=error, wall_s=wall_s, time_s=wall_s, host=None)
    return row
