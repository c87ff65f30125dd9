"""FastT (Yi et al., Middleware'20): DPOS (§5.1, Alg. 1) and OS-DPOS operation splitting (§5.2, Alg. 2).

``dpos``: a list scheduler. Priority = rank_u with each op's largest time and each edge's largest
transfer time (§5.1 eq. for rank_u). The critical path (entry op of largest rank, then repeatedly the
successor of largest rank) goes to a *critical-path device*: the device that, when as many of the
remaining critical-path ops as fit in its free memory are put on it, has the smallest average time
over them; when it cannot hold the next critical-path op another one is chosen the same way. Every other
op goes to the device of smallest EFT, with insertion into idle slots, among devices with room. The
execution order (ops per device sorted by start) is part of the Result and the simulator follows it.

``os_dpos``: run DPOS, take the critical path of the placed graph, walk its splittable ops by
decreasing compute time, try every split dimension and n in 2..m (re-running DPOS on the split graph),
keep the best split only if the makespan improves, stop at the first op that does not improve.

Split graph (``split_instance``), for an op ``op`` with ``extra["split"] = {"dims": {dim: size},
"cut": {dim: [input op ids]}, "reduce": [dims]}`` split on ``dim`` into n parts (part i covers size_i of
the ``size`` rows, as even as possible, frac_i = size_i / size):
  * sub-ops ``op/<dim><i>``: time = time(op) * frac_i + ``overhead_us`` (per device when the time is
    per device); same type, pin and colocation as ``op``; ``split``/``forward_of`` dropped;
    ``extra["split_of"] = op``. Memory (the op's outputs): memory(op) * frac_i (integers summing to
    memory(op)); when ``dim`` is in ``reduce`` each piece computes a full-size partial sum (a weight
    gradient split on the batch) and holds memory(op).
  * inputs: an input whose producer is listed in ``cut[dim]`` is cut along ``dim``: a split node
    ``op/split<k>`` (type Split) gets it whole (b bytes) and sends b * frac_i to piece i. Any other input
    is needed whole by every piece (weights under a batch split, activations under a channel split):
    b bytes straight from its producer to each piece. Without ``cut[dim]``: ``batch`` cuts every input,
    other dims none (the legacy rule, for graphs that do not say which inputs are weights).
  * output: one node for all successors, fed with the largest output edge's bytes B: a concat
    ``op/concat`` (type ConcatV2; piece i sends B * frac_i), or for ``reduce`` dims a sum ``op/reduce``
    (type AddN; every piece sends B). Each successor edge then leaves that node with its own bytes.
  * split, concat and reduce nodes cost a memory copy: bytes read / ``copy_bytes_per_us`` (B for a
    concat, n·B for a reduce, b for a split; default :func:`copy_bandwidth`, measured from the
    instance's own AddN/Concat/Split ops) and hold the bytes they output.
  * ops whose ``forward_of`` names the split op lose that field; split specs of other ops that list it
    in ``cut`` now list the node that gives its output.
Data-parallel input graph (``data_parallel_instance``; ``os_dpos`` by default, ``os_dpos_model_graph``
never): when the model fits one device, §5.2 starts OS-DPOS from the model replicated once per device, each replica on its share of
the batch, gradients summed where they reach the shared variables (rules in the function's docstring).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from dplace import kernels
from dplace.budget import Budget
from dplace.errors import InvalidInstanceError, bad_option
from dplace.instance.graph import longest_path
from dplace.instance.model import Edge, Instance, Op
from dplace.schedule.ranks import priority_order, upward_rank
from dplace.registry import register
from dplace.result import Result, make_result
from dplace.schedule.rules import Rules
from dplace.schedule.simulate import seq_kernel_wanted, simulate
from dplace.schedule.state import ScheduleState
from dplace.instance.transform import Transform, rewrite

# ----------------------------------------------------------------------------------------------- DPOS


@dataclass(frozen=True)
class DposOptions:
    insertion: bool = True  # insert ops into idle slots (the paper); FastT's public code: False
    critical_path: bool = True  # critical-path ops on critical-path devices (the paper); False: EFT for all
    cp_one_device: bool = False  # FastT's public code: all critical-path ops on the first one, memory or not


def critical_path(inst: Instance, rank: Sequence[float]) -> list[int]:
    """FastT §5.1: the entry op of largest rank, then repeatedly the successor of largest rank
    (ties: topological position)."""
    if inst.n == 0:
        return []
    tp = inst.topo_pos
    entries = [o for o in range(inst.n) if not inst.pred[o]]
    o = min(entries, key=lambda x: (-rank[x], tp[x]))
    path = [o]
    while inst.succ[o]:
        o = min((inst.edst[e] for e in inst.succ[o]), key=lambda x: (-rank[x], tp[x]))
        path.append(o)
    return path


def _choose_cp_device(inst: Instance, rules: Rules, path: list[int], i: int) -> int:
    """Device of smallest average time over the prefix of remaining critical-path ops ``path[i:]`` that
    fits in its free memory (ops forced elsewhere are skipped). -1 if ``path[i]`` fits nowhere."""
    best: tuple[float, int, int] | None = None
    best_d = -1
    group_of = inst.group_of
    for d in range(inst.m):
        if not rules.fits(path[i], d):
            continue
        used = rules.used[d]
        cap = inst.capacity[d]
        reserved: set[int] = set()
        total, count = 0.0, 0
        for p in path[i:]:
            if rules.placed[p]:
                continue
            f = rules.forced(p)
            if f >= 0 and f != d:
                continue
            g = group_of[p]
            if g >= 0:
                need = 0 if (rules.group_dev[g] >= 0 or g in reserved) else rules.group_mem[g]
            else:
                need = inst.mem[p]
            if used + need > cap:
                break
            used += need
            if g >= 0:
                reserved.add(g)
            total += inst.dur[p][d]
            count += 1
        if count == 0:
            continue
        key = (total / count, -count, d)
        if best is None or key < best:
            best, best_d = key, d
    return best_d


def _dpos_schedule(inst: Instance, opts: DposOptions) -> tuple[ScheduleState, list[int], list[int]]:
    """Alg. 1. Returns the schedule state, the critical path and the critical-path devices used."""
    if (inst.comm == "parallel" and kernels.use(inst.n, "list")) or seq_kernel_wanted(inst):  # compiled, the same schedule (tests compare)
        from dplace.kernels.lists import run_dpos

        return run_dpos(inst, opts.insertion, opts.critical_path, opts.cp_one_device)
    rank = upward_rank(inst, "max", "max")
    tp = inst.topo_pos
    path = critical_path(inst, rank) if opts.critical_path else []
    cp_pos = {o: i for i, o in enumerate(path)}
    state = ScheduleState(inst)
    rules = Rules(inst)
    ins = opts.insertion
    parallel = inst.comm == "parallel"
    cp_dev = -1
    cp_devs: list[int] = []
    # decreasing rank, made a valid topological order when zero costs tie ranks (Kahn on the priority)
    for o in priority_order(inst, lambda o: (-rank[o], tp[o])):
        d = -1
        if o in cp_pos:
            f = rules.forced(o)
            if f >= 0:
                d = f
            elif cp_dev >= 0 and (opts.cp_one_device or rules.fits(o, cp_dev)):
                d = cp_dev
            else:
                nd = _choose_cp_device(inst, rules, path, cp_pos[o])
                if nd >= 0:
                    cp_dev = d = nd
                    cp_devs.append(nd)
        if d < 0:
            best_f = float("inf")
            for c in rules.choose_or_fallback(o):
                st = state.est(o, c, ins)
                ft = st + inst.dur[o][c]
                if ft < best_f:
                    d, best_f, best_s = c, ft, st
            # sequential mode: commit books the links one transfer after another, so let it recompute
            state.commit(o, d, start=best_s if parallel else None, insertion=ins)
        else:
            state.commit(o, d, insertion=ins)
        rules.assign(o, d)
    return state, path, cp_devs


def _dpos_result(inst: Instance, method: str, opts: DposOptions, options: dict[str, Any],
                 run: tuple[ScheduleState, list[int], list[int]] | None = None) -> Result:
    state, path, cp_devs = run if run is not None else _dpos_schedule(inst, opts)
    order = state.order()
    fifo = simulate(inst, state.placement).makespan
    res = make_result(inst, method, state.placement, order, options=options, claimed_makespan=state.makespan)
    return replace(res, extra={
        "makespan_order": res.makespan,
        "makespan_fifo": fifo,
        "critical_path_ops": len(path),
        "critical_path_devices": [inst.devices[d].name for d in cp_devs],
    })


@register("dpos", options=DposOptions, paper="FastT §5.1 Alg. 1 (Middleware'20)",
          summary="FastT DPOS: critical-path devices + EFT with insertion, with execution order.")
def dpos(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
         **options) -> Result:
    """FastT DPOS (Yi et al., Middleware'20, §5.1 Alg. 1) with the paper's settings; deterministic, ``seed``
    unused. Ties (the paper is silent): equal ranks by topological position, equal finish times by
    device id, critical-path devices by (average time, more ops fitting, device id)."""
    opts = DposOptions(**options)
    return _dpos_result(inst, "dpos", opts, options)


# ------------------------------------------------------------------------------------ split graphs

SPLIT_KEY = "split"


def split_dims(op: Op) -> dict[str, int]:
    """The op's splittable dimensions ``{dim: size}`` from ``extra["split"]["dims"]`` (empty if none)."""
    spec = op.extra.get(SPLIT_KEY)
    if not isinstance(spec, dict):
        return {}
    dims = spec.get("dims")
    if not isinstance(dims, dict):
        return {}
    out = {}
    for k, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 2:
            continue
        out[str(k)] = int(v)
    return out


def _parts(size: int, n: int) -> list[int]:
    q, r = divmod(size, n)
    return [q + (1 if i < r else 0) for i in range(n)]


def _divide_int(total: int, fracs: list[float]) -> list[int]:
    """Integers proportional to ``fracs`` that sum to ``total`` (largest remainder)."""
    raw = [total * f for f in fracs]
    out = [int(x) for x in raw]
    rest = total - sum(out)
    for i in sorted(range(len(fracs)), key=lambda i: (-(raw[i] - out[i]), i))[:rest]:
        out[i] += 1
    return out


COPY_TYPES = ("AddN", "ConcatV2", "Concat", "Split", "SplitV")  # ops whose time is a memory copy
DEFAULT_COPY_BYTES_PER_US = 10000.0  # 10 GB/s, when an instance has no copy ops to measure it by


def copy_bandwidth(inst: Instance) -> float:
    """Bytes per µs at which split, concat and reduce nodes copy: the instance's own copy ops (types in
    ``COPY_TYPES``, not made by a split: output bytes / time, summed) or ``DEFAULT_COPY_BYTES_PER_US``."""
    if "split_copy_bytes_per_us" in inst.extra:
        return float(inst.extra["split_copy_bytes_per_us"])
    nb = t = 0.0
    for o, op in enumerate(inst.ops):
        if op.type in COPY_TYPES and "split_of" not in op.extra and "allreduce" not in op.extra and inst.mem[o] > 0:
            d = min(inst.dur[o])
            if d > 0:
                nb += inst.mem[o]
                t += d
    return nb / t if t > 0 else DEFAULT_COPY_BYTES_PER_US


def _is_cut(spec: dict, dim: str, src: str) -> bool:
    """Is the input from ``src`` cut along ``dim`` (else every piece gets it whole)? ``spec["cut"][dim]``
    lists the cut inputs; without it, a ``batch`` split cuts every input and any other dim none."""
    cut = spec.get("cut")
    if isinstance(cut, dict) and isinstance(cut.get(dim), list):
        return src in cut[dim]
    return dim == "batch"


def _split_one(inst: Instance, op_id: str, dim: str, n: int, overhead_us: float, copy_bw: float,
               ids: set[str]) -> tuple[list[Op], list[Edge], str]:
    """The ops and edges replacing ``op_id`` split on ``dim`` into ``n`` parts, and the id of the node
    that now gives its output; ``ids`` are taken."""
    if op_id not in inst.op_index:
        raise InvalidInstanceError(f"splits: unknown op {op_id!r}")
    o = inst.op_index[op_id]
    op = inst.ops[o]
    dims = split_dims(op)
    if dim not in dims:
        raise InvalidInstanceError(f"splits: op {op_id!r} cannot be split on {dim!r} (dims: {sorted(dims)})")
    if isinstance(n, bool) or not isinstance(n, int) or not 2 <= n <= dims[dim]:
        raise InvalidInstanceError(f"splits: op {op_id!r}: n must be an integer in 2..{dims[dim]}, got {n!r}")
    if overhead_us < 0:
        raise InvalidInstanceError(f"split overhead_us must be >= 0, got {overhead_us!r}")
    spec = op.extra[SPLIT_KEY]
    reduce = dim in (spec.get("reduce") or [])
    sizes = _parts(dims[dim], n)
    fracs = [s / dims[dim] for s in sizes]
    base_extra = {k: v for k, v in op.extra.items() if k not in (SPLIT_KEY, "forward_of")}

    def fresh(name: str) -> str:
        if name in ids:
            raise InvalidInstanceError(f"splits: op {op_id!r}: new op id {name!r} already exists")
        ids.add(name)
        return name

    def copy_us(nbytes: float) -> float:
        return nbytes / copy_bw

    subs = [fresh(f"{op_id}/{dim}{i}") for i in range(n)]
    # each piece holds its share of the op's outputs; a partial sum (reduce) is full size in every piece
    mems = [int(op.memory)] * n if reduce else _divide_int(int(op.memory), fracs)
    new_ops: list[Op] = []
    for i in range(n):
        if isinstance(op.time, dict):
            t: Any = {k: v * fracs[i] + overhead_us for k, v in op.time.items()}
        else:
            t = float(op.time) * fracs[i] + overhead_us
        new_ops.append(Op(subs[i], t, mems[i], op.type, op.colocation, op.device,
                          dict(base_extra, split_of=op_id, split_dim=dim, split_part=i)))
    new_edges: list[Edge] = []
    for k, e in enumerate(inst.pred[o]):
        ed = inst.edges[e]
        if not _is_cut(spec, dim, ed.src):  # needed whole by every piece (e.g. weights under a batch split)
            new_edges.extend(Edge(ed.src, subs[i], ed.bytes, dict(ed.extra)) for i in range(n))
            continue
        sp = fresh(f"{op_id}/split{k}")
        new_ops.append(Op(sp, copy_us(ed.bytes), int(ed.bytes), "Split", None, None, {"split_of": op_id}))
        new_edges.append(Edge(ed.src, sp, ed.bytes, dict(ed.extra)))
        new_edges.extend(Edge(sp, subs[i], ed.bytes * fracs[i]) for i in range(n))
    out_id = op_id
    if inst.succ[o]:
        full = max(inst.ebytes[e] for e in inst.succ[o])  # the output tensor every successor reads from
        if reduce:  # partial sums: every piece sends a full-size tensor, summed by an AddN
            out_id = fresh(f"{op_id}/reduce")
            new_ops.append(Op(out_id, copy_us(n * full), int(full), "AddN", None, None, {"split_of": op_id}))
            new_edges.extend(Edge(subs[i], out_id, full) for i in range(n))
        else:
            out_id = fresh(f"{op_id}/concat")
            new_ops.append(Op(out_id, copy_us(full), int(full), "ConcatV2", None, None, {"split_of": op_id}))
            new_edges.extend(Edge(subs[i], out_id, full * fracs[i]) for i in range(n))
        for e in inst.succ[o]:
            ed = inst.edges[e]
            new_edges.append(Edge(out_id, ed.dst, ed.bytes, dict(ed.extra)))
    return new_ops, new_edges, out_id


def _renamed_input(op: Op, old: str, new: str) -> Op:
    """``op`` with references to ``old`` (its ``forward_of``, its split spec's cut inputs) now naming
    ``new``, the node that gives ``old``'s output after a split; ``forward_of`` is dropped."""
    extra = {k: v for k, v in op.extra.items() if not (k == "forward_of" and v == old)}
    spec = extra.get(SPLIT_KEY)
    if isinstance(spec, dict) and isinstance(spec.get("cut"), dict):
        cut = {d: [new if s == old else s for s in srcs] if isinstance(srcs, list) else srcs
               for d, srcs in spec["cut"].items()}
        extra[SPLIT_KEY] = dict(spec, cut=cut)
    return Op(op.id, op.time, op.memory, op.type, op.colocation, op.device, extra)


def split_instance(inst: Instance, splits: Iterable[Sequence[Any]], *, overhead_us: float = 0.0,
                   copy_bytes_per_us: float | None = None) -> Instance:
    """The graph with each ``(op, dim, n)`` of ``splits`` split (module docstring: exact rules).

    Splits are applied in the given order; each names an op of the original graph. ``overhead_us`` is
    added to every sub-op's time (OS-DPOS's ``split_overhead_us``). ``copy_bytes_per_us``: speed of the
    split/concat/reduce copies (default :func:`copy_bandwidth` of ``inst``). The new Instance is named
    ``<name>+split`` and records ``split_of`` (the base name), ``splits`` and the copy speed in ``extra``.
    """
    cur = inst
    done: list[list[Any]] = list(inst.extra.get("splits", [])) if "split_of" in inst.extra else []
    base = inst.extra.get("split_of", inst.name)
    bw = copy_bandwidth(inst) if copy_bytes_per_us is None else float(copy_bytes_per_us)
    if not 0 < bw < math.inf:
        raise InvalidInstanceError(f"split copy_bytes_per_us must be > 0, got {copy_bytes_per_us!r}")
    for item in splits:
        if not isinstance(item, (list, tuple)) or len(item) != 3:
            raise InvalidInstanceError(f"splits: each split must be [op, dim, n], got {item!r}")
        op_id, dim, n = str(item[0]), str(item[1]), item[2]
        if isinstance(n, float) and n.is_integer():
            n = int(n)
        o = cur.op_index.get(op_id)
        ids = set(cur.op_index)
        new_ops, new_edges, out_id = _split_one(cur, op_id, dim, n, float(overhead_us), bw, ids)
        ops: list[Op] = []
        for x, op in enumerate(cur.ops):
            if x == o:
                ops.extend(new_ops)
            elif op.extra.get("forward_of") == op_id or SPLIT_KEY in op.extra:
                ops.append(_renamed_input(op, op_id, out_id))
            else:
                ops.append(op)
        edges = [ed for e, ed in enumerate(cur.edges) if cur.esrc[e] != o and cur.edst[e] != o]
        edges.extend(new_edges)
        done.append([op_id, dim, n])
        extra = dict(cur.extra, split_of=base, splits=[list(s) for s in done], split_copy_bytes_per_us=bw)
        if overhead_us:
            extra["split_overhead_us"] = float(overhead_us)
        cur = cur.replace(name=f"{base}+split", ops=ops, edges=edges, extra=extra)
    return cur


# -------------------------------------------------------------------------- data-parallel input graph

DP_KEY = "data_parallel"


def batch_inputs(inst: Instance) -> list[str]:
    """The ops that bring the step's batch in: ``extra["tf"]["inputs"]`` (tensor names, ``x:0`` -> op
    ``x``) of a graph extracted from TensorFlow, else ops whose ``extra["batch_input"]`` is true."""
    tf = inst.extra.get("tf")
    names: list[str] = []
    if isinstance(tf, dict) and isinstance(tf.get("inputs"), list):
        names = [str(t).split(":")[0] for t in tf["inputs"]]
    names = [x for x in names if x in inst.op_index]
    if not names:
        names = [op.id for op in inst.ops if op.extra.get("batch_input") is True]
    return names


def fits_one_device(inst: Instance) -> bool:
    """FastT §5.2's test for the data-parallel input graph: the whole model fits the largest device."""
    return sum(inst.mem) <= max(inst.capacity)


def data_parallel_instance(inst: Instance, replicas: int | None = None, inputs: Sequence[str] | None = None, *,
                           copy_bytes_per_us: float | None = None) -> Instance:
    """FastT §5.2's data-parallel input graph: the model replicated ``replicas`` times (default: the
    number of devices), each replica working on its share of the batch (strong scaling: same global
    batch), gradients summed where they reach the shared state.

    * Batch ops: the ``inputs`` (default :func:`batch_inputs`) and every op reachable from them. Each is
      replicated as ``rep<r>/<id>``: time and memory × f_r (f_r = replica r's share of the batch, the
      batch size of ``extra["tf"]["batch"]`` divided as evenly as possible, else 1/replicas); pins kept
      (the inputs still arrive where they did); colocation groups per replica (``<group>/rep<r>``);
      ``forward_of`` and split specs name the replica's ops, a split's ``batch`` size is the replica's.
      An op whose split spec has ``batch`` in ``reduce`` (a weight gradient: a partial sum over the
      batch) and any batch op fed only by such ops keep their full memory and output bytes.
    * Shared ops (one copy, unchanged): every op not reachable from the inputs (variables, their
      reads, constants) and every batch op colocated with one (the variable updates). A shared op's
      output goes whole to every replica that reads it (weights broadcast).
    * Edges between replicated ops keep to their replica with bytes × f_r (full bytes from a
      full-size op). A replicated op feeding shared ops gets one ``<id>/allreduce`` node (type AddN):
      every replica sends its full-size tensor, the node sums them (time: n·B bytes / copy speed, as
      a split's reduce, :func:`copy_bandwidth`) and feeds the shared ops with the original bytes.

    Times scale linearly with the batch: a device's utilisation at a smaller batch is not modelled
    (FastT re-profiles under data parallelism instead). The new Instance is named ``<name>+dp<n>`` and
    records ``data_parallel = {"of", "replicas", "inputs"}`` in ``extra``.
    """
    n = inst.m if replicas is None else replicas
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidInstanceError(f"data_parallel: replicas must be an integer >= 1, got {replicas!r}")
    names = list(batch_inputs(inst) if inputs is None else inputs)
    for x in names:
        if x not in inst.op_index:
            raise InvalidInstanceError(f"data_parallel: unknown input op {x!r}")
    if not names:
        raise InvalidInstanceError(f"data_parallel: instance {inst.name!r} names no batch inputs "
                                   "(extra.tf.inputs or ops with extra.batch_input = true)")
    bw = copy_bandwidth(inst) if copy_bytes_per_us is None else float(copy_bytes_per_us)
    if not 0 < bw < math.inf:
        raise InvalidInstanceError(f"data_parallel: copy_bytes_per_us must be > 0, got {copy_bytes_per_us!r}")
    tf = inst.extra.get("tf")
    batch = tf.get("batch") if isinstance(tf, dict) else None
    if isinstance(batch, int) and not isinstance(batch, bool) and batch >= n:
        sizes: list[int] | None = _parts(batch, n)
        fracs = [s / batch for s in sizes]
    else:
        sizes, fracs = None, [1.0 / n] * n
    # batch ops: reachable from the inputs
    rep = [False] * inst.n
    stack = [inst.op_index[x] for x in names]
    for o in stack:
        rep[o] = True
    while stack:
        o = stack.pop()
        for e in inst.succ[o]:
            v = inst.edst[e]
            if not rep[v]:
                rep[v] = True
                stack.append(v)
    shared_groups = {inst.group_of[o] for o in range(inst.n) if not rep[o] and inst.group_of[o] >= 0}
    for o in range(inst.n):  # batch ops acting on shared state (variable updates) stay shared
        if rep[o] and inst.group_of[o] in shared_groups:
            rep[o] = False
    full = [False] * inst.n  # replicated op whose output does not shrink with the batch
    for o in inst.topo:
        if not rep[o]:
            continue
        spec = inst.ops[o].extra.get(SPLIT_KEY)
        if isinstance(spec, dict) and "batch" in (spec.get("reduce") or []):
            full[o] = True
        else:
            ps = [inst.esrc[e] for e in inst.pred[o] if rep[inst.esrc[e]]]
            full[o] = bool(ps) and all(full[p] for p in ps)
    ids = {op.id for op in inst.ops}

    def rid(o: int, r: int) -> str:
        return f"rep{r}/{inst.ops[o].id}"

    def rname(name: Any, r: int) -> Any:
        o = inst.op_index.get(name) if isinstance(name, str) else None
        return rid(o, r) if o is not None and rep[o] else name

    ops: list[Op] = []
    edges: list[Edge] = []
    for o, op in enumerate(inst.ops):
        if not rep[o]:
            ops.append(op)
            continue
        mems = [int(op.memory)] * n if full[o] else _divide_int(int(op.memory), fracs)
        for r in range(n):
            f = fracs[r]
            t: Any = {k: v * f for k, v in op.time.items()} if isinstance(op.time, dict) else float(op.time) * f
            extra = dict(op.extra, replica_of=op.id, replica=r)
            if "forward_of" in extra:
                extra["forward_of"] = rname(extra["forward_of"], r)
            spec = extra.get(SPLIT_KEY)
            if isinstance(spec, dict):
                spec = dict(spec)
                if isinstance(spec.get("cut"), dict):
                    spec["cut"] = {d: [rname(s, r) for s in srcs] if isinstance(srcs, list) else srcs
                                   for d, srcs in spec["cut"].items()}
                if isinstance(spec.get("dims"), dict) and "batch" in spec["dims"]:
                    dims = dict(spec["dims"])
                    dims["batch"] = (sizes[r] if sizes is not None and dims["batch"] == batch
                                     else max(1, int(dims["batch"] * f)))
                    spec["dims"] = dims
                extra[SPLIT_KEY] = spec
            group = None if op.colocation is None else f"{op.colocation}/rep{r}"
            new = rid(o, r)
            if new in ids:
                raise InvalidInstanceError(f"data_parallel: new op id {new!r} already exists")
            ids.add(new)
            ops.append(Op(new, t, mems[r], op.type, group, op.device, extra))
    agg: dict[int, str] = {}
    for e, ed in enumerate(inst.edges):
        u, v = inst.esrc[e], inst.edst[e]
        if rep[u] and rep[v]:
            edges.extend(Edge(rid(u, r), rid(v, r), ed.bytes if full[u] else ed.bytes * fracs[r], dict(ed.extra))
                         for r in range(n))
        elif rep[v]:  # shared -> every replica, whole
            edges.extend(Edge(ed.src, rid(v, r), ed.bytes, dict(ed.extra)) for r in range(n))
        elif rep[u]:  # replicas -> shared: through one sum of the replicas' full-size tensors
            if u not in agg:
                a = f"{ed.src}/allreduce"
                if a in ids:
                    raise InvalidInstanceError(f"data_parallel: new op id {a!r} already exists")
                ids.add(a)
                agg[u] = a
                big = max(inst.ebytes[x] for x in inst.succ[u] if not rep[inst.edst[x]])
                ops.append(Op(a, n * big / bw, int(big), "AddN", None, None, {"replica_of": ed.src, "allreduce": True}))
                edges.extend(Edge(rid(u, r), a, big) for r in range(n))
            edges.append(Edge(agg[u], ed.dst, ed.bytes, dict(ed.extra)))
        else:
            edges.append(ed)
    extra = dict(inst.extra, split_copy_bytes_per_us=bw, **{DP_KEY: {"of": inst.name, "replicas": n, "inputs": names}})
    return inst.replace(name=f"{inst.name}+dp{n}", ops=ops, edges=edges, extra=extra)


def transformed_instance(inst: Instance, extra: Mapping[str, Any]) -> Instance:
    """The graph a FastT result was computed on, rebuilt from the original ``inst`` and the result's
    ``extra``: the data-parallel graph (``extra["data_parallel"]``) then the splits (``extra["splits"]``);
    ``inst`` itself when the result names neither. Bad fields raise :class:`InvalidInstanceError`."""
    from dplace.instance.model import check_number

    g = inst
    dp = extra.get(DP_KEY)
    if dp:
        if not isinstance(dp, dict) or not isinstance(dp.get("inputs"), list):
            raise InvalidInstanceError(f"result: extra.data_parallel must be an object with replicas and inputs, got {dp!r:.60}")
        g = data_parallel_instance(inst, dp.get("replicas"), [str(x) for x in dp["inputs"]],
                                   copy_bytes_per_us=extra.get("split_copy_bytes_per_us"))
    splits = extra.get("splits")
    if splits:
        if not isinstance(splits, list) or not all(isinstance(s, list) for s in splits):
            raise InvalidInstanceError(f"result: extra.splits must be a list of [op, dim, n], got {splits!r:.60}")
        bw = extra.get("split_copy_bytes_per_us")
        g = split_instance(g, [tuple(s) for s in splits],
                           overhead_us=check_number(extra.get("split_overhead_us", 0.0), "result: extra.split_overhead_us"),
                           copy_bytes_per_us=None if bw is None else check_number(bw, "result: extra.split_copy_bytes_per_us"))
    return g


@rewrite("fastt")
def _fastt_rewrite(base: Instance, params: Mapping[str, Any]) -> tuple[Instance, list[int]]:
    """The transform of an OS-DPOS result: :func:`transformed_instance` with ``params`` = the result's
    ``data_parallel``, ``splits``, ``split_overhead_us`` and ``split_copy_bytes_per_us``."""
    g = transformed_instance(base, params)
    return g, fastt_origin(base, g)


def fastt_origin(base: Instance, g: Instance) -> list[int]:
    """The map back from a FastT graph ``g`` (data-parallel replicas, split pieces and their
    split/concat/reduce/allreduce nodes) to ``base``: per op of ``g``, the op of ``base`` it comes from."""
    ix = base.op_index

    def of(op: Op) -> int:
        for name in (op.id, op.extra.get("replica_of"), op.extra.get("split_of")):
            if isinstance(name, str) and name in ix:
                return ix[name]
        s = op.extra.get("split_of")  # a copy node of a split replica: split_of = "rep<r>/<id>"
        return ix.get(s.split("/", 1)[1], -1) if isinstance(s, str) and "/" in s else -1

    return [of(op) for op in g.ops]


# ------------------------------------------------------------------------------------------ OS-DPOS


@dataclass(frozen=True)
class ModelGraphOsDposOptions:
    """Options of ``os_dpos_model_graph`` (and, with ``data_parallel``, of ``os_dpos``)."""

    insertion: bool = True  # DPOS's insertion into idle slots
    critical_path: bool = True  # DPOS's critical-path devices
    cp_one_device: bool = False  # DPOS's public-code variant (see DposOptions)
    split_overhead_us: float = 0.0  # added to each sub-op's time
    max_dpos_runs: int | None = None  # cap on DPOS re-runs on split graphs; None: the paper's whole loop
    copy_bytes_per_us: float | None = None  # split/concat/reduce copy speed; None: from the instance

    def __post_init__(self) -> None:
        if not 0 <= self.split_overhead_us < math.inf:  # NaN fails too
            raise bad_option("split_overhead_us", "a finite number >= 0", self.split_overhead_us)
        if self.max_dpos_runs is not None and self.max_dpos_runs < 0:
            raise bad_option("max_dpos_runs", ">= 0", self.max_dpos_runs)
        if self.copy_bytes_per_us is not None and not 0 < self.copy_bytes_per_us < math.inf:
            raise bad_option("copy_bytes_per_us", "> 0", self.copy_bytes_per_us)


@dataclass(frozen=True)
class OsDposOptions(ModelGraphOsDposOptions):
    # §5.2: start from the data-parallel graph (one replica per device) when the model fits one device
    # and the graph names its batch inputs; False: start from the graph given (os_dpos_model_graph)
    data_parallel: bool = True


# what the result says about the split pieces' times (FastT re-profiles each split shape, §4)
LINEAR_SHARE_NOTE = ("split pieces timed as a linear share of the op's time (plus split_overhead_us): FastT "
                     "profiles the split shapes, and this instance carries no measured times for them")


def placed_critical_path(inst: Instance, placement: Sequence[int]) -> list[int]:
    """Longest path of the graph with each op's time on its device and the transfer times of the
    placement (device contention ignored): Alg. 2 line 4."""
    w = [inst.dur[o][placement[o]] for o in range(inst.n)]
    c = [inst.transfer_time(e, placement[u], placement[v]) for e, (u, v) in enumerate(zip(inst.esrc, inst.edst))]
    return longest_path(inst, inst.topo, w, c)[1]


def _splittable(inst: Instance, o: int) -> bool:
    return bool(split_dims(inst.ops[o])) and inst.pinned[o] < 0 and inst.group_of[o] < 0


@register("os_dpos", options=OsDposOptions, paper="FastT §5.2 Alg. 2 (Middleware'20)",
          summary="FastT §5.2 OS-DPOS: from the data-parallel graph when the model fits one device, DPOS plus "
                  "splitting of critical-path ops.")
def os_dpos(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0, budget: Budget | None = None,
            **options) -> Result:
    """FastT OS-DPOS (Yi et al., Middleware'20, §5.2 Alg. 2); never worse than DPOS on its input graph.

    The input graph is the data-parallel one (:func:`data_parallel_instance`) when the model fits one
    device and the graph names its batch inputs (§5.2), else the graph given (``extra`` says why). Stops
    trying splits after ``max_dpos_runs`` DPOS re-runs or ``time_limit_s`` seconds (keeping the best
    graph so far). The Result is on the rewritten graph (``res.instance``, with its transform) when it
    is not the given one. A split whose graph breaks memory is never kept (unless DPOS's own placement
    already does). Split pieces take a linear share of the op's time (``extra["split_timing"]``).
    Where the paper is silent: ops are tried by decreasing time on their device (ties: topological
    position); dims in name order, n from 2 up; a split is kept only if it improves the makespan by
    more than 1e-9 relative.
    """
    return _os_dpos(inst, "os_dpos", OsDposOptions(**options), options, Budget.resolve(budget, time_limit_s))


@register("os_dpos_model_graph", options=ModelGraphOsDposOptions, paper="FastT §5.2 Alg. 2", variant_of="os_dpos",
          summary="os_dpos on the graph as given (no data-parallel input graph), so its placement is of the given ops.")
def os_dpos_model_graph(inst: Instance, *, time_limit_s: float | None = None, seed: int = 0,
                        budget: Budget | None = None, **options) -> Result:
    """:func:`os_dpos` started from the graph given even when the model fits one device: its result is a
    placement of the given ops unless a split is kept (what ``portfolio`` and ``refine`` can use)."""
    return _os_dpos(inst, "os_dpos_model_graph", ModelGraphOsDposOptions(**options), options,
                    Budget.resolve(budget, time_limit_s))


def _os_dpos(inst: Instance, method: str, opts: ModelGraphOsDposOptions, options: dict[str, Any],
             budget: Budget) -> Result:
    given = inst
    dopts = DposOptions(insertion=opts.insertion, critical_path=opts.critical_path, cp_one_device=opts.cp_one_device)
    bw = copy_bandwidth(inst) if opts.copy_bytes_per_us is None else float(opts.copy_bytes_per_us)
    dp_info: dict[str, Any] = {}
    if getattr(opts, "data_parallel", False):
        if not fits_one_device(inst):
            dp_info["data_parallel_skipped"] = "the model does not fit one device: the model graph is the input"
        elif not batch_inputs(inst):
            dp_info["data_parallel_skipped"] = ("the graph names no batch inputs (extra.tf.inputs or ops with "
                                                "extra.batch_input = true): the model graph is the input")
        else:
            inst = data_parallel_instance(inst, copy_bytes_per_us=bw)
            dp_info[DP_KEY] = {k: v for k, v in inst.extra[DP_KEY].items() if k != "of"}
    t_run = budget.elapsed()
    best = _dpos_result(inst, method, dopts, options)
    run_s = budget.elapsed() - t_run  # a trial (split, DPOS, simulation) costs about one DPOS run
    dpos_makespan = best.makespan
    cap = math.inf if opts.max_dpos_runs is None else opts.max_dpos_runs
    cur = inst
    splits: list[list[Any]] = []
    runs = 0
    stopped = "no improving split"
    cp = placed_critical_path(inst, best.placement)
    cp_ids = [inst.ops[o].id for o in sorted((o for o in cp if _splittable(inst, o)),
                                             key=lambda o: (-inst.dur[o][best.placement[o]], inst.topo_pos[o]))]
    for op_id in cp_ids:
        o = cur.op_index[op_id]
        trial_best: tuple[float, Any, list[Any]] | None = None
        out_of_budget = False
        for dim, size in sorted(split_dims(cur.ops[o]).items()):
            for n in range(2, min(cur.m, size) + 1):
                # a trial is begun only when it and what follows a kept split (its simulation, the split
                # graph's bound in dplace.solve: about one more run) end within the budget
                if runs >= cap or budget.left() < 2 * run_s:
                    out_of_budget = True
                    break
                runs += 1
                t_run = budget.elapsed()
                g = split_instance(cur, [[op_id, dim, n]], overhead_us=opts.split_overhead_us, copy_bytes_per_us=bw)
                if sum(g.mem) > sum(g.capacity):  # pieces of a partial sum each hold it whole
                    continue
                run = _dpos_schedule(g, dopts)
                sched = simulate(g, run[0].placement, run[0].order())
                if sched.memory_ok or not best.memory_ok:  # a split must not break memory
                    if trial_best is None or sched.makespan < trial_best[0] - 1e-9:
                        trial_best = (sched.makespan, (g, run), [op_id, dim, n])
                run_s = max(run_s, budget.elapsed() - t_run)
            if out_of_budget:
                break
        if trial_best is not None and trial_best[0] < best.makespan - 1e-9 * max(1.0, best.makespan):
            cur, run = trial_best[1]
            best = _dpos_result(cur, method, dopts, options, run)
            splits.append(trial_best[2])
        else:
            if out_of_budget:
                stopped = "max_dpos_runs" if runs >= cap else "time_limit_s"
            break
        if out_of_budget:
            stopped = "max_dpos_runs" if runs >= cap else "time_limit_s"
            break
    else:
        stopped = "critical path exhausted"
    extra = {
        **dp_info,
        "splits": splits,
        "base_instance": given.name,
        "split_overhead_us": opts.split_overhead_us,
        "split_copy_bytes_per_us": bw,
        "dpos_makespan": dpos_makespan,
        "dpos_runs": runs,
        "stopped": stopped,
    }
    if splits:
        extra["split_timing"] = LINEAR_SHARE_NOTE
    transform = None
    if best.instance is not given:
        params = {k: extra[k] for k in (DP_KEY, "splits", "split_overhead_us", "split_copy_bytes_per_us") if k in extra}
        transform = Transform("fastt", params, given, tuple(fastt_origin(given, best.instance)))
    return replace(best, transform=transform, extra={**best.extra, **extra})
