"""``dplace warm``: compile every kernel once, at install, not in a user's first solve.

numba compiles a kernel on its first call after an install or a kernel edit and keeps the machine code in
its disk cache (``dplace/kernels/__pycache__``); later processes load it in milliseconds. A first solve
that compiles instead takes tens of seconds (``dpos`` on the 36k-op graph at a 5 s limit: 57.6 s with a
cold cache, ~2 s warm), past every time limit. ``make install`` runs this command, and ``make`` runs it
again when a kernel source changes.

How: every method that can run compiled kernels (the heuristics and baselines; ``refine`` and
``portfolio`` briefly) runs with ``DPLACE_KERNEL=numba`` (the compiled path at every size) on small
instances of both comm modes, with and without per-device times, pins and colocation, and a small
generated Transformer (forward/backward pairs, copy ops). Their bounds, simulations and checks run the
graph kernels the same way. :func:`compiled_count` counts what numba compiled in this process (its
dispatchers' cache misses): after a warm, a solve compiles nothing (tests/kernels/test_kernel_loading.py).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from typing import Any

from .common import add_command

EXACT_S = 1.0  # the time limit of refine and portfolio here: their heuristics, coarsening and annealing


def compiled_count() -> int:
    """How many kernel signatures numba compiled in this process (cache misses of dplace's kernels; 0
    when numba is not loaded)."""
    if "numba" not in sys.modules:
        return 0
    from numba.core.dispatcher import Dispatcher

    n = 0
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name.startswith("dplace.kernels") or name.startswith("dplace.heuristics")):
            continue
        for v in list(vars(mod).values()):
            if isinstance(v, Dispatcher):
                n += sum(v.stats.cache_misses.values())
    return n


def warm_instances() -> list[Any]:
    """The small instances every kernel signature is met on."""
    from ..formats.generate import transformer_training
    from ..testing import random_instance

    rng = random.Random(28)
    out = []
    for comm in ("parallel", "sequential"):
        out += [random_instance(rng, n_ops=30, n_devices=3, comm=comm, hetero=hetero, memory_slack=3.0)
                for hetero in (False, True)]
        out.append(transformer_training(400, 4, seed=7, comm=comm))
    return out


def _warm_annealing(insts: list[Any]) -> None:
    """Compile the annealing kernel and its judges' entry points (both comm modes). ``portfolio`` skips its
    annealing while the kernel is not compiled (:func:`dplace.formulations.anneal.kernel_ready`) and has
    less than 30 s for it, so warming it through ``portfolio`` at :data:`EXACT_S` never compiled it: the
    first solves after an install ran without the annealing."""
    from ..formulations.anneal import JUDGES, JUDGE_SLACK, judged_order
    from ..formulations.units import Units
    from ..kernels.anneal import Annealer, list_makespan, seq_mixed

    for inst in insts:
        if inst.m < 2:
            continue
        units = Units(inst)
        start = [inst.pinned[o] if inst.pinned[o] >= 0 else 0 for o in range(inst.n)]  # one device, pins kept (colocated ops share their pin)
        judges = list(JUDGES) if inst.comm == "sequential" else ["fast"]
        for name in judges:
            Annealer(inst, start, units.members, units.allowed, units.chains(), 0.1, JUDGES[name], JUDGE_SLACK).step(
                20, 1.0, 0.1, 0)
            judged_order(inst, start, name)
        list_makespan(inst, start)
        if inst.comm == "sequential":
            seq_mixed(inst, start)


def warm(say=print) -> dict[str, Any]:
    """Run every kernel-using method on :func:`warm_instances` with the compiled path forced; returns
    {"instances", "runs", "compiled", "seconds"}."""
    from ..kernels import set_mode
    from ..registry import method_info, methods, solve
    from ..verify.check import check

    set_mode("numba")
    os.environ.setdefault("DPLACE_PROGRESS", "quiet")
    t0 = time.perf_counter()
    insts = warm_instances()
    _warm_annealing(insts)  # first: portfolio runs its annealing only once the kernel is compiled
    names = [m for m in methods() if method_info(m).kind != "exact"]
    runs = 0
    for inst in insts:
        coarse = inst.name.startswith("transformer")  # refine and portfolio coarsen and anneal on these
        for m in names + (["refine", "portfolio"] if coarse else []):
            limit = EXACT_S if m in ("refine", "portfolio") else None
            try:
                res = solve(inst, m, time_limit_s=limit)
                if res.placement is not None:
                    check(res.instance, res)
            except Exception as exc:  # noqa: BLE001 - a method that refuses an instance compiled what it ran
                say(f"  {m} on {inst.name}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            runs += 1
    from ..bounds import lower_bound_parts
    from ..instance.model import Device, Edge, Instance, Op

    chain = Instance("warm-anchored", [Device("d0", 100), Device("d1", 100)], [Op(x, 1.0) for x in "abc"],
                     [Edge("a", "b", 8.0), Edge("b", "c", 8.0)])
    lower_bound_parts(chain)  # one source and one sink: the anchored bounds' compiled recurrence
    return {"instances": len(insts), "runs": runs, "compiled": compiled_count(),
            "seconds": round(time.perf_counter() - t0, 1)}


def add_warm(subparsers: Any) -> argparse.ArgumentParser:
    return add_command(subparsers, "warm", cmd_warm, "compile every kernel once (make install runs it)",
                       instance=None)


def cmd_warm(args: argparse.Namespace) -> int:
    """Compile every compiled kernel dplace can choose (both comm modes, every method's kernels) into numba's
    disk cache, so that no solve compiles one (a compile takes seconds to minutes, past a short time limit).
    Run by `make install`, and again by make after a kernel source changes; with a warm cache it only loads
    them (seconds)."""
    from .. import kernels

    if not kernels.enabled():
        print("numba is not installed or DPLACE_KERNEL=python: nothing to compile")
        return 0
    out = warm(say=lambda line: print(line, file=sys.stderr))
    print(f"kernels warm: {out['runs']} solves on {out['instances']} instances, {out['compiled']} kernel "
          f"signatures compiled, {out['seconds']} s")
    return 0
