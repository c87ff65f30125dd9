"""dplace.runtime.watched: a call that cannot return (as TensorFlow's, waiting for a dead master) does not
hold the command: a worker's death or a Ctrl-C ends the wait; the call's own result and error come through."""
from __future__ import annotations

import threading
import time

import pytest

from dplace import interrupt
from dplace.runtime import watched
from dplace.runtime.cluster import ClusterError


@pytest.fixture(autouse=True)
def _clean():
    interrupt.clear()
    yield
    interrupt.clear()


def _never_returns(release: threading.Event):
    return lambda: release.wait()


def test_a_call_that_never_returns_is_given_up_when_a_worker_dies():
    release = threading.Event()
    t0 = time.monotonic()
    dead_after = t0 + 0.3

    def alive():
        if time.monotonic() > dead_after:
            raise ClusterError("worker 1 (pid 1) died (killed by signal 9); every worker stopped")

    try:
        with pytest.raises(ClusterError, match="worker 1 .* died"):
            watched.call(_never_returns(release), alive, grace_s=0.2, poll_s=0.01)
        assert time.monotonic() - t0 < 5
        stuck = interrupt.abandoned()
        assert stuck and stuck[-1].is_alive()  # left running, noted
    finally:
        release.set()
    stuck[-1].join(5)
    assert stuck[-1] not in interrupt.abandoned()


def test_a_call_that_ends_with_its_own_error_within_the_grace_gives_that_error():
    def alive():
        raise ClusterError("died")

    def fn():
        time.sleep(0.1)
        raise ValueError("the call's own error")

    with pytest.raises(ValueError, match="own error"):
        watched.call(fn, alive, grace_s=5, poll_s=0.01)


def test_value_error_and_the_calls_own_time_come_through():
    out = watched.call(lambda: (time.sleep(0.05), 7)[1], lambda: None, poll_s=0.01)
    assert out.value == 7 and 40_000 < out.us < 5_000_000

    def boom():
        raise KeyError("k")

    with pytest.raises(KeyError):
        watched.call(boom, lambda: None)


def test_a_stop_request_ends_the_wait_at_once():
    release = threading.Event()
    threading.Timer(0.2, interrupt.request).start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            watched.call(_never_returns(release), lambda: None, poll_s=0.01)
        assert time.monotonic() - t0 < 5
    finally:
        release.set()
