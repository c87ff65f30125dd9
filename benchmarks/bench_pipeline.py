"""Pipelined model parallelism on the bundled PipeDream chains: contiguous vs general periods.

For every chain in instances/chains and P in {2, 4, 8}:
  - no memory limit: contiguous_dp (exact, 1F1B*) vs general_cpsat (CP-SAT load model, packed pattern);
  - memory limit M = FRACTION x the largest processor memory of the unlimited contiguous solution
    (so the limit binds): contiguous_dp (exact over 1-periodic patterns; "cont" says where its period is
    proven least: 1-per = 1-periodic contiguous only, k-cont = every k-periodic contiguous pattern), the best Theorem-4
    k-periodic contiguous pattern for k = 2..MAX_K (k_search; T/k and its k, "—" when none beats the
    1-periodic one), general_cpsat (load relaxation, then the position-NCA model when 2·L·P ≤ 2000,
    else the best valid pattern found).
Periods and normalised periods T/k in ms (µs / 1000), status of general_cpsat ("optimal" = T reaches a
bound proven for every k-periodic pattern), solve times in s, and the proven lower bounds on T/k over
every k-periodic pattern of a contiguous allocation (LB_cont) and of any allocation (LB_gen). Every
pattern printed has passed validate_pattern.

    .venv/bin/python benchmarks/bench_pipeline.py [--time-limit 10] [--fraction 0.75] [--max-k 4] [--chains vgg16,gnmt]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dplace.errors import InfeasibleError  # noqa: E402
from dplace.pipeline import (K_PERIODIC_CONTIGUOUS, K_PERIODIC_GENERAL, ONE_PERIODIC_CONTIGUOUS,  # noqa: E402
                             contiguous_dp, general_cpsat, k_search, load_chain)


# where contiguous_dp's period is proven least: 1-periodic contiguous patterns only, every k-periodic
# contiguous pattern (LB_cont reached), every k-periodic pattern (LB_gen reached)
SCOPE = {ONE_PERIODIC_CONTIGUOUS: "1-per", K_PERIODIC_CONTIGUOUS: "k-cont", K_PERIODIC_GENERAL: "k-gen"}


def _run(f, *a, **kw):
    t = time.perf_counter()
    try:
        sol = f(*a, **kw)
    except InfeasibleError:
        return None, time.perf_counter() - t
    assert sol.ok, (f.__name__, sol.report.errors[:3])
    return sol, time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=10.0, help="CP-SAT limit per general_cpsat call (s)")
    ap.add_argument("--fraction", type=float, default=0.75, help="memory limit as a fraction of the unlimited contiguous peak")
    ap.add_argument("--processors", default="2,4,8")
    ap.add_argument("--max-k", type=int, default=4, help="largest k of the Theorem-4 search (default 4)")
    ap.add_argument("--chains", default=None, help="comma-separated names (default: all in instances/chains)")
    ap.add_argument("--json", default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    files = sorted((ROOT / "instances" / "chains").glob("*.json"))
    if args.chains:
        want = set(args.chains.split(","))
        files = [f for f in files if f.stem in want]
    procs = [int(x) for x in args.processors.split(",")]
    rows = []
    head = (f"{'chain':<14}{'L':>4}{'P':>3} | {'T_cont':>8}{'T_gen':>8}{'c/g':>6}{'gen':>9}{'t_dp':>6}{'t_gen':>6} |"
            f" {'M GB':>6}{'T_cont':>8}{'cont':>7}{'T4/k':>8}{'k':>2}{'T_gen':>8}{'c/g':>6}{'gen':>9}{'t_dp':>6}{'t_k':>5}{'t_gen':>6}"
            f"{'LB_cont':>8}{'LB_gen':>8}")
    print(head)
    print("-" * len(head))
    for f in files:
        chain = load_chain(f)
        for P in procs:
            cont, t_dp = _run(contiguous_dp, chain, P, None, use_chain_memory=False)
            gen, t_gen = _run(general_cpsat, chain.replace(memory=None), P, None, time_limit_s=args.time_limit)
            M = args.fraction * max(cont.memory_used)
            cont_m, t_dpm = _run(contiguous_dp, chain, P, M)
            kbest, t_k = _run(k_search, chain, cont_m, "contiguous", args.max_k) if cont_m else (None, 0.0)
            if kbest is cont_m:
                kbest = None  # no Theorem-4 pattern beats the 1-periodic optimum
            gen_m, t_genm = _run(general_cpsat, chain, P, M, time_limit_s=args.time_limit)
            row = dict(chain=chain.name, L=chain.L, P=P, T_cont=cont.period, T_gen=gen.period, gen_status=gen.status,
                       t_dp=t_dp, t_gen=t_gen, M=M, T_cont_M=cont_m.period if cont_m else None,
                       T_cont_M_optimal_over=cont_m.optimal_over if cont_m else None,
                       T4_M=kbest.normalised_period if kbest else None, k4_M=kbest.k if kbest else None,
                       T_gen_M=gen_m.period if gen_m else None, gen_M_status=gen_m.status if gen_m else "infeasible",
                       gen_M_optimal_over=gen_m.optimal_over if gen_m else None,
                       gen_M_model=gen_m.extra.get("nca_model") if gen_m else None,
                       LB_cont_M=cont_m.lower_bound if cont_m else None,
                       LB_gen_M=gen_m.lower_bound if gen_m else None, t_dp_M=t_dpm, t_k_M=t_k, t_gen_M=t_genm)
            rows.append(row)

            def ms(x):
                return f"{x / 1000:8.1f}" if x is not None else f"{'infeas':>8}"

            def ratio(a, b):
                return f"{a / b:6.3f}" if a and b else f"{'—':>6}"

            print(f"{chain.name:<14}{chain.L:>4}{P:>3} | {ms(cont.period)}{ms(gen.period)}{ratio(cont.period, gen.period)}"
                  f"{gen.status:>9}{t_dp:6.2f}{t_gen:6.1f} | {M / 1e9:6.2f}{ms(row['T_cont_M'])}"
                  f"{SCOPE.get(row['T_cont_M_optimal_over'], chr(8212)):>7}"
                  f"{ms(row['T4_M']) if kbest else f'{chr(8212):>8}'}{row['k4_M'] or '':>2}{ms(row['T_gen_M'])}"
                  f"{ratio(row['T_cont_M'], row['T_gen_M'])}{row['gen_M_status']:>9}{t_dpm:6.2f}{t_k:5.2f}{t_genm:6.1f}"
                  f"{ms(row['LB_cont_M']) if row['LB_cont_M'] is not None else f'{chr(8212):>8}'}"
                  f"{ms(row['LB_gen_M']) if row['LB_gen_M'] is not None else f'{chr(8212):>8}'}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
