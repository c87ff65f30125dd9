"""The start from the critical path's cheapest forced cut (formulations/cutstart.py) and its annealing chain in
``portfolio`` (formulations/large.py)."""
import random

import pytest

from dplace.bounds.memory import cheapest_forced_cut
from dplace.instance.graph import critical_path_ops
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.schedule.simulate import simulate
from dplace.formulations.cutstart import cut_start
from dplace.formulations.anneal import chain_scales


def _training(seed: int, layers: int, comm: str, fraction: float = 0.4, pin: bool = False,
              devices: int = 4) -> Instance:
    """A training chain: forward ops f0 -> f1 -> ..., gradients back g_{i} -> g_{i-1}, each gradient colocated
    with its forward op and reading the forward op's input, a skip edge over every other layer, a side op per
    third layer (off the path), devices holding ``fraction`` of the ops' memory (so memory cuts the path)."""
    rnd = random.Random(seed)
    ops, edges = [], []
    for i in range(layers):
        ops.append(Op(f"f{i}", rnd.randint(50, 100), rnd.randint(10, 40), colocation=f"u{i}",
                      device="d0" if pin and i == 0 else None))
        ops.append(Op(f"g{i}", rnd.randint(60, 150), 0, colocation=f"u{i}"))
        edges.append(Edge(f"f{i}", f"g{i}", float(rnd.randint(1, 90))))
        if i:
            b = float(rnd.randint(1, 90))
            edges += [Edge(f"f{i - 1}", f"f{i}", b), Edge(f"g{i}", f"g{i - 1}", b), Edge(f"f{i - 1}", f"g{i}", b)]
        if i >= 2 and i % 2 == 0:
            edges.append(Edge(f"f{i - 2}", f"f{i}", float(rnd.randint(1, 90))))
        if i % 3 == 1:
            ops.append(Op(f"s{i}", rnd.randint(1, 20), rnd.randint(1, 5)))
            edges += [Edge(f"f{i}", f"s{i}", 5.0), Edge(f"s{i}", f"g{i}", 5.0)]
    cap = int(sum(o.memory for o in ops) * fraction) + 1
    return Instance(f"train{seed}", [Device(f"d{d}", cap) for d in range(devices)], ops, edges, link=Link(1.0, 1.0),
                    comm=comm)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_the_cut_start_places_the_programmes_cut_within_memory(comm):
    """Where memory cuts the path: the start fits every device, keeps each colocation group and pin on one
    device, puts each run's new units on one device, a device other than the run's before, and changes device
    on the path's forward half exactly at the programme's cuts there."""
    made, reused = 0, 0
    for seed in range(160):
        few = seed % 2 == 1  # 2 or 3 devices, so some devices hold several runs
        m = 2 + seed % 4 // 2 if few else 4
        inst = _training(seed, random.Random(seed).randint(6, 14), comm, fraction=0.45 if few else 0.4,
                         pin=seed % 3 == 0, devices=m)
        pl = cut_start(inst, min_share=0.0)
        path = critical_path_ops(inst)
        _, cuts = cheapest_forced_cut(inst, path)
        if pl is None:
            continue
        made += 1
        assert simulate(inst, pl).memory_ok
        for g in inst.groups:
            assert len({pl[o] for o in g}) == 1
        for o in range(inst.n):
            assert inst.pinned[o] < 0 or pl[o] == inst.pinned[o]
        names = [inst.ops[o].id for o in path]
        turn = max(j for j, x in enumerate(names) if x.startswith("f"))  # the last forward op on the path
        fwd = [j for j in range(turn) if pl[path[j]] != pl[path[j + 1]]]
        assert fwd == [j for j in cuts if j < turn]
        reused += len(fwd) + 1 > inst.m  # more forward runs than devices: a device holds two
    assert made >= 100 and reused >= 5


def test_no_cut_start_where_the_path_fits_or_the_cut_is_cheap():
    """None when the whole path fits on one device, and when the cut costs less than ``min_share`` of the
    path's smallest times; a start once ``min_share`` allows it."""
    inst = _training(1, 10, "parallel", fraction=1.0)
    assert cut_start(inst, min_share=0.0) is None
    inst = _training(1, 10, "parallel")
    assert cut_start(inst, min_share=0.0) is not None
    assert cut_start(inst, min_share=10.0) is None


def test_chains_from_other_starts_anneal_hot_when_asked():
    """chain_scales: the ladder from 1 down to ``ladder``; the chains begun from other starts at 1 when hot."""
    assert chain_scales(1, 0.1) == [1.0]
    assert chain_scales(2, 0.1) == [1.0, 0.1]
    assert chain_scales(2, 0.1, 1) == [1.0, 1.0]
    assert chain_scales(4, 0.1, 1) == pytest.approx([1.0, 1.0, 0.1 ** (2 / 3), 0.1])


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_portfolio_searches_the_cut_start_on_a_chain_of_its_own(comm, monkeypatch):
    """``portfolio``'s large stage, on a graph whose work is at most ``CUTS_SPREAD`` times its critical path's:
    where memory cuts the path, the cut start is one more start ("cuts") and the annealing's second chain begins
    from it, hot, the chains not meeting (``extra["anneal"]["cuts_chain"]``); where memory does not cut the path,
    or on a branchier graph, neither."""
    from dplace.budget import Budget
    from dplace.formulations import anneal, large
    from dplace.verify.check import check

    got = []
    real = anneal.anneal_placement

    def spy(inst, placement, **kw):
        got.append((inst.comm, kw.get("sync", 0), [list(o) for o in kw.get("others", ())], kw.get("hot_others")))
        return real(inst, placement, **kw)

    monkeypatch.setattr(anneal, "anneal_placement", spy)
    monkeypatch.setattr(large, "LATE_GAIN", 1.0)  # one annealing run
    inst = _training(7, 12, comm)  # a chain where a start is faster than the cut start (asserted below)
    want = cut_start(inst)
    assert want is not None
    starts = {"heft": __import__("dplace").solve(inst, "heft")}
    res = large.portfolio_large(inst, starts, budget=Budget(6.0), bound_share=0.2, anneal_share=0.5,
                                options={"workers": 2})
    assert check(inst, res).ok
    tried = res.extra["starts"]
    assert "cuts" in tried
    first = [v for k, v in tried.items() if k not in ("anneal", "anneal_parallel")]
    assert tried["cuts"] > min(first)  # the cut start is not the best start: the case the chain is for
    assert res.extra["anneal"]["cuts_chain"] is True
    last = got[-1]  # the annealing in the instance's own comm mode (sequential: after the parallel-first one)
    assert last[0] == comm and last[1] == 0 and last[2] == [want] and last[3] is True
    got.clear()
    monkeypatch.setattr(large, "CUTS_SPREAD", 0.99)  # a branchier graph than this one: no cut start
    res = large.portfolio_large(inst, starts, budget=Budget(6.0), bound_share=0.2, anneal_share=0.5,
                                options={"workers": 2})
    assert "cuts" not in res.extra["starts"] and res.extra["anneal"]["cuts_chain"] is False
    assert want not in got[-1][2] and not got[-1][3]  # (parallel comm: the stitched chain where there is one)
    monkeypatch.setattr(large, "CUTS_SPREAD", 1.25)
    got.clear()
    roomy = _training(3, 12, comm, fraction=1.0)
    res = large.portfolio_large(roomy, {"heft": __import__("dplace").solve(roomy, "heft")}, budget=Budget(6.0),
                                bound_share=0.2, anneal_share=0.5, options={"workers": 2})
    assert "cuts" not in res.extra["starts"] and not res.extra["anneal"].get("cuts_chain")
    assert not got[-1][3]
