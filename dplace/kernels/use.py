"""When the compiled list schedulers run (a check that imports nothing heavy: numba is imported only
for an instance big enough to use it)."""
from __future__ import annotations

import os

from . import enabled

# Below this many ops the reference runs: importing numba and loading the compiled kernels costs more
# than it saves (and would eat into the time limit of exact methods that take a HEFT hint).
# DPLACE_KERNEL=numba forces the kernels at any size (tests), DPLACE_KERNEL=python never.
MIN_OPS = 5000


def wanted(inst) -> bool:
    """Run the compiled list schedulers on ``inst``: parallel comm, kernels enabled, big enough."""
    if inst.comm != "parallel":
        return False
    big = inst.n >= MIN_OPS or os.environ.get("DPLACE_KERNEL", "").lower() == "numba"
    return big and enabled()  # enabled() imports numba: only asked when the answer matters
