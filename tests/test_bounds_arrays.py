"""The cheap bounds where the kernels run (arrays: the critical path, memory_path, the anchored bounds'
recurrence, memory_cuts reading only the path's ops) give the pure-Python reference's values to the last
bit; memory_cuts equals a plain O(K^2) dynamic programme over the path written from its docstring (in sequential
comm an O(K^3) one over both runs beside each boundary, the link's queue counted from the docstring)."""
import math
import random

import pytest

from dplace import bounds
from dplace.bounds import memory
from dplace.bounds.anchored import _away
from dplace.instance.io import instance_from_dict, instance_to_dict
from dplace.testing import random_instance


def _one_source_and_sink(inst):
    """``inst`` with an op before every source and one after every sink (the anchored bounds' case)."""
    d = instance_to_dict(inst)
    ids = [op["id"] for op in d["ops"]]
    has_in = {e["dst"] for e in d["edges"]}
    has_out = {e["src"] for e in d["edges"]}
    d["ops"] = [{"id": "s", "time": 1}] + d["ops"] + [{"id": "t", "time": 2}]
    d["edges"] = ([{"src": "s", "dst": x, "bytes": 3} for x in ids if x not in has_in] + d["edges"]
                  + [{"src": x, "dst": "t", "bytes": 5} for x in ids if x not in has_out])
    return instance_from_dict(d)


def _cases():
    rng = random.Random(28)
    out = []
    for k in range(60):
        inst = random_instance(rng, n_ops=rng.randint(2, 40), n_devices=rng.randint(2, 4), integer=rng.random() < 0.5,
                               edge_prob=rng.choice([0.1, 0.3, 0.8]), memory_slack=rng.choice([0.3, 0.6, 3.0]))
        out.append(_one_source_and_sink(inst) if k % 2 else inst)
    return out


def _fresh(inst):
    return instance_from_dict(instance_to_dict(inst))


@pytest.mark.parametrize("inst", _cases(), ids=lambda i: i.name)
def test_bounds_on_arrays_equal_the_reference(inst, monkeypatch):
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    ref = _fresh(inst)
    want = (bounds.lower_bound_parts(ref), bounds.critical_path_ops(ref), _away(ref))
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    got = _fresh(inst)
    assert (bounds.lower_bound_parts(got), bounds.critical_path_ops(got), _away(got)) == want
    for x in ("dur", "mem", "succ", "pred", "group_of"):  # nothing built the per-op lists
        assert x not in got.__dict__, x


def _cuts_by_the_definition(inst, path, cost):
    """min over cuts of ``path`` into runs that fit one device of the cost of the boundaries (lists only)."""
    def unit(o):
        g = inst.group_of[o]
        return set(inst.groups[g]) if g >= 0 else {o}

    f = [0.0] + [math.inf] * len(path)
    for j in range(len(path)):
        for i in range(j + 1):
            held = set().union(*(unit(o) for o in path[i:j + 1]))
            pins = {inst.pinned[x] for x in held if inst.pinned[x] >= 0}
            room = inst.capacity[next(iter(pins))] if len(pins) == 1 else max(inst.capacity)
            if len(pins) <= 1 and sum(inst.mem[x] for x in held) <= room:
                f[j + 1] = min(f[j + 1], f[i] + (cost[i - 1] if i else 0.0))
    return f[-1]


def _sequential_cuts_by_the_definition(inst, path, cost, slack=None, first=None, window=memory.SEQ_WINDOW):
    """min over cuts of ``path`` into runs that fit of the boundaries' costs, a boundary k between runs
    [i..k] and [k+1..l] costing max(0, max(cost[k], max_t (sends of c_t..c_k to the run after's units - the
    smallest times of c_{t+1}..c_k)) - slack[k]), t from max(i, k - window + 1, first[k]), the run after known
    up to k + window (lists only)."""
    K = len(path)
    slack = slack or [0.0] * (K - 1)
    first = first or [0] * (K - 1)

    def unit(o):
        g = inst.group_of[o]
        return set(inst.groups[g]) if g >= 0 else {o}

    def fits(i, j):
        held = set().union(*(unit(o) for o in path[i:j + 1]))
        pins = {inst.pinned[x] for x in held if inst.pinned[x] >= 0}
        room = inst.capacity[next(iter(pins))] if len(pins) == 1 else max(inst.capacity)
        return len(pins) <= 1 and sum(inst.mem[x] for x in held) <= room

    def send(b):
        return min(inst.lat[a][d] + b / inst.bw[a][d] for a in range(inst.m) for d in range(inst.m) if a != d)

    def boundary(i, k, l):
        if cost[k] == math.inf:
            return math.inf
        after = set().union(*(unit(o) for o in path[k + 1:min(l, k + window) + 1]))
        best = cost[k]
        for t in range(max(i, k - window + 1, first[k]), k + 1):
            sends = [max([inst.ebytes[e] for e in inst.succ[path[s]] if inst.edst[e] in after], default=None)
                     for s in range(t, k + 1)]
            total = sum(send(b) for b in sends if b is not None)
            if sends[0] is not None:  # the detour starts at a send of c_t
                best = max(best, total - sum(min(inst.dur[path[r]]) for r in range(t + 1, k + 1)))
        return max(0.0, best - slack[k])

    F = {}  # (i, k): least cost of the boundaries before the run [i..k], the last so far
    for k in range(K):
        if fits(0, k):
            F[(0, k)] = 0.0
    for k in range(K - 1):
        for i in range(k + 1):
            if (i, k) not in F:
                continue
            for l_ in range(k + 1, K):
                if fits(k + 1, l_):
                    v = F[(i, k)] + boundary(i, k, l_)
                    F[(k + 1, l_)] = min(F.get((k + 1, l_), math.inf), v)
    return min((v for (i, k), v in F.items() if k == K - 1), default=math.inf)


@pytest.mark.parametrize("inst", _cases(), ids=lambda i: i.name)
def test_memory_cuts_is_its_definition(inst):
    path = bounds.critical_path_ops(inst)
    if len(path) < 2:
        return
    edge, cost = [], []
    for u, v in zip(path, path[1:]):  # the cheapest transfer of each path edge, the largest over parallel ones
        cs = [min((inst.transfer_time(e, a, b) for a in inst.allowed_devices(u) for b in inst.allowed_devices(v)
                   if a != b), default=0.0) for e in inst.succ[u] if inst.edst[e] == v]
        edge.append(max([0.0] + cs))
        same = (inst.group_of[u] >= 0 and inst.group_of[u] == inst.group_of[v]) or \
            (inst.pinned[u] >= 0 and inst.pinned[u] == inst.pinned[v])
        cost.append(math.inf if same else edge[-1])
    assert memory.path_edge_costs(inst, path) == edge
    if inst.comm == "sequential":
        extra = _sequential_cuts_by_the_definition(inst, path, cost)
        assert extra >= _cuts_by_the_definition(inst, path, cost)
    else:
        extra = _cuts_by_the_definition(inst, path, cost)
    base = sum(min(inst.dur[o]) for o in path)
    assert memory.memory_cuts_bound(inst) == pytest.approx(base + (extra if extra < math.inf else 0.0), rel=1e-12)


def test_the_bound_beside_a_method_is_the_bound_before_it(monkeypatch):
    """``dplace.solve`` on a graph large enough for the compiled bounds (here the threshold lowered) runs
    them on a second thread beside the method (``start_lower_bound``); the result, bound and its source
    included, is the one computed before the method; waiting callers get the same parts."""
    import threading

    from dplace import registry
    from dplace.formats.generate import transformer_training
    from dplace.kernels import bounds as kb

    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    monkeypatch.setattr(kb, "SCALE_FROM", 100)
    started = []

    def spy(i):
        began = bounds.start_lower_bound(i)
        started.append((began, i.__dict__.get("_lower_bound_job")))
        return began

    monkeypatch.setattr(registry, "start_lower_bound", spy)
    for comm in ("parallel", "sequential"):
        inst = transformer_training(1500, 4, seed=5, comm=comm)
        for method in ("heft", "m_etf", "dpos"):
            threaded = registry.solve(_fresh(inst), method)
            before = _fresh(inst)
            want = bounds.lower_bound_parts(before)  # computed first, as before: nothing to start
            plain = registry.solve(before, method)
            assert threaded.to_dict() | {"solve_time_s": 0} == plain.to_dict() | {"solve_time_s": 0}
            assert (threaded.lower_bound, threaded.bound_source) == (max(want.values()), bounds.best_part(want)[0])
    assert [s[0] for s in started] == [True, False] * 6
    assert all(not job.is_alive() for _, job in started if job is not None)
    assert not [t for t in threading.enumerate() if t.name == "dplace-lower-bound"]
    # a method that reads the cheap bounds itself (portfolio's stages), under a time limit: the same cheap
    # parts; its own bound is at least their max (it may prove more, e.g. by segments, as time allows)
    inst_p = _fresh(inst)
    threaded = registry.solve(inst_p, "portfolio", time_limit_s=3)
    assert bounds.lower_bound_parts(inst_p) == want
    assert threaded.lower_bound >= max(want.values())
    if threaded.bound_source in want:
        assert (threaded.lower_bound, threaded.bound_source) == (max(want.values()), bounds.best_part(want)[0])
    assert started[-1][0] and threaded.solve_time_s <= 4.0
    # what the thread fills on the instance: the parts and the heads/tails memo (a race on the memo writes
    # equal values); what both threads read is built before it starts
    fresh = _fresh(inst)
    bounds.check_memory_feasible(fresh)
    keys = set(fresh.__dict__)
    assert bounds.start_lower_bound(fresh)
    fresh.__dict__["_lower_bound_job"].join()
    assert set(fresh.__dict__) - keys == {"_kernel_arrays", "_pred_csr", "_succ_csr", "_heads_tails",
                                          "_lower_bound_job", "_lower_bound_parts"}
    late = _fresh(inst)
    bounds.check_memory_feasible(late)
    assert bounds.start_lower_bound(late) and not bounds.start_lower_bound(late)  # once per instance
    assert bounds.lower_bound_parts(late) == bounds.lower_bound_parts(_fresh(inst))
    assert "_lower_bound_job" not in late.__dict__
    with bounds.quick_bounds():
        assert not bounds.start_lower_bound(_fresh(inst))


@pytest.mark.parametrize("comm", ["sequential", "parallel"])
def test_segment_cut_costs_is_its_definition(comm):
    """segment_cut_costs on random pieces: each edge's cost less its piece's slack (max(0, bound - the piece's
    path ops' smallest times), 0 cost in a paired piece), the link's queue counted from the piece's first path op
    on, or from the first of the consecutive pieces without slack it is in (sequential comm), against the
    definitions above; the queue and the slack bite in some."""
    rng = random.Random(77 if comm == "sequential" else 78)
    bites = 0
    for trial in range(80):
        K, m = rng.randint(3, 8), rng.choice([2, 3])
        mem = [rng.randint(1, 5) for _ in range(K)]
        cap = max(max(mem), int(sum(mem) * rng.uniform(0.3, 0.8)))
        ops = [{"id": f"c{i}", "time": rng.choice([0, 1, 2, 4]), "memory": mem[i]} for i in range(K)]
        edges = [{"src": f"c{i}", "dst": f"c{i + 1}", "bytes": rng.randint(0, 8)} for i in range(K - 1)]
        edges += [{"src": f"c{i}", "dst": f"c{j}", "bytes": rng.randint(0, 14)} for i in range(K)
                  for j in range(i + 2, K) if rng.random() < 0.4]
        inst = instance_from_dict({"format": "dplace-instance/1", "name": "pieces", "comm": comm, "ops": ops,
                                   "edges": edges, "devices": [{"name": f"d{d}", "memory": cap} for d in range(m)],
                                   "link": {"latency": rng.randint(0, 2), "bandwidth": 1}})
        path = bounds.critical_path_ops(inst)
        if len(path) != K:
            continue
        cuts = sorted(rng.sample(range(K), rng.randint(0, min(3, K))))
        ends = [-1] + cuts + [K]
        dmin = [min(inst.dur[o]) for o in path]
        pieces, slack, first = [], [0.0] * (K - 1), [0] * (K - 1)
        start = None  # the first path op of the consecutive pieces without slack so far
        for a, b in zip(ends, ends[1:]):
            if a == b:
                continue
            chain = sum(dmin[max(a, 0):b])
            lb = chain + rng.choice([0.0, 0.0, 1.0, 3.0, -1.0])
            paired = rng.random() < 0.15
            pieces.append((a, b, lb, paired))
            s = math.inf if paired else max(0.0, lb - chain)
            start = (max(a, 0) if start is None else start) if s == 0.0 else None
            for j in range(max(a, 0), min(b, K - 1)):
                slack[j], first[j] = s, (max(a, 0) if start is None else start)
        rng.shuffle(pieces)  # in any order
        edge = memory._guard(inst, path, memory.path_edge_costs(inst, path))
        if comm == "sequential":
            want = _sequential_cuts_by_the_definition(inst, path, edge, slack, first)
        else:
            want = _cuts_by_the_definition(inst, path, [c if c == math.inf else max(0.0, c - s)
                                                        for c, s in zip(edge, slack)])
        got = memory.segment_cut_costs(inst, path, pieces)
        assert got == pytest.approx(want if want < math.inf else 0.0, rel=1e-12, abs=1e-12), (trial, pieces)
        # without the queue (a spent budget): each boundary its edge's transfer less the slack, at most the above
        plain = _cuts_by_the_definition(inst, path, [c if c == math.inf else max(0.0, c - s)
                                                     for c, s in zip(edge, slack)])
        no_queue = memory.segment_cut_costs(inst, path, pieces, queue=False)
        assert no_queue == pytest.approx(plain if plain < math.inf else 0.0, rel=1e-12, abs=1e-12)
        assert no_queue <= got + 1e-9
        bites += got > memory.segment_cut_costs(inst.replace(comm="parallel"), path, [
            (a, b, lb if b == a + 1 else math.inf, p) for a, b, lb, p in pieces]) + 1e-9
    assert bites >= 5


@pytest.mark.parametrize("window", [1, 2, 3])
def test_sequential_cut_cost_with_a_short_window_is_its_definition(window):
    """Runs longer than the window: the queue counted from at most ``window`` path ops on each side of a boundary
    (the dynamic programme's capped state and its sliding-window minimum), against the definition above."""
    from dplace.testing import chain_with_skips

    checked = 0
    for seed in range(300, 420):
        try:
            inst = chain_with_skips(seed, "sequential")
        except Exception:  # a group larger than a device
            continue
        path = bounds.critical_path_ops(inst)
        cost = memory._guard(inst, path, memory.path_edge_costs(inst, path))
        want = _sequential_cuts_by_the_definition(inst, path, cost, window=window)
        got = memory.sequential_cut_cost(inst, path, cost, window=window)
        if want == math.inf:
            assert got == math.inf or memory._run_starts(inst, path)[-1] == 0
            continue
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), seed
        checked += 1
    assert checked >= 50
