"""``dplace profile`` and ``dplace execute`` (rows of the command table in :mod:`dplace.cli`).

TensorFlow is imported only when one of these commands runs.
"""
from __future__ import annotations

import argparse
import json
import re
from contextlib import ExitStack, contextmanager
from typing import Any

from dplace.errors import InvalidInstanceError

GiB = 1 << 30


def _model_args(s: argparse.ArgumentParser) -> None:
    s.add_argument("--model", help="zoo model: inceptionv3, resnet50, vgg19, transformer, lstm")
    s.add_argument("--batch", type=int, help="batch size")
    s.add_argument("--image-size", type=int, default=None,
                   help="image side for image models (default 299 for inceptionv3, 224 for resnet50 and vgg19)")
    s.add_argument("--width", type=int, default=None, help="transformer d_model / LSTM units (default 128 / 64)")
    s.add_argument("--layers", type=int, default=None, help="transformer blocks / LSTM layers (default 2)")
    s.add_argument("--seq-len", type=int, default=None, help="sequence length, transformer and lstm (default 32)")


def _model_options(args: argparse.Namespace, saved: dict[str, Any] | None = None) -> dict[str, Any]:
    opts = dict(saved or {})
    for k in ("image_size", "width", "layers", "seq_len"):
        v = getattr(args, k, None)
        if v is not None:
            opts[k] = v
    return opts


def _at_least(value: Any, flag: str, low: int) -> None:
    if value is not None and value < low:
        raise InvalidInstanceError(f"{flag} must be >= {low}, got {value}")


def _check_model_args(args: argparse.Namespace) -> None:
    """Reject bad model arguments before TensorFlow is imported (a one-line error, no TF start-up)."""
    from .zoo import MODELS

    if args.model is not None and args.model not in MODELS:
        raise InvalidInstanceError(f"--model: unknown model {args.model!r}; valid: {', '.join(sorted(MODELS))}")
    for flag in ("batch", "image_size", "width", "layers", "seq_len"):
        _at_least(getattr(args, flag), "--" + flag.replace("_", "-"), 1)
    _at_least(args.steps, "--steps", 1)
    _at_least(args.warmup, "--warmup", 0)


def _small_batches(text: str) -> list[int]:
    """``--regress-from 2,4,8``: distinct batch sizes >= 1."""
    items = [b.strip() for b in text.split(",") if b.strip()]
    if not items or not all(b.isdigit() and int(b) >= 1 for b in items) or len(set(map(int, items))) != len(items):
        raise InvalidInstanceError(f"--regress-from must be distinct batch sizes >= 1 like 2,4,8, got {text!r}")
    return [int(b) for b in items]


@contextmanager
def _progress(enabled: bool = True, label: str = "profile"):
    """Yields the ``progress(stage, done, total)`` callback: a rich progress bar on a terminal, timestamped
    lines (:mod:`dplace.progress`) otherwise, None when disabled."""
    from dplace import progress

    mode = progress.resolve_mode("auto") if enabled else "quiet"
    if mode == "quiet":
        yield None
        return
    if mode == "plain":
        with progress.reporting(label, mode="plain") as rep:
            yield lambda stage, done, total: rep.phase(f"{stage} {done}/{total}")
        return
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description:>10}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task("start", total=1)

        def cb(stage: str, done: int, total: int) -> None:
            bar.update(task, description=stage, completed=done, total=total)

        yield cb


def cmd_profile(args: argparse.Namespace) -> int:
    from dplace.instance.io import save_instance
    from dplace.instance.model import Link

    from dplace.instance.model import check_number

    _check_model_args(args)
    if args.model is None or args.batch is None:
        raise InvalidInstanceError("profile: --model and --batch are required")
    _at_least(args.memory, "--memory", 1)
    check_number(args.latency, "--latency")
    check_number(args.bandwidth, "--bandwidth", positive=True)
    small = _small_batches(args.regress_from) if args.regress_from is not None else None
    if args.measure_memory and not small:
        raise InvalidInstanceError("profile: --measure-memory needs --regress-from (Celeritas' small batches)")

    from . import commfit, profile, zoo

    if args.workers is not None or args.cluster_spec is not None:
        return _profile_on_cluster(args, small)
    devices = zoo.resolve_devices(args.devices)
    step = zoo.build_step(args.model, device=devices[0], **_model_options(args))
    link = Link(args.latency, args.bandwidth)
    score = None
    with _progress(not args.quiet) as cb, ExitStack() as stack:
        cb = cb or (lambda *a: None)
        if args.measure_memory:  # Celeritas' Standard Evaluation with memory measured on local workers
            from . import standard
            from .cluster import LocalWorkers

            cl = stack.enter_context(LocalWorkers(len(devices))).cluster.map_devices(devices)
            inst = standard.regress(step, args.batch, small, devices, cl, memory=args.memory, link=link,
                                    steps=args.steps, warmup=args.warmup, progress=cb, name=args.name)
        elif small:
            inst = profile.regress(step, args.batch, small, devices, memory=args.memory, link=link,
                                   steps=args.steps, warmup=args.warmup, progress=cb, name=args.name)
        else:
            inst = profile.profile(step, args.batch, devices, memory=args.memory, link=link, steps=args.steps,
                                   warmup=args.warmup, progress=cb, name=args.name)
        if args.measure_placed:
            inst = profile.measure_placed(inst, step, args.batch, steps=args.steps, warmup=args.warmup, progress=cb)
            if args.measure_memory:  # memory unchanged so far: the same sequential placement as for the times
                inst, score = standard.step2(inst, step, args.batch, cl)
        if args.split_shapes:
            from .split import split_shapes

            inst = split_shapes(inst, step, args.batch, steps=args.steps, warmup=args.warmup, progress=cb)
        if args.commfit and len(devices) > 1:
            inst = commfit.with_links(inst, commfit.fit_links(devices, progress=cb))
    save_instance(inst, args.out)
    tot = sum(inst.dur[o][0] for o in range(inst.n))
    print(f"{inst.name}: {inst.n} ops, {len(inst.edges)} edges, {len(inst.groups)} colocation groups, "
          f"{sum(inst.mem) / GiB:.2f} GiB, sum of op times {tot / 1000:.1f} ms on {len(devices)} device(s) -> {args.out}")
    if score is not None:
        reg, sta = score["regression"], score["static"]

        def pct(x):
            return "n/a" if x is None else f"{100 * x:.1f}%"

        print(f"per-op memory at batch {args.batch} (Celeritas' score: median |estimate - measured| / measured over "
              f"{reg['n']} ops): regressed from batches {','.join(map(str, small))} {pct(reg['median_rel_error'])}, "
              f"static output sizes {pct(sta['median_rel_error'])}; totals: regressed "
              f"{reg['estimate_bytes'] / 2**20:.2f} MiB, static {sta['estimate_bytes'] / 2**20:.2f} MiB, measured "
              f"{reg['measured_bytes'] / 2**20:.2f} MiB")
    return 0


def _profile_on_cluster(args: argparse.Namespace, small) -> int:
    """``profile --workers N`` / ``--cluster-spec FILE``: op times on the first worker under its thread
    limits, links fitted between workers, memory measured (:func:`dplace.runtime.remote.profile`), the
    per-op dispatch cost folded into the op times (:func:`dplace.runtime.dispatch.fold_dispatch`)."""
    from dplace.instance.io import save_instance

    from . import remote, zoo
    from .cluster import LocalWorkers, read_cluster_spec
    from .dispatch import fold_dispatch

    if args.workers is not None and args.cluster_spec is not None:
        raise InvalidInstanceError("profile: give --workers or --cluster-spec, not both")
    if small or args.split_shapes:
        flag = "--regress-from" if small else "--split-shapes"
        raise InvalidInstanceError(f"profile: {flag} is not available with --workers/--cluster-spec")
    _at_least(args.workers, "--workers", 1)
    _at_least(args.inter_threads, "--inter-threads", 1)
    spec = read_cluster_spec(args.cluster_spec) if args.cluster_spec is not None else None
    step = zoo.build_step(args.model, **_model_options(args))

    def run(cluster, n):
        names = list(cluster.devices) or [f"CPU:{i}" for i in range(n)]
        inst = remote.profile(step, args.batch, cluster, names, steps=args.steps, warmup=args.warmup,
                              memory=args.memory, progress=cb, name=args.name)
        return fold_dispatch(inst, cluster.target, cluster.map_devices(names).devices[names[0]],
                             alive=cluster.check_alive)[0]

    with _progress(not args.quiet) as cb:
        if spec is not None:
            inst = run(spec, len(spec.tasks))
        else:
            with LocalWorkers(args.workers, inter_threads=args.inter_threads) as workers:
                inst = run(workers.cluster, args.workers)
    save_instance(inst, args.out)
    prof = inst.extra["tf"]["profile"]
    tot = sum(inst.dur[o][0] for o in range(inst.n))
    print(f"{inst.name}: {inst.n} ops, {len(inst.edges)} edges, sum of op times {tot / 1000:.1f} ms on one worker "
          f"({prof['cluster']['threads'] or '?'} intra-op / {prof['cluster'].get('inter_threads') or '?'} inter-op "
          f"thread(s)) -> {args.out}")
    for f in prof["links"]:
        print(f"link {f['src']} -> {f['dst']}: latency {f['latency']:.1f} us, bandwidth {f['bandwidth']:.1f} B/us, "
              f"R^2 {f['r2']:.3f} ({len(f['samples'])} sizes {f['samples'][0][0]}-{f['samples'][-1][0]} B)")
    rc = prof.get("receive_cost")
    if rc is not None:
        per = ", ".join(f"{d} {v:.1f}" for d, v in rc["per_device"].items())
        print(f"receive cost per tensor (transfer_cpu): {inst.transfer_cpu:.1f} us (per receiving device: {per}; "
              f"{rc['n']} tensors per probe), taken out of the links' latencies")
    dp = prof["dispatch"]
    print(f"dispatch cost per op, folded into the op times: {dp['expensive']['us']:.2f} us (ops with a measured "
          f"kernel time), {dp['inline']['us']:.2f} us (ops timed 0: run inline)")
    mem = prof["memory"]
    peak = f"{mem['peak_measured'] / 2**20:.2f} MiB" if mem["peak_measured"] is not None else "not measured"
    print(f"memory of a step on one worker: predicted (sum of op memory) {mem['predicted'] / 2**20:.2f} MiB, "
          f"measured peak {peak}")
    om = mem["op_memory"]
    if om and om["median_rel_error"] is not None:
        print(f"per-op memory estimate (Celeritas' score): median |estimate - measured| / measured "
              f"{100 * om['median_rel_error']:.1f}% over {om['n']} ops")
    return 0


def cmd_execute(args: argparse.Namespace) -> int:
    from dplace.instance.io import load_instance, read_json
    from dplace.result import result_from_dict

    _check_model_args(args)
    data = read_json(args.result, "result")
    if not isinstance(data, dict) or not isinstance(data.get("placement"), dict):
        raise InvalidInstanceError(f"result {args.result!r}: has no placement")
    on_cluster = args.workers is not None or args.cluster_spec is not None
    if args.workers is not None and args.cluster_spec is not None:
        raise InvalidInstanceError("execute: give --workers or --cluster-spec, not both")
    _at_least(args.workers, "--workers", 1)
    _at_least(args.inter_threads, "--inter-threads", 1)
    cluster_spec = None
    if args.cluster_spec is not None:
        from .cluster import read_cluster_spec

        cluster_spec = read_cluster_spec(args.cluster_spec)
    for dev in sorted({str(d) for d in data["placement"].values()} | set(data.get("memory") or {})):
        if not on_cluster and not re.fullmatch(r"(/.*)?[A-Za-z]+:\d+", dev):
            raise InvalidInstanceError(f"result {args.result!r}: device {dev!r} is not a TensorFlow device name "
                                       "(CPU:N or GPU:N; results of dplace profile instances have them)")

    from . import extract, replicas, zoo

    saved: dict[str, Any] = {}
    if args.instance:
        inst = load_instance(args.instance)
        saved = inst.extra.get("tf", {})
    model = args.model or saved.get("model")
    batch = args.batch or saved.get("batch")
    if not model or not batch:
        raise InvalidInstanceError("execute: --model and --batch are required (or an --instance made by dplace profile)")
    if saved and (saved.get("model"), saved.get("batch")) != (model, batch):
        raise InvalidInstanceError(
            f"execute: instance was profiled for {saved.get('model')!r} batch {saved.get('batch')}, "
            f"not {model!r} batch {batch}"
        )
    opts = _model_options(args, {k: v for k, v in (saved.get("options") or {}).items()
                                 if k in ("image_size", "width", "layers", "seq_len", "vocab", "classes", "seed",
                                          "learning_rate", "momentum")})
    devices = list(data.get("memory") or {}) or sorted(set(data["placement"].values()))
    if args.workers is not None and args.workers < len(devices):
        raise InvalidInstanceError(f"--workers must be >= the result's {len(devices)} devices, got {args.workers}")
    zoo.ensure_logical_cpus(1 if on_cluster else sum(1 for d in devices if d.upper().startswith("CPU:")) or 1)
    step = zoo.build_step(model, device=None if on_cluster else devices[0], **opts)
    predicted_from_result = False
    if not args.instance:  # structure only: the predicted time is the result's own makespan
        inst = extract.extract(step, batch, devices)
        predicted_from_result = True
    res = result_from_dict(inst, data)
    with _progress(not args.json, "execute") as cb:
        if on_cluster:
            rep = _execute_on_cluster(args, cluster_spec, inst, res, step, batch, cb)
        else:
            rep = replicas.execute_result(inst, res, step, batch, steps=args.steps, warmup=args.warmup, progress=cb)
    if predicted_from_result and data.get("makespan") is not None:
        rep.predicted_us = float(data["makespan"])
    if args.json:
        print(json.dumps(rep.to_dict(), indent=1))
    else:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=f"{model} batch {batch}: {data.get('method', '?')} on {', '.join(rep.devices)}")
        for c in ("measured ms" + (" median (min-max)" if on_cluster else ""), "predicted ms", "moved", "not run",
                  "loss check"):
            t.add_column(c, justify="right")
        measured = (f"{rep.step_us_median / 1000:.2f} ({min(rep.extra['steps_us']) / 1000:.2f}-"
                    f"{max(rep.extra['steps_us']) / 1000:.2f})" if on_cluster
                    else f"{rep.step_us_mean / 1000:.2f} ± {rep.step_us_std / 1000:.2f}")
        t.add_row(measured, f"{rep.predicted_us / 1000:.2f}",
                  str(len(rep.ops_moved)), str(rep.ops_not_run),
                  "ok" if rep.loss_ok else f"FAILED {rep.loss_placed} vs {rep.loss_ref}")
        Console().print(t)
        print(f"{rep.steps} timed steps after {rep.warmup} warm-up; ops that ran per device: "
              + ", ".join(f"{d} {n}" for d, n in rep.ops_per_device.items()))
        if rep.extra.get("data_parallel", {}).get("note"):
            print("data-parallel: " + rep.extra["data_parallel"]["note"])
        for n, want, got in rep.ops_moved[:20]:
            print(f"moved: {n} placed on {want} ran on {got}")
        if rep.order_enforced:
            print("order: enforced with control dependencies; measured per-device order "
                  + ("matches" if rep.order_matched else "DIFFERS: " + "; ".join(
                      f"{d}: expected {w} ran {g} first" for d, w, g in rep.order_mismatches[:5])))
        else:
            print("order: not enforced (TensorFlow's executor order)")
        if on_cluster:
            _print_cluster_record(rep)
    return 0 if rep.ok else 1


def _execute_on_cluster(args, spec, inst, res, step, batch, cb):
    """``execute --workers N`` (local workers started and stopped here) or ``--cluster-spec FILE``."""
    from . import remote, replicas
    from .cluster import LocalWorkers

    g, rewrite, batch = replicas.result_graph(inst, res, step, batch)
    kw = dict(steps=args.steps, warmup=args.warmup, progress=cb, rewrite=rewrite)
    if spec is not None:
        return replicas.describe(remote.execute(g, res, step, batch, spec, **kw), rewrite, step)
    with LocalWorkers(args.workers, inter_threads=args.inter_threads) as workers:
        return replicas.describe(remote.execute(g, res, step, batch, workers.cluster, **kw), rewrite, step)


def _print_cluster_record(rep) -> None:
    x = rep.extra
    rec = x["record"]
    busy = ", ".join(f"{k} {v / 1000:.2f}" for k, v in rec.items() if k not in ("span_us", "concurrent_us"))
    print(f"record (workers' step stats): span {rec['span_us'] / 1000:.2f} ms, busy ms per device: {busy}; "
          f"two or more busy at once {rec['concurrent_us'] / 1000:.2f} ms")
    peak, pred = x.get("memory_peak_measured"), x["memory_predicted"]
    print("memory per device, predicted (sum of op memory) vs measured peak: " + ", ".join(
        f"{d} {pred[d] / 2**20:.2f} MiB vs " + (f"{peak[d] / 2**20:.2f} MiB" if peak else "not measured")
        for d in pred))
    om = x["op_memory"]
    if om["median_rel_error"] is not None:
        print(f"per-op memory estimate (Celeritas' score): median |estimate - measured| / measured "
              f"{100 * om['median_rel_error']:.1f}% over {om['n']} ops")


def _inter_threads_arg(s) -> None:
    s.add_argument("--inter-threads", type=int, default=1, metavar="T",
                   help="with --workers: inter-op threads per worker (default 1). That pool also runs the worker's side "
                        "of every tensor transfer: with 1 a tensor moves only while both workers are idle (README, "
                        "\"Runtime truth\")")


def add_profile(subparsers) -> None:
    s = subparsers.add_parser("profile", help="extract and profile a zoo model's training step (TensorFlow)")
    _model_args(s)
    s.add_argument("--devices", default="1", help="N logical CPUs, 'gpu', or names like GPU:0,GPU:1 (default 1)")
    s.add_argument("--memory", type=int, default=8 * GiB, help="bytes per device in the instance (default 8 GiB)")
    s.add_argument("--latency", type=float, default=10.0, help="link latency µs (default 10, PCIe-like)")
    s.add_argument("--bandwidth", type=float, default=12000.0, help="link bytes/µs (default 12000, PCIe-like)")
    s.add_argument("--commfit", action="store_true", help="measure copies between the devices and fit links.pairs")
    s.add_argument("--steps", type=int, default=5, help="profiled steps, the median over them is kept (default 5)")
    s.add_argument("--warmup", type=int, default=2, help="untimed steps before profiling (default 2)")
    s.add_argument("--regress-from", default=None, metavar="B1,B2,...",
                   help="estimate --batch from profiles at these small batches (Celeritas §4.2.1)")
    s.add_argument("--measure-placed", action="store_true",
                   help="Celeritas Standard Evaluation step 2: re-measure the op times at --batch itself, run "
                        "under the sequential standard_evaluation placement over --devices")
    s.add_argument("--measure-memory", action="store_true",
                   help="with --regress-from: per-op memory measured at the small batches on local TensorFlow "
                        "workers and regressed (Celeritas §4.2.1); with --measure-placed also re-measured at --batch "
                        "and the estimate's accuracy printed (median |estimate - measured| / measured per op)")
    s.add_argument("--split-shapes", action="store_true",
                   help="FastT §4: also time every splittable op alone at each piece shape OS-DPOS can give it "
                        "(os_dpos then times split pieces from these measurements, not by a linear share)")
    s.add_argument("--name", default=None, help="instance name (default MODEL_bBATCH_Ndev)")
    s.add_argument("--quiet", action="store_true",
                   help="no progress (default: a bar on a terminal, timestamped lines on stderr otherwise)")
    s.add_argument("--out", required=True, help="instance JSON to write")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="profile for N local TensorFlow workers (op times on one worker under its thread limits, "
                        "links fitted between workers, memory measured); devices CPU:0..CPU:N-1")
    _inter_threads_arg(s)
    s.add_argument("--cluster-spec", default=None, metavar="FILE", help="profile for the TensorFlow cluster of FILE "
                   "(the form dplace execute --cluster-spec reads)")
    s.set_defaults(func=cmd_profile)


def add_execute(subparsers) -> None:
    s = subparsers.add_parser("execute", help="run a result's placement on TensorFlow and measure it")
    _model_args(s)
    s.add_argument("--result", required=True, help="dplace-result/1 JSON")
    s.add_argument("--instance", default=None, help="the instance the result was made for (its profile gives "
                   "the model options and the predicted time)")
    s.add_argument("--steps", type=int, default=50, help="timed steps (default 50)")
    s.add_argument("--warmup", type=int, default=5, help="untimed steps first (default 5)")
    s.add_argument("--json", action="store_true", help="print the measurement as JSON")
    s.add_argument("--workers", type=int, default=None, metavar="N",
                   help="run on N local TensorFlow worker processes (one per instance device, each pinned to its "
                        "own core with 1 intra-op and 1 inter-op thread, bound to loopback, stopped on exit)")
    _inter_threads_arg(s)
    s.add_argument("--cluster-spec", default=None, metavar="FILE",
                   help="run on the TensorFlow cluster of FILE: {\"cluster\": {\"worker\": [\"host:port\", ...]}} "
                        "(TF_CONFIG's form; instance device i on task i's CPU:0, or an optional \"devices\" map)")
    s.set_defaults(func=cmd_execute)
