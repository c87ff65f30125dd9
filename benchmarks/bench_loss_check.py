"""Why a placed step's loss can differ from the single-device step's: a lost update, or float reordering?

For one model, on 2 local workers: the loss of the first ``--loss-steps`` steps of several placements
(all on one worker — no transfer at all, only another executor's op order and kernels — and random
ones) against the client's single-device step, in float32 and then in float64
(``keras.config.set_floatx``). Reordering shrinks by ~1e-9 in float64; a lost or misplaced update does
not shrink at all.

    .venv/bin/python benchmarks/bench_loss_check.py [--model inceptionv3] [--loss-steps 3]

Each dtype runs in its own process (Keras' float type is fixed when the model is built).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODELS = {"inceptionv3": (dict(image_size=75), 2), "resnet50": (dict(image_size=32), 4),
          "transformer": (dict(width=128, layers=2, seq_len=32), 8)}


def one(model: str, dtype: str, loss_steps: int) -> list[dict]:
    import keras

    keras.config.set_floatx(dtype)
    sys.path.insert(0, os.path.dirname(__file__))
    from bench_runtime_truth import random_placement

    from dplace.runtime import extract, remote, zoo
    from dplace.runtime.cluster import LocalWorkers

    opts, batch = MODELS[model]
    step = zoo.build_step(model, **opts)
    inst = extract.extract(step, batch, ["CPU:0", "CPU:1"])
    placements = {"one worker": [0] * inst.n, "random 0": random_placement(inst, 0),
                  "random 1": random_placement(inst, 1)}
    rows = []
    with LocalWorkers(2) as w:
        for name, pl in placements.items():
            rep = remote.execute(inst, pl, step, batch, w.cluster, steps=1, warmup=loss_steps, loss_steps=loss_steps,
                                 enforce_order=False)
            diffs = [abs(a - b) / max(abs(b), 1e-30) for a, b in zip(rep.loss_placed, rep.loss_ref)]
            rows.append({"dtype": dtype, "placement": name, "moved": len(rep.ops_moved), "rel_diff": diffs,
                         "loss_ref": rep.loss_ref, "loss_placed": rep.loss_placed})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="inceptionv3", choices=sorted(MODELS))
    ap.add_argument("--loss-steps", type=int, default=3)
    ap.add_argument("--dtype", default=None, help=argparse.SUPPRESS)  # the child's own run
    args = ap.parse_args(argv)
    if args.dtype:
        print(json.dumps(one(args.model, args.dtype, args.loss_steps)))
        return 0
    rows = []
    for dtype in ("float32", "float64"):
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--loss-steps", str(args.loss_steps),
                              "--dtype", dtype], check=True, capture_output=True, text=True).stdout
        rows += json.loads(out.strip().splitlines()[-1])
    with open("/proc/loadavg") as fh:
        load = " ".join(fh.read().split()[:3])
    print(f"{args.model}: |placed loss - single-device loss| / |single-device loss| per step (load {load})")
    print(f"{'dtype':<8} {'placement':<12} {'moved':>5}  " + "  ".join(f"{'step ' + str(i + 1):>9}"
                                                              for i in range(args.loss_steps)))
    for r in rows:
        print(f"{r['dtype']:<8} {r['placement']:<12} {r['moved']:>5}  " + "  ".join(f"{d:9.2e}" for d in r["rel_diff"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
