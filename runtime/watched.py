"""A TensorFlow call on a cluster that cannot hang the command: run in a helper thread, watched here.

A session call to a cluster whose worker died can wait far longer than any step: gRPC retries an
``UNAVAILABLE`` master call and waits for the channel to come back (``wait_for_ready``) until the call's
deadline, and opening or closing a session on a dead master has none (seen in CI: ``execute`` sat 120 s
after a worker was SIGKILLed, stuck in TensorFlow's native code, where neither Python's signal handler
nor a check between steps can run). So :func:`call` runs the TensorFlow call in a daemon thread and
waits for it here, in Python, every ``poll_s``:

* ``alive()`` (the cluster's :meth:`~dplace.runtime.cluster.Cluster.check_alive`) raises when a worker
  died: the call then gets ``grace_s`` to end with its own error; if it does not, it is abandoned
  (:func:`dplace.interrupt.abandon`: the thread is left running, the session must not be used or closed)
  and the death is raised;
* a Ctrl-C raises ``KeyboardInterrupt`` here at once (the main thread never sits in native code), and
  :func:`dplace.interrupt.stop_point` catches one lost in a finalizer.

The call's own duration is measured in its thread (:attr:`Timed.us`): a timed step is not charged the
hand-over between threads.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from dplace import interrupt

GRACE_S = 5.0  # a call whose worker died gets this long to end with its own error
POLL_S = 0.05


@dataclass
class Timed:
    value: Any
    us: float  # the call's wall time, measured in its own thread


def call(fn: Callable[[], Any], alive: Callable[[], None], *, grace_s: float = GRACE_S,
         poll_s: float = POLL_S, name: str = "tensorflow call") -> Timed:
    """``fn()`` run in a helper thread, watched from this one (see the module's docstring). Returns its
    value and duration; re-raises its exception here."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        t0 = time.perf_counter()
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed over to the watching thread
            box["error"] = exc
        box["us"] = (time.perf_counter() - t0) * 1e6
        done.set()

    th = threading.Thread(target=target, name=f"dplace: {name}", daemon=True)
    th.start()
    try:
        while not done.wait(poll_s):
            interrupt.stop_point()
            try:
                alive()
            except BaseException:
                if not done.wait(grace_s):
                    raise
                break  # the call ended after all: its own error (or value) is below
    except BaseException:
        if not done.is_set():
            interrupt.abandon(th)
        raise
    if "error" in box:
        raise box["error"]
    return Timed(box["value"], box["us"])


def _master_gone(target: Any) -> bool:
    """True when nothing accepts connections at a ``grpc://host:port`` session target any more (its worker
    process is gone): a session's close there would wait on the dead master (gRPC retries)."""
    import socket

    t = target.decode() if isinstance(target, bytes) else str(target)
    if not t.startswith("grpc://"):
        return False
    host, _, port = t[len("grpc://"):].rpartition(":")
    try:
        socket.create_connection((host or "localhost", int(port)), timeout=0.5).close()
        return False
    except (OSError, ValueError):
        return True


_SESSION_CLASS: Any = None


def cluster_session(target: str, graph: Any, config: Any) -> Any:
    """``tf.compat.v1.Session(target, graph=, config=)`` for a cluster, except that closing it (explicitly
    or when it is garbage-collected) does nothing once its master's process is gone: TensorFlow's
    ``CloseSession`` would retry the dead master, and a collection anywhere later in the process (seen in a
    test run: ``keras.clear_session`` collecting a session of a cluster stopped long before) would hang."""
    global _SESSION_CLASS
    if _SESSION_CLASS is None:
        import tensorflow as tf

        class ClusterSession(tf.compat.v1.Session):
            def close(self) -> None:
                if not getattr(self, "_closed", True) and _master_gone(self._target):
                    self._closed = True  # the handle is left to the process: nothing can answer its close
                    return
                super().close()

            def __del__(self) -> None:
                if not getattr(self, "_closed", True) and _master_gone(getattr(self, "_target", b"")):
                    return
                super().__del__()

        _SESSION_CLASS = ClusterSession
    return _SESSION_CLASS(target, graph=graph, config=config)
