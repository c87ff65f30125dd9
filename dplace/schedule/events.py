"""The simulator's event loop: the one kernel that times a placement (and optional per-device order)
by the rules in :mod:`dplace.simulate`'s docstring. ``simulate`` calls it on a whole instance;
``ScheduleState`` calls it to re-time everything it has committed (its replay), with ``active``
marking the committed ops.

Compiled twin of the parallel-comm event loop: :mod:`dplace.kernels.sim` (tests/kernels/test_kernels.py).
"""
from __future__ import annotations

import heapq
from typing import Sequence

from ..instance.model import Instance

_FINISH, _READY = 0, 1

Transfer = tuple[int, int, int, float, float, float]  # (producer, src dev, dst dev, start, end, bytes)


def run_events(inst: Instance, pl: Sequence[int], lists: Sequence[Sequence[int]] | None,
               active: Sequence[bool] | None = None, receive: bool = True
               ) -> tuple[list[float], list[float], list[Transfer], int, list[int]]:
    """Time ``pl`` by the simulator's rules: with ``lists`` each device runs its list exactly, without
    it a free device starts the op that became ready first (ties: topological index).

    ``active`` (order mode only): the ops that exist (the others, and so their successors, never run,
    and sequential sends carry only the tensors of active consumers). Returns (start, end, transfers,
    number of ops that ran, per device the position reached in its list)."""
    n, m = inst.n, inst.m
    dur, succ, edst, ebytes = inst.dur, inst.succ, inst.edst, inst.ebytes
    lat, bw, topo_pos = inst.lat, inst.bw, inst.topo_pos
    sequential = inst.comm == "sequential"
    recv = inst.receive_times(pl, active) if receive and inst.transfer_cpu else None  # receive costs (``transfer_cpu``)

    start = [0.0] * n
    end = [0.0] * n
    ready_at = [0.0] * n
    waiting = [len(p) for p in inst.pred]
    is_ready = [False] * n
    busy = [False] * m
    dev_heap: list[list[tuple[float, int, int]]] = [[] for _ in range(m)]
    nxt = [0] * m  # order mode: position in the device's list
    link_free: dict[tuple[int, int], float] = {}
    transfers: list[Transfer] = []
    events = [(0.0, _READY, topo_pos[o], o) for o in range(n)
              if waiting[o] == 0 and (active is None or active[o])]
    heapq.heapify(events)
    done = 0
    push, pop = heapq.heappush, heapq.heappop

    while events:
        t = events[0][0]
        dirty: set[int] = set()
        while events and events[0][0] <= t:
            _, kind, _, o = pop(events)
            d = pl[o]
            dirty.add(d)
            if kind == _READY:
                is_ready[o] = True
                ready_at[o] = t
                if lists is None:
                    push(dev_heap[d], (t, topo_pos[o], o))
                continue
            # an op finished
            done += 1
            busy[d] = False
            if sequential:
                per_dev: dict[int, float] = {}
                for e in succ[o]:
                    v = edst[e]
                    d2 = pl[v]
                    if d2 != d and ebytes[e] >= per_dev.get(d2, -1.0) and (active is None or active[v]):
                        per_dev[d2] = ebytes[e]
                arrive: dict[int, float] = {}
                for d2 in sorted(per_dev):
                    nbytes = per_dev[d2]
                    s = link_free.get((d, d2), 0.0)
                    s = t if t >= s else s
                    f = s + lat[d][d2] + nbytes / bw[d][d2]
                    link_free[(d, d2)] = f
                    transfers.append((o, d, d2, s, f, nbytes))
                    arrive[d2] = f
                for e in succ[o]:
                    v = edst[e]
                    d2 = pl[v]
                    if d2 == d:
                        a = t
                    elif d2 in arrive:
                        a = arrive[d2]
                    else:  # an inactive consumer: it never runs
                        continue
                    if a > ready_at[v]:
                        ready_at[v] = a
                    waiting[v] -= 1
                    if waiting[v] == 0:
                        push(events, (ready_at[v], _READY, topo_pos[v], v))
            else:
                seen_dev: dict[int, int] = {}
                for e in succ[o]:
                    v = edst[e]
                    d2 = pl[v]
                    if d2 == d:
                        a = t
                    else:
                        a = t + lat[d][d2] + ebytes[e] / bw[d][d2]
                        k = seen_dev.get(d2)
                        if k is None:
                            seen_dev[d2] = len(transfers)
                            transfers.append((o, d, d2, t, a, ebytes[e]))
                        elif a > transfers[k][4]:
                            transfers[k] = (o, d, d2, t, a, ebytes[e])
                    if a > ready_at[v]:
                        ready_at[v] = a
                    waiting[v] -= 1
                    if waiting[v] == 0:
                        push(events, (ready_at[v], _READY, topo_pos[v], v))
        # dispatch every free device that has something to start at time t
        for d in dirty:
            if busy[d]:
                continue
            if lists is None:
                h = dev_heap[d]
                if not h:
                    continue
                o = pop(h)[2]
            else:
                lst = lists[d]
                if nxt[d] >= len(lst) or not is_ready[lst[nxt[d]]]:
                    continue
                o = lst[nxt[d]]
                nxt[d] += 1
            busy[d] = True
            start[o] = t
            end[o] = f = t + dur[o][d] if recv is None else t + (dur[o][d] + recv[o])
            push(events, (f, _FINISH, topo_pos[o], o))
    return start, end, transfers, done, nxt
