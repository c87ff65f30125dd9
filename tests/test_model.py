"""Value limits of the model: the largest instance the limits allow runs through every method."""
import pytest

import dplace
from dplace.instance.model import MAX_MEMORY, MAX_SERIAL_US, Device, Edge, Instance, Link, Op


def _at_the_limits() -> Instance:
    # serial time 2e17 + 1e17 + 1.5e17 + 1 + 4 transfers (1e16 latency + bytes) ~ 5.1e17, under the 1e18 limit,
    # with a 1 µs op beside 1e17 µs ones (float resolution there is 16 µs)
    ops = [Op("a", 2e17, 1), Op("b", 1e17, 1), Op("c", 1.5e17, 1, type="X"), Op("d", 1, 1)]
    edges = [Edge("a", "b", 5e16), Edge("a", "c", 1e16), Edge("b", "d", 1e-3), Edge("c", "d", 3)]
    return Instance("edge", [Device("g0", MAX_MEMORY, 1.0), Device("g1", MAX_MEMORY, 1.0)], ops, edges,
                    link=Link(1e16, 1.0))


@pytest.mark.solver
@pytest.mark.parametrize("method", dplace.methods())
def test_every_method_runs_at_the_value_limits(method):
    inst = _at_the_limits()
    res = dplace.solve(inst, method, time_limit_s=5)
    assert res.makespan is not None and res.makespan < MAX_SERIAL_US
    assert dplace.check(res.instance, res).ok, dplace.check(res.instance, res).summary()
    assert res.lower_bound is not None and res.lower_bound <= res.makespan


def test_limits_are_inclusive():
    Instance("ok", [Device("g0", MAX_MEMORY, 1e-6)], [Op("a", 1e12, MAX_MEMORY)], [], link=Link(1e18, 1e-6))
    with pytest.raises(dplace.InvalidInstanceError, match=r"device 'g0': memory must be <= 9.0072e\+15 bytes"):
        Instance("no", [Device("g0", MAX_MEMORY + 1)], [Op("a", 1)], [])


def test_serial_limit_counts_transfers_only_with_two_devices():
    ops = [Op("a", 1), Op("b", 1)]
    big = [Edge("a", "b", 1e18)]
    Instance("one", [Device("g0", 10)], ops, big, link=Link(0.0, 1.0))  # never transferred
    with pytest.raises(dplace.InvalidInstanceError, match="ops and transfers one after another take 1.1e\\+18 µs"):
        Instance("two", [Device("g0", 10), Device("g1", 10)], [Op("a", 5e17), Op("b", 1)], [Edge("a", "b", 6e17)],
                 link=Link(2.0, 1.0))


def test_every_public_name_has_a_docstring():
    """dplace.__all__ is the public API: each name says what it is (a dataclass's generated signature
    does not count)."""
    missing = [n for n in dplace.__all__
               if not (getattr(dplace, n).__doc__ or "").strip() or getattr(dplace, n).__doc__.startswith(n + "(")]
    assert missing == []


@pytest.mark.solver
@pytest.mark.parametrize("method, opts", [("cpsat", {"hint": "none"}), ("cpsat", {}), ("refine", {}), ("milp", {})])
def test_unused_huge_transfer_beside_small_ops(method, opts):
    """A transfer of 1e13 µs that no good schedule uses, beside sub-µs ops: the CP-SAT tick must still cover
    the model's horizon (every op and transfer serial) in int64."""
    ops = [Op("a", 0.4537291), Op("b", 0.2519113), Op("c", 0.7771539)]  # no decimal tick above 1e-6 µs
    inst = Instance("wide", [Device("g0", 10), Device("g1", 10)], ops,
                    [Edge("a", "b", 1e10), Edge("a", "c", 3.0)], link=Link(0.0, 1e-3))
    res = dplace.solve(inst, method, time_limit_s=5, **opts)
    assert res.makespan == pytest.approx(1.4827943) and dplace.check(inst, res).ok  # all on one device
    assert res.lower_bound <= res.makespan


def test_pins_and_groups_in_bulk_equal_the_loop_over_ops():
    """``pinned`` and the colocation groups (numbered in order of their first op), found by dict lookups in
    bulk, equal a loop over the ops written from the docstring; an unknown pinned device is named at its
    first op."""
    import random as _random

    from dplace.testing import random_instance

    rng = _random.Random(12)
    for _ in range(60):
        inst = random_instance(rng, n_ops=rng.randint(1, 20))
        names, group_of, pins = {}, [], []
        for op in inst.ops:
            if op.colocation is not None and op.colocation not in names:
                names[op.colocation] = len(names)
            group_of.append(names.get(op.colocation, -1))
            pins.append(-1 if op.device is None else inst.device_index[op.device])
        assert inst.group_names == list(names) and inst.group_of == group_of
        members = [[o for o, g in enumerate(group_of) if g == k] for k in range(len(names))]
        assert inst.groups == members
        for ops in members:  # a group takes its pinned member's device (one at most in a valid instance)
            pin = {pins[o] for o in ops} - {-1}
            for o in ops:
                pins[o] = min(pin) if pin else -1
        assert inst.pinned == pins
    ops = [Op("a", 1.0), Op("b", 1.0, device="gpu9"), Op("c", 1.0, device="gpu8")]
    from dplace.errors import InvalidInstanceError

    with pytest.raises(InvalidInstanceError, match="op 'b': device 'gpu9' does not exist"):
        Instance("p", [Device("d0", 10)], ops, [])
