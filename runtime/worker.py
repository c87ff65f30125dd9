"""One local TensorFlow worker of :class:`dplace.runtime.cluster.LocalWorkers` (run as
``python -m dplace.runtime.worker --task I --tasks HOST:PORT,... --cores C --threads T``).

Before TensorFlow is imported the process pins itself to its cores (``sched_setaffinity``: the threads
TensorFlow starts later inherit it) and asks the kernel to kill it when its parent dies
(``PR_SET_PDEATHSIG``); then it starts a ``tf.distribute.Server`` for ``job:worker``/task I whose
session and device thread pools have ``T`` intra-op and ``T`` inter-op threads (``--inter-threads``: another
number of inter-op threads; that pool also runs the worker's side of every tensor transfer, see
:mod:`dplace.runtime.explain`). The server binds
TensorFlow's hard-coded wildcard address, which the ``loopback_bind`` shim (``LD_PRELOAD``, set by the
parent) turns into loopback. It prints ``ready PID`` and then serves until its standard input closes
(the parent's end of the pipe: closed when the parent stops it, exits or dies), answering one command a
line on standard input:

- ``memory``: ``memory CURRENT PEAK`` — bytes in use and peak of this process's CPU allocator
  (``tf.config.experimental.get_memory_info``; ``memory - -`` where TensorFlow keeps no statistics);
- ``reset``: resets that peak, answers ``ok``.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import sys
import threading

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    parent = os.getppid()

    def watch() -> None:  # a parent that died before prctl ran: we were adopted
        import time

        while True:
            if os.getppid() != parent:
                os._exit(3)
            time.sleep(1.0)

    threading.Thread(target=watch, daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="dplace.runtime.worker")
    ap.add_argument("--task", type=int, required=True)
    ap.add_argument("--tasks", required=True, help="HOST:PORT of every task of job 'worker', comma-separated")
    ap.add_argument("--cores", default="", help="CPU cores to pin to, comma-separated (default: no pinning)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op and inter-op threads (default 1)")
    ap.add_argument("--inter-threads", type=int, default=None,
                    help="inter-op threads, where they differ from --threads (the pool that also serves tensor transfers)")
    args = ap.parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGINT, lambda *a: os._exit(130))  # Ctrl-C at a terminal reaches the whole group
    if args.cores:
        os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")})
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    inter = args.inter_threads or args.threads
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    cfg = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads, inter_op_parallelism_threads=inter)
    cluster = tf.train.ClusterSpec({"worker": args.tasks.split(",")})
    try:
        tf.distribute.Server(cluster, job_name="worker", task_index=args.task, protocol="grpc", config=cfg, start=True)
    except Exception as exc:  # a port in use: "Could not start gRPC server"
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sys.stdout.write(f"error {msg}\n")
        sys.stdout.flush()
        return 2
    sys.stdout.write(f"ready {os.getpid()}\n")
    sys.stdout.flush()
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "memory":
            try:
                info = tf.config.experimental.get_memory_info("CPU:0")
                answer = f"memory {int(info['current'])} {int(info['peak'])}"
            except (ValueError, RuntimeError):
                answer = "memory - -"
        elif cmd == "reset":
            try:
                tf.config.experimental.reset_memory_stats("CPU:0")
            except (ValueError, RuntimeError):
                pass
            answer = "ok"
        else:
            answer = f"error unknown command {cmd!r}"
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    os._exit(0)  # stdin closed: the parent is gone or stopped us; skip TensorFlow's slow teardown


if __name__ == "__main__":
    sys.exit(main())
