"""The compiled schedule state and list loop shared by both comm modes (issue 26: ``kernels/state.py``'s
``_retime`` / ``_replay`` / commit steps, ``kernels/etf.py``'s ``list_loop``), new against an old revision:
CPU seconds of the placing alone (no load, no final simulation), each cell one process, old and new
interleaved round by round after a warm-up call in every process (numba's caches warm).

  heft / m_etf   the method's place function (``dplace.plugins.get_method``) on the 36k-op Transformer
  settle         every op (topological order, device o % m) committed at its data-ready time with
                 insertion: commits land before committed ops and cascade (the settling loop's stress)

in both comm modes. Prints per cell the median CPU s (and range) of old and new, and whether the results
(makespan; settle: also the retimed and replay counts) are equal. Report ``cat /proc/loadavg`` beside it.

  .venv/bin/python benchmarks/bench_kernel_pairs.py --old 34ce35c --rounds 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CELLS = (("settle", 3), ("heft", 3), ("m_etf", 3))


def child(method: str, graph: str, reps: int) -> None:
    """One process: the cell's CPU seconds per repetition after a warm-up, and its result."""
    import dplace

    inst = dplace.load_instance(graph)
    if method == "settle":
        from dplace.kernels import inst_arrays
        from dplace.kernels import seqstate as Q
        from dplace.kernels import state as K

        a = inst_arrays(inst)
        I, topo, m = K.inst_tuple(a), list(inst.topo), a.m

        def run():
            S = K.new_state(a.n, m)
            L = Q.new_links(a.n, m) if inst.comm == "sequential" else None
            for o in topo:
                d = o % m
                if L is None:
                    K.commit(I, S, o, d, K.data_ready(I, S, o, d), True, True)
                else:
                    Q.commit(I, S, L, o, d, Q.data_ready(I, S, L, o, d), True, True)
            return f"{float(S.end.max())!r} retimed {int(S.cnt[K.RETIMED])} replays {int(S.cnt[K.REPLAYS])}"
    else:
        from dplace.plugins import get_method

        fn = get_method(method)

        def run():
            return repr(fn(inst, time_limit_s=600).makespan)
    run()
    cpu = []
    for _ in range(reps):
        c0 = time.process_time()
        got = run()
        cpu.append(time.process_time() - c0)
    print(" ".join(f"{c:.4f}" for c in cpu), "|", got)


def _cell(path: str, method: str, graph: str, reps: int) -> tuple[list[float], str]:
    env = dict(os.environ, PYTHONPATH=path)
    p = subprocess.run([sys.executable, "-P", os.path.abspath(__file__), "--child", method, graph, str(reps)],
                       env=env, capture_output=True, text=True, check=True)
    times, _, got = p.stdout.strip().splitlines()[-1].partition(" | ")
    return [float(x) for x in times.split()], got


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--old", required=True, help="git revision of the old code")
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    dplace_exe = os.path.join(os.path.dirname(sys.executable), "dplace")
    with tempfile.TemporaryDirectory() as tmp:
        from bench_seqcomm import export_revision  # this script's folder is on sys.path

        old = export_revision(args.old, tmp)
        graphs = {}
        for comm in ("parallel", "sequential"):
            graphs[comm] = os.path.join(tmp, f"t{args.ops}_{comm}.npz")
            subprocess.run([dplace_exe, "generate", "transformer", "--ops", str(args.ops), "--devices",
                            str(args.devices), "--comm", comm, "--out", graphs[comm]], check=True, capture_output=True)
        got: dict[tuple[str, str, str], list] = {}
        print(f"transformer --ops {args.ops} --devices {args.devices}; load {open('/proc/loadavg').read().split()[:3]}",
              flush=True)
        for _ in range(args.rounds):
            for version, path in (("old", old), ("new", ROOT)):
                for method, reps in CELLS:
                    for comm, graph in graphs.items():
                        t, res = _cell(path, method, graph, reps)
                        cell = got.setdefault((method, comm, version), [[], set()])
                        cell[0].extend(t)
                        cell[1].add(res)
        print(f"{'cell':22} {'old CPU s':>20} {'new CPU s':>20} {'new/old':>8}  same result")
        for method, _ in CELLS:
            for comm in graphs:
                (o, ro), (n, rn) = got[(method, comm, "old")], got[(method, comm, "new")]
                mo, mn = statistics.median(o), statistics.median(n)
                print(f"{method + ' ' + comm:22} {mo:8.3f} ({min(o):.3f}-{max(o):.3f}) {mn:8.3f} ({min(n):.3f}-{max(n):.3f}) "
                      f"{100 * (mn / mo - 1):+7.1f}%  {'yes' if ro == rn and len(ro) == 1 else 'NO: ' + str(ro | rn)}")
        print(f"load {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
