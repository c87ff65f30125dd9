"""The mirrored-pieces bound (dplace.bounds.mirror) against the brute-force optimum (dplace.verify.oracle,
written from the model's text), both comm modes: a forward piece (one source, branches, one sink of time
0) chained into its mirror (every op tied to its twin by colocation, the edges reversed), as a forward
stem and its backward stem are; and the segment bound that pairs such pieces."""
import json
import random

import pytest

from dplace.bounds import lower_bound
from dplace.bounds.mirror import mirror_split_bound
from dplace.formulations.bounds_segments import segment_bound
from dplace.instance.io import instance_to_dict
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.verify.oracle import brute_force, tolerance


def _mirrored(rng: random.Random, comm: str) -> tuple[Instance, list[str], list[str]]:
    """(instance, the forward piece's op ids, the backward piece's): src -> k branches (a branch of one or
    two ops) -> snk (time 0), then snk -> snk' (no bytes) -> the branches' twins -> src'; every op x tied
    to x' by colocation; bytes out of src large or not (a stem's tensors)."""
    k = rng.randint(1, 3)
    fwd = ["src"] + [f"b{i}" for i in range(k)] + ["snk"]
    chains = [[f"b{i}"] for i in range(k)]
    if k < 3 and rng.random() < 0.5:
        fwd.insert(-1, "c0")
        chains[0].append("c0")
    big = rng.choice([1, 4, 10])
    edges_f = []
    for ch in chains:
        edges_f.append(("src", ch[0], float(big * rng.choice([1, 2]))))
        edges_f += [(u, v, float(rng.choice([0, 1, 3]))) for u, v in zip(ch, ch[1:])]
        edges_f.append((ch[-1], "snk", float(rng.choice([0, 1, 3]))))
    m = rng.choice([2, 3])
    names = [f"d{d}" for d in range(m)]
    hetero = rng.random() < 0.3

    def t(zero: bool):
        if zero:
            return 0.0
        return {d: float(rng.choice([1, 2, 3, 5])) for d in names} if hetero else float(rng.choice([1, 2, 3, 5]))

    ops = [Op(x, t(x == "snk"), rng.randint(0, 3), colocation=f"g_{x}") for x in fwd]
    ops += [Op(x + "'", t(False), rng.randint(0, 3), colocation=f"g_{x}") for x in fwd]
    edges = [Edge(u, v, b) for u, v, b in edges_f]
    edges += [Edge(v + "'", u + "'", float(rng.choice([b, 1.0, big]))) for u, v, b in edges_f]
    edges.append(Edge("snk", "snk'", 0.0))
    mem = max(6, int(rng.choice([0.6, 1.0, 3.0]) * sum(o.memory for o in ops) / m) + 1)
    inst = Instance("mirrored", [Device(d, mem, 1.0) for d in names], ops, edges,
                    link=Link(float(rng.choice([0, 1])), float(rng.choice([1, 2]))), comm=comm)
    return inst, fwd, [x + "'" for x in ["snk"] + fwd[1:-1][::-1] + ["src"]]


def _piece(inst: Instance, ids: list[str], name: str) -> Instance:
    """The ops as an instance of their own: their edges, memory, colocation names, parallel comm."""
    keep = set(ids)
    ops = [Op(o.id, {d.name: inst.dur[i][j] for j, d in enumerate(inst.devices)}, o.memory, colocation=o.colocation)
           for i, o in enumerate(inst.ops) if o.id in keep]
    edges = [Edge(inst.ops[u].id, inst.ops[v].id, b) for u, v, b in zip(inst.esrc, inst.edst, inst.ebytes)
             if inst.ops[u].id in keep and inst.ops[v].id in keep]
    return Instance(name, inst.devices, ops, edges, link=inst.link, comm="parallel")


def _solved(seed: int, comm: str, count: int):
    """(instance, forward ids, backward ids, brute-force optimum) of ``count`` drawn mirrored instances,
    those without a schedule left out."""
    rng = random.Random(seed)
    for _ in range(count):
        inst, fwd, bwd = _mirrored(rng, comm)
        orc = brute_force(inst)
        if orc.optimum is None:
            continue
        assert orc.complete
        yield inst, fwd, bwd, orc.optimum


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_mirror_split_bound_never_above_the_brute_force_optimum(comm):
    """The forward piece's span (until snk) plus the backward piece's (from snk') is at most the whole
    makespan, so the bound of the two spans' sum is audited against the whole instance's optimum; it
    proves more than the two pieces' own cheap bounds on some."""
    checked = sees = 0
    for inst, fwd, bwd, opt in _solved(7 if comm == "parallel" else 8, comm, 60):
        a, b = _piece(inst, fwd, "a"), _piece(inst, bwd, "b")
        la, lb = lower_bound(a), lower_bound(b)
        v = mirror_split_bound(a, b, la, lb)
        assert v >= la + lb
        assert v <= opt + tolerance(opt), (json.dumps(instance_to_dict(inst)), v, opt)
        sees += v > la + lb + 1e-9
        checked += 1
    assert checked >= 45
    assert sees >= 5


def test_mirror_split_bound_takes_tx_and_hx_on_the_anchors_devices():
    """Case (i): an op on its piece's source device is not on its sink's, so it ends at least its tx
    before the piece's end (and one on the sink's device starts at its hx or later): 15 here, 14.5 with
    heads and tails alone; the brute-force optimum of the whole is 29.5 (a drawn instance, parallel comm)."""
    t = lambda a, b, c: {"d0": a, "d1": b, "d2": c}  # noqa: E731
    ops = [Op("src", t(1, 5, 1), 2, colocation="g_src"), Op("b0", t(1, 3, 5), 1, colocation="g_b0"),
           Op("b1", t(5, 2, 3), 0, colocation="g_b1"), Op("c0", t(1, 1, 1), 0, colocation="g_c0"),
           Op("snk", 0.0, 0, colocation="g_snk"), Op("src'", t(3, 3, 5), 3, colocation="g_src"),
           Op("b0'", t(5, 2, 2), 1, colocation="g_b0"), Op("b1'", t(2, 2, 2), 3, colocation="g_b1"),
           Op("c0'", t(3, 2, 3), 1, colocation="g_c0"), Op("snk'", t(1, 1, 3), 2, colocation="g_snk")]
    edges = [Edge("src", "b0", 20.0), Edge("b0", "c0", 0.0), Edge("c0", "snk", 0.0), Edge("src", "b1", 10.0),
             Edge("b1", "snk", 1.0), Edge("b0'", "src'", 1.0), Edge("c0'", "b0'", 10.0), Edge("snk'", "c0'", 0.0),
             Edge("b1'", "src'", 10.0), Edge("snk'", "b1'", 1.0), Edge("snk", "snk'", 0.0)]
    inst = Instance("mirrored", [Device(f"d{d}", 6, 1.0) for d in range(3)], ops, edges, link=Link(1.0, 2.0))
    a = _piece(inst, ["src", "b0", "b1", "c0", "snk"], "a")
    b = _piece(inst, ["snk'", "c0'", "b1'", "b0'", "src'"], "b")
    la, lb = lower_bound(a), lower_bound(b)
    v = mirror_split_bound(a, b, la, lb)
    assert v == pytest.approx(15.0)
    assert v <= brute_force(inst).optimum + 1e-9


def test_mirror_split_bound_needs_the_crosswise_tie():
    """Anchors not tied crosswise (the backward piece's sink not tied to the forward source): the two
    bounds' sum, unchanged."""
    rng = random.Random(3)
    inst, fwd, bwd = _mirrored(rng, "parallel")
    a = _piece(inst, fwd, "a")
    untied = Instance("u", inst.devices, [Op(o.id, o.time, o.memory) for o in _piece(inst, bwd, "b").ops],
                      [Edge(e.src, e.dst, e.bytes) for e in _piece(inst, bwd, "b").edges], link=inst.link)
    assert mirror_split_bound(a, untied, 3.0, 4.0) == 7.0


def test_the_stems_forced_branches_force_their_twins():
    """src -> three branches of 3 -> snk (time 0), tensors out of src of 10 (a stem's), mirrored with small
    tensors. Apart, the forward piece keeps its branches on src's device (1 + 9 = 10, its split bound)
    and the backward piece spreads them (1 + 3 + 1 = 5 on three devices, its own bounds): 15. Tied, either
    the forward branches stay home and their twins follow (10 + 1 + 9 + 1 = 21) or the forward pays a
    transfer (1 + 10 + 3 = 14) and the backward spreads (5): 19, the brute-force optimum, which the bound
    and the segment bound (which pairs the two pieces) prove."""
    ops = [Op("src", 1, colocation="gs")] + [Op(f"b{i}", 3, colocation=f"g{i}") for i in range(3)]
    ops += [Op("snk", 0, colocation="gt"), Op("snk'", 1, colocation="gt")]
    ops += [Op(f"b{i}'", 3, colocation=f"g{i}") for i in range(3)] + [Op("src'", 1, colocation="gs")]
    edges = [Edge("src", f"b{i}", 10.0) for i in range(3)] + [Edge(f"b{i}", "snk", 0.0) for i in range(3)]
    edges += [Edge("snk'", f"b{i}'", 0.0) for i in range(3)] + [Edge(f"b{i}'", "src'", 0.0) for i in range(3)]
    edges.append(Edge("snk", "snk'", 0.0))
    inst = Instance("stems", [Device(f"d{d}", 100) for d in range(3)], ops, edges, link=Link(0.0, 1.0))
    orc = brute_force(inst)
    assert orc.complete and orc.optimum == pytest.approx(19.0)
    a = _piece(inst, ["src", "b0", "b1", "b2", "snk"], "a")
    b = _piece(inst, ["snk'", "b0'", "b1'", "b2'", "src'"], "b")
    la, lb = lower_bound(a), lower_bound(b)
    assert la == pytest.approx(10.0) and lb == pytest.approx(5.0)
    assert mirror_split_bound(a, b, la, lb) == pytest.approx(19.0)
    # a deadline already passed: no preemptive schedule is run, and what is proven without them comes back
    calls = []
    assert mirror_split_bound(a, b, la, lb, stop=lambda: calls.append(1) or True) == pytest.approx(15.0)
    assert calls == [1]
    sb = segment_bound(inst, time_limit_s=10.0)
    assert sb.mirrored == 1 and sb.best[0] == pytest.approx(19.0)
    assert lower_bound(inst) < 16.0


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_segment_bound_with_mirrored_pieces_never_above_the_brute_force_optimum(comm):
    """The segment bound pairs the forward piece (src .. snk) with its mirror (snk' .. src') where both
    are pieces of it (step 6): never above the optimum, and it pairs on some."""
    checked = paired = 0
    for inst, _, _, opt in _solved(11 if comm == "parallel" else 12, comm, 30):
        sb = segment_bound(inst, time_limit_s=10.0)
        v = sb.best[0]
        assert v <= opt + tolerance(opt), (json.dumps(instance_to_dict(inst)), v, opt)
        paired += sb.mirrored > 0
        checked += 1
    assert checked >= 20
    assert paired >= 2


def test_segments_cp_sat_has_no_time_for_count_with_the_cheap_pass(monkeypatch):
    """The bound where CP-SAT's pass is stopped at its first segment (as on a loaded box): every segment
    left counts with the cheap pass's bound of it, not the path ops' sum, so the result is at least the
    cheap pass's (InceptionV3, the bundled graph: without the cheap pass it fell to the path sums)."""
    import os

    import dplace
    import dplace.formulations.bounds_segments as bs

    inst = dplace.load_instance(os.path.join(os.path.dirname(__file__), "..", "instances",
                                             "inceptionv3_training_4dev.json"))
    cheap = bs.segment_bound(inst, max_segment_ops=0, cheap_first=0, time_limit_s=60.0)
    stopped = []
    real = bs._segment_lb

    def first_then_stop(sub, budget, workers, cheap=None):
        if budget is not None:  # CP-SAT's pass: this segment, then no time for the rest
            stopped.append(True)
        return real(sub, budget, workers, cheap)

    monkeypatch.setattr(bs, "_segment_lb", first_then_stop)
    stop = lambda: bool(stopped)  # noqa: E731
    alone = bs.segment_bound(inst, cheap_first=0, should_stop=stop, time_limit_s=60.0)
    stopped.clear()
    both = bs.segment_bound(inst, should_stop=stop, time_limit_s=60.0)
    assert alone.value < cheap.value - 1000.0  # what a stopped pass fell to: the path sums (238,184 vs 257,082)
    assert both.value >= cheap.value
