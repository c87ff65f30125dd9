"""The checker's rules in bulk (numpy), for large schedules: :func:`valid_in_bulk` says a result passes
every rule of :func:`dplace.verify.check.check` (both comm modes; in sequential comm the transfers' rules too:
one per tensor and destination, from the producer's device, carrying the edge's bytes, after the producer,
lasting the link's time, before the consumer, one at a time per link), or that it cannot tell; then the
rule-by-rule reference runs and words the errors. Same raw fields (op times and devices' speeds, links,
edges, pins, colocation, memory, transfers), same tolerances, no code shared with the simulator.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..instance.model import Instance

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
    """``memory_ok`` when ``data`` (a result's JSON form) passes every rule, else None (some rule may
    fail, or the data has a shape this pass does not read: the reference decides)."""
    if inst.transfer_cpu or not isinstance(data, dict):
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
    order = None
    if data.get("order_given") and data.get("order"):
        od = data["order"]
        if not isinstance(od, dict) or not all(isinstance(lst, list) for lst in od.values()):
            return None
        try:
            order = [np.array([inst.op_index[x] for x in lst], dtype=np.int64) for lst in od.values()]
        except (KeyError, TypeError):
            return None
    transfers = None
    if inst.comm == "sequential":
        transfers = _transfers_of(inst, data.get("transfers") or [], dindex)
        if transfers is None:
            return None
    return valid_arrays(inst, pdev, start, end, data.get("makespan"), data.get("memory_ok"), order, transfers)


def _transfers_of(inst: Instance, rows: Any, dindex: dict) -> tuple | None:
    """A result's transfer rows (JSON form) as columns (producers, src devices, dst devices, starts, ends,
    bytes); None when a row names an unknown op or device or holds what is not a number."""
    if not isinstance(rows, list) or not all(isinstance(t, dict) for t in rows):
        return None
    try:
        cols = (np.array([inst.op_index[t["op"]] for t in rows], dtype=np.int64),
                np.array([dindex[t["src"]] for t in rows], dtype=np.int64),
                np.array([dindex[t["dst"]] for t in rows], dtype=np.int64))
        nums = [_numbers([t[k] for t in rows]) for k in ("start", "end", "bytes")]
    except (KeyError, TypeError):
        return None
    if any(x is None for x in nums):
        return None
    return (*cols, *nums)


def valid_result_in_bulk(inst: Instance, result: Any) -> bool | None:
    """:func:`valid_in_bulk` of a Result object, read from its arrays (the numbers its JSON form would
    carry: placement, the schedule's start and end, makespan, memory_ok, the order if given) without
    building that form."""
    if result.instance is not inst or result.schedule is None or result.placement is None:
        return None
    s = result.schedule
    _, start, end = s.arrays()
    pdev = np.asarray(result.placement, dtype=np.int64)
    if pdev.shape != (inst.n,) or start.shape != (inst.n,) or end.shape != (inst.n,):
        return None
    order = None if result.order is None else [np.asarray(x, dtype=np.int64) for x in result.order]
    transfers = None
    if inst.comm == "sequential":
        tc = s.transfer_columns()
        transfers = (*(np.asarray(x, dtype=np.int64) for x in tc[:3]), *(np.asarray(x, dtype=np.float64) for x in tc[3:]))
        if any(x.shape != (len(tc[0]),) for x in transfers):
            return None
    return valid_arrays(inst, pdev, start, end, s.makespan, s.memory_ok, order, transfers)


def valid_arrays(inst: Instance, pdev: np.ndarray, start: np.ndarray, end: np.ndarray, makespan: Any,
                 memory_ok: Any, order: list[np.ndarray] | None, transfers: tuple | None = None) -> bool | None:
    """The rules on arrays: ``pdev[o]`` the device of op o, its ``start``/``end``, the claimed ``makespan``
    and ``memory_ok`` (None: not claimed), ``order`` (None: none given) per device the op indices in the
    order given, ``transfers`` (sequential comm; columns: producers, src devices, dst devices, starts,
    ends, bytes). ``memory_ok`` when every rule holds, else None. An instance with ``transfer_cpu``
    (receive costs), or in sequential comm without ``transfers``, is left to the rule-by-rule reference
    (None)."""
    if inst.transfer_cpu or (inst.comm == "sequential" and transfers is None):
        return None
    n, m = inst.n, inst.m
    cols = inst.columns
    names = [d.name for d in inst.devices]
    dindex = {x: d for d, x in enumerate(names)}

    # durations and start >= 0
    speed = np.array([float(d.speed) for d in inst.devices])
    if isinstance(cols.time, np.ndarray):
        t, tmap = cols.time, cols.time_map
    elif set(map(type, cols.time)) <= {int, float}:  # no per-device times (isinstance(x, Mapping) is slow)
        t, tmap = np.array(cols.time, dtype=np.float64), {}
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
    by_dev = np.lexsort((end, start, pdev))
    s1, f1, d1 = start[by_dev], end[by_dev], pdev[by_dev]
    same = d1[1:] == d1[:-1]
    bad = ~_close_ge(s1[1:], f1[:-1]) & (f1[1:] > s1[1:]) & (f1[:-1] > s1[:-1])
    if (same & bad).any():
        return None

    # precedence with transfer delays
    src, dst = inst._esrc_a, inst._edst_a
    nbytes = np.asarray(cols.nbytes, dtype=np.float64)
    lat = np.full((m, m), float(inst.link.latency))
    bw = np.full((m, m), float(inst.link.bandwidth))
    for (a, b), lk in inst.pairs.items():
        lat[dindex[a], dindex[b]], bw[dindex[a], dindex[b]] = float(lk.latency), float(lk.bandwidth)
    du, dv = pdev[src], pdev[dst]
    if inst.comm == "sequential":
        if not _transfers_hold(n, m, src, dst, du, dv, nbytes, start, end, lat, bw, transfers):
            return None
    else:
        need = np.where(du == dv, end[src], end[src] + lat[du, dv] + nbytes / bw[du, dv])
        if not _close_ge(start[dst], need).all():
            return None

    # pins and colocation
    if cols.pin_names is not None:
        pins = np.array([dindex.get(x, -2) for x in cols.pin_names] + [-1], dtype=np.int64)[np.asarray(cols.pin, dtype=np.int64)]
    else:
        pins = np.asarray(cols.pin_codes(names), dtype=np.int64)
    if ((pins >= 0) & (pins != pdev)).any():
        return None
    g = inst._group_of_a
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
    mem = np.asarray(cols.mem)
    if mem.dtype.kind in "iu" and (not n or int(mem.max()) * n < 2**62):
        used_a = np.zeros(m, dtype=np.int64)
        np.add.at(used_a, pdev, mem.astype(np.int64))
        used = used_a.tolist()
    else:
        used = [0] * m
        for x, d in zip(mem.tolist(), pdev.tolist()):
            used[d] += int(x)
    ok = all(used[d] <= inst.devices[d].memory for d in range(m))
    if memory_ok is not None and bool(memory_ok) != ok:
        return None

    # makespan and order
    last = float(end.max()) if n else 0.0
    if makespan is not None and (type(makespan) not in (int, float) or not _close(float(makespan), last)):
        return None
    for lst in order or ():
        s = start[lst]
        if len(s) > 1 and not _close_ge(s[1:], s[:-1]).all():
            return None
    return ok


def _transfers_hold(n: int, m: int, src: np.ndarray, dst: np.ndarray, du: np.ndarray, dv: np.ndarray,
                    nbytes: np.ndarray, start: np.ndarray, end: np.ndarray, lat: np.ndarray, bw: np.ndarray,
                    transfers: tuple) -> bool:
    """Sequential comm's precedence and link rules (the reference's, in bulk): an edge on one device waits
    for its producer; an edge across devices for the one transfer of its producer to the consumer's
    device, which leaves the producer's device after the producer ends, carries at least the edge's
    bytes, lasts the link's latency + bytes / bandwidth, and arrives before the consumer starts; the
    transfers of one link do not overlap."""
    tp, ts_dev, td_dev, ts, te, tb = transfers
    if len(tp) and (tp.min() < 0 or tp.max() >= n or min(ts_dev.min(), td_dev.min()) < 0
                    or max(ts_dev.max(), td_dev.max()) >= m):
        return False
    key = tp * m + td_dev  # one transfer per (producer, destination)
    if len(key) != len(np.unique(key)):
        return False
    same = du == dv
    if not _close_ge(start[dst[same]], end[src[same]]).all():
        return False
    cross = ~same
    at = np.full(n * m, -1, dtype=np.int64)
    at[key] = np.arange(len(key))
    t = at[src[cross] * m + dv[cross]]
    if (t < 0).any():
        return False
    a, b = du[cross], dv[cross]
    if (ts_dev[t] != a).any() or (tb[t] + TOL < nbytes[cross]).any():
        return False
    if not (_close_ge(ts[t], end[src[cross]]) & _close_ge(start[dst[cross]], te[t])).all():
        return False
    run, want = te - ts, lat[ts_dev, td_dev] + tb / bw[ts_dev, td_dev]
    ulp4 = 4 * np.spacing(np.maximum(np.abs(ts), np.abs(te)))
    used = np.zeros(len(key), dtype=bool)  # the reference times only the transfers some edge needs
    used[t] = True
    if not (_close(run, want) | (np.abs(run - want) <= ulp4))[used].all():
        return False
    by_link = np.lexsort((te, ts, td_dev, ts_dev))
    s1, f1, l1 = ts[by_link], te[by_link], (ts_dev * m + td_dev)[by_link]
    bad = ~_close_ge(s1[1:], f1[:-1]) & (f1[:-1] > s1[:-1]) & (f1[1:] > s1[1:])
    return not (bad & (l1[1:] == l1[:-1])).any()
