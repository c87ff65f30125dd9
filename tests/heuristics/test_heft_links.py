"""``heft_links``: HEFT planning with the link queues it meets and the tensors its successors would send
(sequential comm): its split cost by hand, its weights, its options, and that its answer is the best of
its list schedules, each the simulation of what it committed (claimed == simulated, exact)."""
from __future__ import annotations

import numpy as np
import pytest

import dplace
from dplace.errors import OptionError
from dplace.formats.generate import transformer_training
from dplace.heuristics.heft import heft_schedule, split_cost
from dplace.instance.model import Device, Edge, Instance, Link, Op
from dplace.schedule.simulate import simulate


def _fan() -> Instance:
    """a and b feed v; b and c feed w; three devices, link (0, 1) slower than the others."""
    ops = [Op(x, 1.0) for x in "abcvw"]
    edges = [Edge("a", "v", 100.0), Edge("b", "v", 10.0), Edge("b", "w", 40.0), Edge("c", "w", 10.0)]
    return Instance("fan", [Device(f"d{i}", 10**6) for i in range(3)], ops, edges, link=Link(1.0, 10.0),
                    comm="sequential", pairs={("d0", "d1"): Link(5.0, 1.0)})


def test_split_cost_by_hand():
    inst = _fan()
    a, b, c, v, w = (inst.op_index[x] for x in "abcvw")
    pl = [-1] * inst.n
    assert split_cost(inst, pl, b, 0) == 0.0  # v and w have no committed input but b's
    pl[a] = 1  # v's other input is on d1: b on d0 sends 10 bytes over the slow link (0, 1)
    assert split_cost(inst, pl, b, 0) == 5.0 + 10.0 / 1.0
    assert split_cost(inst, pl, b, 1) == 0.0
    assert split_cost(inst, pl, b, 2) == 1.0 + 10.0 / 10.0
    pl[c] = 2  # and w's on d2: b on d0 sends 40 bytes to d2 as well
    assert split_cost(inst, pl, b, 0) == (5.0 + 10.0) + (1.0 + 40.0 / 10.0)
    assert split_cost(inst, pl, b, 2) == 1.0 + 10.0 / 10.0
    pl[v] = 1  # a committed successor is not counted
    assert split_cost(inst, pl, b, 0) == 1.0 + 40.0 / 10.0


def test_split_cost_compiled_is_the_reference():
    from dplace import kernels
    from dplace.kernels import inst_arrays
    if not kernels._numba_ok():
        pytest.skip("numba not importable")
    from dplace.kernels.lists import split_cost as split_cost_c
    from dplace.kernels.state import inst_tuple, new_state

    inst = transformer_training(120, 3, comm="sequential", seed=3)
    rng = np.random.default_rng(0)
    I, S = inst_tuple(inst_arrays(inst)), new_state(inst.n, inst.m)
    pl = [-1] * inst.n
    for o in inst.topo[: inst.n // 2]:
        pl[o] = S.placement[o] = int(rng.integers(inst.m))
    checked = 0
    for o in inst.topo[: inst.n // 2]:
        for d in range(inst.m):
            ref = split_cost(inst, pl, o, d)
            assert split_cost_c(I, S, o, d) == ref
            checked += ref > 0
    assert checked > 10


def _seq_transformer() -> Instance:
    return transformer_training(300, 4, comm="sequential", seed=0)


def test_heft_links_is_its_best_weight_and_claims_the_simulation():
    inst = _seq_transformer()
    res = dplace.solve(inst, "heft_links")
    each = {w: heft_schedule(inst, True, link_aware=True, lookahead=w).makespan for w in (2.0, 10.0, 50.0)}
    assert res.makespan == min(each.values()) == each[res.extra["lookahead"]]
    assert res.claimed_makespan == res.makespan == simulate(inst, res.placement, res.order).makespan
    # the split cost changes the plan: without it (the link harm alone) the schedule is another one
    plain = heft_schedule(inst, True, link_aware=True, lookahead=0.0)
    assert plain.makespan != res.makespan
    assert res.makespan < dplace.solve(inst, "heft").makespan


def test_heft_links_stops_between_schedules_at_its_time_limit():
    from dplace.budget import Budget

    inst = _seq_transformer()
    now = [0.0]
    budget = Budget(1.0, clock=lambda: now[0])
    now[0] = 2.0  # expired before it starts: the first schedule only
    from dplace.heuristics.heft import heft_links

    res = heft_links(inst, budget=budget)
    assert res.extra["schedules"] == 1 and res.extra["lookahead"] == 2.0
    assert res.makespan == heft_schedule(inst, True, link_aware=True, lookahead=2.0).makespan
    assert dplace.solve(inst, "heft_links").extra["schedules"] == 3


def test_heft_links_options():
    inst = _seq_transformer()
    one = dplace.solve(inst, "heft_links", lookahead="10")
    assert one.extra["lookahead"] == 10.0
    assert one.makespan == dplace.solve(inst, "heft_links", lookahead=(10.0,)).makespan
    for bad in ("x", "-1", "", "1,inf"):
        with pytest.raises(OptionError, match="lookahead"):
            dplace.solve(inst, "heft_links", lookahead=bad)


def test_heft_links_in_parallel_comm_is_heft():
    inst = transformer_training(200, 3, seed=1)
    a, b = dplace.solve(inst, "heft_links"), dplace.solve(inst, "heft")
    assert a.placement == b.placement and a.makespan == b.makespan


def test_heft_links_coplace_puts_backward_ops_with_their_forward_op():
    """``coplace``: every backward op whose forward op's device has room runs there (as Baechi places them);
    the answer is still its own simulation; off by default."""
    from dplace.instance.columns import forward_of_index

    inst = _seq_transformer()
    fwd = forward_of_index(inst)
    res = dplace.solve(inst, "heft_links", coplace=True, lookahead="2")
    assert res.claimed_makespan == res.makespan == simulate(inst, res.placement, res.order).makespan
    pairs = [(o, int(f)) for o, f in enumerate(fwd) if f >= 0]
    assert len(pairs) > 50
    together = sum(res.placement[o] == res.placement[f] for o, f in pairs)
    off = dplace.solve(inst, "heft_links", lookahead="2")
    apart = sum(off.placement[o] != off.placement[f] for o, f in pairs)
    assert together >= 0.75 * len(pairs) and len(pairs) - together < apart / 2  # the rest: no room there
    assert off.makespan == dplace.solve(inst, "heft_links", lookahead="2", coplace=False).makespan
    with pytest.raises(OptionError, match="coplace"):
        dplace.solve(inst, "heft_links", coplace="maybe")
