"""The compiled Baechi / Celeritas pieces (dplace.kernels) decide exactly as the pure-Python reference
(``DPLACE_KERNEL=python``): same units, clusters, orders, placements, per-device orders and makespans on
random instances with pins, colocation groups, forward/backward pairs, memory pressure, per-pair links,
per-device times, zero times and ties (small integers). The compiled list scheduler runs in both comm
modes (sequential: :mod:`dplace.kernels.etfseq` on the compiled sequential state), whole and cut.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import dplace
from dplace import kernels
from dplace.heuristics import baechi
from dplace.instance.model import Device, Edge, Instance, Link, Op

pytestmark = pytest.mark.skipif(not kernels.enabled(), reason="numba not importable")




def _instance(rng: random.Random, n: int, m: int, *, comm: str = "parallel", slack: float | None = None) -> Instance:
    """Random DAG: chains (fusion, co-placement) and random forward edges, some ops with several
    consumers; per-device or scalar times, many zeros and ties; colocation groups, pins,
    forward_of pairs; per-pair links; memory from tight (fallbacks) to ample."""
    names = [f"d{d}" for d in range(m)]
    hetero = rng.random() < 0.4
    ops = []
    for i in range(n):
        if hetero:
            t = {x: float(rng.choice([0, 0, 1, 2, 3, 5, 8])) for x in names}
        else:
            t = float(rng.choice([0, 1, 1, 2, 3, 4]))
        extra = {}
        if i > 0 and rng.random() < 0.15:
            extra["forward_of"] = f"o{rng.randrange(i)}"
        ops.append(dict(id=f"o{i}", time=t, memory=rng.choice([0, 1, 2, 3, 5, 8]), extra=extra))
    edges = set()
    for j in range(1, n):
        r = rng.random()
        if r < 0.5:
            edges.add((j - 1, j))  # chains
        k = rng.choice([0, 1, 1, 2, 3])
        for _ in range(k):
            edges.add((rng.randrange(max(0, j - 12), j), j))
    ng = rng.randint(0, max(0, n // 8))
    for g in range(ng):
        for o in rng.sample(range(n), min(n, rng.randint(2, 4))):
            if "colocation" not in ops[o]:
                ops[o]["colocation"] = f"g{g}"
    pinned_groups = {}
    for o in range(n):
        if m > 1 and rng.random() < 0.06:
            g = ops[o].get("colocation")
            if g is None:
                ops[o]["device"] = rng.choice(names)
            else:
                pinned_groups.setdefault(g, rng.choice(names))
    for o in range(n):
        g = ops[o].get("colocation")
        if g in pinned_groups and rng.random() < 0.5:
            ops[o]["device"] = pinned_groups[g]
    groups: dict[str, int] = {}
    for op in ops:
        if op.get("colocation"):
            groups[op["colocation"]] = groups.get(op["colocation"], 0) + op["memory"]
    total = sum(op["memory"] for op in ops)
    slack = slack if slack is not None else rng.choice([0.4, 0.7, 1.0, 1.5, 4.0])
    cap = max([int(slack * total / m) + 1] + list(groups.values()) + [op["memory"] for op in ops])
    devices = [Device(x, cap, rng.choice([1.0, 1.0, 2.0]) if not hetero else 1.0) for x in names]
    link = Link(float(rng.choice([0, 1, 2])), float(rng.choice([1, 2, 4])))
    pairs = {}
    for a in names:
        for b in names:
            if a != b and rng.random() < 0.3:
                pairs[(a, b)] = Link(float(rng.choice([0, 1, 3])), float(rng.choice([1, 2, 8])))
    return Instance(f"k{n}x{m}", devices, [Op(**op) for op in ops],
                    [Edge(f"o{a}", f"o{b}", float(rng.choice([0, 1, 2, 4]))) for a, b in sorted(edges)],
                    link=link, pairs=pairs, comm=comm)


def _cases(count: int, seed: int, comm: str = "parallel"):
    rng = random.Random(seed)
    for _ in range(count):
        yield _instance(rng, rng.choice([1, 2, 5, 12, 30, 80, 200]), rng.choice([1, 2, 3, 4, 8]), comm=comm)


def _both(monkeypatch, f):
    """f() under the reference and under the kernels; an error counts as its message."""
    out = []
    for mode in ("python", "numba"):
        monkeypatch.setenv("DPLACE_KERNEL", mode)
        try:
            out.append(f())
        except dplace.InvalidInstanceError as exc:
            out.append(("error", str(exc)))
    return out


def _untimed(extra: dict) -> dict:
    return {k: v for k, v in extra.items() if not k.endswith("time_s")}


def _assert_same(ref, got, name: str) -> None:
    """Two Results of one method: the same placement, orders, makespans, claims and (untimed) extras."""
    assert got.placement == ref.placement, name
    assert got.order == ref.order
    assert got.makespan == ref.makespan and got.claimed_makespan == ref.claimed_makespan
    assert _untimed(got.extra) == _untimed(ref.extra) and got.memory_ok == ref.memory_ok


def _partition(labels) -> list[list[int]]:
    groups: dict[int, list[int]] = {}
    for o, x in enumerate(labels):
        groups.setdefault(int(x), []).append(o)
    return sorted(groups.values())


def test_units_and_fusion_match_the_reference():
    from dplace.kernels import baechi as kb

    for inst in _cases(60, 1):
        for opts in (baechi.BaechiOptions(), baechi.CappedOptions(), baechi.CappedOptions(unit_cap=0.3, forward_placement=False),
                     baechi.BaechiOptions(coplacement=False)):
            units = baechi.build_units(inst, opts)
            ku, ca = baechi._prepare_arrays(inst, opts)
            assert ku.tolist() == units  # the same roots, not only the same partition
            ref = baechi.fuse(inst, units)
            assert ca.lists() == (ref.of, ref.ops, ref.succ, ref.pred)
            assert _partition(kb.fuse(kernels.inst_arrays(inst), None)) == _partition(
                [ref_c for ref_c in baechi.fuse(inst, None).of])


@pytest.mark.parametrize("method", ["m_etf", "m_sct", "m_topo", "m_etf_capped"])
def test_baechi_methods_match_the_reference(monkeypatch, method):
    count = 40 if method == "m_etf" else 15
    for inst in _cases(count, 2 + len(method)):
        for options in ({}, {"colocation_coadjust": False, "fusion": False}):
            ref, got = _both(monkeypatch, lambda: dplace.solve(inst, method, **options))
            _assert_same(ref, got, inst.name)


@pytest.mark.parametrize("method", ["m_etf", "m_sct"])
def test_sequential_comm_matches_the_reference(monkeypatch, method):
    """The compiled sequential m-ETF / m-SCT: the reference's placements, orders, claims, extras; among the
    cases some where link contention sends a chosen cluster back to wait (the reference's second look)."""
    for inst in _cases(30 if method == "m_etf" else 15, 7 + len(method), comm="sequential"):
        for options in ({}, {"colocation_coadjust": False, "fusion": False}):
            ref, got = _both(monkeypatch, lambda: dplace.solve(inst, method, **options))
            _assert_same(ref, got, inst.name)


def test_heap_pops_in_tuple_order():
    from dplace.kernels.etf import _hpop, _hpush

    rng = random.Random(5)
    keys = [(float(rng.randint(0, 3)), float(rng.randint(0, 2)), i) for i in range(300)]
    rng.shuffle(keys)
    H = np.empty((2, 4, 3))
    size = np.zeros(2, dtype=np.int64)
    for k in keys:
        H = _hpush(H, size, 1, k[0], k[1], k[2])
    out = []
    while size[1]:
        out.append((H[1, 0, 0], H[1, 0, 1], int(H[1, 0, 2])))
        _hpop(H, size, 1)
    assert out == sorted(keys) and size[0] == 0


def test_hash_set_against_a_python_set():
    from dplace.kernels.baechi import _hs_add, _hs_del, _hs_has, _hs_new

    rng = random.Random(9)
    keys, cnt = _hs_new(4)
    ref: set[int] = set()
    for _ in range(3000):  # many deletions: the table is rebuilt several times
        k = rng.randrange(40)
        if k in ref:
            _hs_del(keys, cnt, k)
            ref.discard(k)
        else:
            keys = _hs_add(keys, cnt, k)
            ref.add(k)
        assert cnt[0] == len(ref)
    assert [k for k in range(50) if _hs_has(keys, cnt, k)] == sorted(ref)


def test_orders_match_the_reference(monkeypatch):
    from dplace.heuristics.orders import cpd_topo_order, dfs_topo_order

    for inst in _cases(40, 11):
        for f in (cpd_topo_order, dfs_topo_order):
            ref, got = _both(monkeypatch, lambda: f(inst))
            assert got == ref


def test_orders_match_the_reference_on_wide_fans(monkeypatch):
    """Ops with many children (the kernel sorts long runs another way), many equal critical paths."""
    from dplace.heuristics.orders import cpd_topo_order, dfs_topo_order

    rng = random.Random(5)
    for width in (33, 40, 100):
        ops = [Op(f"o{i}", float(rng.choice([1, 2]))) for i in range(2 * width + 1)]
        edges = [Edge("o0", f"o{i}", float(rng.choice([0, 5]))) for i in rng.sample(range(1, width + 1), width)]
        edges += [Edge(f"o{i}", f"o{width + i}") for i in range(1, width + 1) if rng.random() < 0.5]
        inst = Instance(f"fan{width}", [Device("a", 10), Device("b", 10)], ops, edges)
        for f in (cpd_topo_order, dfs_topo_order):
            ref, got = _both(monkeypatch, lambda: f(inst))
            assert got == ref


def _coarse_fields(cz):
    c = cz.coarse
    ops = [(op.id, dict(op.time) if isinstance(op.time, dict) else op.time, op.memory, op.device, op.extra)
           for op in c.ops]
    return (cz.cluster_of, cz.members, cz.oversize, cz.cut_cost, cz.anchor, cz.moved_ops, cz.mem_limit, ops,
            list(c.esrc), list(c.edst), list(c.ebytes), [list(r) for r in c.dur], list(c.pinned))


def test_fusion_and_coarse_graph_match_the_reference(monkeypatch):
    from dplace.heuristics.coarsen import coarsen

    rng = random.Random(12)
    for inst in _cases(40, 12):
        kw = dict(R=rng.choice([1, 2, 3, 7, 200]), M=rng.choice([0.05, 0.25, 1.0]),
                  work_limit=rng.choice([None, 1.0, 4.0, 30.0]), pins_alone=rng.random() < 0.5,
                  anchor_first=rng.random() < 0.5)
        if rng.random() < 0.3:
            kw["max_nodes"] = rng.randint(1, 6)
        ref, got = _both(monkeypatch, lambda: _coarse_fields(coarsen(inst, **kw)))
        assert got == ref, kw


@pytest.mark.parametrize("method", ["celeritas", "order_place", "standard_evaluation"])
def test_celeritas_methods_match_the_reference(monkeypatch, method):
    for inst in _cases(15, 13 + len(method)):
        ref, got = _both(monkeypatch, lambda: dplace.solve(inst, method))
        assert (got.placement, got.order, got.makespan, got.memory_ok) == (
            ref.placement, ref.order, ref.makespan, ref.memory_ok)
        assert _untimed(got.extra) == _untimed(ref.extra)


def test_small_graphs_do_not_load_numba():
    """Below the gate's sizes the reference runs and numba is not even imported (its import alone would
    eat the exact methods' hint budget)."""
    import subprocess
    import sys

    code = ("import sys, dplace; from dplace.testing import contract_instances\n"
            "for inst in contract_instances():\n"
            "    for m in ('m_etf', 'm_sct', 'm_topo', 'celeritas', 'order_place', 'standard_evaluation'):\n"
            "        dplace.solve(inst, m)\n"
            "print('numba' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "False"


def test_adjusting_placement_matches_the_reference(monkeypatch):
    """Alg. 2 on whole graphs (pins, groups, memory pressure), not only on coarse ones."""
    from dplace.heuristics.celeritas import adjusting_placement

    for inst in _cases(40, 21):
        def run():
            pl, st = adjusting_placement(inst)
            return pl, st.order(), st.makespan
        ref, got = _both(monkeypatch, run)
        assert got == ref, inst.name


def test_row_times_columns_equal_per_op_time_maps():
    """Columns whose per-device times are one array (coarse graphs) give the instance that per-op
    ``{device: µs}`` maps give; a bad value is named as the per-op checks name it."""
    from dplace.instance.columns import Columns, RowTimes
    from dplace.errors import InvalidInstanceError

    devs = [Device("a", 100), Device("b", 100, 2.0)]
    t = np.array([[1.0, 2.5], [0.0, 3.0], [4.0, 4.0]])

    def cols(times):
        return Columns(ids=["x", "y", "z"], time=np.full(3, np.nan), mem=np.array([1, 2, 3]),
                       type=np.full(3, -1), pin=np.array([-1, 1, -1]), coloc=np.full(3, -1),
                       src=np.array([0, 1]), dst=np.array([1, 2]), nbytes=np.array([5.0, 0.0]),
                       time_map=RowTimes(times, ["a", "b"]), type_names=[], pin_names=["a", "b"], coloc_names=[])

    got = Instance.from_columns("g", devs, cols(t))
    ref = Instance("g", devs, [Op("x", {"a": 1.0, "b": 2.5}, 1), Op("y", {"a": 0.0, "b": 3.0}, 2, device="b"),
                               Op("z", {"a": 4.0, "b": 4.0}, 3)], [Edge("x", "y", 5.0), Edge("y", "z", 0.0)])
    assert got.dur == ref.dur and got.pinned == ref.pinned and got.ops == ref.ops and got.mem == ref.mem
    bad = t.copy()
    bad[1, 1] = -1.0
    with pytest.raises(InvalidInstanceError, match=r"op 'y': time\['b'\]"):
        Instance.from_columns("g", devs, cols(bad))


def test_forward_of_column_in_npz(tmp_path, monkeypatch):
    """``.npz`` files store ``forward_of`` as op indices: Baechi's pairs come without parsing the ops'
    JSON fields and equal the pairs read from the fields (self references, unknown ids and numbers
    included); files without the column still load and give the same pairs; a bad column is an error."""
    from dplace.errors import InvalidInstanceError
    from dplace.instance.npz import _LazyJSON, load_npz, save_npz

    ops = [Op("a", 1.0), Op("b", 1.0, extra={"forward_of": "a"}), Op("c", 1.0, extra={"forward_of": "c"}),
           Op("7", 1.0, extra={"forward_of": "zz", "x": 1}), Op("d", 1.0, extra={"forward_of": 7})]
    cases = [Instance("f", [Device("g0", 10)], ops, [Edge("a", "b")])] + list(_cases(6, 31))
    for k, inst in enumerate(cases):
        ref = baechi._forward_pairs(inst)
        path = tmp_path / f"i{k}.npz"
        save_npz(inst, path)
        with monkeypatch.context() as mp:
            mp.setattr(_LazyJSON, "items", lambda self: pytest.fail("op fields parsed"))
            assert baechi._forward_pairs(load_npz(path)) == ref
        with np.load(path) as z:
            old = {x: z[x] for x in z.files if x != "forward_of"}
        np.savez(tmp_path / "old.npz", **old)
        again = load_npz(tmp_path / "old.npz")
        assert again.columns.forward_of is None and baechi._forward_pairs(again) == ref
        assert [op.extra for op in again.ops] == [op.extra for op in inst.ops]
    assert baechi._forward_pairs(cases[0]) == [(0, 1), (3, 4)]
    np.savez(tmp_path / "bad.npz", **dict(old, forward_of=np.full(len(old["time"]), len(old["time"]))))
    with pytest.raises(InvalidInstanceError, match="forward_of"):
        load_npz(tmp_path / "bad.npz")


class _ExpiresAfter:
    """A budget for the reference's ``_list_schedule`` (checked before each cluster with ``_CHECK_EVERY`` 1):
    expired once ``k`` clusters are placed (its first look is before the ready queues are built)."""

    def __init__(self, k: int) -> None:
        self.k, self.looks = k, 0

    def expired(self) -> bool:
        self.looks += 1
        return self.looks >= self.k + 2


class _ExpiresAfterPlaced:
    """A budget for the reference's ``_list_schedule`` (``_CHECK_EVERY`` 1): expired once ``k`` clusters are
    placed, counted where the unit rules book them (in sequential comm a step may place nothing: a cluster
    delayed by link contention goes back to wait)."""

    def __init__(self, k: int, ur) -> None:
        self.k, self.placed = k, 0
        assign = ur.assign

        def counted(c: int, d: int) -> None:
            self.placed += 1
            assign(c, d)

        ur.assign = counted

    def expired(self) -> bool:
        return self.placed >= self.k


@pytest.mark.parametrize("sct,comm", [(False, "parallel"), (True, "parallel"), (False, "sequential"),
                                      (True, "sequential")])
def test_a_cut_list_schedule_matches_the_reference(monkeypatch, sct, comm):
    """The compiled list scheduler stopped after k clusters (what its budget's timer does) and completed
    by the deadline rule gives the reference's answer cut after the same k clusters."""
    monkeypatch.setattr(baechi, "_CHECK_EVERY", 1)
    rng = random.Random(11 + sct)
    cuts = 0
    for inst in _cases(25, 21 + sct, comm=comm):
        opts = baechi.BaechiOptions(colocation_coadjust=rng.random() < 0.7)
        monkeypatch.setenv("DPLACE_KERNEL", "python")
        units, cl, _ = baechi._prepare(inst, opts)
        fav = [rng.choice(s) if s and rng.random() < 0.6 else -1 for s in cl.succ] if sct else None
        for k in sorted({0, 1, cl.n // 3, cl.n // 2, max(0, cl.n - 1)}):
            ur = baechi._UnitRules(inst, units, cl, opts.colocation_coadjust)
            budget = _ExpiresAfter(k) if comm == "parallel" else _ExpiresAfterPlaced(k, ur)
            ref = baechi._list_schedule(inst, cl, ur, fav, budget)
            monkeypatch.setenv("DPLACE_KERNEL", "numba")
            ku, ca = baechi._prepare_arrays(inst, opts)
            got = baechi._schedule_arrays(inst, ku, ca, opts.colocation_coadjust,
                                          None if fav is None else np.array(fav), None, stop_after=k)
            monkeypatch.setenv("DPLACE_KERNEL", "python")
            assert got == ref, (inst.name, k)
            cuts += bool(ref[4])
    assert cuts > 20
