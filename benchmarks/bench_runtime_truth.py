"""Runtime truth: dplace's simulated makespan against the measured step on a real TensorFlow cluster.

For each model: start N local workers (one core each, 1 intra-op / 1 inter-op thread, loopback), profile
the model for that cluster (op times on one worker from its step stats, links fitted between workers),
place it with several methods, run every placement on the cluster with its order enforced (warm-up, then
``--steps`` timed steps; the median is kept) and print, per placement: the simulated makespan with
``comm: parallel`` and ``comm: sequential``, the measured step (median and min-max), the relative error
of each mode, the record's check (0 moved, loss ok, order kept) and /proc/loadavg at that moment; per
model: Spearman's rank correlation of simulated vs measured (each mode) and the measured step of the
simulator's first choice against the best measured. Then the terms the model lacks, measured: the
per-op dispatch cost (measured single-worker step minus the sum of profiled op times, per op run; and
measured directly and folded into the op times by :func:`dplace.runtime.dispatch.fold_dispatch`, as
``dplace profile --workers`` does: the "par+disp" columns) and the cost per transfer (fitted on the placements, in-sample).

    .venv/bin/python benchmarks/bench_runtime_truth.py [--models transformer,resnet50,inceptionv3]
        [--workers 2] [--steps 10] [--warmup 3] [--portfolio-s 30] [--json out.json] [--explain]
        [--inter-threads 1]

``--explain``: first :func:`dplace.runtime.explain.busy_transfer_probe` (is a transfer served while a
worker computes?), then per model a table of where each placement's measured step goes
(:func:`dplace.runtime.explain.explain`: the simulator replayed with the run's own kernel and node times,
the traced span, per device kernel/node/idle time, every received tensor against the model's link).
``--inter-threads``: inter-op threads per worker (default 1, the issue's setting; that pool also runs the
worker's side of every transfer).

No timed asserts. On a loaded machine (this one is shared), figures are noisy: loadavg is printed beside each.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODELS = {  # small enough for one core each; different shapes: attention blocks, a deep residual chain, wide inception branches
    "transformer": (dict(width=128, layers=2, seq_len=32), 8),
    "resnet50": (dict(image_size=32), 4),
    "inceptionv3": (dict(image_size=75), 2),
    "vgg19": (dict(image_size=32), 4),
}
METHODS = ("single", "heft", "m_etf", "dpos", "celeritas", "metis", "portfolio", "random")


def loadavg() -> str:
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    import numpy as np

    def ranks(x):
        x = np.asarray(x, float)
        order = x.argsort(kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x), dtype=float)
        for v in np.unique(x):
            idx = x == v
            r[idx] = r[idx].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def random_placement(inst, seed: int) -> list[int]:
    """A random valid placement: each colocation group (or lone op) on a random device; pins kept."""
    from dplace.testing import with_groups_and_pins

    rng = random.Random(seed)
    pl = [rng.randrange(inst.m) for _ in range(inst.n)]
    return with_groups_and_pins(inst, pl, lambda ms: next(
        (inst.pinned[o] for o in ms if inst.pinned[o] >= 0), rng.randrange(inst.m)))


def transfers(inst, pl) -> int:
    """Tensors sent between devices: distinct (producer, destination device) over cross-device edges."""
    return len({(inst.esrc[e], pl[inst.edst[e]]) for e in range(len(inst.edges))
                if pl[inst.esrc[e]] != pl[inst.edst[e]]})


def per_transfer_term(rows: list[dict]) -> tuple[float, float]:
    """The cost per transfer the model lacks, fitted on one model's rows: least squares ``measured -
    simulated(parallel) = k * transfers`` (through the origin) -> (k µs, median |err| of simulated +
    k * transfers: in-sample, so an upper bound on what the term can explain)."""
    xs = [r["transfers"] for r in rows]
    ys = [r["measured_median_us"] - r["sim_parallel_us"] for r in rows]
    sxx = sum(x * x for x in xs)
    k = sum(x * y for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    errs = [abs(r["sim_parallel_us"] + k * r["transfers"] - r["measured_median_us"]) / r["measured_median_us"]
            for r in rows]
    return k, statistics.median(errs)


def _solve_apart(inst, method: str, time_limit_s: float):
    """``dplace solve`` in a child process without TensorFlow; the Result read back."""
    import subprocess
    import sys
    import tempfile

    from dplace.instance.io import save_instance
    from dplace.result import result_from_dict

    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "i.json"), os.path.join(tmp, "r.json")
        save_instance(inst, src)
        subprocess.run([sys.executable, "-m", "dplace.cli", "solve", src, "--method", method, "--time-limit",
                        str(time_limit_s), "--quiet", "--out", out], check=True, stdout=subprocess.DEVNULL)
        with open(out) as fh:
            return result_from_dict(inst, json.load(fh))


def place(inst, method: str, portfolio_s: float):
    import dplace
    from dplace.schedule.simulate import as_placement, simulate

    t0 = time.perf_counter()
    if method == "single":
        pl = [0] * inst.n
        return pl, None, time.perf_counter() - t0
    if method == "random":
        return random_placement(inst, 0), None, time.perf_counter() - t0
    if method == "portfolio":  # in its own process: OR-Tools' LP (m_sct) segfaults beside TensorFlow here
        res = _solve_apart(inst, method, portfolio_s)
    else:
        res = dplace.solve(inst, method)
    pl = [int(d) for d in as_placement(inst, res.placement)]
    simulate(inst, pl, res.order)  # the order must be valid for the placement
    return pl, res.order, time.perf_counter() - t0


def explain_table(model: str, rows: list[dict], devices: list[str]):
    """The ``--explain`` table: per placement, the measured step split up (:mod:`dplace.runtime.explain`)."""
    from rich.table import Table

    t = Table(title=f"{model}: where the step goes (ms; per device: kernel time predicted / in this run, node time; "
                    "receives: the model's count x transfer_cpu, the record's _Recv nodes (count: span); _Send nodes; "
                    "other nodes; idle in the span)")
    for col in ("placement", "sim", "replay kernel", "replay node", "replay gated", "sim gated", "traced span", "outside span",
                "traced wall", "wall", "transfers: n, send wait / took / model median µs", *[f"{d}" for d in devices]):
        t.add_column(col, justify="right")
    for r in rows:
        x = r["explain"]
        tr = x["transfers"]
        per = [f"{v['pred_kernel_us'] / 1000:.1f}/{v['kernel_us'] / 1000:.1f} node {v['node_us'] / 1000:.1f}; "
               f"recv {v['receives']}x: {v['pred_receive_us'] / 1000:.1f}, {v['recv_nodes']}: {v['recv_us'] / 1000:.1f}; "
               f"send {v['send_nodes']}: {v['send_us'] / 1000:.1f}; other {v['other_nodes']}: {v['other_us'] / 1000:.1f}; "
               f"idle {v['idle_us'] / 1000:.1f}" for v in (x["devices"][d] for d in devices)]
        t.add_row(r["placement"], *(f"{x[k] / 1000:.2f}" for k in ("sim_us", "replay_kernel_us", "replay_node_us",
                                                                      "replay_gated_us", "sim_gated_us", "span_us", "outside_us", "traced_wall_us",
                                                                      "wall_us")),
                  f"{tr['n']} (+{tr['unmatched']}): {tr.get('send_wait_median_us', 0):.0f} / {tr.get('took_median_us', 0):.0f} / "
                  f"{tr.get('model_median_us', 0):.0f}",
                  *per)
    return t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="transformer,resnet50,inceptionv3")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--inter-threads", type=int, default=1,
                    help="inter-op threads per worker (1 intra-op thread, one core each, whatever this says)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--prof-steps", type=int, default=5)
    ap.add_argument("--portfolio-s", type=float, default=30.0)
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--json", default=None, help="write every row here too")
    ap.add_argument("--explain", action="store_true",
                    help="per placement, where the measured step goes (dplace.runtime.explain): a table per model")
    args = ap.parse_args()

    from rich.console import Console
    from rich.table import Table

    from dplace.schedule.simulate import simulate
    from dplace.runtime import remote, zoo
    from dplace.runtime.cluster import LocalWorkers
    from dplace.runtime.dispatch import fold_dispatch
    from dplace.runtime.explain import busy_transfer_probe, explain

    con = Console(width=220)
    rows, summary = [], []
    devices = [f"CPU:{i}" for i in range(args.workers)]
    with LocalWorkers(args.workers, inter_threads=args.inter_threads) as workers:
        c = workers.cluster
        con.print(f"[dim]{args.workers} workers on cores {workers.cores}, 1 intra/{args.inter_threads} inter-op thread(s) each; "
                  f"load {loadavg()}")
        probe = busy_transfer_probe(c, devices) if args.explain else []
        for p in probe:
            con.print(f"transfer {p['src']}->{p['dst']}, {p['busy']} computing a matmul chain until "
                      f"{p['chain_end_us'] / 1000:.1f} ms: {p['n']} tensors ready at {p['ready_median_us'] / 1000:.1f} ms "
                      f"(median), sent from {p['send_median_us'] / 1000:.1f} ms, arrived {p['arrive_median_us'] / 1000:.1f} ms")
        for model in [m for m in args.models.split(",") if m]:
            opts, batch = MODELS[model]
            step = zoo.build_step(model, **opts)
            t0 = time.perf_counter()
            inst = remote.profile(step, batch, c, devices, steps=args.prof_steps, warmup=args.warmup + 2)
            prof = inst.extra["tf"]["profile"]
            inst_d, (disp_in, disp) = fold_dispatch(inst, c.target, c.map_devices(devices).devices[devices[0]],
                                                    alive=c.check_alive)
            seq = inst.replace(comm="sequential")
            links = "; ".join(f"{f['src']}->{f['dst']} {f['latency']:.0f} us + B/{f['bandwidth']:.0f} (R2 {f['r2']:.2f})"
                              for f in prof["links"])
            mem = prof["memory"]
            om = mem["op_memory"] or {}
            con.print(f"[bold]{model}[/] batch {batch}: {inst.n} ops, sum of op times "
                      f"{sum(inst.dur[o][0] for o in range(inst.n)) / 1000:.1f} ms, profiled in "
                      f"{time.perf_counter() - t0:.0f} s; links {links} (latency fitted, less the receive cost); "
                      f"receive cost per tensor (transfer_cpu) {inst.transfer_cpu:.1f} us; dispatch per op {disp.us:.1f} us "
                      f"(64² MatMul chain: per extra op {disp.per_op_us:.1f} us, kernel {disp.kernel_us:.1f} us; rounds "
                      f"{disp.rounds}), inline {disp_in.us:.2f} us (tiny Mul chain); per step beyond its ops "
                      f"{disp_in.step_us / 1000:.2f} ms); memory one worker: predicted "
                      f"{mem['predicted'] / 2**20:.1f} MiB, measured peak "
                      f"{(mem['peak_measured'] or 0) / 2**20:.1f} MiB; per-op memory median rel. error "
                      f"{100 * (om.get('median_rel_error') or 0):.1f}% over {om.get('n')} ops; load {loadavg()}")
            t = Table(title=f"{model} batch {batch} on {args.workers} workers ({args.warmup} warm-up + {args.steps} timed "
                            "steps, order enforced)")
            for col in ("placement", "ops/dev", "place s", "sim par ms", "sim seq ms", "sim par+disp ms",
                        "measured ms (min-max)", "err par", "err seq", "err par+disp", "moved", "loss", "order", "concurrent ms", "peak MiB meas/pred", "load"):
                t.add_column(col, justify="right")
            model_rows = []
            for method in [m for m in args.methods.split(",") if m]:
                try:
                    pl, order, secs = place(inst, method, args.portfolio_s)
                except Exception as exc:  # a method that fails here is reported, not hidden
                    con.print(f"[red]{model} {method}: {type(exc).__name__}: {exc}")
                    continue
                par = simulate(inst, pl, order).makespan
                sq = simulate(seq, pl, order).makespan
                pd = simulate(inst_d, pl, order).makespan
                rep = remote.execute(inst, pl, step, batch, c, order=order, steps=args.steps, warmup=args.warmup)
                meas = rep.step_us_median
                load = loadavg()
                peak = rep.extra["memory_peak_measured"] or {}
                pred = rep.extra["memory_predicted"]
                row = {"model": model, "batch": batch, "placement": method, "sim_parallel_us": par,
                       "sim_sequential_us": sq, "sim_dispatch_us": pd, "measured_median_us": meas, "measured_min_us": min(rep.extra["steps_us"]),
                       "measured_max_us": max(rep.extra["steps_us"]), "err_parallel": (par - meas) / meas,
                       "err_sequential": (sq - meas) / meas, "err_dispatch": (pd - meas) / meas, "moved": len(rep.ops_moved), "loss_ok": rep.loss_ok,
                       "order_matched": rep.order_matched, "ops_per_device": rep.ops_per_device,
                       "record": rep.extra["record"], "memory_peak": peak, "memory_predicted": pred,
                       "op_memory": rep.extra["op_memory"], "ops_not_run": rep.ops_not_run, "loadavg": load,
                       "place_s": secs, "transfers": transfers(inst, pl)}
                if args.explain:
                    row["explain"] = explain(inst, pl, order, *rep.trace[:1], meas, rep.trace[1])
                model_rows.append(row)
                rows.append(row)
                t.add_row(method, "/".join(str(rep.ops_per_device.get(d, 0)) for d in devices), f"{secs:.1f}",
                          f"{par / 1000:.2f}", f"{sq / 1000:.2f}", f"{pd / 1000:.2f}",
                          f"{meas / 1000:.2f} ({row['measured_min_us'] / 1000:.2f}-{row['measured_max_us'] / 1000:.2f})",
                          f"{100 * row['err_parallel']:+.0f}%", f"{100 * row['err_sequential']:+.0f}%",
                          f"{100 * row['err_dispatch']:+.0f}%",
                          str(row["moved"]), "ok" if rep.loss_ok else "FAIL",
                          {None: "-", True: "kept", False: "DIFF"}[rep.order_matched],
                          f"{rep.extra['record']['concurrent_us'] / 1000:.2f}",
                          "/".join(f"{peak.get(d, 0) / 2**20:.1f}:{pred[d] / 2**20:.1f}" for d in devices), load)
                con.print(f"[dim]{model} {method}: measured {meas / 1000:.2f} ms, simulated {par / 1000:.2f} ms")
            con.print(t)
            if args.explain:
                con.print(explain_table(model, model_rows, devices))
            if len(model_rows) >= 2:
                meas = [r["measured_median_us"] for r in model_rows]
                best = min(model_rows, key=lambda r: r["measured_median_us"])
                s = {"model": model, "n": len(model_rows),
                     "median_abs_err_parallel": statistics.median(abs(r["err_parallel"]) for r in model_rows),
                     "median_abs_err_sequential": statistics.median(abs(r["err_sequential"]) for r in model_rows),
                     "median_abs_err_dispatch": statistics.median(abs(r["err_dispatch"]) for r in model_rows),
                     "spearman_dispatch": spearman([r["sim_dispatch_us"] for r in model_rows], meas),
                     "dispatch_probe_us": disp.us,
                     "spearman_parallel": spearman([r["sim_parallel_us"] for r in model_rows], meas),
                     "spearman_sequential": spearman([r["sim_sequential_us"] for r in model_rows], meas),
                     "best_measured": best["placement"], "best_measured_us": best["measured_median_us"]}
                for mode in ("parallel", "sequential", "dispatch"):
                    first = min(model_rows, key=lambda r: r[f"sim_{mode}_us"])
                    s[f"first_{mode}"] = first["placement"]
                    s[f"first_{mode}_vs_best"] = first["measured_median_us"] / best["measured_median_us"] - 1
                single = next((r for r in model_rows if r["placement"] == "single"), None)
                if single:  # the term the model lacks: cost per op run beyond its profiled time
                    ran = sum(single["ops_per_device"].values())
                    s["dispatch_us_per_op"] = (single["measured_median_us"] - single["sim_parallel_us"]) / max(1, ran)
                s["transfer_us"], s["median_abs_err_with_transfer"] = per_transfer_term(model_rows)
                if args.explain:  # the term the model lacks, as explain's replay_gated predicts with it
                    gated = [r["explain"]["sim_gated_us"] for r in model_rows]
                    s["median_abs_err_gated"] = statistics.median(abs(g - m) / m for g, m in zip(gated, meas))
                    s["spearman_gated"] = spearman(gated, meas)
                    first = min(zip(gated, model_rows), key=lambda x: x[0])[1]
                    s["first_gated"] = first["placement"]
                    s["first_gated_vs_best"] = first["measured_median_us"] / best["measured_median_us"] - 1
                summary.append(s)
    t = Table(title="Predicted vs measured, per model (goals: median |err| <= 20 %, Spearman >= 0.8, "
                    "first choice within 10 % of the best measured)")
    for col in ("model", "placements", "median |err| par", "median |err| seq", "Spearman par", "Spearman seq",
                "median |err| par+disp", "Spearman par+disp", "best measured", "sim's first (par): vs best",
                "sim's first (seq): vs best", "sim's first (par+disp): vs best", "dispatch us/op (single / probe)", "unmodelled us/transfer", "median |err| +term"):
        t.add_column(col, justify="right")
    for s in summary:
        t.add_row(s["model"], str(s["n"]), f"{100 * s['median_abs_err_parallel']:.0f}%",
                  f"{100 * s['median_abs_err_sequential']:.0f}%", f"{s['spearman_parallel']:.2f}",
                  f"{s['spearman_sequential']:.2f}", f"{100 * s['median_abs_err_dispatch']:.0f}%",
                  f"{s['spearman_dispatch']:.2f}", s["best_measured"],
                  f"{s['first_parallel']} {100 * s['first_parallel_vs_best']:+.0f}%",
                  f"{s['first_sequential']} {100 * s['first_sequential_vs_best']:+.0f}%",
                  f"{s['first_dispatch']} {100 * s['first_dispatch_vs_best']:+.0f}%",
                  f"{s.get('dispatch_us_per_op', float('nan')):.1f} / {s['dispatch_probe_us']:.1f}",
                  f"{s['transfer_us']:.0f}",
                  f"{100 * s['median_abs_err_with_transfer']:.0f}%")
    con.print(t)
    if args.explain:
        con.print("With transfers served only while sender and receiver are idle (dplace.runtime.explain.replay_gated, "
                  "profiled op times; a check, not the model): " + "; ".join(
                      f"{s['model']}: median |err| {100 * s['median_abs_err_gated']:.0f}%, Spearman {s['spearman_gated']:.2f}, "
                      f"first {s['first_gated']} {100 * s['first_gated_vs_best']:+.0f}%" for s in summary if "spearman_gated" in s))
    con.print(f"load at the end: {loadavg()}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "summary": summary, "busy_transfer_probe": probe}, fh, indent=1, default=str)


if __name__ == "__main__":
    main()
