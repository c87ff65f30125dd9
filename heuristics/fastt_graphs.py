"""FastT's graph rewrites (Yi et al., Middleware'20, §5.2), used by ``os_dpos`` (:mod:`.fastt`).

Split graph (``split_instance``), for an op ``op`` with ``extra["split"] = {"dims": {dim: size},
"cut": {dim: [input op ids]}, "reduce": [dims]}`` split on ``dim`` into n parts (part i covers size_i of
the ``size`` rows, as even as possible, frac_i = size_i / size):
  * sub-ops ``op/<dim><i>``: time = time(op) * share_i + ``overhead_us`` (per device when the time is
    per device), share_i = the op's measured time at the piece's shape over its measured time at its
    own (:func:`measured_share`, ``extra["split"]["measured"]`` from ``dplace profile --split-shapes``)
    when both are measured, else the linear share frac_i; ``extra["timed"]`` says which; same type, pin and colocation as ``op``; ``split``/``forward_of`` dropped;
    ``extra["split_of"] = op`` (a piece is a node of its own: ``tf_node`` dropped). Memory (the op's outputs): memory(op) * frac_i (integers summing to
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

import bisect
import math
from dataclasses import replace
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from dplace.bounds.shared import smallest_times
from dplace.errors import InvalidInstanceError
from dplace.instance.columns import Columns
from dplace.instance.model import Edge, Instance, Op
from dplace import kernels
from dplace.kernels.arrays import inst_arrays
from dplace.instance.transform import rewrite


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
    cols = inst.columns  # read by column: building every Op of a 36k-op graph cost 0.3 s here
    copies = [o for o, ty in enumerate(cols.types()) if ty in COPY_TYPES]
    extra = cols.extras_of(copies)
    fastest = smallest_times(inst)
    for o in copies:
        ex = extra.get(o, {})
        if "split_of" not in ex and "allreduce" not in ex and inst.mem[o] > 0:
            d = fastest[o]
            if d > 0:
                nb += inst.mem[o]
                t += d
    return nb / t if t > 0 else DEFAULT_COPY_BYTES_PER_US


MEASURED_KEY = "measured"  # extra["split"]["measured"] = {dim: {piece size: µs at that shape}} (dplace profile)


def measured_share(op: Op, dim: str, size: int, whole: int) -> float | None:
    """The measured time of ``op`` at ``size`` of ``dim`` over its time at ``whole`` (both from
    ``extra["split"]["measured"]``, the op run alone at those shapes by ``dplace profile --split-shapes``),
    or None when either is missing or the whole one is 0 (then a linear share ``size / whole`` is used)."""
    spec = op.extra.get(SPLIT_KEY)
    table = spec.get(MEASURED_KEY, {}).get(dim) if isinstance(spec, dict) and isinstance(spec.get(MEASURED_KEY), dict) else None
    if not isinstance(table, dict):
        return None
    t, w = table.get(str(size)), table.get(str(whole))
    if isinstance(t, (int, float)) and isinstance(w, (int, float)) and w > 0 and 0 <= t < math.inf:
        return float(t) / float(w)
    return None


def _is_cut(spec: dict, dim: str, src: str) -> bool:
    """Is the input from ``src`` cut along ``dim`` (else every piece gets it whole)? ``spec["cut"][dim]``
    lists the cut inputs; without it, a ``batch`` split cuts every input and any other dim none."""
    cut = spec.get("cut")
    if isinstance(cut, dict) and isinstance(cut.get(dim), list):
        return src in cut[dim]
    return dim == "batch"


def _split_one(op: Op, ins: Sequence[Edge], outs: Sequence[Edge], dim: str, n: int, overhead_us: float,
               copy_bw: float, ids: set[str]) -> tuple[list[Op], list[Edge], str]:
    """The ops and edges replacing ``op`` (its input edges ``ins``, output edges ``outs``, each in edge
    order) split on ``dim`` into ``n`` parts, and the id of the node that now gives its output; ``ids``
    are taken."""
    op_id = op.id
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
    base_extra = {k: v for k, v in op.extra.items() if k not in (SPLIT_KEY, "forward_of", "tf_node")}

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
    shares = [measured_share(op, dim, s, dims[dim]) for s in sizes]
    timed = "measured" if all(x is not None for x in shares) else "linear"
    if timed == "linear":
        shares = fracs
    new_ops: list[Op] = []
    for i in range(n):
        if isinstance(op.time, dict):
            t: Any = {k: v * shares[i] + overhead_us for k, v in op.time.items()}
        else:
            t = float(op.time) * shares[i] + overhead_us
        new_ops.append(Op(subs[i], t, mems[i], op.type, op.colocation, op.device,
                          dict(base_extra, split_of=op_id, split_dim=dim, split_part=i, timed=timed)))
    new_edges: list[Edge] = []
    for k, ed in enumerate(ins):
        if not _is_cut(spec, dim, ed.src):  # needed whole by every piece (e.g. weights under a batch split)
            new_edges.extend(Edge(ed.src, subs[i], ed.bytes, dict(ed.extra)) for i in range(n))
            continue
        sp = fresh(f"{op_id}/split{k}")
        new_ops.append(Op(sp, copy_us(ed.bytes), int(ed.bytes), "Split", None, None, {"split_of": op_id}))
        new_edges.append(Edge(ed.src, sp, ed.bytes, dict(ed.extra)))
        new_edges.extend(Edge(sp, subs[i], ed.bytes * fracs[i]) for i in range(n))
    out_id = op_id
    if outs:
        full = max(float(ed.bytes) for ed in outs)  # the output tensor every successor reads from
        if reduce:  # partial sums: every piece sends a full-size tensor, summed by an AddN
            out_id = fresh(f"{op_id}/reduce")
            new_ops.append(Op(out_id, copy_us(n * full), int(full), "AddN", None, None, {"split_of": op_id}))
            new_edges.extend(Edge(subs[i], out_id, full) for i in range(n))
        else:
            out_id = fresh(f"{op_id}/concat")
            new_ops.append(Op(out_id, copy_us(full), int(full), "ConcatV2", None, None, {"split_of": op_id}))
            new_edges.extend(Edge(subs[i], out_id, full * fracs[i]) for i in range(n))
        for ed in outs:
            new_edges.append(Edge(out_id, ed.dst, ed.bytes, dict(ed.extra)))
    return new_ops, new_edges, out_id


def _renamed_extra(extra: Mapping[str, Any], old: str, new: str) -> dict[str, Any] | None:
    """An op's unknown fields with references to ``old`` (its ``forward_of``, its split spec's cut
    inputs) now naming ``new``, the node that gives ``old``'s output after a split (``forward_of`` is
    dropped); None when they name ``old`` nowhere (nothing changes)."""
    spec = extra.get(SPLIT_KEY)
    cut = spec.get("cut") if isinstance(spec, dict) else None
    cut_names = isinstance(cut, dict) and any(isinstance(srcs, list) and old in srcs for srcs in cut.values())
    if extra.get("forward_of") != old and not cut_names:
        return None
    out = {k: v for k, v in extra.items() if not (k == "forward_of" and v == old)}
    if cut_names:
        out[SPLIT_KEY] = dict(spec, cut={d: [new if s == old else s for s in srcs] if isinstance(srcs, list) else srcs
                                         for d, srcs in cut.items()})
    return out


class _LaterExtras:
    """op index -> unknown fields of a split graph, made when first asked for: the edit of the graph it was
    split from (renumbered, references renamed) is a loop over every op's fields, and a trial's DPOS run
    and simulation never read them (only a kept split's graph, edited again, and its result do)."""

    def __init__(self, make: Any) -> None:
        self._make, self._found = make, None

    def found(self) -> dict[int, Mapping[str, Any]]:
        if self._found is None:
            self._found, self._make = self._make(), None
        return self._found

    def items(self) -> Iterable[tuple[int, Mapping[str, Any]]]:
        return self.found().items()

    def get(self, o: int, default: Any = None) -> Any:
        return self.found().get(o, default)

    def may_contain(self, word: str) -> bool:
        return True


def _list_columns(inst: Instance) -> Columns:
    """``inst``'s ops and edges as the columns :func:`split_instance` edits in place of rebuilding every
    ``Op``: per op and per edge a list entry as given (the values ``Columns.of_objects`` holds), edge ends
    as op indices (int64 arrays: no name lookups when the edited graph is validated), unknown fields by
    index; kept on the instance (read-only, like its other indexes)."""
    c = inst.columns
    if (isinstance(c.ids, list) and isinstance(c.time, list) and isinstance(c.mem, list) and isinstance(c.type, list)
            and isinstance(c.pin, list) and isinstance(c.coloc, list) and isinstance(c.src, np.ndarray)
            and isinstance(c.dst, np.ndarray) and isinstance(c.nbytes, list) and type(c.op_extra) in (dict, _LaterExtras)
            and type(c.edge_extra) is dict and not c.time_map and c.type_names is None and c.pin_names is None
            and c.coloc_names is None and c.forward_of is None):
        return c
    kept = inst.__dict__.get("_split_columns")
    if kept is None:
        objs = Columns.of_objects(inst.ops, inst.edges)
        a = inst_arrays(inst)
        objs.src, objs.dst = a.esrc.copy(), a.edst.copy()
        kept = inst.__dict__["_split_columns"] = objs
    return kept


def _cut_out(items: list, drop: Sequence[int]) -> list:
    """``items`` without the positions ``drop`` (increasing)."""
    out: list = []
    prev = 0
    for i in drop:
        out.extend(items[prev:i])
        prev = i + 1
    out.extend(items[prev:])
    return out


def _split_columns(c: Columns, o: int, drop: Sequence[int], new_ops: Sequence[Op], new_edges: Sequence[Edge],
                   old: str, new: str) -> Columns:
    """The list columns ``c`` with op ``o`` replaced by ``new_ops`` (at its position), its edges ``drop``
    (increasing) dropped and ``new_edges`` appended, and references to ``old`` renamed ``new``
    (:func:`_renamed_extra`): the ops and edges the per-op rebuild gave, without an ``Op`` per op."""

    def spliced(col: list, vals: list) -> list:
        return col[:o] + vals + col[o + 1:]

    shift = len(new_ops) - 1
    base = c.op_extra

    def op_extra() -> dict[int, Mapping[str, Any]]:
        out: dict[int, Mapping[str, Any]] = {}
        for i, ex in base.items():
            if i == o:
                continue
            j = i if i < o else i + shift
            if ex.get("forward_of") == old or (isinstance(spec := ex.get(SPLIT_KEY), dict) and "cut" in spec):
                renamed = _renamed_extra(ex, old, new)
                if renamed is not None:
                    if renamed:
                        out[j] = renamed
                    continue
            out[j] = ex
        out.update((o + j, op.extra) for j, op in enumerate(new_ops) if op.extra)
        return out

    n_kept = len(c.src) - len(drop)
    dropped = set(drop)
    edge_extra = {e - bisect.bisect_left(drop, e): ex for e, ex in c.edge_extra.items() if e not in dropped}
    edge_extra.update((n_kept + j, ed.extra) for j, ed in enumerate(new_edges) if ed.extra)
    # edge ends by index: the kept edges' ends after o move by shift; the new edges name o's neighbours or new ops
    src, dst = np.delete(c.src, drop), np.delete(c.dst, drop)
    src += (src > o) * shift
    dst += (dst > o) * shift
    where = {c.ids[x]: x if x < o else x + shift for e in drop for x in (int(c.src[e]), int(c.dst[e])) if x != o}
    where.update((op.id, o + j) for j, op in enumerate(new_ops))
    return Columns(
        ids=spliced(c.ids, [op.id for op in new_ops]), time=spliced(c.time, [op.time for op in new_ops]),
        mem=spliced(c.mem, [op.memory for op in new_ops]), type=spliced(c.type, [op.type for op in new_ops]),
        pin=spliced(c.pin, [op.device for op in new_ops]), coloc=spliced(c.coloc, [op.colocation for op in new_ops]),
        src=np.append(src, [where[ed.src] for ed in new_edges]).astype(np.int64),
        dst=np.append(dst, [where[ed.dst] for ed in new_edges]).astype(np.int64),
        nbytes=_cut_out(c.nbytes, drop) + [ed.bytes for ed in new_edges], op_extra=_LaterExtras(op_extra),
        edge_extra=edge_extra)


def _op_at(c: Columns, o: int) -> Op:
    return Op(c.ids[o], c.time[o], c.mem[o], c.type[o], c.coloc[o], c.pin[o], dict(c.op_extra.get(o, {})))


def op_at(inst: Instance, o: int) -> Op:
    """``inst.ops[o]`` (an equal ``Op``) without building every op of a graph made by :func:`split_instance`."""
    return _op_at(_list_columns(inst), o)


def _edges_at(c: Columns, edges: Iterable[int]) -> list[Edge]:
    ids = c.ids
    return [Edge(ids[c.src[e]], ids[c.dst[e]], c.nbytes[e], dict(c.edge_extra.get(e, {}))) for e in edges]


def split_instance(inst: Instance, splits: Iterable[Sequence[Any]], *, overhead_us: float = 0.0,
                   copy_bytes_per_us: float | None = None) -> Instance:
    """The graph with each ``(op, dim, n)`` of ``splits`` split (module docstring: exact rules).

    Splits are applied in the given order; each names an op of the original graph. ``overhead_us`` is
    added to every sub-op's time (OS-DPOS's ``split_overhead_us``). ``copy_bytes_per_us``: speed of the
    split/concat/reduce copies (default :func:`copy_bandwidth` of ``inst``). The new Instance is named
    ``<name>+split`` and records ``split_of`` (the base name), ``splits`` and the copy speed in ``extra``.

    Each split edits the previous graph's columns (:func:`_split_columns`: the op's rows replaced, its
    edges dropped, the new ones appended) and validates them in bulk (``Instance.from_columns``, given
    the topological order by the compiled Kahn walk where kernels run, :mod:`dplace.kernels.kahn`): the
    instance ``inst.replace(ops=..., edges=...)`` of the rebuilt ``Op``/``Edge`` lists gives, equal
    field by field (tests/heuristics/test_fastt_split.py), without an ``Op`` per op of the graph.
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
        if o is None:
            raise InvalidInstanceError(f"splits: unknown op {op_id!r}")
        c = _list_columns(cur)
        a = inst_arrays(cur)
        pe = a.pred_edge[a.pred_ptr[o]:a.pred_ptr[o + 1]].tolist()
        se = a.succ_edge[a.succ_ptr[o]:a.succ_ptr[o + 1]].tolist()
        new_ops, new_edges, out_id = _split_one(_op_at(c, o), _edges_at(c, pe), _edges_at(c, se), dim, n,
                                                float(overhead_us), bw, set(c.ids))
        cols = _split_columns(c, o, sorted(pe + se), new_ops, new_edges, op_id, out_id)
        done.append([op_id, dim, n])
        extra = dict(cur.extra, split_of=base, splits=[list(s) for s in done], split_copy_bytes_per_us=bw)
        if overhead_us:
            extra["split_overhead_us"] = float(overhead_us)
        n_ops = len(cols.ids)
        topo = None
        if kernels.use(n_ops, "graph"):
            from dplace.kernels.kahn import ready_order_arrays  # numba: imported when used

            topo = ready_order_arrays(n_ops, cols.src, cols.dst)
        cur = Instance.from_columns(f"{base}+split", cur.devices, cols, link=cur.link, pairs=cur.pairs, comm=cur.comm,
                                    extra=extra, transfer_cpu=cur.transfer_cpu, topo=topo)
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
      ``forward_of`` and split specs name the replica's ops, a split's ``batch`` size is the replica's;
      ``tf_node`` dropped (``dplace execute`` runs replica r as graph node ``rep<r>/<id>``,
      :mod:`dplace.runtime.replicas`).
      An op whose split spec has ``batch`` in ``reduce`` (a weight gradient: a partial sum over the
      batch) and any batch op fed only by such ops keep their full memory and output bytes.
    * Shared ops (one copy, unchanged): every op not reachable from the inputs (variables, their
      reads, constants) and every batch op colocated with one (the variable updates). A shared op's
      output goes whole to every replica that reads it (weights broadcast).
    * Edges between replicated ops keep to their replica with bytes × f_r (full bytes from a
      full-size op). A replicated op feeding shared ops gets one ``<id>/allreduce`` node (type AddN):
      every replica sends its full-size tensor, the node sums them (time: n·B bytes / copy speed, as
      a split's reduce, :func:`copy_bandwidth`) and feeds the shared ops with the original bytes.

    Times scale linearly with the batch, except for ops whose time was measured at the replica's rows
    (``extra["split"]["measured"]["batch"]``, :func:`measured_share`); a replica keeps only that table
    (its other dims were measured at the whole batch). The new Instance is named ``<name>+dp<n>`` and
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
        bdims = split_dims(op)
        for r in range(n):
            f = fracs[r]
            if "batch" in bdims:  # a replica is the op at its share of the batch: measured where it was
                rows = sizes[r] if sizes is not None and bdims["batch"] == batch else max(1, int(bdims["batch"] * f))
                share = measured_share(op, "batch", rows, bdims["batch"])
                f = f if share is None else share
            t: Any = {k: v * f for k, v in op.time.items()} if isinstance(op.time, dict) else float(op.time) * f
            extra = {k: v for k, v in op.extra.items() if k != "tf_node"}  # a replica is a node of its own
            extra.update(replica_of=op.id, replica=r)
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
                                     else max(1, int(dims["batch"] * fracs[r])))
                    spec["dims"] = dims
                if isinstance(spec.get(MEASURED_KEY), dict):  # other dims were measured at the whole batch
                    spec[MEASURED_KEY] = {d: v for d, v in spec[MEASURED_KEY].items() if d == "batch"}
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
