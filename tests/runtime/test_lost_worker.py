"""A lost connection waits a moment for a local worker's death to show (``Cluster.check_alive(wait_s)``):
a killed worker's sockets close before the process can be waited for, so under load TensorFlow's
"connection reset" can come before the death is visible. Real processes, no TensorFlow."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from dplace.runtime.cluster import Cluster, ClusterError, LocalWorkers


def _workers_of(procs: list[subprocess.Popen]) -> LocalWorkers:
    w = LocalWorkers(len(procs))
    w.procs = procs  # stand-in workers: plain processes that live until killed
    return w


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)


def test_a_death_that_shows_late_is_still_named():
    procs = [_sleeper(), _sleeper()]
    w = _workers_of(procs)
    cluster = Cluster(["127.0.0.1:1", "127.0.0.1:2"], local=w)
    try:
        cluster.check_alive()  # both alive: nothing to say
        killer = threading.Timer(0.3, procs[1].kill)
        killer.start()
        t0 = time.monotonic()
        with pytest.raises(ClusterError, match=r"worker 1 \(pid \d+\) died \(killed by signal 9\)"):
            cluster.check_alive(wait_s=5.0)
        waited = time.monotonic() - t0
        killer.join()
        assert 0.25 <= waited < 5.0  # it waited for the death, and stopped waiting once it showed
    finally:
        w.stop()
    assert all(p.poll() is not None for p in procs)


def test_without_a_death_the_wait_ends_and_the_caller_raises_its_own_error():
    procs = [_sleeper()]
    w = _workers_of(procs)
    cluster = Cluster(["127.0.0.1:1"], local=w)
    try:
        t0 = time.monotonic()
        cluster.check_alive(wait_s=0.2)  # returns: no local worker died
        assert 0.2 <= time.monotonic() - t0 < 3.0
        Cluster(["127.0.0.1:1"]).check_alive(wait_s=30.0)  # no local workers: returns at once
        assert time.monotonic() - t0 < 3.0
    finally:
        w.stop()


def test_a_death_found_by_check_alive_is_named_again_after_the_workers_stop():
    """The death is found by ``check_alive`` itself (before the watchdog saw it), which stops every worker;
    the session then ends with TensorFlow's own error and the caller asks again (``check_alive(wait_s)``):
    it must name the same worker, not find nothing (seen in CI: "cluster: UnavailableError: =====" after a
    worker was killed during the receive probes)."""
    procs = [_sleeper(), _sleeper()]
    w = _workers_of(procs)  # no watchdog: only check_alive can see the death
    cluster = Cluster(["127.0.0.1:1", "127.0.0.1:2"], local=w)
    try:
        procs[1].kill()
        procs[1].wait(10)
        for _ in range(2):
            with pytest.raises(ClusterError, match=r"worker 1 \(pid \d+\) died \(killed by signal 9\)"):
                cluster.check_alive(wait_s=1.0)
        assert w.procs == []  # stopped by the first
    finally:
        w.stop()
    assert all(p.poll() is not None for p in procs)
