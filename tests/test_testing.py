"""The placement helpers of dplace.testing keep colocation and pins."""
from __future__ import annotations

import random

import dplace
from dplace import testing


def test_split_and_random_placements_are_valid():
    rng = random.Random(3)
    for inst in [testing.colocated(), testing.pinned()] + [testing.random_instance(rng) for _ in range(30)]:
        for pl in (testing.split_placement(inst) if inst.m >= 2 else [0] * inst.n,
                   testing.with_groups_and_pins(inst, [rng.randrange(inst.m) for _ in range(inst.n)])):
            assert all(pl[o] == inst.pinned[o] for o in range(inst.n) if inst.pinned[o] >= 0)
            assert all(len({pl[o] for o in ms}) == 1 for ms in inst.groups)
            dplace.simulate(inst, pl)  # a placement the simulator takes
