"""TensorFlow runtime benchmark: prints three tables (no timed asserts).

1. Small-batch regression (Celeritas §4.2.1, Table 5): per-op time and memory fitted on batches
   1, 2, 4 and predicted at three larger batches, against a real profile at those batches.
2. Predicted (dplace.simulate) vs measured step time (Celeritas §6.3: 5 warm-up, 50 timed steps) on 1
   and 2 logical CPU devices, for a few placement methods.
3. The fitted link model between the logical CPUs (commfit).

    .venv/bin/python benchmarks/bench_runtime.py [--models resnet50,transformer] [--targets 8,16,32]
        [--small 1,2,4] [--batch 8] [--steps 50] [--warmup 5] [--methods single,heft,m_etf,celeritas]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODEL_OPTS = {
    "resnet50": dict(image_size=64),
    "inceptionv3": dict(image_size=75),
    "vgg19": dict(image_size=32),
    "transformer": dict(width=128, layers=2, seq_len=32),
    "lstm": dict(width=64, layers=2, seq_len=16),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet50,transformer")
    ap.add_argument("--small", default="1,2,4")
    ap.add_argument("--targets", default="8,16,32")
    ap.add_argument("--batch", type=int, default=8, help="batch of the execute table")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--prof-steps", type=int, default=5)
    ap.add_argument("--methods", default="single,heft,m_etf,celeritas")
    ap.add_argument("--skip", default="", help="comma list of tables to skip: regression,execute,commfit")
    args = ap.parse_args()

    from rich.console import Console
    from rich.table import Table

    import dplace
    from dplace.runtime import commfit, execute, profile, zoo

    zoo.ensure_logical_cpus(2)
    con = Console(width=200)
    models = [m for m in args.models.split(",") if m]
    small = [int(b) for b in args.small.split(",")]
    targets = [int(b) for b in args.targets.split(",")]
    skip = set(args.skip.split(","))
    ps = args.prof_steps

    if "regression" not in skip:
        t = Table(title=f"Small-batch regression (fit on batches {small}): mean relative deviation over ops")
        for c in ("model", "batch", "ops (mem / time≥1µs)", "mem dev", "time dev", "time dev (time-weighted)",
                  "Σ op time pred ms", "Σ op time real ms", "noise: time dev of a repeat", "(time-weighted)"):
            t.add_column(c, justify="right")
        for m in models:
            step = zoo.build_step(m, **MODEL_OPTS.get(m, {}))
            meas = [profile.measure(step, b, steps=ps, warmup=2, device="CPU:0") for b in small]
            for b in targets:
                real = profile.measure(step, b, steps=ps, warmup=2, device="CPU:0")
                e = profile.regression_error(profile.predict(meas, b), real, model=m, small_batches=small)
                # the same measurement once more: how far two real profiles of one batch are apart
                again = profile.measure(step, b, steps=ps, warmup=1, device="CPU:0")
                n = profile.regression_error(again, real)
                t.add_row(m, str(b), f"{e.n_mem} / {e.n_time}", f"{100 * e.mem_dev:.2f}%", f"{100 * e.time_dev:.1f}%",
                          f"{100 * e.time_dev_weighted:.1f}%", f"{e.step_pred_us / 1000:.1f}",
                          f"{e.step_real_us / 1000:.1f}", f"{100 * n.time_dev:.1f}%", f"{100 * n.time_dev_weighted:.1f}%")
                con.print(f"[dim]{m} batch {b} done")
        con.print(t)

    if "execute" not in skip:
        t = Table(title=f"Predicted vs measured step time, batch {args.batch} ({args.warmup} warm-up + {args.steps} "
                        "timed steps), logical CPUs")
        for c in ("model", "devices", "method", "ops per device (ran)", "predicted ms", "method's own ms",
                  "measured ms mean ± sd", "measured / predicted", "moved", "loss"):
            t.add_column(c, justify="right")
        for m in models:
            step = zoo.build_step(m, **MODEL_OPTS.get(m, {}))
            for ndev in (1, 2):
                devs = [f"CPU:{i}" for i in range(ndev)]
                inst = profile.profile(step, args.batch, devs, steps=ps, warmup=2)
                meths = ["single"] if ndev == 1 else [x for x in args.methods.split(",") if x in dplace.methods()]
                for meth in meths:
                    t0 = time.perf_counter()
                    res = dplace.solve(inst, meth, time_limit_s=60)
                    if res.placement is None:
                        t.add_row(m, str(ndev), meth, res.status, "", "", "", "", "", "")
                        continue
                    rep = execute.execute(inst, res, step, args.batch, steps=args.steps, warmup=args.warmup)
                    t.add_row(m, str(ndev), meth, ", ".join(f"{v}" for v in rep.ops_per_device.values()),
                              f"{rep.predicted_us / 1000:.1f}", f"{res.makespan / 1000:.1f}",
                              f"{rep.step_us_mean / 1000:.1f} ± {rep.step_us_std / 1000:.1f}",
                              f"{rep.step_us_mean / rep.predicted_us:.2f}", str(len(rep.ops_moved)),
                              "ok" if rep.loss_ok else "FAIL")
                    con.print(f"[dim]{m} {ndev} dev {meth} done in {time.perf_counter() - t0:.0f} s")
        con.print(t)

    if "commfit" not in skip:
        fits = commfit.fit_links(["CPU:0", "CPU:1"], reps=5)
        t = Table(title="commfit on 2 logical CPUs: copy time minus same-device call, µs")
        t.add_column("pair")
        for s, _ in fits[0].samples:
            t.add_column(f"{s // 1024} KB", justify="right")
        for c in ("latency µs", "bandwidth B/µs", "rms µs"):
            t.add_column(c, justify="right")
        for f in fits:
            t.add_row(f"{f.src}->{f.dst}", *[f"{v:.1f}" for _, v in f.samples], f"{f.latency:.1f}",
                      f"{f.bandwidth:.3g}", f"{f.residual_us:.1f}")
        con.print(t)


if __name__ == "__main__":
    main()
