"""Pictures of a schedule: a Gantt chart (PNG, matplotlib) and Chrome trace events (Perfetto)."""
from __future__ import annotations

import io
import json
from typing import Any

from .io import write_atomic
from .result import Result


def chrome_trace(res: Result) -> dict[str, Any]:
    """Chrome trace-event JSON of a Result: one thread per device, one per directed link."""
    inst, s = res.instance, res.schedule
    if s is None:
        return {"traceEvents": []}
    ev: list[dict[str, Any]] = []
    for d, dev in enumerate(inst.devices):
        ev.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": d, "args": {"name": dev.name}})
    for o in range(inst.n):
        op = inst.ops[o]
        ev.append({
            "name": op.id, "cat": op.type or "op", "ph": "X", "pid": 0, "tid": s.placement[o],
            "ts": s.start[o], "dur": s.end[o] - s.start[o], "args": {"memory": inst.mem[o]},
        })
    links: dict[tuple[int, int], int] = {}
    for (p, a, b, st, en, nb) in s.transfers:
        tid = links.get((a, b))
        if tid is None:
            tid = links[(a, b)] = len(links)
            ev.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": f"{inst.devices[a].name}->{inst.devices[b].name}"}})
        ev.append({"name": inst.ops[p].id, "cat": "transfer", "ph": "X", "pid": 1, "tid": tid,
                   "ts": st, "dur": en - st, "args": {"bytes": nb}})
    ev.append({"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "devices"}})
    ev.append({"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "links"}})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"instance": inst.name, "method": res.method, "makespan_us": s.makespan}}


def write_trace(res: Result, path: str) -> None:
    write_atomic(path, json.dumps(chrome_trace(res)))


def write_gantt(res: Result, path: str, max_labels: int = 60) -> None:
    """Write :func:`gantt_png` to ``path`` atomically."""
    write_atomic(path, gantt_png(res, max_labels))


def gantt_png(res: Result, max_labels: int = 60) -> bytes:
    """Gantt chart of the schedule (PNG bytes), one row per device, transfers as thin bars below their link."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    inst, s = res.instance, res.schedule
    if s is None:
        from .errors import InvalidInstanceError

        raise InvalidInstanceError(f"gantt: result of {res.method!r} has no schedule (status {res.status})")
    fig, ax = plt.subplots(figsize=(12, 1.0 + 0.6 * inst.m))
    cmap = plt.get_cmap("tab20")
    for o in range(inst.n):
        d = s.placement[o]
        w = s.end[o] - s.start[o]
        ax.barh(d, w, left=s.start[o], height=0.7, color=cmap(o % 20), edgecolor="black", linewidth=0.3)
        if inst.n <= max_labels and w > 0:
            ax.text(s.start[o] + w / 2, d, inst.ops[o].id, ha="center", va="center", fontsize=7)
    for (p, a, b, st, en, nb) in s.transfers:
        ax.barh(b + 0.42, en - st, left=st, height=0.12, color="grey")
    ax.set_yticks(range(inst.m))
    ax.set_yticklabels([dv.name for dv in inst.devices])
    ax.invert_yaxis()
    ax.set_xlabel("time (µs)")
    ax.set_title(f"{inst.name} — {res.method}: makespan {s.makespan:,.1f} µs")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
