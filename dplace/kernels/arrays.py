"""An :class:`~dplace.instance.model.Instance` as flat numpy arrays, the form every compiled kernel takes.

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


def inst_arrays(inst) -> InstArrays:
    """Build (once, cached on the instance) the arrays of ``inst``, from the arrays it holds (no per-op
    Python lists are built or read)."""
    got = inst.__dict__.get("_kernel_arrays")
    if got is not None:
        return got
    pred_ptr, pred_edge = inst._pred_csr
    succ_ptr, succ_edge = inst._succ_csr
    a = InstArrays(
        n=inst.n, m=inst.m,
        dur=np.ascontiguousarray(inst._dur_a, dtype=np.float64),
        mem=inst._mem_a,
        capacity=np.asarray(inst.capacity, dtype=np.int64),
        esrc=inst._esrc_a, edst=inst._edst_a, ebytes=np.asarray(inst._ebytes_a, dtype=np.float64),
        pred_ptr=pred_ptr, pred_edge=pred_edge, succ_ptr=succ_ptr, succ_edge=succ_edge,
        lat=np.asarray(inst.lat, dtype=np.float64).reshape(inst.m, inst.m),
        bw=np.asarray(inst.bw, dtype=np.float64).reshape(inst.m, inst.m),
        pinned=inst._pinned_a, group_of=inst._group_of_a,
        group_ptr=inst._group_ptr, group_members=inst._group_members,
        topo=inst._topo_a, topo_pos=inst._topo_pos_a,
        sequential=inst.comm == "sequential",
    )
    for name in ("dur", "mem", "esrc", "edst", "ebytes", "pred_ptr", "pred_edge", "succ_ptr", "succ_edge",
                 "pinned", "group_of", "group_ptr", "group_members", "topo", "topo_pos"):
        getattr(a, name).flags.writeable = False  # shared with the instance: read-only
    inst.__dict__["_kernel_arrays"] = a
    return a
