"""A placement run on a real 2-worker TensorFlow cluster (local servers on loopback): where ops ran, from
the workers' own step stats; the loss against a single-device step; no worker listening beyond loopback;
no worker outliving ``dplace execute`` (normal end, Ctrl-C, a worker killed).

Kept small for CI's 2 cores: a 1-block Transformer of width 16, batch 2, a few steps.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import dplace
from dplace.testing import split_placement

tf = pytest.importorskip("tensorflow")

from dplace.runtime import cluster, extract, memory, remote, zoo  # noqa: E402
from dplace.runtime.explain import explain  # noqa: E402

pytestmark = pytest.mark.tf

TINY = dict(width=16, layers=1, seq_len=4, vocab=50)
MODEL_ARGS = ["--model", "transformer", "--batch", "2", "--width", "16", "--layers", "1", "--seq-len", "4"]


def _ports_or_skip() -> None:
    try:
        cluster.free_ports(2)
    except OSError as exc:
        pytest.skip(f"cannot open a port on 127.0.0.1: {exc}")


@pytest.fixture(scope="module", autouse=True)
def _two_logical_cpus():
    """The client process's CPU split as tests/runtime/test_runtime.py needs it (it skips in a process
    whose TensorFlow started with one logical CPU, and xdist may run both files in one process)."""
    zoo.ensure_logical_cpus(2)


@pytest.fixture(scope="module")
def workers():
    _ports_or_skip()
    with cluster.LocalWorkers(2) as w:
        yield w
    assert all(p.poll() is not None for p in w._stopped), "a worker outlived its LocalWorkers"


@pytest.fixture(scope="module")
def tiny():
    step = zoo.build_step("transformer", **TINY)
    return step, extract.extract(step, 2, ["CPU:0", "CPU:1"])


def test_workers_listen_on_loopback_only(workers):
    for pid in workers.pids:
        addrs = cluster.listening(pid)
        assert addrs, f"worker {pid} listens nowhere"
        assert all(cluster.is_loopback(a) for a in addrs), addrs
    # the check itself: a wildcard address is not loopback
    assert not cluster.is_loopback("[::]:5000") and not cluster.is_loopback("0.0.0.0:5000")
    assert cluster.is_loopback("127.0.0.1:5000") and cluster.is_loopback("[::ffff:127.0.0.1]:5000")


def test_two_worker_run_places_orders_and_matches_the_loss(workers, tiny):
    step, inst = tiny
    pl = split_placement(inst)
    res = dplace.solve(inst, "heft")  # an order to enforce
    res_split = remote.execute(inst, pl, step, 2, workers.cluster, steps=3, warmup=1, loss_steps=2)
    assert res_split.ops_moved == [] and res_split.loss_ok and res_split.ok
    # from the workers' own record: both tasks ran ops, and a named op placed on CPU:1 ran there
    assert res_split.ops_per_device.get("CPU:0", 0) > 30 and res_split.ops_per_device.get("CPU:1", 0) > 30
    on1 = [op.id for o, op in enumerate(inst.ops) if pl[o] == 1 and op.type in ("Einsum", "BatchMatMulV2", "MatMul",
                                                                                 "Softmax", "AssignVariableOp")]
    assert len(on1) >= 5 and all(res_split.ran_on.get(n) == "CPU:1" for n in on1)
    assert res_split.extra["record"]["span_us"] > 0
    # the record's received tensors are the model's cross-device transfers (explain sets one against the other)
    rec, traced_us = res_split.trace
    ex = explain(inst, pl, None, rec, res_split.step_us_median, traced_us)
    tr = ex["transfers"]
    crossing = {(inst.esrc[e], pl[inst.edst[e]]) for e in range(inst.n_edges) if pl[inst.esrc[e]] != pl[inst.edst[e]]}
    assert 0 < tr["n"] <= len(crossing) and tr["n"] + tr["unmatched"] == len(rec.transfers)
    assert all(took >= 0 and model > 0 for _, took, model, _ in tr["rows"])
    per = ex["devices"]
    assert sum(v["ops"] for v in per.values()) == inst.n and all(0 <= v["idle_us"] <= ex["span_us"] for v in per.values())
    assert ex["sim_us"] == dplace.simulate(inst, pl).makespan and ex["replay_node_us"] >= ex["replay_kernel_us"] > 0
    rep = remote.execute(inst, res, step, 2, workers.cluster, steps=2, warmup=1, loss_steps=1)
    assert rep.order_enforced and rep.order_matched and rep.ok


def test_step_record_reads_devices_and_concurrency():
    """The verification reads the record: a node's device is the one whose step stats list it; the time
    two devices were busy at once is the overlap of their intervals."""
    md = tf.compat.v1.RunMetadata()
    ds = md.step_stats.dev_stats.add()
    ds.device = "/job:worker/replica:0/task:1/device:CPU:0"
    ns = ds.node_stats.add()
    ns.node_name, ns.all_start_micros, ns.all_end_rel_micros = "a", 10, 5
    ns2 = md.step_stats.dev_stats.add()
    ns2.device = "/job:worker/replica:0/task:0/device:CPU:0"
    b = ns2.node_stats.add()
    b.node_name, b.all_start_micros, b.all_end_rel_micros = "b", 12, 10
    r = ns2.node_stats.add()  # a worker's gRPC receive: a transfer, not a node
    r.node_name, r.all_start_micros, r.all_end_rel_micros = "RecvTensor", 13, 4
    r.timeline_label = ("[64B] [2.048000Mb/s] edge_280_a from /job:worker/replica:0/task:1/device:CPU:0 "
                        "to /job:worker/replica:0/task:0/device:CPU:0")
    rec = remote.StepRecord.from_metadata(md)
    assert "RecvTensor" not in rec.device
    assert rec.transfers == [("a", "/job:worker/replica:0/task:1/device:CPU:0",
                              "/job:worker/replica:0/task:0/device:CPU:0", 64, 13.0, 17.0)]
    assert rec.device["a"].endswith("task:1/device:CPU:0")
    conc = rec.concurrency()
    assert conc["span_us"] == 12 and conc["concurrent_us"] == 3


def test_profile_for_the_cluster_and_memory(workers, tiny):
    step, _ = tiny
    inst = remote.profile(step, 2, workers.cluster, ["CPU:0", "CPU:1"], steps=2, warmup=1,
                          comm_sizes=[4096, 65536, 1 << 20], comm_reps=3,
                          receive_probe=dict(n=60, rounds=1, steps=3, heavy=6, size=256))
    prof = inst.extra["tf"]["profile"]
    rc = prof["receive_cost"]  # the receive cost per tensor, fitted and written into the instance
    assert set(rc["per_device"]) == {"CPU:0", "CPU:1"} and inst.transfer_cpu == rc["us"] >= 0
    assert prof["ops_timed"] > 100 and sum(inst.dur[o][0] for o in range(inst.n)) > 0
    assert {(f["src"], f["dst"]) for f in prof["links"]} == {("CPU:0", "CPU:1"), ("CPU:1", "CPU:0")}
    assert all(f["bandwidth"] > 0 and f["latency"] >= 0 and f["r2"] <= 1 for f in prof["links"])
    assert inst.pairs[("CPU:0", "CPU:1")].latency == round(max(0.0, prof["links"][0]["latency"] - inst.transfer_cpu), 3)
    mem = prof["memory"]
    assert mem["peak_measured"] and mem["peak_measured"] > 0  # BFC allocator statistics on the worker
    assert mem["op_memory"]["n"] > 100 and mem["op_memory"]["median_rel_error"] is not None
    m = memory.measure_peak(inst, split_placement(inst), step, 2, workers.cluster)
    assert set(m["peak"]) == {"CPU:0", "CPU:1"} and all(v > 0 for v in m["peak"].values())


def test_cluster_spec_file(tmp_path, workers):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"cluster": {"worker": workers.cluster.tasks}}))
    c = cluster.read_cluster_spec(str(p)).map_devices(["CPU:0", "CPU:1"])
    assert c.devices["CPU:1"] == "/job:worker/replica:0/task:1/device:CPU:0" and c.local is None
    for bad, needle in [({"cluster": {}}, "exactly one job"), ({"worker": ["nohost"]}, "host:port"),
                        ({"worker": ["a:1"], "devices": {"CPU:0": "GPU:0"}}, "'/job:...'")]:
        p.write_text(json.dumps(bad))
        with pytest.raises(dplace.InvalidInstanceError, match=needle):
            cluster.read_cluster_spec(str(p))


# ------------------------------------------------------------------------------ no process left behind
def _tagged(tag: str) -> list[int]:
    """Live processes whose environment carries ``DPLACE_TEST_TAG=tag`` (the CLI and its workers)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            env = (d / "environ").read_bytes()
            state = (d / "stat").read_text().split()[2]
        except OSError:
            continue
        if f"DPLACE_TEST_TAG={tag}".encode() in env.split(b"\0") and state != "Z":
            out.append(int(d.name))
    return out


def _workers_of(tag: str, parent: int) -> list[int]:
    return [p for p in _tagged(tag) if p != parent]


def _task_pids(pids: list[int]) -> tuple[int, int]:
    """(task 0's pid, task 1's pid) of two workers, read from their command lines."""
    task = {}
    for p in pids:
        argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        task[int(argv[argv.index(b"--task") + 1])] = p
    return task[0], task[1]


def _start_cli(tmp_path, tiny, steps: int, json_out: bool = True):
    step, inst = tiny
    res = dplace.solve(inst, "heft")
    r = tmp_path / "r.json"
    r.write_text(json.dumps(res.to_dict()))
    tag = uuid.uuid4().hex
    env = dict(os.environ, DPLACE_TEST_TAG=tag)
    cmd = [sys.executable, "-c", "import sys; from dplace.cli import main; sys.exit(main())", "execute",
           *MODEL_ARGS, "--result", str(r), "--workers", "2", "--steps", str(steps), "--warmup", "1"]
    cmd += ["--json"] if json_out else []
    env["DPLACE_PROGRESS"] = "plain"
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), tag


def _wait_workers(proc, tag: str, timeout: float = 240.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ws = _workers_of(tag, proc.pid)
        if len(ws) == 2 and all(cluster.listening(p) for p in ws):
            return ws
        if proc.poll() is not None:
            pytest.fail(f"execute ended before its workers listened: {proc.communicate()[1][-500:]}")
        time.sleep(0.5)
    proc.kill()
    pytest.fail("workers did not start")


def _gone(tag: str, timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while _tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    return _tagged(tag)


def test_no_worker_outlives_execute(tmp_path, tiny):
    _ports_or_skip()
    proc, tag = _start_cli(tmp_path, tiny, steps=3)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-800:]
    rep = json.loads(out)
    assert rep["ok"] and rep["ops_moved_count"] == 0 and rep["extra"]["cluster"]["local"]
    assert _gone(tag) == []


def test_no_worker_outlives_ctrl_c(tmp_path, tiny):
    _ports_or_skip()
    proc, tag = _start_cli(tmp_path, tiny, steps=100000)
    _wait_workers(proc, tag)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-800:]
    assert _gone(tag) == []


def test_a_killed_worker_stops_execute_with_one_line(tmp_path, tiny):
    """The hard case, seen in CI: the master (task 0) is not scheduled (here: stopped) when the other
    worker dies in the middle of the timed steps, and is killed by the watchdog while the client's step
    call is in flight. TensorFlow's client then retries the call and waits for the master to come back
    (``GrpcRemoteMaster::CallWithRetry``, ``wait_for_ready``) until the step's 600 s deadline: execute
    must still end at once with one line naming the dead worker (:mod:`dplace.runtime.watched`)."""
    import threading

    _ports_or_skip()
    proc, tag = _start_cli(tmp_path, tiny, steps=100000, json_out=False)
    lines: list[str] = []
    timed = threading.Event()

    def read() -> None:
        for ln in proc.stderr:
            lines.append(ln)
            if "timed" in ln:
                timed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ws = sorted(_wait_workers(proc, tag))
    assert timed.wait(240), "no timed step began: " + "".join(lines)[-800:]
    master, other = _task_pids(ws)
    os.kill(master, signal.SIGSTOP)
    time.sleep(0.5)
    os.kill(other, signal.SIGKILL)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        for p in _tagged(tag):
            os.kill(p, signal.SIGKILL)
        pytest.fail("execute still ran 120 s after a worker died: " + "".join(lines)[-800:])
    reader.join(10)
    assert proc.returncode == 2, "".join(lines)[-800:]
    err = [ln for ln in lines if ln.strip()]
    assert err and "died" in err[-1] and err[-1].startswith("dplace: error: worker 1 "), "".join(lines)[-800:]
    assert _gone(tag) == []


def test_bad_cluster_arguments_are_one_line(tmp_path, capsys):
    from dplace.cli import main

    r = tmp_path / "r.json"
    r.write_text(json.dumps({"format": "dplace-result/1", "status": "heuristic", "placement": {"a": "CPU:0"}}))
    spec = tmp_path / "c.json"
    spec.write_text("{}")
    for extra, needle in [(["--workers", "0"], "--workers must be >= 1, got 0"),
                          (["--workers", "2", "--inter-threads", "0"], "--inter-threads must be >= 1, got 0"),
                          (["--workers", "2", "--cluster-spec", str(spec)], "not both"),
                          (["--cluster-spec", str(spec)], "exactly one job")]:
        assert main(["execute", *MODEL_ARGS, "--result", str(r), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err


def test_execute_on_a_cluster_spec_file(tmp_path, capsys, workers, tiny):
    """``dplace execute --cluster-spec FILE``: the placement runs on the servers the file names (here the
    fixture's local workers, reached as a spec of hosts: nothing is started or stopped by execute)."""
    from dplace.cli import main

    step, inst = tiny
    r = tmp_path / "r.json"
    r.write_text(json.dumps(dplace.solve(inst, "heft").to_dict()))
    spec = tmp_path / "c.json"
    spec.write_text(json.dumps({"cluster": {"worker": workers.cluster.tasks}}))
    assert main(["execute", *MODEL_ARGS, "--result", str(r), "--cluster-spec", str(spec), "--steps", "2",
                 "--warmup", "1", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["ok"] and rep["ops_moved_count"] == 0 and rep["extra"]["cluster"]["local"] is False
    assert rep["extra"]["cluster"]["tasks"] == workers.cluster.tasks
    assert all(p.poll() is None for p in workers.procs)  # the spec's servers are not execute's to stop


def test_a_port_in_use_is_one_line_and_leaves_no_worker():
    import socket

    _ports_or_skip()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        w = cluster.LocalWorkers(1, ports=[port])
        with pytest.raises(cluster.ClusterError) as ei:
            w.start()
    msg = str(ei.value)
    assert "\n" not in msg and f"port {port}" in msg and "in use" in msg, msg
    assert w.procs == [] or all(p.poll() is not None for p in w.procs)
    assert all(p.poll() is not None for p in w._stopped)


def test_a_worker_killed_during_the_receive_probe_ends_it_with_one_error():
    """``dplace profile --workers`` probes the receive cost on the cluster (:func:`fit_receive_cost`): a
    worker killed during those probes ends them with the cluster's one error naming it, at once (not
    after the probes' own length), and no worker is left."""
    import threading

    from dplace.runtime.recvcost import fit_receive_cost

    _ports_or_skip()
    w = cluster.LocalWorkers(2)
    w.start()
    try:
        victim = w.pids[1]
        killer = threading.Timer(3.0, lambda: os.kill(victim, signal.SIGKILL))
        killer.start()
        t0 = time.monotonic()
        with pytest.raises(cluster.ClusterError, match=r"worker 1 \(pid \d+\) died"):
            fit_receive_cost(w.cluster, ["CPU:0", "CPU:1"], n=200, rounds=10_000, steps=5)  # hours, unkilled
        assert time.monotonic() - t0 < 90
        killer.join()
    finally:
        w.stop()
    assert all(p.poll() is not None for p in w._stopped) and len(w._stopped) == 2


def test_a_session_of_a_stopped_cluster_is_collected_without_waiting_on_its_master():
    """A session still referenced when its cluster stops is closed (or collected) later; TensorFlow's close
    would retry the dead master (seen: a test run hung in keras.clear_session's collection, inside
    GrpcRemoteMaster::CloseSession). watched.cluster_session's close gives up at once when the master is gone."""
    import gc
    import threading

    from dplace.runtime import watched

    _ports_or_skip()
    with cluster.LocalWorkers(1) as w:
        g = tf.Graph()
        with g.as_default(), tf.device(w.cluster.task_device(0)):
            out = tf.constant(2.0) * 3.0
        target = w.cluster.target
        sess = watched.cluster_session(target, g, tf.compat.v1.ConfigProto(operation_timeout_in_ms=5000))
        assert watched.call(lambda: sess.run(out), w.check_alive).value == 6.0
    assert watched._master_gone(target)
    done = threading.Event()

    def collect():
        nonlocal sess
        sess.close()
        del sess
        gc.collect()
        done.set()

    threading.Thread(target=collect, daemon=True).start()
    assert done.wait(10.0), "closing a session of a stopped cluster waited on its dead master"
