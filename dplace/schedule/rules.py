"""Placement rules shared by every constructive method: pinning, colocation and memory.

``Rules`` answers "which devices may op o go to now?" and does the bookkeeping when it goes there:
a pinned op goes to its device; an op whose colocation group is already placed goes with the group;
the first op of a group reserves memory for the whole group, so only devices with room for the group
are candidates. When no device has room, ``fallback`` names the allowed device with the most free
memory and the Result will carry ``memory_ok = False`` (flagged, never hidden).

Compiled twin: :mod:`dplace.kernels.rules` (tests/kernels/test_list_kernels.py).
"""
from __future__ import annotations

from ..instance.model import Instance


class Rules:
    def __init__(self, inst: Instance) -> None:
        self.inst = inst
        self.used = [0] * inst.m  # bytes committed or reserved per device
        self.group_dev = [-1] * len(inst.groups)
        self.group_mem = [sum(inst.mem[o] for o in g) for g in inst.groups]
        self.placed = [False] * inst.n

    def need(self, o: int) -> int:
        """Bytes that placing o now adds (its whole group's if it is the group's first op)."""
        g = self.inst.group_of[o]
        if g >= 0:
            return 0 if self.group_dev[g] >= 0 else self.group_mem[g]
        return self.inst.mem[o]

    def forced(self, o: int) -> int:
        """The device o must go to (pin or already-placed group), else -1."""
        inst = self.inst
        if inst.pinned[o] >= 0:
            return inst.pinned[o]
        g = inst.group_of[o]
        if g >= 0 and self.group_dev[g] >= 0:
            return self.group_dev[g]
        return -1

    def fits(self, o: int, d: int) -> bool:
        return self.used[d] + self.need(o) <= self.inst.capacity[d]

    def candidates(self, o: int) -> list[int]:
        """Devices o may go to now while keeping memory (may be empty: then use ``fallback``)."""
        f = self.forced(o)
        if f >= 0:
            return [f] if (self.need(o) == 0 or self.fits(o, f)) else []
        return [d for d in range(self.inst.m) if self.fits(o, d)]

    def free(self, d: int) -> int:
        return self.inst.capacity[d] - self.used[d]

    def fallback(self, o: int) -> int:
        """Best-effort device when no candidate keeps memory: forced one, else most free memory."""
        f = self.forced(o)
        if f >= 0:
            return f
        return max(range(self.inst.m), key=lambda d: (self.free(d), -d))

    def choose_or_fallback(self, o: int) -> list[int]:
        c = self.candidates(o)
        return c if c else [self.fallback(o)]

    def assign(self, o: int, d: int) -> None:
        inst = self.inst
        self.used[d] += self.need(o)
        g = inst.group_of[o]
        if g >= 0 and self.group_dev[g] < 0:
            self.group_dev[g] = d
        self.placed[o] = True
