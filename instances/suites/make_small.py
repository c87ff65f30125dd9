"""Write the small exact-solvable part of the bundled bench study (instances/suites/small/*.json).

Run from the repo root: ``.venv/bin/python instances/suites/make_small.py``. Deterministic (fixed
seeds); the files are committed, so this script only documents how they were made. Each instance is a
random layered DAG of 6-12 ops on 2-3 devices, op times 5-60 µs, tensor sizes chosen for a target
communication-to-computation ratio (CCR) on the default link (10 µs latency, 12,000 bytes/µs), with one
feature each: heterogeneous speeds, per-device times, a colocation group, a pinned op, sequential
communication, tight memory.
"""
from __future__ import annotations

import random
from pathlib import Path

from dplace.instance.io import instance_from_dict, save_instance

BW = 12000.0  # bytes / µs (the format's default link)
GIB = 1 << 30


def layered(name: str, n: int, m: int, *, seed: int, ccr: float, layers: int, comm: str = "parallel",
            speeds: list[float] | None = None, per_device: bool = False, coloc: int = 0, pin: bool = False,
            tight: bool = False) -> dict:
    rng = random.Random(seed)
    sizes = [1] * layers
    for _ in range(n - layers):
        sizes[rng.randrange(1, layers - 1) if layers > 2 else rng.randrange(layers)] += 1
    ops, level, k = [], [], 0
    for li, s in enumerate(sizes):
        level.append([])
        for _ in range(s):
            oid = f"op{k}"
            k += 1
            level[-1].append(oid)
            mem = rng.randint(1, 8) * (64 << 20)
            t = rng.randint(5, 60)
            op = {"id": oid, "time": t, "memory": mem, "type": f"L{li}"}
            ops.append(op)
    devs = [f"gpu{d}" for d in range(m)]
    if per_device:
        for op in ops:
            base = op["time"]
            op["time"] = {dv: round(base * rng.uniform(0.6, 1.6), 1) for dv in devs}
    edges = []
    mean_t = sum((o["time"] if isinstance(o["time"], (int, float)) else sum(o["time"].values()) / m) for o in ops) / n
    for li in range(1, layers):
        for v in level[li]:
            srcs = rng.sample(level[li - 1], k=min(len(level[li - 1]), rng.randint(1, 2)))
            for u in srcs:
                nbytes = int(max(0.0, rng.uniform(0.5, 1.5) * ccr * mean_t - 10.0) * BW)
                edges.append({"src": u, "dst": v, "bytes": nbytes})
        # every op of the previous layer feeds something
        for u in level[li - 1]:
            if not any(e["src"] == u for e in edges):
                v = rng.choice(level[li])
                edges.append({"src": u, "dst": v, "bytes": int(ccr * mean_t * BW * 0.5)})
    if coloc:
        grp = [op["id"] for op in ops[1:1 + coloc]]
        for op in ops:
            if op["id"] in grp:
                op["colocation"] = "grp0"
    if pin:
        ops[0]["device"] = devs[-1]
    total = sum(op["memory"] for op in ops)
    cap = int(total * 0.6) if tight else 16 * GIB
    devices = [{"name": dv, "memory": cap, "speed": (speeds[d] if speeds else 1.0)} for d, dv in enumerate(devs)]
    data = {"format": "dplace-instance/1", "name": name, "devices": devices,
            "links": {"latency": 10.0, "bandwidth": BW}, "comm": comm, "ops": ops, "edges": edges,
            "source": f"instances/suites/make_small.py (seed {seed}, ccr {ccr})"}
    instance_from_dict(data)  # validate
    return data


SPECS = [
    dict(name="small_01_lowccr", n=6, m=2, seed=1, ccr=0.2, layers=3),
    dict(name="small_02_balanced", n=8, m=2, seed=2, ccr=1.0, layers=4),
    dict(name="small_03_highccr", n=8, m=3, seed=3, ccr=3.0, layers=4),
    dict(name="small_04_speeds", n=9, m=2, seed=4, ccr=0.5, layers=4, speeds=[1.0, 2.0]),
    dict(name="small_05_hetero", n=10, m=3, seed=5, ccr=1.0, layers=5, per_device=True),
    dict(name="small_06_coloc_pin", n=10, m=2, seed=6, ccr=0.8, layers=4, coloc=3, pin=True),
    dict(name="small_07_sequential", n=11, m=3, seed=7, ccr=1.5, layers=5, comm="sequential"),
    dict(name="small_08_tightmem", n=12, m=2, seed=8, ccr=0.5, layers=5, tight=True),
]

if __name__ == "__main__":
    out = Path(__file__).resolve().parent / "small"
    out.mkdir(exist_ok=True)
    for spec in SPECS:
        inst = instance_from_dict(layered(**spec))
        save_instance(inst, out / f"{spec['name']}.json")
        print(f"{spec['name']}: {inst.n} ops, {len(inst.edges)} edges, {inst.m} devices, {inst.comm}")
