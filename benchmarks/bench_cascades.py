"""Why HEFT's commits re-time so many ops in sequential comm (issue 25 item 1): HEFT's compiled loop on a
generated Transformer (or an instance file) with a per-commit trace (``dplace.kernels.lists.heft_loop``'s
``trace``), then

- how many commits re-time committed ops, and how many ops (the cascades' sizes);
- which commits hold the moves: those >= 1,000 ops, and among them those that read a weight (an op with
  no inputs) from another device: a weight runs first on its device, so its send goes first on its link
  (the link order is the producers' execution order) and delays every send already queued there;
- the largest commit re-run from a copy of the state before it: how far each moved op moved;
- whether settling the times lazily could skip cascades: the next choices' margins (second-best EFT -
  best) against the growth the commits cause; a state that settles only when a margin is within the
  growth accumulated since its last settle (decisions by bounds: stale <= true <= stale + growth)
  settles this many times.

    .venv/bin/python benchmarks/bench_cascades.py --ops 36000
    .venv/bin/python benchmarks/bench_cascades.py --instance some_sequential_graph.json
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dplace.instance.io import load_instance  # noqa: E402
from dplace.kernels import lists as kl  # noqa: E402


def _state(inst):
    """HEFT's compiled state with exact re-timing throughout (no link policy: its cascades are what this counts)."""
    from dplace.kernels.seqlinks import set_link_policy

    got = kl._prepare(inst, "mean", "mean")
    if got[-1] is not None:
        set_link_policy(got[-1], inst.n, -1.0)
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=36000)
    ap.add_argument("--instance", default="")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.instance
        if not path:
            path = os.path.join(tmp, "t.json")
            subprocess.run([os.path.join(os.path.dirname(sys.executable), "dplace"), "generate", "transformer", "--ops",
                            str(args.ops), "--devices", "4", "--comm", "sequential", "--out", path], check=True,
                           capture_output=True)
        inst = load_instance(path)
    if inst.comm != "sequential":
        sys.exit("bench_cascades: the instance's comm is not sequential")
    a, _, order, I, S, R, L = _state(inst)
    n = len(order)
    trace = np.zeros((n, 3))
    kl.heft_loop(I, S, R, order, True, L, None, 0.0, None, trace)
    print(f"{inst.n} ops; HEFT's makespan {S.end.max():,.1f}; load {open('/proc/loadavg').read().split()[:3]}")
    moves = trace[:, 0]
    tot = moves.sum()
    casc = moves[moves > 0]
    print(f"commits {n:,}; re-timing committed ops {len(casc):,}; ops re-timed {tot:,.0f} (median "
          f"{np.median(casc):.0f}, p90 {np.percentile(casc, 90):,.0f}, max {casc.max():,.0f} per such commit)")
    big = moves >= 1000
    pl = S.placement
    no_input = np.diff(I.pred_ptr) == 0
    weight_across = np.zeros(n, dtype=bool)
    for k, o in enumerate(order):
        ps = I.esrc[I.pred_edge[I.pred_ptr[o]:I.pred_ptr[o + 1]]]
        weight_across[k] = bool(np.any(no_input[ps] & (pl[ps] != pl[o])))
    print(f"commits re-timing >= 1,000 ops: {big.sum():,}, {moves[big].sum() / tot:.1%} of the moves; of them "
          f"{(big & weight_across).sum():,} read a weight from another device (all such commits: "
          f"{weight_across.sum():,}, {moves[weight_across].sum() / tot:.1%} of the moves)")
    k = int(np.argmax(moves))
    _, _, _, I, S, R, L = _state(inst)
    kl.heft_loop(I, S, R, order[:k], True, L)
    st0 = S.start.copy()
    kl.heft_loop(I, S, R, order[k:k + 1], True, L)
    mv = (S.start != st0) & (S.placement >= 0)
    mv[order[k]] = False
    dl = (S.start - st0)[mv]
    vals, cnt = np.unique(np.round(dl, 6), return_counts=True)
    top = np.argsort(-cnt)[:3]
    print(f"largest commit: #{k} {inst.ops[order[k]].id!r}, {mv.sum():,} ops moved; by (rounded to 1e-6 us, count): "
          + ", ".join(f"{vals[i]:,.6f} x {cnt[i]:,}" for i in top))
    margin, grow = trace[:, 1], trace[:, 2]
    nxt = np.where(big[:-1])[0] + 1
    print(f"the choice after each of those: margin median {np.median(margin[nxt]):,.1f} us, above the growth just "
          f"caused ({np.median(grow[nxt - 1]):,.1f} us median) in {(margin[nxt] > grow[nxt - 1]).sum():,} of {len(nxt):,}")
    acc, settles = 0.0, 0
    for i in range(n):
        if margin[i] <= acc:
            settles, acc = settles + 1, 0.0
        acc += grow[i]
    print(f"settling only when a margin is within the growth since the last settle: {settles:,} settles "
          f"(against {big.sum():,} cascades of >= 1,000 ops now)")


if __name__ == "__main__":
    main()
