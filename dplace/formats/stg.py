"""Standard Task Graph set files (Kasahara): task costs, no communication (:func:`from_stg`)."""
from __future__ import annotations

import re
from pathlib import Path

from ..instance.io import read_text
from ..instance.model import Edge, Op
from .common import Parsed, bad, converter, num, parse_float

@converter("stg", latency=0.0)
def from_stg(path: str | Path, *, devices: int | None = None, edge_bytes: float = 0.0) -> Parsed:
    """An instance from a Standard Task Graph (STG, Kasahara) file.

    Format: the first number is the task count n (real tasks), then one line per task
    ``id cost npred pred_1 ... pred_npred`` for tasks 0 .. n+1 (0 and n+1 are the dummy entry and exit
    tasks of cost 0, kept as ops ``t0`` and ``t<n+1>``); a file listing exactly n tasks is accepted too.
    Anything after the task lines (STG files end with ``#`` comment blocks) is ignored. Costs are read
    as µs. STG has no communication costs: every edge carries ``edge_bytes`` (default 0, so with the
    default ``latency=0`` communication is free). Ops hold no memory; devices default to 4 with 16 GiB.
    """
    eb = num(path, edge_bytes, "edge_bytes")
    lines = []
    for ln, line in enumerate(read_text(path, "input").splitlines(), 1):
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            if lines:
                break  # the trailing comment block
            continue
        lines.append((ln, s.split()))
    if not lines:
        raise bad(path, "no task count line")
    ln0, head = lines[0]
    if len(head) != 1 or not head[0].isdigit():
        raise bad(path, f"line {ln0}: first line must be the task count, got {' '.join(head)[:40]!r}")
    n = int(head[0])
    tasks: dict[int, tuple[float, list[int], int]] = {}
    for ln, toks in lines[1:]:
        if len(tasks) == n + 2:
            break
        if not all(re.fullmatch(r"-?\d+(\.\d+)?", t) for t in toks):
            if len(tasks) in (n, n + 2):
                break
            raise bad(path, f"line {ln}: expected 'id cost npred preds...', got {' '.join(toks)[:40]!r}")
        if len(toks) < 3:
            raise bad(path, f"line {ln}: expected 'id cost npred preds...', got {' '.join(toks)!r}")
        tid = int(float(toks[0]))
        cost = parse_float(path, toks[1], f"line {ln}: task {tid}: cost")
        npred = int(float(toks[2]))
        preds = [int(float(t)) for t in toks[3:]]
        if npred != len(preds):
            raise bad(path, f"line {ln}: task {tid}: npred is {npred} but {len(preds)} predecessors are listed")
        if tid in tasks:
            raise bad(path, f"line {ln}: duplicate task id {tid}")
        tasks[tid] = (cost, preds, ln)
    if len(tasks) not in (n, n + 2):
        raise bad(path, f"task count is {n} but {len(tasks)} task lines were found (expected {n} or {n + 2})")
    ops = [Op(f"t{tid}", cost, 0, None, None, None,
              {"dummy": True} if (len(tasks) == n + 2 and tid in (min(tasks), max(tasks)) and cost == 0) else {})
           for tid, (cost, _, _) in tasks.items()]
    edges = []
    for tid, (_, preds, ln) in tasks.items():
        for p in preds:
            if p not in tasks:
                raise bad(path, f"line {ln}: task {tid}: unknown predecessor {p}")
            edges.append(Edge(f"t{p}", f"t{tid}", eb))
    return Parsed(ops, edges)
