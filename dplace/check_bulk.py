"""The checker's rules in bulk (numpy), for large schedules: :func:`valid_in_bulk` says a result passes
every rule of :func:`dplace.check.check` (parallel comm), or that it cannot tell; then the rule-by-rule
reference runs and words the errors. Same raw fields (op times and devices' speeds, links, edges, pins,
colocation, memory), same tolerances, no code shared with the simulator.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .model import Instance

TOL = 1e-6


def _close_ge(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a >= b - TOL * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))


def _close(a: Any, b: Any) -> Any:
    return np.abs(a - b) <= TOL * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b)))


def _numbers(vals: list) -> np.ndarray | None:
    if not set(map(type, vals)) <= {int, float}:
        return None
    try:
        return np.array(vals, dtype=np.float64)
    except OverflowError:
        return None


def valid_in_bulk(inst: Instance, data: Any) -> bool | None:
    """``memory_ok`` when ``data`` (a result's JSON form, parallel comm) passes every rule, else None
    (some rule may fail, or the data has a shape this pass does not read: the reference decides)."""
    if inst.comm != "parallel" or not isinstance(data, dict):
        return None
    pl, rows = data.get("placement"), data.get("schedule")
    n, m = inst.n, inst.m
    if not isinstance(pl, dict) or not isinstance(rows, list) or len(pl) != n or len(rows) != n:
        return None
    cols = inst.columns
    names = [d.name for d in inst.devices]
    dindex = {x: d for d, x in enumerate(names)}
    try:
        pdev = np.array([dindex[pl[x]] for x in cols.ids], dtype=np.int64)  # placement, instance order
        r_op = [r["op"] for r in rows]
        r_dev = [dindex.get(r["device"], -1) for r in rows]
        r_s, r_e = _numbers([r["start"] for r in rows]), _numbers([r["end"] for r in rows])
        idx = np.array([inst.op_index[x] for x in r_op], dtype=np.int64)
    except (KeyError, TypeError):
        return None
    if r_s is None or r_e is None or set(map(type, r_op)) != {str} or np.bincount(idx, minlength=n).max() != 1:
        return None
    if not (np.array(r_dev, dtype=np.int64) == pdev[idx]).all():
        return None
    start, end = np.empty(n), np.empty(n)
    start[idx], end[idx] = r_s, r_e

    # durations and start >= 0
    speed = np.array([float(d.speed) for d in inst.devices])
    if isinstance(cols.time, np.ndarray):
        t, tmap = cols.time, cols.time_map
    else:
        tmap = {o: x for o, x in enumerate(cols.time) if isinstance(x, Mapping)}
        t = np.array([np.nan if o in tmap else x for o, x in enumerate(cols.time)], dtype=np.float64)
    want = t / speed[pdev]
    for o, x in tmap.items():
        want[o] = float(x[names[pdev[o]]])
    run = end - start
    ulp4 = 4 * np.spacing(np.maximum(np.abs(start), np.abs(end)))
    if not ((start >= -TOL) & (_close(run, want) | (np.abs(run - want) <= ulp4))).all():
        return None

    # no overlap per device
    order = np.lexsort((end, start, pdev))
    s1, f1, d1 = start[order], end[order], pdev[order]
    same = d1[1:] == d1[:-1]
    bad = ~_close_ge(s1[1:], f1[:-1]) & (f1[1:] > s1[1:]) & (f1[:-1] > s1[:-1])
    if (same & bad).any():
        return None

    # precedence with transfer delays
    src, dst = np.asarray(inst.esrc, dtype=np.int64), np.asarray(inst.edst, dtype=np.int64)
    nbytes = np.asarray(cols.nbytes, dtype=np.float64)
    lat = np.full((m, m), float(inst.link.latency))
    bw = np.full((m, m), float(inst.link.bandwidth))
    for (a, b), lk in inst.pairs.items():
        lat[dindex[a], dindex[b]], bw[dindex[a], dindex[b]] = float(lk.latency), float(lk.bandwidth)
    du, dv = pdev[src], pdev[dst]
    need = np.where(du == dv, end[src], end[src] + lat[du, dv] + nbytes / bw[du, dv])
    if not _close_ge(start[dst], need).all():
        return None

    # pins and colocation
    pins = np.asarray(cols.pin_codes(names), dtype=np.int64)
    if ((pins >= 0) & (pins != pdev)).any():
        return None
    g = np.asarray(inst.group_of, dtype=np.int64)
    ing = g >= 0
    if ing.any():
        k = int(g.max()) + 1
        lo = np.full(k, m, dtype=np.int64)
        hi = np.full(k, -1, dtype=np.int64)
        np.minimum.at(lo, g[ing], pdev[ing])
        np.maximum.at(hi, g[ing], pdev[ing])
        if (hi[lo <= hi] != lo[lo <= hi]).any():
            return None

    # memory
    mem = cols.mem.tolist() if isinstance(cols.mem, np.ndarray) else cols.mem
    used = [0] * m
    for x, d in zip(mem, pdev.tolist()):
        used[d] += int(x)
    memory_ok = all(used[d] <= inst.devices[d].memory for d in range(m))
    claimed = data.get("memory_ok")
    if claimed is not None and bool(claimed) != memory_ok:
        return None

    # makespan and order
    last = float(end.max()) if n else 0.0
    mk = data.get("makespan")
    if mk is not None and (type(mk) not in (int, float) or not _close(float(mk), last)):
        return None
    if data.get("order_given") and data.get("order"):
        od = data["order"]
        if not isinstance(od, dict):
            return None
        for lst in od.values():
            if not isinstance(lst, list):
                return None
            try:
                s = start[[inst.op_index[x] for x in lst]]
            except (KeyError, TypeError):
                return None
            if len(s) > 1 and not _close_ge(s[1:], s[:-1]).all():
                return None
    return memory_ok
