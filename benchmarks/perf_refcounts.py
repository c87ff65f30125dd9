"""Share of a ``dplace`` command's CPU samples spent in numba's reference counting (``NRT_incref`` /
``NRT_decref``, an atomic add each): the cost that ``njit(borrow=True)`` removes from the list schedulers'
kernels (:func:`dplace.kernels.njit`). Needs Linux ``perf``.

    .venv/bin/python benchmarks/perf_refcounts.py solve t36k_seq.json --method heft --out /tmp/r.json
    .venv/bin/python benchmarks/perf_refcounts.py solve nas_seq.json --method portfolio --time-limit 20 --out /tmp/r.json

The command runs in a child of ``perf record`` (the dplace CLI in this interpreter: run this file with an older
checkout's interpreter, from that checkout, to measure older code). At its end the child writes the addresses of
numba's compiled ``NRT_incref`` / ``NRT_decref``; the samples at those functions (their few instructions) are
counted per process. Worker processes forked from it (the annealing's) share its compiled runtime at the same
addresses, so their samples are counted too. Prints, per process with at least 1 % of the samples: its samples,
those in JIT-compiled code, those in the reference counts.
"""
from __future__ import annotations

import collections
import os
import shutil
import subprocess
import sys
import tempfile

_CHILD = """
import atexit, sys


def _addresses():  # dplace.cli.run ends the process after its atexit functions
    from numba.core.runtime.nrt import rtsys
    lib = rtsys.library
    with open({addr!r}, "w") as f:
        f.write(" ".join(str(lib.get_pointer_to_function(n)) for n in ("NRT_incref", "NRT_decref")))


atexit.register(_addresses)
from dplace.cli import run
sys.argv = ["dplace"] + {argv!r}
run()
"""

SPAN = 0x20  # bytes from each function's entry counted as the function (each is 4-6 instructions)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    if shutil.which("perf") is None:
        print("perf_refcounts: perf is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        data, addr = os.path.join(tmp, "perf.data"), os.path.join(tmp, "addr")
        child = [sys.executable, "-c", _CHILD.format(argv=argv, addr=addr)]
        subprocess.run(["perf", "record", "-q", "-F", "1000", "-o", data, "--", *child], stdout=subprocess.DEVNULL)
        if not os.path.exists(addr):
            print("perf_refcounts: the command ended before numba's runtime was read", file=sys.stderr)
            return 1
        with open(addr) as f:
            inc, dec = (int(x) for x in f.read().split())
        rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--sort", "pid,sym", "--stdio",
                              "-q", "--percent-limit", "0"], capture_output=True, text=True, check=True).stdout
    total, jit, nrt = collections.Counter(), collections.Counter(), collections.Counter()
    for line in rep.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[0].endswith("%"):
            continue
        pct, pid = float(parts[0][:-1]), parts[1]
        total[pid] += pct
        sym = next((t for t in parts[2:] if t.startswith("0x")), None)
        if sym is None:
            continue
        x = int(sym, 16)
        jit[pid] += pct
        if inc <= x < inc + SPAN or dec <= x < dec + SPAN:
            nrt[pid] += pct
    print(f"dplace {' '.join(argv)}")
    print("| process | samples % | JIT code % | reference counts % |")
    for pid, pct in total.most_common():
        if pct >= 1.0:
            print(f"| {pid} | {pct:.1f} | {jit[pid]:.1f} | {nrt[pid]:.1f} |")
    print(f"| all | {sum(total.values()):.1f} | {sum(jit.values()):.1f} | {sum(nrt.values()):.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
