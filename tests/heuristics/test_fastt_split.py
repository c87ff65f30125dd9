"""OS-DPOS's split graphs built by editing columns (issue 25): the same instance as rebuilding every op,
field by field, on random graphs with every kind of split spec (cut inputs, partial sums, per-device
times, pins and groups, ``forward_of``, edge extras) and on the TF graphs' data-parallel form."""
import random

import pytest

from dplace.heuristics.fastt_graphs import (SPLIT_KEY, _split_one, copy_bandwidth, data_parallel_instance,
                                            split_dims, split_instance)
from dplace.instance.io import instance_to_dict, load_instance
from dplace.instance.model import Edge, Op
from dplace.testing import random_instance


def _renamed_by_rebuild(op: Op, old: str, new: str) -> Op:
    """The rename as the per-op rebuild did it, for every op with a ``forward_of`` or a split spec."""
    extra = dict(op.extra)
    if extra.get("forward_of") == old:
        del extra["forward_of"]
    spec = extra.get(SPLIT_KEY)
    if isinstance(spec, dict) and isinstance(spec.get("cut"), dict):
        extra[SPLIT_KEY] = {**spec, "cut": {d: ([new if s == old else s for s in v] if isinstance(v, list) else v)
                                            for d, v in spec["cut"].items()}}
    return Op(op.id, op.time, op.memory, op.type, op.colocation, op.device, extra)


def _split_by_rebuild(inst, splits, overhead_us=0.0, bw=None):
    """The reference: every op and edge rebuilt as objects and validated by ``Instance.replace``."""
    cur = inst
    done = list(inst.extra.get("splits", [])) if "split_of" in inst.extra else []
    base = inst.extra.get("split_of", inst.name)
    bw = copy_bandwidth(inst) if bw is None else bw
    for op_id, dim, n in splits:
        o = cur.op_index[op_id]
        new_ops, new_edges, out_id = _split_one(cur.ops[o], [cur.edges[e] for e in cur.pred[o]],
                                                [cur.edges[e] for e in cur.succ[o]], dim, n, overhead_us, bw,
                                                set(cur.op_index))
        ops = []
        for x, op in enumerate(cur.ops):
            if x == o:
                ops.extend(new_ops)
            else:
                ops.append(_renamed_by_rebuild(op, op_id, out_id) if ("forward_of" in op.extra or SPLIT_KEY in op.extra)
                           else op)
        edges = [ed for e, ed in enumerate(cur.edges) if o not in (cur.esrc[e], cur.edst[e])] + new_edges
        done.append([op_id, dim, n])
        extra = dict(cur.extra, split_of=base, splits=[list(s) for s in done], split_copy_bytes_per_us=bw)
        if overhead_us:
            extra["split_overhead_us"] = float(overhead_us)
        cur = cur.replace(name=f"{base}+split", ops=ops, edges=edges, extra=extra)
    return cur


def _same(a, b):
    assert instance_to_dict(a) == instance_to_dict(b)
    assert a.ops == b.ops and a.edges == b.edges and a.name == b.name and a.extra == b.extra
    assert a.topo == b.topo and a.pred == b.pred and a.succ == b.succ and a.dur == b.dur and a.mem == b.mem
    assert a.pinned == b.pinned and a.group_of == b.group_of and a.ebytes == b.ebytes


def _spec(rng, o, inst):
    """A split spec for op ``o``: dims, sometimes a cut list naming some inputs (or a stranger), a reduce."""
    dims = {"batch": rng.choice([2, 3, 4, 64])}
    if rng.random() < 0.5:
        dims["channel"] = rng.choice([3, 128])
    spec = {"dims": dims}
    srcs = [inst.ops[inst.esrc[e]].id for e in inst.pred[o]]
    if rng.random() < 0.6:
        spec["cut"] = {d: [s for s in srcs if rng.random() < 0.5] + (["nobody"] if rng.random() < 0.2 else [])
                       for d in dims}
    if rng.random() < 0.3:
        spec["reduce"] = ["batch"]
    return spec


def _random_splittable(rng):
    inst = random_instance(rng, n_ops=rng.randint(3, 14), n_devices=rng.randint(2, 4))
    names = [op.id for op in inst.ops]
    ops = []
    for o, op in enumerate(inst.ops):
        extra = dict(op.extra)
        if rng.random() < 0.3:
            extra["forward_of"] = rng.choice(names)
        if op.colocation is None and op.device is None and rng.random() < 0.6:
            extra[SPLIT_KEY] = _spec(rng, o, inst)
        time = op.time
        if rng.random() < 0.2:
            time = {dev.name: rng.uniform(0, 50) for dev in inst.devices}
        ops.append(Op(op.id, time, op.memory, op.type, op.colocation, op.device, extra))
    edges = [Edge(ed.src, ed.dst, ed.bytes, {"tag": e} if rng.random() < 0.3 else dict(ed.extra))
             for e, ed in enumerate(inst.edges)]
    return inst.replace(ops=ops, edges=edges)


def _random_splits(rng, inst, k):
    """Up to ``k`` valid splits, each of an op still in the graph as it is after the splits before it."""
    out, cur = [], inst
    for _ in range(k):
        cand = [op for op in cur.ops if split_dims(op) and "split_of" not in op.extra]
        if not cand:
            break
        op = rng.choice(cand)
        dim, size = rng.choice(sorted(split_dims(op).items()))
        s = [op.id, dim, rng.randint(2, min(size, 5))]
        out.append(s)
        cur = _split_by_rebuild(cur, [s], bw=100.0)
    return out


def test_split_columns_equal_the_rebuild_on_random_graphs():
    checked = 0
    for seed in range(150):
        rng = random.Random(seed)
        inst = _random_splittable(rng)
        splits = _random_splits(rng, inst, rng.randint(1, 4))
        if not splits:
            continue
        ov = rng.choice([0.0, 2.5])
        _same(split_instance(inst, splits, overhead_us=ov, copy_bytes_per_us=100.0),
              _split_by_rebuild(inst, splits, ov, 100.0))
        # one at a time, each from the graph the last one built (what os_dpos does)
        cur = inst
        for s in splits:
            cur = split_instance(cur, [s], overhead_us=ov, copy_bytes_per_us=100.0)
        _same(cur, _split_by_rebuild(inst, splits, ov, 100.0))
        checked += 1
    assert checked > 100


@pytest.mark.parametrize("path", ["instances/tf/vgg19_b32_train_4dev.json",
                                  "instances/tf/transformer_b96_train_4dev.json"])
def test_split_columns_equal_the_rebuild_on_data_parallel_tf_graphs(path):
    inst = data_parallel_instance(load_instance(path))
    rng = random.Random(7)
    splits = _random_splits(rng, inst, 3)
    assert splits
    _same(split_instance(inst, splits), _split_by_rebuild(inst, splits))
    # from a loaded file (columns not in list form: its own list columns are made once and kept)
    loaded = load_instance(path)
    s2 = _random_splits(rng, loaded, 2)
    _same(split_instance(loaded, s2), _split_by_rebuild(loaded, s2))


def _same_answer(a, b):
    assert a.status == b.status and a.placement == b.placement and a.order == b.order and a.makespan == b.makespan
    if a.status == "infeasible":  # no method ran
        return
    assert a.extra["splits"] == b.extra["splits"] and a.extra["dpos_runs"] == b.extra["dpos_runs"]
    assert a.extra["stopped"] == b.extra["stopped"]
    assert instance_to_dict(a.instance) == instance_to_dict(b.instance)


def _solved_both_ways(monkeypatch, inst, **options):
    """os_dpos as it runs, and os_dpos with every split graph rebuilt op by op (the builder before)."""
    import dplace
    import dplace.heuristics.fastt as fastt

    new = dplace.solve(inst, "os_dpos", **options)
    with monkeypatch.context() as mp:
        mp.setattr(fastt, "split_instance", lambda g, splits, *, overhead_us=0.0, copy_bytes_per_us=None:
                   _split_by_rebuild(g, [tuple(s) for s in splits], overhead_us, copy_bytes_per_us))
        old = dplace.solve(inst, "os_dpos", **options)
    return new, old


@pytest.mark.parametrize("kernel", ["python", "numba"])
def test_os_dpos_answer_is_the_rebuilt_graphs_answer_random(monkeypatch, kernel):
    # the pure-Python DPOS and the compiled one (DPLACE_KERNEL), both comm modes
    monkeypatch.setenv("DPLACE_KERNEL", kernel)
    kept = 0
    for seed in range(40):
        rng = random.Random(seed)
        inst = _random_splittable(rng)
        inst = inst.replace(comm=rng.choice(["parallel", "sequential"]))
        new, old = _solved_both_ways(monkeypatch, inst, split_overhead_us=rng.choice([0.0, 1.0]))
        _same_answer(new, old)
        kept += bool(new.extra.get("splits"))
    assert kept >= 5


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_os_dpos_answer_is_the_rebuilt_graphs_answer_transformer(monkeypatch, comm):
    from dplace.formats.generate import transformer_training

    inst = transformer_training(700, 4, comm=comm)
    new, old = _solved_both_ways(monkeypatch, inst, max_dpos_runs=12)
    _same_answer(new, old)
    assert new.extra["dpos_runs"] == 12 and new.extra["splits"]


def test_compiled_kahn_is_ready_order():
    from dplace.instance.graph import ready_order
    from dplace.kernels.kahn import ready_order_arrays

    for seed in range(60):
        rng = random.Random(seed)
        inst = _random_splittable(rng)
        splits = _random_splits(rng, inst, 3)
        g = _split_by_rebuild(inst, splits, bw=100.0) if splits else inst
        # edges in a shuffled order and ops renumbered at random: the order must not depend on either
        perm = list(range(g.n))
        rng.shuffle(perm)
        es = list(zip(g.esrc, g.edst))
        rng.shuffle(es)
        src = [perm[u] for u, _ in es]
        dst = [perm[v] for _, v in es]
        assert ready_order_arrays(g.n, src, dst).tolist() == ready_order(_lists(g.n, src, dst))
        assert ready_order_arrays(g.n, g.esrc, g.edst).tolist() == g.topo
    # a cycle: the order stops short, as ready_order's does
    assert ready_order_arrays(3, [0, 1, 2], [1, 2, 1]).tolist() == [0]


def _lists(n, src, dst):
    """The edge lists ``ready_order`` walks (``n``, ``succ``, ``pred``, ``edst``) of edges ``src[e] -> dst[e]``."""
    h = type("G", (), {})()
    h.n, h.edst = n, list(dst)
    h.succ = [[e for e in range(len(src)) if src[e] == o] for o in range(n)]
    h.pred = [[e for e in range(len(src)) if dst[e] == o] for o in range(n)]
    return h


def _kahn_by(n, src, dst, key):
    """Kahn's algorithm taking the ready op of smallest ``key`` first, ties by index (any topological order)."""
    from dplace.instance.graph import ready_order

    return ready_order(_lists(n, src, dst), key=lambda o: (key[o], o))


def test_is_kahn_order_says_exactly_when_an_order_is_the_smallest_index_walk():
    from dplace.instance.columns import is_kahn_order
    from dplace.instance.graph import ready_order

    yes = no = 0
    for seed in range(300):
        rng = random.Random(seed)
        n = rng.randint(1, 12)
        es = sorted({(u, v) for u in range(n) for v in range(n) if u != v and rng.random() < 0.25})
        perm = list(range(n))
        rng.shuffle(perm)  # a DAG whose edges do not follow the index order
        src = [perm[u] for u, v in es if u < v]
        dst = [perm[v] for u, v in es if u < v]
        kahn = ready_order(_lists(n, src, dst))
        assert is_kahn_order(kahn, src, dst, n)
        for _ in range(5):  # other topological orders (ties of the random key broken by index)
            other = _kahn_by(n, src, dst, [rng.randint(0, 3) for _ in range(n)])
            assert is_kahn_order(other, src, dst, n) == (other == kahn)
            yes += other == kahn
            no += other != kahn
        bad = list(kahn)
        if n > 1:
            bad[0], bad[-1] = bad[-1], bad[0]
            assert not is_kahn_order(bad, src, dst, n) or bad == kahn
        assert not is_kahn_order(kahn[:-1], src, dst, n) and not is_kahn_order([0] * n, src, dst, n) or n == 1
    assert yes > 100 and no > 100


def test_from_columns_takes_a_given_order_only_if_it_is_kahns():
    from dplace.instance.model import Instance

    for seed in range(40):
        rng = random.Random(seed)
        base = _random_splittable(rng)
        inst = _split_by_rebuild(base, _random_splits(rng, base, 2), bw=100.0)
        cols = inst.columns
        assert Instance.from_columns("x", inst.devices, cols, link=inst.link, topo=inst.topo).topo == inst.topo
        other = _kahn_by(inst.n, inst.esrc, inst.edst, [rng.random() for _ in range(inst.n)])
        for given in (other, list(reversed(inst.topo)), inst.topo[:-1], [0] * inst.n, list(range(inst.n))):
            assert Instance.from_columns("x", inst.devices, cols, link=inst.link, topo=given).topo == inst.topo
