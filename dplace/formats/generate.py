"""Synthetic instances: random layered DAGs with a target CCR, and Transformer-like training graphs.

Both generators are deterministic for a seed (they draw from their own ``random.Random(seed)``) and
return a validated :class:`~dplace.instance.model.Instance` on identical devices (speed 1) joined by the
PCIe-like default link (10 µs latency, 12,000 bytes/µs) unless told otherwise.

CCR (communication-to-computation ratio), the one definition used across dplace::

    CCR = mean over edges of (latency + bytes / bandwidth)  /  mean over ops of op time

with the instance's default link and op times on a device of speed 1 (an edge is priced as if its
ends were on different devices). :func:`ccr` computes it for any instance.
"""
from __future__ import annotations

import math
import random
from typing import Any

import numpy as np

from .. import kernels
from ..schedule.ranks import ccr  # noqa: F401 - the one CCR definition, re-exported
from ..instance.columns import Columns
from ..errors import InvalidInstanceError
from ..instance.model import Device, Edge, Instance, Link, Op

DEFAULT_LINK = Link(10.0, 12000.0)  # PCIe-like: 10 µs latency, 12,000 bytes/µs (12 GB/s)


# ---------------------------------------------------------------------------------------------- helpers
def _check_int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidInstanceError(f"{where} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_pos(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InvalidInstanceError(f"{where} must be a finite number > 0, got {value!r}")
    return float(value)


def default_memory(total_bytes: int, n_devices: int) -> int:
    """Per-device memory so one device cannot hold everything: total / (0.7 · n_devices), rounded up.

    With ``n_devices >= 2`` that is less than the total (a split is forced) while the devices together
    still have 1/0.7 ≈ 1.43 times the room the ops need.
    """
    if total_bytes <= 0:
        return 16 * 2**30
    return int(math.ceil(total_bytes / (0.7 * n_devices)))


def _devices(n_devices: int, memory: int, prefix: str = "gpu") -> list[Device]:
    return [Device(f"{prefix}{d}", int(memory), 1.0) for d in range(n_devices)]


# ---------------------------------------------------------------------------------------------- layered
def layered_dag(
    n_ops: int,
    n_devices: int,
    *,
    ccr: float = 1.0,
    layers: int | None = None,
    memory_fraction: float | None = None,
    comm: str = "parallel",
    seed: int = 0,
    name: str | None = None,
) -> Instance:
    """A random layered DAG of ``n_ops`` ops whose CCR (module docstring) is ``ccr``.

    Ops are spread over ``layers`` levels (default ``round(sqrt(n_ops))``, at least 2 so that there are
    edges, every level non-empty; with one level there are no edges and no CCR to hit); each
    op after level 0 gets 1-3 predecessors on the previous level and, with probability 0.2, one more
    from an earlier level. Op times are integers drawn uniformly in [0.5, 1.5] · T with T = 100 µs
    (raised to ``2 · latency / ccr`` when ``ccr`` is small, so that transfers can be that cheap); edge
    bytes are integers drawn uniformly and then scaled so that the mean transfer time is
    ``ccr ·`` (mean op time): the CCR is hit up to integer rounding. Op memory is an integer number of
    MiB in [1, 64]; every device holds ``memory_fraction`` of the total op memory (default
    ``1 / (0.7 · n_devices)``, see :func:`default_memory`; never less than the largest op).
    """
    _check_int(n_ops, "n_ops", 1)
    _check_int(n_devices, "n_devices", 1)
    target = _check_pos(ccr, "ccr")
    if layers is None:
        layers = min(n_ops, max(2, int(round(math.sqrt(n_ops)))))
    _check_int(layers, "layers", 1)
    if layers > n_ops:
        raise InvalidInstanceError(f"layers must be <= n_ops ({n_ops}), got {layers}")
    if memory_fraction is not None:
        _check_pos(memory_fraction, "memory_fraction")
    rng = random.Random(seed)
    lk = DEFAULT_LINK

    # level sizes: one op per level, the rest spread at random
    sizes = [1] * layers
    for _ in range(n_ops - layers):
        sizes[rng.randrange(layers)] += 1
    level_ops: list[list[int]] = []
    k = 0
    for s in sizes:
        level_ops.append(list(range(k, k + s)))
        k += s

    base_t = max(100.0, 2.0 * lk.latency / target)
    times = [max(1, int(round(rng.uniform(0.5, 1.5) * base_t))) for _ in range(n_ops)]
    mems = [rng.randint(1, 64) * 2**20 for _ in range(n_ops)]

    pairs: list[tuple[int, int]] = []
    for li in range(1, layers):
        prev = level_ops[li - 1]
        for v in level_ops[li]:
            srcs = set(rng.sample(prev, min(len(prev), rng.randint(1, 3))))
            if li >= 2 and rng.random() < 0.2:
                srcs.add(rng.choice(level_ops[rng.randrange(li - 1)]))
            pairs.extend((u, v) for u in sorted(srcs))

    # bytes: draw relative sizes, then scale so mean(latency + bytes/bw) = target · mean(time)
    mean_t = sum(times) / n_ops
    raw = [rng.uniform(0.5, 1.5) for _ in pairs]
    want_mean_bytes = max(0.0, (target * mean_t - lk.latency) * lk.bandwidth)
    scale = want_mean_bytes / (sum(raw) / len(raw)) if raw else 0.0
    nbytes = [int(round(r * scale)) for r in raw]

    total = sum(mems)
    if memory_fraction is None:
        cap = default_memory(total, n_devices)
    else:
        cap = int(math.ceil(memory_fraction * total))
    cap = max(cap, max(mems))
    ops = [Op(f"t{o}", float(times[o]), mems[o], "Task") for o in range(n_ops)]
    edges = [Edge(f"t{u}", f"t{v}", float(b)) for (u, v), b in zip(pairs, nbytes)]
    nm = name or f"layered_{n_ops}ops_{n_devices}dev_ccr{target:g}_s{seed}"
    return Instance(nm, _devices(n_devices, cap), ops, edges, link=lk, comm=comm,
                    extra={"generator": {"kind": "layered", "n_ops": n_ops, "n_devices": n_devices,
                                         "ccr": target, "layers": layers, "seed": seed}})


# ---------------------------------------------------------------------------------------------- transformer
_F32 = 4  # bytes per element
_FLOPS_PER_US = 1.0e7  # 10 TFLOP/s: a V100-class device
_BW_MEM_PER_US = 5.0e5  # 500 GB/s device memory bandwidth, for element-wise ops


class _Builder:
    """Collects the training graph's ops and edges as columns (op indices, no Op/Edge objects). Each op
    takes one ``rng.uniform(0.9, 1.1)`` draw in creation order for its time jitter; :meth:`jitter` draws
    them in bulk for the ops added since its last call (the same draws, the same times)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.ids: list[str] = []
        self.base: list[float] = []  # time before jitter
        self.time: list[float] = []  # jittered, for ops up to the last jitter()
        self.mem: list[int] = []
        self.types: list[str] = []
        self.coloc: list[str | None] = []
        self.extra: dict[int, dict] = {}
        self.out_bytes: list[int] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.nbytes: list[float] = []

    def jitter(self) -> None:
        """``round(max(0.1, t * rng.uniform(0.9, 1.1)), 3)`` for each op added since the last call."""
        t = np.array(self.base[len(self.time):], dtype=np.float64)
        r = np.array([self.rng.random() for _ in range(len(t))], dtype=np.float64)
        u = 0.9 + (1.1 - 0.9) * r  # random.uniform's arithmetic
        self.time.extend(round(x, 3) for x in np.maximum(0.1, t * u).tolist())

    def op(self, oid: str, t: float, mem: int, typ: str, out_bytes: int, *, colocation: str | None = None,
           extra: dict | None = None) -> int:
        o = len(self.ids)
        self.ids.append(oid)
        self.base.append(t)
        self.mem.append(int(mem))
        self.types.append(typ)
        self.coloc.append(colocation)
        if extra:
            self.extra[o] = extra
        self.out_bytes.append(int(out_bytes))
        return o

    def edge(self, u: int, v: int, nbytes: int | None = None) -> None:
        self.src.append(u)
        self.dst.append(v)
        self.nbytes.append(float(self.out_bytes[u] if nbytes is None else nbytes))


def _matmul_us(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n / _FLOPS_PER_US


def _elementwise_us(nbytes: int) -> float:
    return 2.0 * nbytes / _BW_MEM_PER_US + 1.0


def transformer_training(
    n_ops: int,
    n_devices: int = 4,
    *,
    seed: int = 0,
    layers: int | None = None,
    memory_per_device: int | None = None,
    comm: str = "parallel",
    name: str | None = None,
) -> Instance:
    """A Transformer-like training graph of about ``n_ops`` ops (one training step).

    Forward: an embedding lookup (GatherV2) on an embedding table; per layer a LayerNorm, per attention
    head Q/K/V projections (MatMul), scores (BatchMatMul), Softmax and context (BatchMatMul), a
    ConcatV2 of the heads, the output projection (MatMul), a residual Add, a second LayerNorm, an MLP
    (MatMul, Gelu, MatMul) and a residual Add; then a final LayerNorm, the logits MatMul and the loss
    (SoftmaxCrossEntropy). Every weight is a ``VariableV2`` op holding weight + two Adam moments.
    Backward: every forward compute op has a mirrored gradient op (``forward_of`` = the forward op id,
    type ``<Type>Grad``) with the forward edges reversed (a gradient has the size of the tensor it is
    the gradient of), an edge from each forward op to its gradient op (stashed activations), and from
    each weight to the gradient ops that use it. Each weight has an ``ApplyAdam`` update op fed by the
    weight's gradient and colocated with the weight (``colocation = "var:<weight id>"``).

    Sizes: batch 32 × sequence 128, head dimension 64; the number of heads per layer is what brings the
    op count to about ``n_ops`` (``layers`` defaults to ``clamp(n_ops // 750, 1, 48)``). Times follow a
    10 TFLOP/s device for matrix products and 500 GB/s memory traffic for the rest, ±10 % jitter. Op
    memory: forward ops keep their output (for backward), gradient ops their output, variables 3 ×
    parameters. MatMul/BatchMatMul ops and their gradients carry ``split = {"dims": {"batch": 32,
    "channel": C}}`` (C = output features) for FastT's operation splitting. Device memory defaults to
    :func:`default_memory` (total / (0.7 · n_devices), raised to the largest op or colocation group if
    needed), so one device cannot hold the graph when ``n_devices >= 2``. Smallest graph: 1 layer, 1 head (60 ops).
    """
    _check_int(n_ops, "n_ops", 1)
    _check_int(n_devices, "n_devices", 1)
    fixed, per_layer, per_head = 14, 28, 18
    if layers is None:
        layers = max(1, min(48, n_ops // 750))
    _check_int(layers, "layers", 1)
    heads = max(1, int(round((n_ops - fixed - per_layer * layers) / (per_head * layers))))
    if memory_per_device is not None:
        _check_int(memory_per_device, "memory_per_device", 1)
    rng = random.Random(seed)
    b = _Builder(rng)
    B, S, DH = 32, 128, 64
    D = DH * heads  # model width
    F = 4 * D  # MLP width
    tok = B * S
    act = tok * D * _F32  # one [B, S, D] activation
    vocab = 30522

    forward: list[int] = []  # compute ops in creation order (for mirroring)
    fwd_edges: list[tuple[int, int]] = []  # compute -> compute edges
    weight_users: dict[int, list[int]] = {}  # variable -> compute ops that read it

    def split(channel: int) -> dict:
        return {"split": {"dims": {"batch": B, "channel": int(channel)}}}

    def var(vid: str, params: int) -> int:
        w = b.op(vid, 1.0, 3 * params * _F32, "VariableV2", params * _F32, colocation=f"var:{vid}")
        weight_users[w] = []
        return w

    def compute(oid: str, t: float, typ: str, out_bytes: int, inputs: list[int], weights: list[int] = (),
                extra: dict | None = None) -> int:
        o = b.op(oid, t, out_bytes, typ, out_bytes, extra=extra)
        forward.append(o)
        for u in inputs:
            b.edge(u, o)
            fwd_edges.append((u, o))
        for w in weights:
            b.edge(w, o)
            weight_users[w].append(o)
        return o

    emb = var("embedding/table", vocab * D)
    x = compute("embedding/lookup", _elementwise_us(act), "GatherV2", act, [], [emb])
    for li in range(layers):
        p = f"layer{li}"
        g1 = var(f"{p}/ln1/gamma", 2 * D)
        ln1 = compute(f"{p}/ln1", _elementwise_us(act) * 2, "LayerNorm", act, [x], [g1])
        ctx = []
        for h in range(heads):
            q = f"{p}/head{h}"
            hb = tok * DH * _F32
            wq, wk, wv = (var(f"{q}/w{c}", D * DH) for c in "qkv")
            mq = compute(f"{q}/q", _matmul_us(tok, D, DH), "MatMul", hb, [ln1], [wq], split(DH))
            mk = compute(f"{q}/k", _matmul_us(tok, D, DH), "MatMul", hb, [ln1], [wk], split(DH))
            mv = compute(f"{q}/v", _matmul_us(tok, D, DH), "MatMul", hb, [ln1], [wv], split(DH))
            sb = B * S * S * _F32
            sc = compute(f"{q}/scores", _matmul_us(B * S, DH, S), "BatchMatMul", sb, [mq, mk], (), split(S))
            sm = compute(f"{q}/softmax", _elementwise_us(sb) * 3, "Softmax", sb, [sc])
            ctx.append(compute(f"{q}/context", _matmul_us(B * S, S, DH), "BatchMatMul", hb, [sm, mv], (),
                               split(DH)))
        cat = compute(f"{p}/concat", _elementwise_us(act), "ConcatV2", act, ctx)
        wo = var(f"{p}/attn_out/w", D * D)
        ao = compute(f"{p}/attn_out", _matmul_us(tok, D, D), "MatMul", act, [cat], [wo], split(D))
        a1 = compute(f"{p}/add1", _elementwise_us(act), "Add", act, [ao, x])
        g2 = var(f"{p}/ln2/gamma", 2 * D)
        ln2 = compute(f"{p}/ln2", _elementwise_us(act) * 2, "LayerNorm", act, [a1], [g2])
        w1 = var(f"{p}/mlp/w1", D * F)
        f1 = compute(f"{p}/mlp/fc1", _matmul_us(tok, D, F), "MatMul", tok * F * _F32, [ln2], [w1], split(F))
        ge = compute(f"{p}/mlp/gelu", _elementwise_us(tok * F * _F32), "Gelu", tok * F * _F32, [f1])
        w2 = var(f"{p}/mlp/w2", F * D)
        f2 = compute(f"{p}/mlp/fc2", _matmul_us(tok, F, D), "MatMul", act, [ge], [w2], split(D))
        x = compute(f"{p}/add2", _elementwise_us(act), "Add", act, [f2, a1])
    gf = var("final/ln/gamma", 2 * D)
    lnf = compute("final/ln", _elementwise_us(act) * 2, "LayerNorm", act, [x], [gf])
    wl = var("final/logits/w", D * 1024)
    logits = compute("final/logits", _matmul_us(tok, D, 1024), "MatMul", tok * 1024 * _F32, [lnf], [wl],
                     split(1024))
    compute("loss", _elementwise_us(tok * 1024 * _F32), "SoftmaxCrossEntropy", _F32, [logits])
    b.jitter()  # the forward ops' times: their gradients' times derive from them

    # backward: mirror every compute op; reverse compute edges (gradient of u's output flows v' -> u')
    grad: dict[int, int] = {}
    for f in reversed(forward):
        extra = {"forward_of": b.ids[f]}
        if "split" in b.extra.get(f, ()):
            extra["split"] = b.extra[f]["split"]
        out = b.out_bytes[f]
        t, typ = b.time[f], b.types[f]
        grad[f] = b.op(f"grad/{b.ids[f]}", t * 2.0 if typ in ("MatMul", "BatchMatMul") else t * 1.5, out,
                       f"{typ}Grad", out, extra=extra)
        b.edge(f, grad[f], out)  # stashed activation, needed by the gradient op
    for u, v in reversed(fwd_edges):
        b.edge(grad[v], grad[u], b.out_bytes[u])
    for w, users in weight_users.items():
        params = b.out_bytes[w]
        wid = b.ids[w]
        upd = b.op(f"update/{wid}", _elementwise_us(params) * 2, 0, "ApplyAdam", 0, colocation=f"var:{wid}")
        b.edge(w, upd, 0)
        for f in users:
            b.edge(w, grad[f], params)
            b.edge(grad[f], upd, params)
    b.jitter()

    total = sum(b.mem)
    if memory_per_device is not None:
        cap = memory_per_device
    else:
        groups: dict[str, int] = {}
        for c, mm in zip(b.coloc, b.mem):
            if c is not None:
                groups[c] = groups.get(c, 0) + mm
        cap = max(default_memory(total, n_devices), max(b.mem), max(groups.values()))
    n = len(b.ids)
    nm = name or f"transformer_{n}ops_{n_devices}dev_s{seed}"
    cols = Columns(ids=b.ids, time=np.array(b.time), mem=np.array(b.mem, dtype=np.int64), type=b.types,
                   pin=[None] * n, coloc=b.coloc, src=np.array(b.src, dtype=np.int64),
                   dst=np.array(b.dst, dtype=np.int64), nbytes=np.array(b.nbytes), op_extra=b.extra)
    return Instance.from_columns(nm, _devices(n_devices, cap), cols, link=DEFAULT_LINK, comm=comm,
                                 extra={"generator": {"kind": "transformer", "n_ops": n_ops, "n_devices": n_devices,
                                                      "layers": layers, "heads": heads, "seed": seed}})
