"""Sequential communication (issue 25): the list heuristics, old code beside new, on one graph in both
comm modes. Each cell is one whole process, ``dplace solve GRAPH --method M --out R.json`` (start-up,
loading, placing, the final simulation and the proven bound), timed by the wall clock, after each method
ran once per executable on small graphs (numba's compile caches warm); the makespan and
the bound are read back from R.json.

    .venv/bin/python benchmarks/bench_seqcomm.py --ops 36000
    .venv/bin/python benchmarks/bench_seqcomm.py --ops 3000 --methods heft,heft_links,m_topo,m_etf,celeritas
    .venv/bin/python benchmarks/bench_seqcomm.py --ops 36000 --old /work/main/.venv/bin/dplace --timeout 400
    .venv/bin/python benchmarks/bench_seqcomm.py --ops 36000 --methods heft,dpos,m_etf,m_sct --old c90937a
    .venv/bin/python benchmarks/bench_seqcomm.py --instances instances/bert12_training_4dev.json,instances/resnet50_training_4dev.json --old 34ce35c

``--instances``: instance files instead of the generated Transformer, each converted to both comm modes
(``dplace convert instance FILE --comm C``).

``--old``: a ``dplace`` executable of the old code (e.g. the main checkout's venv, run with
PYTHONPATH unset so that it imports its own checkout), or a git revision of this repository (e.g.
``--old c90937a``: its files are exported to a temporary folder and run by this venv's Python, its
packages ahead of this checkout's); methods it lacks print "-". A run past
``--timeout`` seconds (wall) is stopped and printed as "> T". Times are "wall/CPU" seconds of the whole
process (CPU: user + system, what a loaded box distorts least). Prints, per method: new time
sequential, new time parallel, their CPU ratio (the goal: at most 2), old time sequential and parallel, then
makespans (old and new, sequential; old and new, parallel) and the proven bound of the sequential graph.
Report ``cat /proc/loadavg`` beside the figures: the box is shared.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NEW = os.path.join(os.path.dirname(sys.executable), "dplace")
METHODS = "heft,heft_links,m_etf,m_sct,dpos,os_dpos,m_topo,celeritas"


def _run(exe: str, graph: str, method: str, timeout: float, out_dir: str,
         extra: tuple[str, ...] | list[str] = ()) -> tuple[str, float | None, float | None]:
    """(time cell, makespan, lower bound) of one whole ``dplace solve`` process (``extra``: more of its flags)."""
    out = os.path.join(out_dir, f"{os.path.basename(graph)}.{method}.{abs(hash(exe))}.json")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    t = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run([exe, "solve", graph, "--method", method, "--out", out, "--quiet", *extra], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"> {timeout:.0f}", None, None
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    if p.returncode != 0 or not os.path.exists(out):
        msg = (p.stderr or p.stdout).strip().splitlines()
        return ("-" if msg and "unknown method" in msg[-1].lower() else f"exit {p.returncode}"), None, None
    with open(out) as f:
        r = json.load(f)
    return f"{dt:.1f}/{cpu:.1f}", r.get("makespan"), r.get("lower_bound")


def export_revision(rev: str, tmp: str) -> str:
    """Revision ``rev`` of this repository exported under ``tmp`` (returned: the folder for PYTHONPATH), its
    method packages where the editable install maps them (``dplace.heuristics`` -> ``heuristics/``, ...)."""
    src = os.path.join(tmp, "old")
    os.makedirs(src)
    arc = subprocess.run(["git", "-C", ROOT, "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", src], input=arc, check=True)
    for pkg in ("formulations", "heuristics", "pipeline", "runtime"):
        if os.path.isdir(os.path.join(src, pkg)) and not os.path.exists(os.path.join(src, "dplace", pkg)):
            os.symlink(os.path.join(src, pkg), os.path.join(src, "dplace", pkg))
    return src


def _old_exe(rev: str, tmp: str) -> str:
    """A ``dplace`` script running revision ``rev`` of this repository (:func:`export_revision`) with this
    venv's Python: PYTHONPATH names the export."""
    src = export_revision(rev, tmp)
    exe = os.path.join(tmp, "old-dplace")
    with open(exe, "w") as f:
        f.write(f"#!/bin/sh\nPYTHONPATH={src} exec {sys.executable} -P -c "  # -P: not the current folder first
                "'import sys; from dplace.cli import main; sys.exit(main())' \"$@\"\n")
    os.chmod(exe, 0o755)
    return exe


def _warm(args: argparse.Namespace, tmp: str) -> None:
    """Each method once per executable on 10,500-op graphs (above every compiled kernel's size, e.g. Baechi's
    units from 10,000 ops), so that no timed cell pays numba's compilation (cached on disk)."""
    for comm, ops in (("sequential", 10500),) + (() if args.no_parallel else (("parallel", 10500),)):
        g = os.path.join(tmp, f"warm_{comm}.json")
        subprocess.run([NEW, "generate", "transformer", "--ops", str(ops), "--devices", str(args.devices), "--comm",
                        comm, "--out", g], check=True, capture_output=True)
        for exe in (NEW, args.old) if args.old else (NEW,):
            for m in args.methods.split(","):
                try:
                    subprocess.run([exe, "solve", g, "--method", m, "--quiet"], capture_output=True,
                                   timeout=args.timeout)
                except subprocess.TimeoutExpired:
                    pass  # its timed cell says so


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--devices", type=int, default=4)
    ap.add_argument("--methods", default=METHODS)
    ap.add_argument("--old", default=None, help="dplace executable of the old code, or a git revision")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--no-parallel", action="store_true", help="only the sequential graph")
    ap.add_argument("--instances", default="", help="comma-separated instance files instead of the generated graph")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.old and not os.path.isfile(args.old):
            args.old = _old_exe(args.old, tmp)
        comms = ("sequential",) + (() if args.no_parallel else ("parallel",))
        todo = []  # (title, {comm: file})
        for path in filter(None, args.instances.split(",")):
            graphs = {}
            for comm in comms:
                g = os.path.join(tmp, f"{os.path.basename(path)}_{comm}.json")
                subprocess.run([NEW, "convert", "instance", path, "--comm", comm, "--out", g], check=True,
                               capture_output=True)
                graphs[comm] = g
            todo.append((path, graphs))
        if not todo:
            graphs = {}
            for comm in comms:
                g = os.path.join(tmp, f"t{args.ops}_{comm}.json")
                subprocess.run([NEW, "generate", "transformer", "--ops", str(args.ops), "--devices", str(args.devices),
                                "--comm", comm, "--out", g], check=True, capture_output=True)
                graphs[comm] = g
            todo.append((f"transformer --ops {args.ops} --devices {args.devices}", graphs))
        _warm(args, tmp)
        for title, graphs in todo:
            _table(args, title, graphs, tmp)


def _table(args: argparse.Namespace, title: str, graphs: dict[str, str], tmp: str) -> None:
    """One graph's rows (module docstring)."""
    print(f"{title}; load {open('/proc/loadavg').read().split()[:3]}")
    print(f"{'method':11} {'new seq s':>12} {'new par s':>12} {'ratio':>6} {'old seq s':>12} {'old par s':>12} "
          f"{'old seq makespan':>17} {'new seq makespan':>17} {'old par makespan':>17} {'new par makespan':>17} "
          f"{'seq bound':>12}", flush=True)
    for m in args.methods.split(","):
        ns, nms, bound = _run(NEW, graphs["sequential"], m, args.timeout, tmp)
        np_, npm, _ = (("", None, None) if args.no_parallel
                       else _run(NEW, graphs["parallel"], m, args.timeout, tmp))
        os_, oms, _ = (_run(args.old, graphs["sequential"], m, args.timeout, tmp) if args.old
                       else ("", None, None))
        op_, opm, _ = (_run(args.old, graphs["parallel"], m, args.timeout, tmp) if args.old and not args.no_parallel
                       else ("", None, None))
        try:
            ratio = f"{float(ns.split('/')[1]) / float(np_.split('/')[1]):.1f}"
        except (ValueError, IndexError):
            ratio = ""
        print(f"{m:11} {ns:>12} {np_:>12} {ratio:>6} {os_:>12} {op_:>12} {_num(oms):>17} {_num(nms):>17} "
              f"{_num(opm):>17} {_num(npm):>17} {_num(bound):>12}", flush=True)
    print(f"load {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
