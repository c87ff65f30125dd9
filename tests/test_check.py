"""dplace.check against schedules written by hand from the model's text (no simulator involved)."""
import copy

import pytest

from dplace import check
from dplace.instance.model import Device, Edge, Instance, Link, Op

# a (2 µs) -> b (3 µs), 4 bytes over a link of latency 1 µs and 2 bytes/µs: the transfer takes 1 + 4/2 = 3 µs.
# c (1 µs) has no edges. Devices hold 10 bytes each; a and b need 6 each.
INST = Instance("hand", [Device("g0", 10), Device("g1", 10)],
                [Op("a", 2, 6), Op("b", 3, 6), Op("c", 1, 0)], [Edge("a", "b", 4)], link=Link(1.0, 2.0))
VALID = {
    "status": "heuristic", "makespan": 8.0, "memory_ok": True,
    "placement": {"a": "g0", "b": "g1", "c": "g0"},
    "schedule": [{"op": "a", "device": "g0", "start": 0.0, "end": 2.0},
                 {"op": "c", "device": "g0", "start": 2.0, "end": 3.0},
                 {"op": "b", "device": "g1", "start": 5.0, "end": 8.0}],  # a ends at 2, data arrives at 2 + 3
    "transfers": [],
}


def _row(d, op):
    return next(r for r in d["schedule"] if r["op"] == op)


def test_a_hand_written_valid_schedule_passes():
    rep = check(INST, VALID)
    assert rep.ok and rep.memory_ok, rep.summary()


BROKEN = {
    "data_not_arrived": (lambda d: _row(d, "b").update(start=4.0, end=7.0), "data arrives at 5.0"),
    "overlap": (lambda d: _row(d, "c").update(start=1.0, end=2.0), "overlap"),
    "wrong_duration": (lambda d: _row(d, "b").update(end=7.0), "its time there is 3"),
    "op_not_placed": (lambda d: d["placement"].pop("c"), "op 'c' is not placed"),
    "memory_not_flagged": (lambda d: (d["placement"].update(b="g0"), _row(d, "b").update(device="g0", start=3.0, end=6.0),
                                      d.update(makespan=6.0)), "memory_ok says True"),
    "makespan_not_last_end": (lambda d: d.update(makespan=7.0), "differs from the last end 8.0"),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_each_broken_rule_is_named(case):
    mutate, needle = BROKEN[case]
    d = copy.deepcopy(VALID)
    mutate(d)
    rep = check(INST, d)
    assert not rep.ok and any(needle in e for e in rep.errors), rep.errors


def test_wrong_json_types_are_reported_not_raised():
    assert not check(INST, {"placement": [1]}).ok
    assert not check(INST, "x").ok
