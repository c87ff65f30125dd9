"""Where a placement's measured step goes, set against the simulator's prediction.

One traced step on a cluster (:class:`dplace.runtime.remote.StepRecord`: per node its device, start, end and
kernel time) splits the measured step into parts the model can be checked on, one at a time:

* ``outside_us``: the traced step's wall time less the span of its nodes (first start to last end): what a
  step costs beyond its ops (the session's call, the master, the workers' set-up and tear-down);
* ``replay_kernel_us``: the simulator's makespan of the same placement and order with each op's time
  replaced by its kernel time *in this run* (op start to op end): against ``sim_us`` it shows how far
  the profiled op times drift when the placement runs (two workers at once, another load);
* ``replay_node_us``: the same with each op's whole node time (start to end: the kernel and the
  executor's work around it): against ``replay_kernel_us`` it is the executor's cost per op; against
  ``span_us`` what the model's structure (links, receive cost, order) misses;
* ``replay_gated_us``: the same as ``replay_node_us`` with transfers served only while the sender and
  the receiver are idle (:func:`replay_gated`): against ``span_us`` it tests that term; ``sim_gated_us``:
  that term with the profiled op times (a prediction, as ``sim_us``);
* per device: ops, predicted kernel time, this run's kernel and node time, the tensors it receives
  (the model's count and receive cost; the record's ``_Recv`` nodes, whose span is mostly waiting for
  the tensor, and ``_Send`` nodes, with their times), the other nodes that are no instance op, and the
  device's idle time in the span (no node but a ``_Recv`` running: a waiting receive is not work).

``benchmarks/bench_runtime_truth.py --explain`` prints it per placement, and :func:`busy_transfer_probe`
before them: whether a worker serves a transfer while its core computes.
"""
from __future__ import annotations

from typing import Any


def _node_times(rec, nodes) -> dict[str, float]:
    return {n: rec.end_us[n] - rec.start_us[n] for n in nodes if n in rec.start_us}


def explain(inst, placement, order, rec, wall_us: float, traced_wall_us: float) -> dict[str, Any]:
    """The breakdown above for ``placement`` (with ``order``, or None) of ``inst``, from ``rec`` (the
    traced step's record), ``wall_us`` (the median untraced step) and ``traced_wall_us`` (the traced
    step's own wall time)."""
    from dplace.schedule.simulate import as_placement, simulate

    from .profile import with_times
    from .remote import merge_intervals

    pl = [int(d) for d in as_placement(inst, placement)]
    node_of = [op.extra.get("tf_node", op.id) for op in inst.ops]
    ours = set(node_of)
    dev_of_node = {node_of[o]: inst.devices[pl[o]].name for o in range(inst.n)}
    starts = list(rec.start_us.values())
    span = (max(rec.end_us.values()) - min(starts)) if starts else 0.0
    kernel = {n: rec.op_us.get(n, 0.0) for n in ours}
    node = _node_times(rec, ours)
    out: dict[str, Any] = {
        "wall_us": wall_us, "traced_wall_us": traced_wall_us, "span_us": span,
        "outside_us": traced_wall_us - span,
        "sim_us": simulate(inst, pl, order).makespan,
        "replay_kernel_us": simulate(with_times(inst, kernel), pl, order).makespan,
        "replay_node_us": simulate(with_times(inst, node), pl, order).makespan,
        "replay_gated_us": replay_gated(inst, pl, order, node),
        "sim_gated_us": replay_gated(inst, pl, order, {node_of[o]: inst.dur[o][pl[o]] for o in range(inst.n)}),
    }
    received = {}
    for e in range(inst.n_edges):
        s, t = inst.esrc[e], inst.edst[e]
        if pl[s] != pl[t]:
            received.setdefault(pl[t], set()).add(s)
    tf_names = {}  # the record's device name (a task device) -> instance device, from where our ops ran
    for n, d in rec.device.items():
        if n in dev_of_node:
            tf_names.setdefault(d, dev_of_node[n])
    per = {}
    for d, dev in enumerate(inst.devices):
        mine = [o for o in range(inst.n) if pl[o] == d]
        tfd = [k for k, v in tf_names.items() if v == dev.name]
        ran = [n for n in rec.start_us if rec.device[n] in tfd]
        others = [n for n in ran if n not in ours]
        kinds = {k: [n for n in others if rec.op_type.get(n, "").endswith(k)] for k in ("_Recv", "_Send")}
        rest = [n for n in others if n not in kinds["_Recv"] and n not in kinds["_Send"]]
        work = [(rec.start_us[n], rec.end_us[n]) for n in ran if n not in kinds["_Recv"]]
        per[dev.name] = {
            "ops": len(mine),
            "pred_kernel_us": sum(inst.dur[o][d] for o in mine),
            "pred_receive_us": inst.transfer_cpu * len(received.get(d, ())),
            "receives": len(received.get(d, ())),
            "kernel_us": sum(kernel[node_of[o]] for o in mine),
            "node_us": sum(node.get(node_of[o], 0.0) for o in mine),
            **{f"{key}_{what}": (len(ns) if what == "nodes" else sum(rec.end_us[n] - rec.start_us[n] for n in ns))
               for key, ns in (("recv", kinds["_Recv"]), ("send", kinds["_Send"]), ("other", rest))
               for what in ("nodes", "us")},
            "idle_us": span - sum(b - a for a, b in merge_intervals(work)),
        }
    out["devices"] = per
    out["transfers"] = _transfers(inst, pl, rec, node_of)
    return out


def replay_gated(inst, placement, order, times: dict[str, float], serve_us: float = 0.0) -> float:
    """The makespan of ``placement`` (its order: ``order``, or the simulator's own) with op times
    ``times`` (µs by graph node) when a worker serves its side of a transfer only while it is idle, as
    :func:`busy_transfer_probe` measures for one inter-op thread: a device is idle when it runs no op and
    its next op in its order is not ready. A device's requests for the tensors it receives go out at its
    first idle moment; the sender sends a tensor at its first idle moment after the tensor exists and the
    request came; the tensor then takes the model's ``latency + bytes / bandwidth`` and is usable at the
    receiver's first idle moment after it arrived. Everything else is the simulator's (``transfer_cpu``
    paid by the first consumer on a device, parallel links). ``serve_us`` > 0: an idle sender serves one
    tensor at a time, each taking it ``serve_us`` of its core (its next op, once ready, goes first).
    Not the model: a check of a term it lacks."""
    import heapq

    from dplace.schedule.simulate import as_placement, simulate

    from .profile import with_times

    pl = [int(d) for d in as_placement(inst, placement)]
    base = with_times(inst, times)
    lists = simulate(base, pl, order).order
    n, m = inst.n, inst.m
    rc = inst.receive_times(pl)
    dur = [base.dur[o][pl[o]] + rc[o] for o in range(n)]
    end = [None] * n
    usable: dict[tuple[int, int], float] = {}  # (producer, device) -> when its tensor is usable there
    arrived: list[dict[int, float]] = [{} for _ in range(m)]  # per device: producer -> arrival (not taken in)
    pending = [[] for _ in range(m)]  # per sender: (producer, destination) made, not yet sent
    queued = set()  # every (producer, destination) ever put in pending
    asked = [None] * m  # when each device sent its requests (its first idle moment)
    nxt = [0] * m
    busy_until = [0.0] * m
    events = [0.0]
    t = 0.0

    def ready(o: int, d: int) -> bool:
        for e in inst.pred[o]:
            s = inst.esrc[e]
            if end[s] is None or (pl[s] == d and end[s] > t) or (pl[s] != d and usable.get((s, d), t + 1) > t):
                return False
        return True

    while events:
        t = heapq.heappop(events)
        while events and events[0] <= t:
            heapq.heappop(events)
        changed = True
        while changed:
            changed = False
            for d in range(m):
                if busy_until[d] > t:
                    continue
                if nxt[d] < len(lists[d]) and ready(lists[d][nxt[d]], d):
                    o = lists[d][nxt[d]]
                    nxt[d] += 1
                    end[o] = t + dur[o]
                    busy_until[d] = end[o]
                    heapq.heappush(events, end[o])
                    for e in inst.succ[o]:
                        b = pl[inst.edst[e]]
                        if b != d and (o, b) not in queued:
                            queued.add((o, b))
                            pending[d].append((o, b))
                    changed = True
                    continue
                # d is idle at t: it asks, takes in what arrived, sends what was asked for and exists
                if asked[d] is None:
                    asked[d] = t
                    changed = True
                for o, at in list(arrived[d].items()):
                    if at <= t:
                        usable[(o, d)] = t
                        del arrived[d][o]
                        changed = True
                keep = []
                for o, b in pending[d]:
                    if end[o] <= t and asked[b] is not None and asked[b] <= t and not (serve_us and busy_until[d] > t):
                        left = t + serve_us
                        if serve_us:
                            busy_until[d] = left
                            heapq.heappush(events, left)
                        at = left + min(inst.transfer_time(e, d, b) for e in inst.succ[o] if pl[inst.edst[e]] == b)
                        arrived[b][o] = at
                        heapq.heappush(events, at)
                        changed = True
                    else:
                        keep.append((o, b))
                pending[d] = keep
    if any(x is None for x in end):
        raise RuntimeError("replay_gated: not every op ran")
    return max(end) if n else 0.0


def _transfers(inst, pl, rec, node_of) -> dict[str, Any]:
    """The tensors the workers received in the step (their RecvTensor calls) against the model's links:
    per transfer its bytes, the time from the later of the call's start and the end of the producer's
    kernel to the call's end (``took``: the transfer once the tensor existed) and the model's ``latency + bytes /
    bandwidth`` for that pair (``model``; the receive cost ``transfer_cpu`` is apart: the receiver's
    core pays it). Calls whose producer is no instance op (a variable's stand-in) or that no edge of the
    instance explains are counted apart (``unmatched``)."""
    import statistics

    index = {n: o for o, n in enumerate(node_of)}
    dev_index = {}
    for o in range(inst.n):  # the record's task device -> instance device, from where the ops ran
        if node_of[o] in rec.device:
            dev_index.setdefault(rec.device[node_of[o]], pl[o])
    rows, unmatched, waits = [], 0, []
    for node, src, dst, nbytes, start, end in rec.transfers:
        o = index.get(node)
        if o is None or src not in dev_index or dst not in dev_index or node not in rec.op_end_us:
            unmatched += 1
            continue
        a, b = dev_index[src], dev_index[dst]
        e = next((e for e in inst.succ[o] if pl[inst.edst[e]] == b), None)
        if e is None:  # no edge of the instance crosses there (a control input, a node TF added)
            unmatched += 1
            continue
        model = inst.transfer_time(e, a, b)
        rows.append((nbytes, end - max(start, rec.op_end_us[node]), model, end - start))
        waits.append((start - rec.op_end_us[node], end - rec.op_end_us[node]))
    out = {"n": len(rows), "unmatched": unmatched, "rows": [[round(x, 1) for x in r] for r in rows]}
    if rows:
        out.update({"took_median_us": statistics.median(r[1] for r in rows),
                    "model_median_us": statistics.median(r[2] for r in rows),
                    "took_sum_us": sum(r[1] for r in rows), "model_sum_us": sum(r[2] for r in rows),
                    "call_median_us": statistics.median(r[3] for r in rows),
                    "send_wait_median_us": statistics.median(w for w, _ in waits),
                    "delay_median_us": statistics.median(d for _, d in waits)})
    return out


def busy_transfer_probe(cluster, devices: list[str], *, n: int = 20, heavy: int = 20, size: int = 512,
                        warmup: int = 2) -> list[dict[str, Any]]:
    """Does a worker serve a transfer while its core computes? For each ordered pair (a, b) of the first
    two devices and each side: ``n`` tiny tensors made on ``a`` at the step's start are summed on ``b``
    while a chain of ``heavy`` ``size``² matmuls keeps the sender (``busy: sender``) or the receiver
    (``busy: receiver``) computing (:func:`dplace.runtime.recvcost.probe_graph`, configs ``send`` and
    ``recv``); one traced step each. Per case (µs from the step's first node): the chain's end, the
    median of the tensors' ready time, of when the sender began to send them (TensorFlow's
    ``send_start_micros``, kept in the RecvTensor record) and of their arrival. A send that starts at the
    chain's end, not at the tensor's ready time, says the busy worker served no transfer while it
    computed (its inter-op pool, which runs its side of each transfer, was busy)."""
    import statistics

    from . import watched
    from .recvcost import probe_graph, session_config, watched_call
    from .remote import StepRecord
    from .zoo import _tf

    tf = _tf()
    cluster = cluster.map_devices(list(devices))
    out = []
    pairs = [(devices[0], devices[1]), (devices[1], devices[0])] if len(devices) > 1 else []
    for a, b in pairs:
        for cfg, busy in (("send", "sender"), ("recv", "receiver")):
            g, fetch = probe_graph(cfg, n, cluster.devices[a], cluster.devices[b], heavy=heavy, size=size)
            sess = watched_call(lambda g=g: watched.cluster_session(cluster.target, g, session_config()),
                                cluster.check_alive)[0]
            opts = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            md = tf.compat.v1.RunMetadata()
            for _ in range(warmup):
                watched_call(lambda s=sess: s.run(fetch), cluster.check_alive)
            watched_call(lambda s=sess: s.run(fetch, options=opts, run_metadata=md), cluster.check_alive)
            sess.close()
            rec = StepRecord.from_metadata(md)
            t0 = min(rec.start_us.values())
            chain = [rec.end_us[k] for k in rec.start_us if rec.op_type.get(k, "").endswith("MatMul")]
            got = [(rec.op_end_us[k] - t0, s - t0, e - t0) for k, _, _, _, s, e in rec.transfers if k in rec.op_end_us]
            out.append({"src": a, "dst": b, "busy": busy, "chain_end_us": max(chain) - t0 if chain else float("nan"),
                        "n": len(got), **{f"{k}_median_us": statistics.median(x[i] for x in got) if got else float("nan")
                                          for i, k in enumerate(("ready", "send", "arrive"))}})
    return out
