"""``forced_links`` (dplace/bounds/links.py) against the oracle's brute force, both comm modes: where it is
tight, where it sees more than every other cheap bound, and where it must not apply."""
import random

import pytest

from dplace.bounds import lower_bound_parts
from dplace.bounds.links import forced_links_bound, forced_sends
from dplace.errors import InvalidInstanceError
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.testing import audit_bound, random_instance
from dplace.verify.oracle import brute_force as oracle

TOL = 1e-6


def _pinned_then_pushed_away(k: int, comm: str, m: int = 2) -> Instance:
    """k producers of 1 pinned to d0 (they fill its memory), each feeding a consumer of 1 (unpinned, memory
    1) a tensor of 4 on links of latency 0 and bandwidth 1: every consumer must run elsewhere."""
    ops = [Op(f"p{j}", 1.0, 10, device="d0") for j in range(k)] + [Op(f"c{j}", 1.0, 1) for j in range(k)]
    edges = [Edge(f"p{j}", f"c{j}", 4.0) for j in range(k)]
    devices = [Device("d0", 10 * k)] + [Device(f"d{d}", 100) for d in range(1, m)]
    return Instance(f"pushed{k}-{m}", devices, ops, edges, link=Link(0.0, 1.0), comm=comm)


def test_tight_where_memory_pushes_every_consumer_across_one_link():
    """Two producers pinned to d0 and two consumers memory keeps off it, two devices: in sequential comm
    the two sends queue on d0 -> d1 (p0 ends at 1, its send 1-5, p1's 5-9, c1 9-10): the optimum 10,
    which the bound proves (min r 1 + 8 / 1 link + min q 1), while every other cheap bound, pinned_links
    included (no consumer is pinned), stays at 6 or below. In parallel comm the sends overlap: the
    optimum is 7 (2 + 4 + 1) and the bound only counts one send's path, 6 (no link rule there)."""
    seq = _pinned_then_pushed_away(2, "sequential")
    assert oracle(seq).optimum == pytest.approx(10.0)
    assert forced_links_bound(seq) == pytest.approx(10.0)
    others = {k: v for k, v in lower_bound_parts(seq).items() if k != "forced_links"}
    assert max(others.values()) <= 6.0 + 1e-9
    par = _pinned_then_pushed_away(2, "parallel")
    assert oracle(par).optimum == pytest.approx(7.0)
    assert forced_links_bound(par) == pytest.approx(6.0)


def test_sends_from_one_pinned_device_share_its_outgoing_links():
    """Four producers on d0 and three devices: the four sends leave d0 on two links, so one carries 8 of
    link time: 1 + 16 / 2 + 1 = 10 (sequential). The optimum is no lower."""
    inst = _pinned_then_pushed_away(4, "sequential", m=3)
    sends = forced_sends(inst)
    assert len(sends) == 4 and all(s[3] == 0 and s[4] == -1 for s in sends)
    assert forced_links_bound(inst) == pytest.approx(10.0)


def test_nothing_forced_gives_zero():
    """No pins and every two units fit on one device: no send is forced (both comm modes)."""
    for comm in ("parallel", "sequential"):
        inst = _pinned_then_pushed_away(2, comm)
        free = Instance("free", [Device("d0", 1000), Device("d1", 1000)],
                        [Op(op.id, 1.0, op.memory) for op in inst.ops], list(inst.edges), link=inst.link, comm=comm)
        assert forced_sends(free) == [] and forced_links_bound(free) == 0.0


def test_a_colocation_group_is_never_apart():
    """Two ops of one group pinned nowhere, too large together for any device beside a third: the pair
    inside the group is not forced apart, only the edge to the third op."""
    ops = [Op("a", 1.0, 6, colocation="g"), Op("b", 1.0, 3, colocation="g"), Op("c", 1.0, 5)]
    edges = [Edge("a", "b", 4.0), Edge("b", "c", 4.0)]
    inst = Instance("grp", [Device("d0", 10), Device("d1", 10)], ops, edges, link=Link(0.0, 1.0), comm="sequential")
    sends = forced_sends(inst)
    assert [(s[0], s[1], s[2]) for s in sends] == [(2.0, 4.0, 1.0)]  # b ends at 2, 4 across, then c
    assert forced_links_bound(inst) == pytest.approx(oracle(inst).optimum) == pytest.approx(7.0)


def _random_forced(rng: random.Random, comm: str) -> Instance:
    """Tiny instances where pins, colocation and memory force sends: 2-3 devices, some ops pinned, memory
    tight enough that some units cannot share a device."""
    m = rng.choice([2, 2, 3])
    n = rng.randint(3, 6 if m == 2 else 5)
    caps = [rng.randint(8, 14) for _ in range(m)]
    ops = []
    for o in range(n):
        pin = f"d{rng.randrange(m)}" if rng.random() < 0.35 else None
        coloc = "g" if rng.random() < 0.2 else None
        ops.append(Op(f"o{o}", float(rng.randint(1, 4)), rng.randint(1, 8), device=pin, colocation=coloc))
    grouped = [op for op in ops if op.colocation]
    if grouped:  # one group: its members share a pin, and the group fits somewhere
        pin = next((op.device for op in grouped if op.device), None)
        grouped_ids = {op.id for op in grouped}
        ops = [Op(op.id, op.time, 1 if op.id in grouped_ids else op.memory, device=pin if op.id in grouped_ids else op.device,
                  colocation=op.colocation) for op in ops]
    edges = [Edge(f"o{u}", f"o{v}", float(rng.randint(0, 6))) for u in range(n) for v in range(u + 1, n)
             if rng.random() < 0.45]
    devices = [Device(f"d{d}", caps[d]) for d in range(m)]
    return Instance(f"forced{m}-{n}", devices, ops, edges, link=Link(float(rng.randint(0, 2)), float(rng.choice([1, 2]))),
                    comm=comm)


@pytest.mark.parametrize("comm", ["sequential", "parallel"])
def test_forced_links_at_most_the_oracle_optimum(comm):
    """The bound never exceeds the oracle's optimum (brute force written from the model's text), both comm
    modes, on random tiny instances where pins, colocation and memory force sends (and on plain random
    ones); in sequential comm it sees more than every other cheap bound on some of them."""
    rng = random.Random(51 if comm == "sequential" else 52)

    def made():
        for i in range(120):
            try:
                yield _random_forced(rng, comm) if i % 4 else random_instance(rng, n_ops=rng.randint(2, 6), comm=comm)
            except InvalidInstanceError:  # pins over a device's memory: not an instance
                continue

    checked, sees, forced = audit_bound(made(), forced_links_bound, "forced_links")
    assert checked >= 80
    assert forced >= 20
    if comm == "sequential":
        assert sees >= 3
    for k in (2, 3):  # the pushed-away family: tight or close, and never above the optimum
        inst = _pinned_then_pushed_away(k, comm)
        assert forced_links_bound(inst) <= oracle(inst).optimum + TOL
