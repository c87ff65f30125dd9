"""Differential fuzzing of the methods' claims against the brute-force oracle (``dplace.verify.oracle``).

Each seed gives one ``dplace.verify.fuzz.fuzz_instance`` (3-9 ops, 2-3 devices, both comm modes, speeds,
per-device times, pins, colocation, per-pair links, binding memory, zero times, ties, magnitudes 1e-3 ..
1e10 µs). Its optimum comes from ``dplace.verify.oracle.brute_force`` (never from ``dplace.simulate``); every
method then solves it with a per-instance time limit and ``dplace.verify.oracle.judge`` counts the claims the
optimum refutes: an ``optimal`` status that is not optimal, a lower bound above the optimum,
``infeasible`` while a placement fits, a makespan below the optimum; and proven optima thrown away (the
solver proved the optimum, the answer returned is worse or not marked optimal).

Prints one row per method: instances, wrong optimal claims, wrong bounds, wrong infeasible, makespans
below the optimum, errors, the proven rate (optimal or infeasible status, correct, of all instances)
and mean/max solve time. Goal: 0 wrong claims; >= 99 % proven by each exact method within 10 s.
Results are appended to a JSONL file keyed by (seed, method), so a rerun resumes; every instance with
a wrong claim or an error is saved as JSON (instance, oracle optimum and argmin, the method's answer
or exception) in --cases.
Exits 1 when any claim is wrong. Two levels per exact method (``--levels``): ``METHOD/solver`` judges the
solvers' own claims (the other formulation's check off, a same-solver re-solve confirming alone: what
shipped above 9 ops before issue 29), ``METHOD/product`` the shipped claims with the other formulation
confirming them (CP-SAT's by the MILP with HiGHS, the MILP's by CP-SAT). Brute force inside dplace.verify.claims
(the same oracle: circular) is off at both levels unless --oracle-in-claims.
``--composed``: instances of 10-40 ops instead (``dplace.verify.fuzz.composed_instance``: brute-forced blocks
padded with independent zero ops, side by side on disjoint devices, or in series), their optimum known
from the blocks' brute force. ``--mixed``: 10+ ops, parallel comm, times orders of magnitude apart
(``dplace.verify.fuzz.mixed_instance``: the kind of issue 29's two files), optimum from brute force.
Use a separate --out file per --time-limit / --oracle-in-claims setting (rows are keyed by seed and method).

  .venv/bin/python benchmarks/fuzz_claims.py --n 10000 --workers 2 --out fuzz.jsonl --cases fuzz_cases
"""
from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

EXACT = ("cpsat", "milp-cbc", "milp-highs", "refine", "portfolio")
HEURISTICS = ("heft", "m_etf", "dpos", "m_sct", "celeritas", "m_topo")
KINDS = ("wrong_optimal", "wrong_bound", "wrong_infeasible", "below_optimum", "optimum_thrown_away")


def method_call(spec: str) -> tuple[str, dict]:
    """``milp-cbc`` -> ("milp", {"solver": "cbc"}); other specs are method names."""
    if spec.startswith("milp-"):
        return "milp", {"solver": spec[5:]}
    if spec == "cpsat":
        return "cpsat", {"progress": False}
    return spec, {}


def oracle_record(orc) -> dict:
    return {"optimum": orc.optimum, "feasible": orc.feasible, "complete": orc.complete,
            "placement": orc.placement, "order": orc.order, "seconds": round(orc.seconds, 4), **orc.counts}


LEVELS = ("solver", "product")


@contextlib.contextmanager
def claim_checks(oracle: bool = False, cross: bool = True):
    """Which small-graph checks ``dplace.verify.claims`` may use while a method runs. ``oracle``: brute force
    (``EXHAUSTIVE_MAX_OPS``) — judged against this same oracle that is circular, so off unless asked;
    ``cross``: the other formulation (``CROSS_MAX_OPS``), on at the product level, off at the solver level
    (where a same-solver re-solve confirms alone, ``SAME_SOLVER_CONFIRMS``: the solvers' own claims)."""
    try:
        from dplace.verify import claims
    except ImportError:  # trees without dplace.verify.claims
        yield
        return
    saved = {k: getattr(claims, k) for k in ("EXHAUSTIVE_MAX_OPS", "CROSS_MAX_OPS", "SAME_SOLVER_CONFIRMS")
             if hasattr(claims, k)}
    if not oracle and "EXHAUSTIVE_MAX_OPS" in saved:
        claims.EXHAUSTIVE_MAX_OPS = 0
    if "CROSS_MAX_OPS" in saved:
        claims.CROSS_MAX_OPS = getattr(claims, "CROSS_ON", 9) if cross else 0
    if "SAME_SOLVER_CONFIRMS" in saved:  # the solver level: the solver's claims as its own re-solve confirms them
        claims.SAME_SOLVER_CONFIRMS = not cross
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(claims, k, v)


def solver_claims_only(on: bool = True):
    """The solvers' own claims: no brute force, no cross-formulation check (``on=False``: as shipped)."""
    return claim_checks(oracle=not on, cross=not on)


def run_keys(methods: list[str], levels: list[str]) -> list[tuple[str, str, str]]:
    """(row key, method spec, level): an exact method once per level (``cpsat/solver``, ``cpsat/product``),
    a heuristic once (no solver claims to check)."""
    out = []
    for spec in methods:
        if spec in EXACT:
            out += [(f"{spec}/{lv}", spec, lv) for lv in levels]
        else:
            out.append((spec, spec, "product"))
    return out


def _small(seed: int, time_limit_s: float):
    from dplace.verify.fuzz import fuzz_instance
    from dplace.verify.oracle import brute_force

    inst = fuzz_instance(seed)
    return inst, brute_force(inst, time_limit_s=time_limit_s), {"kind": "fuzz"}


def _composed(seed: int, time_limit_s: float):
    from dplace.verify.fuzz import composed_instance

    return composed_instance(seed, time_limit_s=time_limit_s)


def _mixed(seed: int, time_limit_s: float):
    from dplace.verify.fuzz import mixed_instance

    return mixed_instance(seed, time_limit_s=time_limit_s)


# family -> (maker, the flag's help: None for the default family, which has no flag); the flags choose one
FAMILIES = {
    "small": (_small, None),
    "composed": (_composed, "instances of 10-40 ops whose optimum is known from brute-forced blocks "
                            "(dplace.verify.fuzz.composed_instance: padded, side by side, in series) instead of 3-9 ops"),
    "mixed": (_mixed, "instances of 10+ ops whose times lie orders of magnitude apart, parallel comm "
                      "(dplace.verify.fuzz.mixed_instance: issue 29's two files) instead of 3-9 ops"),
}


def instance_of(seed: int, family: str = "small", oracle_limit: float = 120.0):
    """(instance, the oracle's word on it, how it was made) of ``seed`` in ``family`` (:data:`FAMILIES`):
    "small" a brute-forced ``fuzz_instance`` (3-9 ops), "composed" a ``composed_instance`` (10-40 ops:
    brute-forced blocks padded with zero ops, side by side on disjoint devices, or in series), "mixed" a
    ``mixed_instance`` (10+ ops, parallel comm, magnitudes far apart: issue 29's two files)."""
    return FAMILIES[family][0](seed, oracle_limit)


def check_seed(seed: int, methods: list[str], time_limit: float, oracle_limit: float = 120.0,
               oracle_in_claims: bool = False, levels: tuple[str, ...] | None = None,
               family: str = "small") -> list[dict]:
    """Solve instance ``seed`` with every method in ``methods`` (row keys of :func:`run_keys`, or plain
    specs judged at the solver level when ``levels`` is None) and judge each answer by the oracle."""
    import dplace
    from dplace.instance.io import instance_to_dict
    from dplace.verify.oracle import judge

    inst, orc, made = instance_of(seed, family, oracle_limit)
    rows = []
    keys = [(m, m, "solver") for m in methods] if levels is None else run_keys(methods, list(levels))
    for key, spec, level in keys:
        name, opts = method_call(spec)
        row = {"seed": seed, "method": key, "n": inst.n, "m": inst.m, "comm": inst.comm,
               "opt": orc.optimum, "feasible": orc.feasible, "oracle_complete": orc.complete, "kind": made["kind"]}
        t0 = time.perf_counter()
        try:
            with claim_checks(oracle=oracle_in_claims, cross=level == "product"):
                res = dplace.solve(inst, name, time_limit_s=time_limit, seed=seed, **opts)
        except Exception as exc:  # noqa: BLE001 - a fuzzer counts every failure
            row.update(status="error", error=repr(exc)[:300], time_s=time.perf_counter() - t0, defects=[])
            row["case"] = {"instance": instance_to_dict(inst), "oracle": oracle_record(orc), "options": opts,
                           "made": made, "error": repr(exc)}
            rows.append(row)
            continue
        row.update(status=res.status, makespan=res.makespan, lower_bound=res.lower_bound,
                   memory_ok=res.memory_ok, time_s=round(time.perf_counter() - t0, 4),
                   defects=judge(res, orc))
        if row["defects"]:
            row["case"] = {"instance": instance_to_dict(inst), "oracle": oracle_record(orc), "options": opts,
                           "made": made, "result": res.to_dict()}
        rows.append(row)
    return rows


def _work(args: tuple) -> list[dict]:
    return check_seed(*args)


def summarize(rows: list[dict], methods: list[str]) -> list[dict]:
    table = []
    for spec in methods:
        rs = [r for r in rows if r["method"] == spec]
        if not rs:
            continue
        times = [r["time_s"] for r in rs]
        proven = sum(1 for r in rs if not r["defects"] and (
            r["status"] == "optimal" or (r["status"] == "infeasible" and not r["feasible"])))
        small = [r for r in rs if r["n"] <= 9]
        proven_fast = sum(1 for r in small if not r["defects"] and r["time_s"] <= 10.0 and (
            r["status"] == "optimal" or (r["status"] == "infeasible" and not r["feasible"])))
        row = {"method": spec, "instances": len(rs)}
        for k in KINDS:
            row[k] = sum(1 for r in rs if k in r["defects"])
        row["errors"] = sum(1 for r in rs if r["status"] == "error")
        row["proven_pct"] = 100.0 * proven / len(rs)
        row["proven_le9_10s_pct"] = 100.0 * proven_fast / len(small) if small else float("nan")
        row["mean_s"] = sum(times) / len(times)
        row["max_s"] = max(times)
        table.append(row)
    return table


def print_table(table: list[dict]) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:  # pragma: no cover
        for r in table:
            print(r)
        return
    t = Table(title="claims vs brute-force oracle")
    cols = ["method", "instances", *KINDS, "errors", "proven %", "proven ≤9 ops ≤10 s %", "mean s", "max s"]
    for c in cols:
        t.add_column(c, justify="left" if c == "method" else "right")
    for r in table:
        t.add_row(r["method"], str(r["instances"]), *(str(r[k]) for k in KINDS), str(r["errors"]),
                  f"{r['proven_pct']:.2f}", f"{r['proven_le9_10s_pct']:.2f}", f"{r['mean_s']:.3f}",
                  f"{r['max_s']:.2f}")
    Console(width=200).print(t)


def _write_json(path: Path, obj: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def _collect(batches, out: Path, cases: Path, rows: list[dict], total: int, done: dict[int, set]) -> None:
    """Append each finished seed's rows to ``out`` (flushed per seed) and save its wrong-claim cases."""
    from rich.progress import Progress

    with out.open("a") as f, Progress(transient=True) as prog:
        task = prog.add_task("fuzzing", total=total)
        for batch in batches:
            for r in batch:
                if r["method"] in done.get(r["seed"], ()):  # a seed resumed for its other rows
                    continue
                case = r.pop("case", None)
                if case is not None:
                    p = cases / f"seed{r['seed']}-{r['method'].replace('/', '-')}.json"
                    _write_json(p, {"seed": r["seed"], "method": r["method"], "defects": r["defects"] or ["error"],
                                    **case})
                    r["case_file"] = str(p)
                f.write(json.dumps(r) + "\n")
                rows.append(r)
            f.flush()
            prog.advance(task)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10000, help="instances (seeds start..start+n-1) per method")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--methods", default=",".join(EXACT + HEURISTICS),
                    help="comma-separated: cpsat, milp-cbc, milp-highs, refine, portfolio or any method name")
    ap.add_argument("--time-limit", type=float, default=10.0, help="seconds per instance and method")
    ap.add_argument("--levels", default=",".join(LEVELS),
                    help="exact methods' claims: solver (no small-graph checks) and/or product (the other "
                         "formulation confirms, as shipped; brute force still off)")
    ap.add_argument("--oracle-in-claims", action="store_true",
                    help="let dplace.verify.claims settle claims by brute force as shipped (circular here: off by default)")
    kinds = ap.add_mutually_exclusive_group()
    for family, (_, text) in FAMILIES.items():
        if text is not None:
            kinds.add_argument(f"--{family}", dest="family", action="store_const", const=family, help=text)
    ap.add_argument("--summary-only", action="store_true",
                    help="print the table of every row already in --out (any seeds) without running anything")
    ap.add_argument("--workers", type=int, default=2, help="processes (1: run in this process)")
    ap.add_argument("--out", default="fuzz_claims.jsonl", help="JSONL of results (appended; resumes)")
    ap.add_argument("--cases", default="fuzz_cases", help="folder for the instances with a wrong claim")
    ap.set_defaults(family="small")
    args = ap.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    levels = [lv for lv in args.levels.split(",") if lv]
    if any(lv not in LEVELS for lv in levels) or not levels:
        print(f"error: --levels must be solver and/or product, got {args.levels!r}", file=sys.stderr)
        return 2
    keys = [k for k, _, _ in run_keys(methods, levels)]
    if args.n < 0 or args.workers < 1 or args.time_limit <= 0:
        print(f"error: --n, --workers and --time-limit must be positive, got {args.n}, {args.workers}, "
              f"{args.time_limit}", file=sys.stderr)
        return 2
    out = Path(args.out)
    cases = Path(args.cases)
    cases.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    done: dict[int, set] = {}
    if out.exists():
        for line in out.read_text().splitlines():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by an interrupted run
            rows.append(r)
            done.setdefault(r["seed"], set()).add(r["method"])
    if args.summary_only:
        rows = [r for r in rows if r["method"] in keys]
        print_table(summarize(rows, keys))
        return 1 if any(r["defects"] for r in rows) else 0
    seeds = range(args.start, args.start + args.n)
    todo = []
    for sd in seeds:
        left = [m for m in methods if any(k not in done.get(sd, ()) for k, _, _ in run_keys([m], levels))]
        todo.append((sd, left, args.time_limit, 120.0, args.oracle_in_claims, tuple(levels),
                     args.family))
    todo = [t for t in todo if t[1]]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a kill also ends the workers (finally)
    pool = mp.get_context("spawn").Pool(args.workers) if args.workers > 1 else None
    batches = pool.imap_unordered(_work, todo) if pool is not None else map(_work, todo)
    try:
        _collect(batches, out, cases, rows, len(todo), done)
    finally:  # stopped (Ctrl-C, kill): the workers go too; rows written so far stay for a resume
        if pool is not None:
            pool.terminate()
            pool.join()
    rows = [r for r in rows if r["seed"] in seeds and r["method"] in keys]
    table = summarize(rows, keys)
    print_table(table)
    for r in rows:
        if r["defects"]:
            print(f"seed {r['seed']} {r['method']}: {','.join(r['defects'])} status={r['status']} "
                  f"makespan={r.get('makespan')} bound={r.get('lower_bound')} opt={r['opt']} {r.get('case_file', '')}")
    return 1 if any(r["defects"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
