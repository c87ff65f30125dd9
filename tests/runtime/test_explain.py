"""dplace.runtime.explain.replay_gated: a worker serves its side of a transfer only while it is idle (what
busy_transfer_probe measures with one inter-op thread). Hand-timed cases; no TensorFlow needed."""
from __future__ import annotations

import dplace
from dplace.instance.io import instance_from_dict
from dplace.runtime.explain import replay_gated


def _inst(edges, times, transfer_cpu=0.0):
    return instance_from_dict({
        "format": "dplace-instance/1", "name": "gated",
        "devices": [{"name": "CPU:0", "memory": 1 << 30}, {"name": "CPU:1", "memory": 1 << 30}],
        "links": {"latency": 10.0, "bandwidth": 1.0}, "transfer_cpu": transfer_cpu,
        "ops": [{"id": k, "time": v, "memory": 0} for k, v in times.items()],
        "edges": [{"src": a, "dst": b, "bytes": 5} for a, b in edges]})


TIMES = {"x": 100.0, "z": 1000.0, "y": 50.0, "w": 20.0}


def test_a_tensor_leaves_a_busy_sender_when_it_idles():
    """x then z on CPU:0, y on CPU:1 needs x. The simulator sends x when it is made (y starts at 100 + 15);
    gated, CPU:0 runs z right after x and sends x when it idles, at 1100: y starts at 1115."""
    inst = _inst([("x", "y"), ("x", "z")], {k: TIMES[k] for k in ("x", "z", "y")})
    pl = [0, 0, 1]
    order = [[0, 1], [2]]
    assert dplace.simulate(inst, pl, order).makespan == 1100.0  # z ends last; y ends at 165
    times = {"x": 100.0, "z": 1000.0, "y": 50.0}
    assert replay_gated(inst, pl, order, times) == 1100.0 + 15.0 + 50.0
    # serving a tensor costs the idle sender 100 µs of its core before it leaves
    assert replay_gated(inst, pl, order, times, serve_us=100.0) == 1100.0 + 100.0 + 15.0 + 50.0


def test_an_idle_sender_sends_at_once_and_a_busy_receiver_takes_in_late():
    """x on CPU:0 (idle after it); on CPU:1 w (1000 µs, no input) runs first, then y needs x. CPU:1 asks at
    its first idle moment; it has none before w ends, so x is asked for, sent and taken in at 1000: y
    starts at 1000 + 15. The simulator starts y at max(115, 1000) = 1000."""
    inst = _inst([("x", "y")], {"x": 100.0, "w": 1000.0, "y": 50.0})
    pl = [0, 1, 1]
    order = [[0], [1, 2]]
    assert dplace.simulate(inst, pl, order).makespan == 1050.0
    assert replay_gated(inst, pl, order, {"x": 100.0, "w": 1000.0, "y": 50.0}) == 1000.0 + 15.0 + 50.0


def test_without_crossing_edges_or_idle_devices_it_is_the_simulator():
    inst = _inst([("x", "z"), ("z", "y")], {k: TIMES[k] for k in ("x", "z", "y")}, transfer_cpu=7.0)
    for pl in ([0, 0, 0], [0, 1, 1]):
        times = {op.id: inst.dur[o][0] for o, op in enumerate(inst.ops)}
        want = dplace.simulate(inst, pl).makespan
        got = replay_gated(inst, pl, None, times)
        # one crossing edge whose sender idles at once and receiver waits for it: nothing to defer
        assert got == want, (pl, got, want)
