"""Why a nearly-chain graph's sequential answer stays where it is (issue 25 item 3, ResNeXt-50): the link time
that memory forces at the chain's cuts.

The units (colocation groups: a layer's forward and backward ops; single ops alone) are taken in the order of their
first op's topological position, a chain. Cutting between positions k and k + 1 costs ``cost[k]``: the link time,
in sequential comm, of the tensors crossing it in both directions, one send per producer (its largest edge across,
``latency + bytes / bandwidth`` on the cheapest link), an edge counted at every cut it spans. The cut model
(CP-SAT, ``min_cuts``): each unit on one device, every device's memory within its capacity, minimise the sum
of ``cost[k]`` over the k where the next unit's device differs. That is a model of ours, **not a proven bound** (a
skip edge is counted at every cut it spans, and off-path sends need not delay the makespan); it tells how much link
time memory forces on a chain, beside the critical path's compute.

Printed per graph: the critical path (compute only), the model's least cut cost and its segments, that
placement simulated in ``placement_order``'s order, and with ``--answer`` a result file's own cuts.

    .venv/bin/dplace convert pipedream instances/sources/pipedream-profiles/resnext50.graph.txt --devices 4 \\
        --memory-fraction 0.4 --comm sequential --out /tmp/rx.json
    .venv/bin/python benchmarks/bench_chaincuts.py /tmp/rx.json --answer r.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def chain(inst) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pos, mem, cost): each op's unit position on the chain, each position's memory (bytes), and each cut's
    link time (µs; ``cost[k]`` between positions k and k + 1, both directions, module docstring)."""
    key: dict = {}
    uid = np.array([key.setdefault(("g", g) if g >= 0 else ("o", o), len(key))
                    for o, g in enumerate(inst.group_of)], dtype=np.int64)
    first = np.full(len(key), np.iinfo(np.int64).max)
    np.minimum.at(first, uid, np.asarray(inst.topo_pos, dtype=np.int64))
    rank = np.empty(len(key), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(key))
    pos = rank[uid]
    mem = np.zeros(len(key))
    np.add.at(mem, pos, np.asarray(inst.mem, dtype=float))
    pairs = [(a, b) for a in range(inst.m) for b in range(inst.m) if a != b]  # a send's time: its cheapest link
    per: dict[tuple[int, int, int], float] = {}  # (cut, producer, direction) -> its largest edge's link time
    for e in range(len(inst.esrc)):
        u, v = int(inst.esrc[e]), int(inst.edst[e])
        pu, pv = int(pos[u]), int(pos[v])
        if pu == pv:
            continue
        t = min(inst.lat[a][b] + float(inst.ebytes[e]) / inst.bw[a][b] for a, b in pairs)
        for k in range(min(pu, pv), max(pu, pv)):
            per[(k, u, pu < pv)] = max(per.get((k, u, pu < pv), 0.0), t)
    cost = np.zeros(max(0, len(key) - 1))
    for (k, _, _), t in per.items():
        cost[k] += t
    return pos, mem, cost


def min_cuts(inst, mem: np.ndarray, cost: np.ndarray, seconds: float) -> tuple[float, float, list[int]]:
    """The cut model (module docstring) by CP-SAT: (objective, CP-SAT's bound on it, device of each position)."""
    from ortools.sat.python import cp_model

    n_u, m = len(mem), inst.m
    md = cp_model.CpModel()
    x = [[md.NewBoolVar(f"x{k},{d}") for d in range(m)] for k in range(n_u)]  # x[k][d]: position k on d
    z = [md.NewBoolVar(f"z{k}") for k in range(n_u - 1)]  # z[k]: positions k and k + 1 on different devices
    for k in range(n_u):
        md.AddExactlyOne(x[k])
    for d in range(m):
        md.Add(sum(int(mem[k]) * x[k][d] for k in range(n_u)) <= int(inst.devices[d].memory))
    for k in range(n_u - 1):
        for d in range(m):
            md.Add(z[k] >= x[k][d] - x[k + 1][d])
    if len({d.memory for d in inst.devices}) == 1:  # devices alike in memory: the first unit's device named 0
        md.Add(x[0][0] == 1)
    md.Minimize(sum(int(round(cost[k])) * z[k] for k in range(n_u - 1)))
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = seconds
    s.parameters.num_workers = 2
    st = s.Solve(md)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise RuntimeError(f"cut model: {s.StatusName(st)}")
    dev = [next(d for d in range(m) if s.Value(x[k][d])) for k in range(n_u)]
    return float(s.ObjectiveValue()), float(s.BestObjectiveBound()), dev


def segments(dev: list[int]) -> list[tuple[int, int, int]]:
    """(device, first position, last position) of each run of equal devices."""
    out: list[list[int]] = []
    for k, d in enumerate(dev):
        if out and out[-1][0] == d:
            out[-1][2] = k
        else:
            out.append([d, k, k])
    return [tuple(s) for s in out]


def report(inst, answer: dict | None = None, seconds: float = 10.0) -> dict:
    """The figures of one graph (module docstring), as a dict."""
    from dplace import critical_path_length, simulate
    from dplace.formulations.units import placement_order

    pos, mem, cost = chain(inst)
    obj, lb, dev = min_cuts(inst, mem, cost, seconds)
    pl = [int(dev[pos[o]]) for o in range(inst.n)]
    s = simulate(inst, pl, placement_order(inst, pl))
    out = {"units": len(mem), "critical_path": critical_path_length(inst), "cut_cost": obj, "cut_cost_bound": lb,
           "segments": segments(dev), "simulated": s.makespan, "memory_ok": s.memory_ok}
    if answer is not None:
        from dplace import result_from_dict

        res = result_from_dict(inst, answer)  # validated and simulated again
        adev = [-1] * len(mem)
        for o in range(inst.n):
            adev[pos[o]] = res.placement[o]  # a unit's ops share a device
        out["answer"] = {"makespan": res.makespan, "segments": segments(adev),
                         "cut_cost": float(sum(cost[k] for k in range(len(mem) - 1) if adev[k] != adev[k + 1]))}
    return out


def main(argv: list[str] | None = None) -> int:
    import dplace

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("instance")
    ap.add_argument("--answer", help="a result file (dplace solve --out) whose cuts to show")
    ap.add_argument("--cp-s", type=float, default=10.0, help="CP-SAT's time on the cut model (s)")
    a = ap.parse_args(argv)
    inst = dplace.load_instance(a.instance)
    ans = json.load(open(a.answer)) if a.answer else None
    print(json.dumps(report(inst, ans, a.cp_s), indent=1, default=float))
    print("load", open("/proc/loadavg").read().split()[:3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
