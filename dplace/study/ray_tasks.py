"""The Ray executor: each pair a Ray task on a local Ray (``workers`` CPUs) or a cluster (``address``);
on overrun the task is cancelled with force and the pair is a ``timeout`` row. Every node of a cluster
needs dplace installed."""
from __future__ import annotations

import os
import sys
import time
from collections import deque
from typing import Any, Iterator, Sequence

from .. import interrupt
from ..errors import InvalidInstanceError
from .pair import POLL_S, failed_row, one_line, run_pair


_RAY_SLACK_S = 30.0  # Ray cannot tell when a task starts: its wall limit counts from submission plus this


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
            raise InvalidInstanceError(f"--executor ray: cannot start/join Ray ({one_line(exc)})") from None
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
            ready, _ = ray.wait(list(inflight), num_returns=1, timeout=min(timeout, POLL_S))
            for ref in ready:
                task, t, _ = inflight.pop(ref)
                try:
                    yield ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - worker crash, OOM kill, ...
                    yield failed_row(task, "crashed", one_line(exc)[:500], time.monotonic() - t)
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
