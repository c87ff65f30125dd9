"""Pictures of a schedule: a Gantt chart (PNG, matplotlib) and Chrome trace events (Perfetto).

The Gantt chart draws one lane per device and, below them, one lane per directed link that carries
tensors. With few ops in view every op is a bar (labelled when there is room); with many, ops are
aggregated: each column of a device lane is stacked by how much of that time slice each op type (or
colocation group) keeps the device busy, and a link lane shows the share of each slice in which the link
carries at least one tensor. Both scale to any graph size (numpy, one polygon per lane and colour).
"""
from __future__ import annotations

import heapq
import io
import json
from typing import Any, Sequence

from .errors import InvalidInstanceError
from .instance.io import write_atomic
from .result import Result

COLOR_BY = ("auto", "type", "colocation", "op")
MAX_COLORS = 12  # categories with their own colour; the rest are "other"
DETAIL_OPS = 300  # at most this many ops in view: one bar per op, else aggregated columns
BINS = 1000  # columns of an aggregated chart
LINK_COLOR = "#4a6fa5"


def tracks(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """Track index of each ``(start, end)`` so intervals on one track never overlap (touching ends are
    fine): greedy interval partitioning in start order, the fewest tracks possible."""
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], intervals[i][1]))
    free: list[tuple[float, int]] = []  # (end of the track's last interval, track)
    out = [0] * len(intervals)
    n_tracks = 0
    for i in order:
        st, en = intervals[i]
        if free and free[0][0] <= st:
            _, k = heapq.heappop(free)
        else:
            k = n_tracks
            n_tracks += 1
        out[i] = k
        heapq.heappush(free, (max(st, en), k))
    return out


# ---------------------------------------------------------------------------------------- Chrome trace
def chrome_trace(res: Result) -> dict[str, Any]:
    """Chrome trace-event JSON of a Result: a thread per device and per directed link. Slices on one
    thread never overlap: concurrent transfers on a link (``comm: parallel``) get one thread each
    (``gpu0->gpu1 #2``), as Perfetto needs the slices of a track to nest."""
    inst, s = res.instance, res.schedule
    if s is None:
        return {"traceEvents": []}
    ev: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "devices"}},
        {"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "links"}},
    ]

    def thread(pid: int, tid: int, name: str) -> None:
        ev.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        ev.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}})

    # devices: one track each (a second one only if a schedule overlapped ops, which check() reports)
    by_dev: dict[int, list[int]] = {}
    for o in range(inst.n):
        by_dev.setdefault(s.placement[o], []).append(o)
    tid = 0
    dev_tid: dict[tuple[int, int], int] = {}
    for d in range(inst.m):
        ops = by_dev.get(d, [])
        ks = tracks([(s.start[o], s.end[o]) for o in ops])
        for k in range(max(ks, default=0) + 1):
            dev_tid[d, k] = tid
            thread(0, tid, inst.devices[d].name + (f" #{k + 1}" if k else ""))
            tid += 1
        for o, k in zip(ops, ks):
            op = inst.ops[o]
            ev.append({"name": op.id, "cat": op.type or "op", "ph": "X", "pid": 0, "tid": dev_tid[d, k],
                       "ts": s.start[o], "dur": s.end[o] - s.start[o], "args": {"memory": inst.mem[o]}})
    # links: concurrent transfers on their own tracks
    by_link: dict[tuple[int, int], list[int]] = {}
    for i, t in enumerate(s.transfers):
        by_link.setdefault((t[1], t[2]), []).append(i)
    tid = 0
    for (a, b) in sorted(by_link):
        idx = by_link[a, b]
        ks = tracks([(s.transfers[i][3], s.transfers[i][4]) for i in idx])
        base = tid
        name = f"{inst.devices[a].name}->{inst.devices[b].name}"
        for k in range(max(ks) + 1):
            thread(1, base + k, name + (f" #{k + 1}" if k else ""))
        tid += max(ks) + 1
        for i, k in zip(idx, ks):
            p, _, _, st, en, nb = s.transfers[i]
            ev.append({"name": inst.ops[p].id, "cat": "transfer", "ph": "X", "pid": 1, "tid": base + k,
                       "ts": st, "dur": en - st, "args": {"bytes": nb}})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "otherData": {"instance": inst.name, "method": res.method, "makespan_us": s.makespan}}


def write_trace(res: Result, path: str) -> None:
    """Write :func:`chrome_trace` to ``path`` atomically."""
    write_atomic(path, json.dumps(chrome_trace(res)))


# ---------------------------------------------------------------------------------------- Gantt chart
def write_gantt(res: Result, path: str, **kw: Any) -> None:
    """Write :func:`gantt_png` to ``path`` atomically."""
    write_atomic(path, gantt_png(res, **kw))


def parse_window(text: str) -> tuple[float, float]:
    """``"T0:T1"`` (µs; either side may be empty: from 0 / to the makespan) as a pair; ``inf`` stands for
    an open end. A malformed window is an :class:`InvalidInstanceError` naming it."""
    parts = text.split(":")
    try:
        if len(parts) != 2:
            raise ValueError
        t0 = float(parts[0]) if parts[0].strip() else 0.0
        t1 = float(parts[1]) if parts[1].strip() else float("inf")
    except ValueError:
        raise InvalidInstanceError(f"--gantt-window must look like T0:T1 in µs (e.g. 0:5000), got {text!r}") from None
    if not (t0 >= 0 and t1 > t0) or t0 != t0:
        raise InvalidInstanceError(f"--gantt-window: need 0 <= T0 < T1, got {text!r}")
    return t0, t1


def _categories(res: Result, color_by: str, detail: bool) -> tuple[str, list[int], list[str]]:
    """(the key used, category index per op, category names, by busy time; the last may be "other")."""
    inst, s = res.instance, res.schedule
    if color_by not in COLOR_BY:
        raise InvalidInstanceError(f"gantt: color_by must be one of {', '.join(COLOR_BY)}, got {color_by!r}")
    if color_by == "auto":
        color_by = ("type" if len({op.type for op in inst.ops}) > 1
                    else "colocation" if inst.groups else "op")
    if color_by == "op":
        if detail:  # a colour per op, cycling; no legend
            return color_by, list(range(inst.n)), [op.id for op in inst.ops]
        return color_by, [0] * inst.n, ["ops (too many to colour one by one)"]
    if color_by == "type":
        key = [op.type or "(no type)" for op in inst.ops]
    else:
        key = [inst.group_names[g] if g >= 0 else "(no group)" for g in inst.group_of]
    busy: dict[str, float] = {}
    for o in range(inst.n):
        busy[key[o]] = busy.get(key[o], 0.0) + (s.end[o] - s.start[o])
    ranked = sorted(busy, key=lambda k: (-busy[k], k))
    if len(ranked) > MAX_COLORS:
        keep = ranked[:MAX_COLORS - 1]
        names = keep + [f"other ({len(ranked) - len(keep)} more)"]
    else:
        keep = names = ranked
    index = {k: i for i, k in enumerate(keep)}
    other = len(names) - 1
    return color_by, [index.get(k, other) for k in key], names


def _busy_integral(starts: Any, ends: Any, xs: Any) -> Any:
    """F(x) = sum over intervals of the part of [start, end] before x, at every x (numpy, O((k + len(xs))
    log k)); intervals may overlap."""
    import numpy as np

    S = np.sort(starts)
    E = np.sort(ends)
    PS = np.concatenate(([0.0], np.cumsum(S)))
    PE = np.concatenate(([0.0], np.cumsum(E)))
    cs = np.searchsorted(S, xs, side="right")
    ce = np.searchsorted(E, xs, side="right")
    return (cs * xs - PS[cs]) - (ce * xs - PE[ce])


def _union(starts: Any, ends: Any) -> tuple[Any, Any]:
    """The union of intervals as sorted disjoint intervals (numpy arrays)."""
    import numpy as np

    if len(starts) == 0:
        return starts, ends
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [len(s) - 1]))
    return s[first], reach[last]


def _step_polygon(edges: Any, low: Any, high: Any) -> Any:
    """Vertices of the area between two step functions (one value per bin between ``edges``)."""
    import numpy as np

    xs = np.repeat(edges, 2)[1:-1]
    return np.column_stack((np.concatenate((xs, xs[::-1])),
                            np.concatenate((np.repeat(high, 2), np.repeat(low, 2)[::-1]))))


def gantt_png(res: Result, max_labels: int = 60, *, color_by: str = "auto",
              window: tuple[float, float] | None = None, detail_ops: int = DETAIL_OPS) -> bytes:
    """PNG bytes of the schedule's Gantt chart; see the module docstring.

    ``color_by``: ``type`` (op type), ``colocation`` (group), ``op`` (each op its own colour, for small
    graphs) or ``auto`` (type when ops have types, else colocation groups, else ops). ``window``:
    ``(t0, t1)`` µs to zoom on (clipped to the makespan). With at most ``detail_ops`` ops in view each op
    is a bar (labelled when at most ``max_labels``), else columns aggregate them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.collections import PolyCollection
    from matplotlib.patches import Patch

    inst, s = res.instance, res.schedule
    if s is None:
        raise InvalidInstanceError(f"gantt: result of {res.method!r} has no schedule (status {res.status})")
    mk = s.makespan
    t0, t1 = (0.0, mk) if window is None else (max(0.0, window[0]), min(window[1], mk))
    if window is not None and not t1 > t0:
        raise InvalidInstanceError(f"gantt: window {window[0]:g}:{window[1]:g} µs lies outside the schedule "
                                   f"(makespan {mk:g} µs)")
    if t1 <= t0:  # every op takes 0 µs
        t1 = t0 + 1.0
    st = np.asarray(s.start, dtype=float)
    en = np.asarray(s.end, dtype=float)
    pl = np.asarray(s.placement, dtype=int)
    in_view = (en >= t0) & (st <= t1)
    n_view = int(in_view.sum())
    detail = n_view <= detail_ops
    color_by, cat, names = _categories(res, color_by, detail)
    K = len(names)
    per_op = color_by == "op" and detail
    base_cmap = plt.get_cmap("tab20")
    palette = [base_cmap(i) for i in (0, 2, 4, 6, 8, 10, 12, 16, 18, 1, 3, 5, 9, 11, 13, 17, 19)]
    colors = [palette[i % len(palette)] for i in range(K)]
    if not per_op and names[-1].startswith("other ("):
        colors[-1] = (0.62, 0.62, 0.62, 1.0)

    cat_a = np.asarray(cat, dtype=int)

    # lanes: devices, then one per directed link with transfers (one per destination device when there
    # are more than two per device); y grows down
    tr = s.transfers
    by_dst = len({(a, b) for (_, a, b, _, _, _) in tr}) > 2 * inst.m
    lane_of = [(-1 if by_dst else a, b) for (_, a, b, _, _, _) in tr]
    links = sorted(set(lane_of))
    lane_y = {d: float(d) for d in range(inst.m)}
    link_y = {lk: inst.m + 0.3 + 0.55 * i for i, lk in enumerate(links)}
    dev_h, link_h = 0.8, 0.4
    height = 1.8 + 0.55 * inst.m + 0.26 * len(links) + (0 if per_op else 0.3 + 0.2 * ((K + 5) // 6))
    fig, ax = plt.subplots(figsize=(13, max(2.5, height)))

    if detail:
        bars: dict[tuple[int, int], list[tuple[float, float]]] = {}
        for o in np.flatnonzero(in_view):
            bars.setdefault((int(pl[o]), int(cat_a[o])), []).append((st[o], en[o] - st[o]))
        for (d, c), xs in sorted(bars.items()):
            ax.broken_barh(xs, (lane_y[d] - dev_h / 2, dev_h), facecolors=colors[c], edgecolors="black",
                           linewidth=0.3)
        if n_view <= max_labels:
            for o in np.flatnonzero(in_view):
                w = min(en[o], t1) - max(st[o], t0)
                label = inst.ops[o].id
                if w > (t1 - t0) * 0.0075 * max(3, len(label)):
                    ax.text(max(st[o], t0) + w / 2, lane_y[int(pl[o])], label, ha="center", va="center",
                            fontsize=7, clip_on=True)
        for lk in links:
            idx = [i for i, t in enumerate(tr) if lane_of[i] == lk and t[4] >= t0 and t[3] <= t1]
            ks = tracks([(tr[i][3], tr[i][4]) for i in idx])
            n_k = max(ks, default=0) + 1
            h = link_h / n_k
            for k in range(n_k):
                bars = [(tr[i][3], tr[i][4] - tr[i][3]) for i, kk in zip(idx, ks) if kk == k]
                ax.broken_barh(bars, (link_y[lk] - link_h / 2 + k * h, h * 0.85), facecolors=LINK_COLOR,
                               edgecolors="none")
            if len(tr) <= max_labels:  # name each tensor by its producer where there is room
                for i, k in zip(idx, ks):
                    w = min(tr[i][4], t1) - max(tr[i][3], t0)
                    label = inst.ops[tr[i][0]].id
                    if w > (t1 - t0) * 0.0065 * max(3, len(label)) and n_k <= 2:
                        ax.text(max(tr[i][3], t0) + w / 2, link_y[lk] - link_h / 2 + (k + 0.42) * h, label,
                                ha="center", va="center", fontsize=6, color="white", clip_on=True)
    else:
        polys: list[tuple[Any, Any]] = []
        edges = np.linspace(t0, t1, BINS + 1)
        width = edges[1] - edges[0]
        for d in range(inst.m):
            bottom = np.zeros(BINS)
            for c in range(K):
                sel = (pl == d) & (cat_a == c) & in_view
                if not sel.any():
                    continue
                F = _busy_integral(st[sel], en[sel], edges)
                share = np.clip(np.diff(F) / width, 0.0, 1.0)
                top = np.minimum(bottom + share, 1.0)
                y0 = lane_y[d] + dev_h / 2  # lanes fill upwards from their bottom edge (y axis inverted)
                polys.append((_step_polygon(edges, y0 - bottom * dev_h, y0 - top * dev_h), colors[c]))
                bottom = top
        for lk in links:
            sel = [i for i in range(len(tr)) if lane_of[i] == lk]
            us, ue = _union(np.array([tr[i][3] for i in sel]), np.array([tr[i][4] for i in sel]))
            share = np.clip(np.diff(_busy_integral(us, ue, edges)) / width, 0.0, 1.0)
            y0 = link_y[lk] + link_h / 2
            polys.append((_step_polygon(edges, np.full(BINS, y0), y0 - share * link_h), LINK_COLOR))
        ax.add_collection(PolyCollection([p for p, _ in polys], facecolors=[c for _, c in polys], linewidths=0),
                          autolim=False)
    for d in range(inst.m):  # lane frames, so idle time reads as white inside a box
        ax.add_patch(plt.Rectangle((t0, lane_y[d] - dev_h / 2), t1 - t0, dev_h, fill=False, linewidth=0.4,
                                   edgecolor="#888888"))
    for lk in links:
        ax.add_patch(plt.Rectangle((t0, link_y[lk] - link_h / 2), t1 - t0, link_h, fill=False, linewidth=0.4,
                                   edgecolor="#888888"))
    if links:
        ax.axhline(inst.m - 0.5 + 0.12, color="#444444", linewidth=0.6)
    ticks = [lane_y[d] for d in range(inst.m)] + [link_y[lk] for lk in links]
    labels = [dv.name for dv in inst.devices] + [
        f"→ {inst.devices[b].name}" if a < 0 else f"{inst.devices[a].name}→{inst.devices[b].name}" for a, b in links]
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=8 if len(ticks) > 12 else 9)
    ax.set_ylim(max(ticks) + 0.6, -0.6)
    ax.set_xlim(t0, t1)
    ax.set_xlabel("time (µs)")
    zoom = "" if window is None else f", window {t0:,.6g}–{t1:,.6g} µs"
    ax.set_title(f"{inst.name} — {res.method}: makespan {mk:,.1f} µs, {inst.n:,} ops on {inst.m} devices{zoom}",
                 fontsize=10, pad=16)
    if detail:
        note = f"one bar per op ({n_view:,} in view)"
    else:
        note = (f"{n_view:,} ops in view, aggregated: a device column is stacked by the share of its "
                f"{(t1 - t0) / BINS:,.4g} µs slice each {color_by} keeps the device busy; a link column by the share "
                "in which the link carries a tensor")
    if links:
        note += ("; lanes below: transfers " + ("into each device" if by_dst else "on each directed link")
                 + (", concurrent ones on sub-rows" if detail else ""))
    ax.text(0.0, 1.005, note, transform=ax.transAxes, fontsize=7, va="bottom", ha="left", color="#333333")
    if not per_op:
        handles = [Patch(facecolor=colors[c], edgecolor="black", linewidth=0.3, label=names[c]) for c in range(K)]
        ax.legend(handles=handles, title=f"colour = {color_by}", loc="upper center", bbox_to_anchor=(0.5, -0.16),
                  ncol=min(6, K), fontsize=7, title_fontsize=7, frameon=False)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()
