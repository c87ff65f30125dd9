"""Where the sequential-comm gap of a generated Transformer sits (issue 25 item 2): the answers or the bound.

Per graph (``dplace generate transformer --ops N --devices 4``, seed 0), in µs:

* ``cpsat par`` / ``cpsat seq``: CP-SAT's answer and its proven bound in each comm mode (``--cpsat-s`` each;
  ``*`` marks a proven optimum). Every sequential schedule is no faster than the parallel model's schedule of
  the same placement and order (proof in :mod:`dplace.bounds`), so a proven parallel optimum bounds the
  sequential optimum too;
* ``pf par`` / ``pf seq``: ``portfolio`` at ``--portfolio-s`` in each mode;
* ``par pl in seq``: the best parallel answer's placement timed in sequential comm, the best of its own
  order and judge LINKS' orders (:func:`dplace.kernels.anneal.seq_links`), and ``anneal``: the sequential
  annealing from that placement for ``--anneal-s``.

If the sequential answers sit well above the parallel optimum while the parallel answer's placement is far
worse in sequential comm, the sequential optimum is unknown between the two and a bound that sees the links'
queues is what would tell (the bound side); if the sequential answers sit above a proven sequential optimum,
it is the answers'.

    .venv/bin/python benchmarks/bench_seqgap.py                      # 60, 96 and 150 ops
    .venv/bin/python benchmarks/bench_seqgap.py --ops 60 --cpsat-s 300

Run it ``nice`` and report ``cat /proc/loadavg`` beside the figures (printed per row).
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def row(n: int, args: argparse.Namespace) -> dict:
    """The figures of one graph size (module docstring)."""
    import dplace
    from dplace.formats.generate import transformer_training
    from dplace.formulations.anneal import anneal_placement
    from dplace.kernels.anneal import seq_links

    seq = transformer_training(n, 4, comm="sequential")  # = dplace generate's seed 0
    par = seq.replace(comm="parallel")
    out: dict = {"ops": seq.n}
    res = {}
    for mode, inst in (("par", par), ("seq", seq)):
        cp = dplace.solve(inst, "cpsat", time_limit_s=args.cpsat_s, progress=False)
        pf = dplace.solve(inst, "portfolio", time_limit_s=args.portfolio_s)
        res[mode] = (cp, pf)
        out[f"cpsat {mode}"] = (cp.makespan, cp.lower_bound, cp.status == "optimal")
        out[f"pf {mode}"] = pf.makespan
    best_par = min(res["par"], key=lambda r: r.makespan)
    pl = list(best_par.placement)

    def timed(placement: list[int]) -> float:
        """The simulator's makespan of ``placement`` in sequential comm: the better of the parallel answer's
        order and judge LINKS' order (the judge's own value is a claim; only its order is used)."""
        orders = [seq_links(seq, placement)[1]] + ([best_par.order] if placement == pl else [])
        return min(dplace.simulate(seq, placement, od).makespan for od in orders)

    out["par pl in seq"] = timed(pl)
    out["anneal"] = timed(list(anneal_placement(seq, pl, time_limit_s=args.anneal_s, workers=2, seed=0)[0]))
    out["load"] = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="60,96,150", help="generated Transformers (comma-separated op counts)")
    ap.add_argument("--cpsat-s", type=float, default=90.0, help="CP-SAT's time limit, each comm mode")
    ap.add_argument("--portfolio-s", type=float, default=20.0, help="portfolio's time limit, each comm mode")
    ap.add_argument("--anneal-s", type=float, default=10.0, help="the sequential annealing from the parallel placement")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    os.environ.setdefault("DPLACE_PROGRESS", "quiet")  # the solvers' progress lines would hide the table

    def cp(v) -> str:
        return f"{v[0]:,.1f}{'*' if v[2] else ''} / {v[1]:,.1f}"

    print(f"{'ops':>5} {'cpsat par (ans / bound)':>26} {'cpsat seq (ans / bound)':>26} {'pf par':>10} {'pf seq':>10} "
          f"{'par pl in seq':>14} {'anneal':>10}  load")
    for n in [int(x) for x in args.ops.split(",") if x]:
        r = row(n, args)
        print(f"{r['ops']:>5} {cp(r['cpsat par']):>26} {cp(r['cpsat seq']):>26} {r['pf par']:>10,.1f} "
              f"{r['pf seq']:>10,.1f} {r['par pl in seq']:>14,.1f} {r['anneal']:>10,.1f}  {r['load']}", flush=True)


if __name__ == "__main__":
    main()
