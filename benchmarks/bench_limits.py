"""Time-limit contract: every method ends its solve within max(1.1 x L, L + 1 s).

    python benchmarks/bench_limits.py [INSTANCE ...] [--limits 5,20,60] [--methods all|exact|cpsat,milp-highs,...]
                                      [--t36k] [--json FILE] [--jobs 2] [--warm]

Defaults: every bundled instance (``instances/*.json``), every registered method (``milp`` as
``milp-highs`` and ``milp-cbc``), limits 5, 20 and 60 s; ``--t36k`` adds the 36k-op Transformer of
``dplace generate transformer --ops 36000 --devices 4`` (made once in the temp folder). The limit is
enforced by dplace (:class:`dplace.Budget`: CP-SAT stopped from outside at the deadline, CBC/HiGHS
children stopped then killed), not asked of the solvers.

Each (method, instance, limit) runs as its own ``dplace solve FILE --method M --time-limit L --json``
process and the table shows:

* ``solve s``: the ``dplace.solve`` call (``solve_time_s`` of the result: dplace's lower bound, every
  phase of the method — heuristics, model building, hint completion, search, confirmation, clean-up
  — and the simulation of its answer). **The contract is on this figure.**
* ``process s`` / ``CPU s``: the whole process (Python start, imports, loading the instance, the
  checker, writing the JSON) — wall and user+system CPU. Loading the 36k-op JSON alone takes ~1-2 s, so
  at small limits the process can end past the allowed time while the solve is within it.
* ``allowed``: max(1.1 x L, L + 1 s); ``ok``: ``solve s <= allowed``; ``status`` and ``how`` (how the
  method ended: the heuristic fallback's reason, the search's status, ...).

``milp-highs``/``milp-cbc`` are ``milp`` with ``--solver``. The machine's load makes every figure worse
(the load average is printed before and after, and kept per row in ``--json``). ``--jobs 2`` runs two solve
processes side by side: on a 2-core machine that is the load of 2 the contract is stated for; CPU s is
each process's own. CP-SAT's default workers use every core: give ``--workers 1`` with ``--jobs`` to keep
the load at the number of jobs.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEFAULT_INSTANCES = sorted(glob.glob(os.path.join(ROOT, "instances", "*.json")))
EXACT = "cpsat,milp-highs,milp-cbc,refine,portfolio"


def method_list(spec: str) -> list[str]:
    """``all``: every registered method (milp as milp-highs and milp-cbc); ``exact``: :data:`EXACT`."""
    if spec == "exact":
        return EXACT.split(",")
    if spec != "all":
        return spec.split(",")
    import dplace

    out = []
    for nm in dplace.methods():
        out += ["milp-highs", "milp-cbc"] if nm == "milp" else [nm]
    return out


def t36k() -> str:
    """The 36k-op Transformer (4 devices), generated once into the temp folder."""
    path = os.path.join(tempfile.gettempdir(), "dplace_bench_t36k.json")
    if not os.path.exists(path):
        subprocess.run([sys.executable, "-m", "dplace.cli", "generate", "transformer", "--ops", "36000", "--devices",
                        "4", "--out", path], check=True, capture_output=True)
    return path


def allowed_s(limit: float) -> float:
    return max(1.1 * limit, limit + 1.0)  # dplace.budget.within's rule, without importing dplace here


def run_process(cmd: list[str]) -> tuple[int, float, float, str, str]:
    """Run ``cmd``: (exit code, wall s, its own user+system CPU s, stdout, stderr). The CPU time is the
    child's own (``os.wait4``), so it stays right when several run side by side (``--jobs``)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
        out.seek(0)
        err.seek(0)
        return p.returncode, wall, usage.ru_utime + usage.ru_stime, out.read(), err.read()


def run_one(instance: str, method: str, limit: float, workers: int | None) -> dict:
    """One ``dplace solve`` process; returns its figures."""
    name, _, solver = method.partition("-")
    cmd = [sys.executable, "-m", "dplace.cli", "solve", instance, "--method", name, "--time-limit", f"{limit:g}",
           "--json", "--quiet"]
    if solver:
        cmd += ["--solver", solver]
    if workers is not None and name in ("cpsat", "refine", "portfolio"):
        cmd += ["-o", f"workers={workers}"]
    rc, wall, cpu, stdout, stderr = run_process(cmd)
    row = {"method": method, "instance": os.path.basename(instance), "limit": limit, "process_s": wall, "cpu_s": cpu,
           "rc": rc, "allowed": allowed_s(limit), "load1": os.getloadavg()[0]}
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        row.update(solve_s=None, status=f"rc {rc}", how=(stderr.strip().splitlines() or [""])[-1][:80])
        return row
    e = data.get("extra") or {}
    how = e.get("stopped") or e.get("lns_stopped") or e.get("solver_status") or e.get("stage") or ""
    cut = e.get("time_limit")
    if isinstance(cut, dict) and "clusters" in cut:  # a list schedule cut at the limit (heuristics/baechi.py)
        how = f"cut: {cut['clusters_placed_by_method']}/{cut['clusters']} by the method"
    elif isinstance(cut, dict) and "settings_tried" in cut:  # celeritas' balanced variants
        how = f"cut: {cut['settings_tried']} fusion settings tried"
    if e.get("hint_method"):
        how = f"{e['hint_method']}: {how}"
    row.update(solve_s=data.get("solve_time_s"), status=data.get("status"), makespan=data.get("makespan"),
               how=str(how)[:60])
    return row


RIGHT = {2, 3, 4, 5, 6}  # the number columns, right-aligned


def column_widths(methods: list[str], instances: list[str]) -> list[int]:
    """Each column's width: its header's or its longest entry's (method and instance names of any length),
    the last column (how) unpadded."""
    return [max([10] + [len(m) for m in methods]), max([28] + [len(i) for i in instances]), 7, 7, 9, 6, 9, 3, 10, 0]


def table_line(cells: list[str], widths: list[int]) -> str:
    """One line of the Markdown table, every cell padded to its column's width."""
    return "| " + " | ".join(c.rjust(w) if i in RIGHT else c.ljust(w)
                             for i, (c, w) in enumerate(zip(cells, widths))) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instances", nargs="*", default=DEFAULT_INSTANCES)
    ap.add_argument("--limits", default="5,20,60")
    ap.add_argument("--methods", default="all", help="all, exact, or a comma-separated list")
    ap.add_argument("--t36k", action="store_true", help="add the 36k-op generated Transformer")
    ap.add_argument("--workers", type=int, default=None, help="CP-SAT workers (default: the method's own)")
    ap.add_argument("--json", metavar="FILE", help="also write the rows here")
    ap.add_argument("--jobs", type=int, default=1,
                    help="solve processes side by side (2 on a 2-core machine: the issue's load 2)")
    ap.add_argument("--warm", action="store_true",
                    help="run each method once on each instance, untimed, first (fills numba's cache)")
    a = ap.parse_args()
    instances = list(a.instances) + ([t36k()] if a.t36k else [])
    print(f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} on {os.cpu_count()} cores", flush=True)
    limits = [float(x) for x in a.limits.split(",")]
    todo = [(instance, method) for instance in instances for method in method_list(a.methods)]
    widths = column_widths([m for _, m in todo], instances)
    hdr = table_line(["method", "instance", "limit s", "solve s", "process s", "CPU s", "allowed s", "ok", "status",
                      "how"], widths)
    print(hdr)
    print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|", flush=True)
    rows = []
    with ThreadPoolExecutor(max_workers=a.jobs) as pool:
        if a.warm:  # numba compiles a kernel on its first use after an install or an edit: not timed
            list(pool.map(lambda im: run_one(*im, min(limits), a.workers), todo))
        runs = [pool.submit(run_one, instance, method, limit, a.workers)
                for instance, method in todo for limit in limits]
        for r in as_completed(runs):  # printed as they end: with --jobs 2 not in the order above
            r = r.result()
            r["ok"] = r["solve_s"] is not None and r["solve_s"] <= r["allowed"]
            rows.append(r)
            solve = "-" if r["solve_s"] is None else f"{r['solve_s']:.2f}"
            print(table_line([r["method"], r["instance"], f"{r['limit']:g}", solve, f"{r['process_s']:.2f}",
                              f"{r['cpu_s']:.1f}", f"{r['allowed']:.1f}", "yes" if r["ok"] else "NO", str(r["status"]),
                              r["how"]], widths), flush=True)
    bad = sum(not r["ok"] for r in rows)
    print(f"{len(rows) - bad}/{len(rows)} within the limit; {a.jobs} at a time; load average now "
          f"{os.getloadavg()[0]:.1f}")
    if a.json:
        rows.sort(key=lambda r: (r["instance"], r["method"], r["limit"]))  # the same file whatever the --jobs
        with open(a.json + ".tmp", "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(a.json + ".tmp", a.json)


if __name__ == "__main__":
    main()
