"""An :class:`~dplace.model.Instance` as flat numpy arrays, the form every compiled kernel takes.

Edges keep their indices (``e`` in ``esrc[e]`` is the instance's edge ``e``); ``pred_ptr``/``pred_edge``
list each op's incoming edges in the order of ``inst.pred[o]``, ``succ_ptr``/``succ_edge`` its outgoing
ones in the order of ``inst.succ[o]`` (CSR: op o's are ``pred_edge[pred_ptr[o]:pred_ptr[o + 1]]``).
Groups: ``group_of[o]`` (-1: none), members of group g are ``group_members[group_ptr[g]:group_ptr[g + 1]]``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InstArrays:
    n: int
    m: int
    dur: np.ndarray  # (n, m) float64, µs on each device
    mem: np.ndarray  # (n,) int64 bytes
    capacity: np.ndarray  # (m,) int64 bytes
    esrc: np.ndarray  # (E,) int64
    edst: np.ndarray  # (E,) int64
    ebytes: np.ndarray  # (E,) float64
    pred_ptr: np.ndarray  # (n + 1,) int64
    pred_edge: np.ndarray  # (E,) int64
    succ_ptr: np.ndarray  # (n + 1,) int64
    succ_edge: np.ndarray  # (E,) int64
    lat: np.ndarray  # (m, m) float64 µs
    bw: np.ndarray  # (m, m) float64 bytes/µs
    pinned: np.ndarray  # (n,) int64, -1: free
    group_of: np.ndarray  # (n,) int64, -1: no group
    group_ptr: np.ndarray  # (G + 1,) int64
    group_members: np.ndarray  # (sum of group sizes,) int64
    topo: np.ndarray  # (n,) int64
    topo_pos: np.ndarray  # (n,) int64
    sequential: bool  # comm mode "sequential"


def _csr(lists) -> tuple[np.ndarray, np.ndarray]:
    sizes = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    flat = np.fromiter((v for x in lists for v in x), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


def inst_arrays(inst) -> InstArrays:
    """Build (once, cached on the instance) the arrays of ``inst``."""
    got = inst.__dict__.get("_kernel_arrays")
    if got is not None:
        return got
    pred_ptr, pred_edge = _csr(inst.pred)
    succ_ptr, succ_edge = _csr(inst.succ)
    group_ptr, group_members = _csr(inst.groups)
    a = InstArrays(
        n=inst.n, m=inst.m,
        dur=np.ascontiguousarray(np.asarray(inst.dur, dtype=np.float64).reshape(inst.n, inst.m)),
        mem=np.asarray(inst.mem, dtype=np.int64),
        capacity=np.asarray(inst.capacity, dtype=np.int64),
        esrc=np.asarray(inst.esrc, dtype=np.int64),
        edst=np.asarray(inst.edst, dtype=np.int64),
        ebytes=np.asarray(inst.ebytes, dtype=np.float64),
        pred_ptr=pred_ptr, pred_edge=pred_edge, succ_ptr=succ_ptr, succ_edge=succ_edge,
        lat=np.asarray(inst.lat, dtype=np.float64).reshape(inst.m, inst.m),
        bw=np.asarray(inst.bw, dtype=np.float64).reshape(inst.m, inst.m),
        pinned=np.asarray(inst.pinned, dtype=np.int64),
        group_of=np.asarray(inst.group_of, dtype=np.int64),
        group_ptr=group_ptr, group_members=group_members,
        topo=np.asarray(inst.topo, dtype=np.int64),
        topo_pos=np.asarray(inst.topo_pos, dtype=np.int64),
        sequential=inst.comm == "sequential",
    )
    inst.__dict__["_kernel_arrays"] = a
    return a
