"""``portfolio`` with and without the start from the cheapest forced cut (issue #25, session 26), old code beside new.

Session 26 gave the annealing a start built from the cut of the critical path that the forced-cut bound finds
(``formulations/cutstart.py``): where memory forces cuts on the path, the second annealing chain begins from it
(at the first chain's temperatures, the chains not meeting). Each cell is one ``dplace solve F --method portfolio
--time-limit S --json`` in its own process, old and new alternated per graph:

    .venv/bin/python benchmarks/bench_cutstart.py --old 5e272c7                 # PipeDream graphs, both modes
    .venv/bin/python benchmarks/bench_cutstart.py --old 5e272c7 --graphs resnext50 --comm sequential --repeat 3
    .venv/bin/python benchmarks/bench_cutstart.py --graphs "" --instances instances/inceptionv3_training_4dev.json
    .venv/bin/python benchmarks/bench_cutstart.py --start-only --graphs resnext50 --anneal 30   # the start alone

Columns: the cut start's own makespan (``extra.starts.cuts``: its placement timed by ``placement_order``; "-"
where there is none), each code's answer, the proven bound (new code's run) and both gaps, and the start the
new answer came from (``extra.winner``) with ``cuts`` when the annealing's second chain began from the cut.
PipeDream graphs are converted as the issue says (``--devices 4 --memory-fraction 0.4``).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_memcuts import gap, instance_files, num, run_json  # noqa: E402
from bench_nas import warm_anneal  # noqa: E402
from bench_seqcomm import NEW, ROOT, _old_exe  # noqa: E402

GRAPHS = "resnext50,resnet50,resnet101,inception_v3,vgg16"


def solve(exe: str, path: str, seconds: float, timeout: float) -> dict | None:
    """``dplace solve --method portfolio --json`` of ``path`` by ``exe``; None on failure."""
    return run_json(exe, ["solve", path, "--method", "portfolio", "--time-limit", str(seconds), "--json", "--quiet"],
                    timeout)


def from_the_cut(path: str, seconds: float) -> str:
    """The new code in this process: the cut start's time (s) and makespan, and with ``seconds`` > 0 the
    annealing from it alone (both chains begun there, hot, as ``portfolio``'s cuts chain runs): its makespan and
    the ops per device it ends with."""
    import time
    from collections import Counter

    from dplace.formulations.anneal import anneal_placement
    from dplace.formulations.cutstart import cut_start
    from dplace.formulations.units import placement_order
    from dplace.instance.io import load_instance
    from dplace.schedule.simulate import simulate

    inst = load_instance(path)
    t0 = time.perf_counter()
    pl = cut_start(inst)
    took = time.perf_counter() - t0
    if pl is None:
        return f"none ({took:.3f} s)"
    out = f"{num(simulate(inst, pl, placement_order(inst, pl)).makespan)} ({took:.3f} s)"
    if seconds > 0:
        best, _ = anneal_placement(inst, pl, time_limit_s=seconds, workers=2, others=[pl], hot_others=True)
        used = Counter(best)
        out += (f"; annealed {num(simulate(inst, best, placement_order(inst, best)).makespan)} on "
                + " / ".join(str(used[d]) for d in sorted(used)) + " ops")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default=GRAPHS, help="PipeDream profiles (instances/sources/pipedream-profiles)")
    ap.add_argument("--instances", default="", help="instance files, comma-separated (taken in each --comm mode)")
    ap.add_argument("--comm", default="parallel,sequential")
    ap.add_argument("--old", default=None, help="dplace executable of the old code, or a git revision")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--repeat", type=int, default=1, help="runs per code and graph")
    ap.add_argument("--start-only", action="store_true", help="no portfolio runs: per graph the cut start's "
                    "time and makespan (this process, new code)")
    ap.add_argument("--anneal", type=float, default=0.0, metavar="S",
                    help="with --start-only: also anneal S seconds from the cut start alone (2 chains, hot)")
    args = ap.parse_args(argv)
    comms = [c for c in args.comm.split(",") if c]
    with tempfile.TemporaryDirectory() as tmp:
        old = args.old
        if old and not os.path.isfile(old):
            old = _old_exe(old, tmp)
            warm_anneal(os.path.join(tmp, "old"))
        warm_anneal(ROOT)
        files = instance_files(args.graphs, args.instances, comms, tmp)
        if args.start_only:
            print("| graph | comm | cut start (time) |\n|---|---|---|")
            for name, comm, path in files:
                print(f"| {name} | {comm} | {from_the_cut(path, args.anneal)} |", flush=True)
            return 0
        cols = ["graph", "comm", "cut start", "old", "new", "bound", "gap old", "gap new", "new from"]
        print("| " + " | ".join(cols) + " |")
        print("|" + "---|" * len(cols))
        timeout = 3 * args.time_limit + 60
        for name, comm, path in files:
            for _ in range(args.repeat):
                new = solve(NEW, path, args.time_limit, timeout)
                was = solve(old, path, args.time_limit, timeout) if old else None
                extra = (new or {}).get("extra", {})
                bound = new and new.get("lower_bound")
                came = extra.get("winner", "-") + (" (cuts chain)" if extra.get("anneal", {}).get("cuts_chain") else "")
                row = [name, comm, num(extra.get("starts", {}).get("cuts")), num(was and was["makespan"]),
                       num(new and new["makespan"]), num(bound), gap(was and was["makespan"], bound),
                       gap(new and new["makespan"], bound), came]
                print("| " + " | ".join(row) + " |", flush=True)
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
