"""The kernels' array form of an instance says what the instance says (edges, CSR lists, groups, links)."""
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from dplace import kernels
from dplace.testing import contract_instances, random_instance


def _check(inst):
    a = kernels.inst_arrays(inst)
    assert kernels.inst_arrays(inst) is a  # built once
    assert (a.n, a.m) == (inst.n, inst.m)
    assert a.dur.shape == (inst.n, inst.m) and a.dur.tolist() == [list(r) for r in inst.dur]
    assert a.mem.tolist() == list(inst.mem) and a.capacity.tolist() == list(inst.capacity)
    assert a.esrc.tolist() == list(inst.esrc) and a.edst.tolist() == list(inst.edst)
    assert a.ebytes.tolist() == [float(b) for b in inst.ebytes]
    for o in range(inst.n):
        assert a.pred_edge[a.pred_ptr[o]:a.pred_ptr[o + 1]].tolist() == list(inst.pred[o])
        assert a.succ_edge[a.succ_ptr[o]:a.succ_ptr[o + 1]].tolist() == list(inst.succ[o])
    for g, members in enumerate(inst.groups):
        assert a.group_members[a.group_ptr[g]:a.group_ptr[g + 1]].tolist() == list(members)
    assert a.group_of.tolist() == list(inst.group_of) and a.pinned.tolist() == list(inst.pinned)
    assert a.lat.tolist() == [list(r) for r in inst.lat] and a.bw.tolist() == [list(r) for r in inst.bw]
    assert a.topo.tolist() == list(inst.topo) and a.topo_pos.tolist() == list(inst.topo_pos)
    assert a.sequential == (inst.comm == "sequential")
    # the edges' own fields, not the instance's lists: edge e goes from op esrc[e] to op edst[e]
    ids = [op.id for op in inst.ops]
    assert [ids[u] for u in a.esrc.tolist()] == [ed.src for ed in inst.edges]
    assert [ids[v] for v in a.edst.tolist()] == [ed.dst for ed in inst.edges]
    for o in range(inst.n):
        assert a.pred_edge[a.pred_ptr[o]:a.pred_ptr[o + 1]].tolist() == [
            e for e, ed in enumerate(inst.edges) if ed.dst == ids[o]]


def test_arrays_match_the_instance():
    rng = random.Random(3)
    for inst in list(contract_instances()) + [random_instance(rng) for _ in range(30)]:
        _check(inst)


def test_one_policy_by_size_and_one_setting(monkeypatch):
    """kernels.use decides everywhere: DPLACE_KERNEL=python never, numba at every size, else by size."""
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    assert not any(kernels.use(n, kind) for n in (0, 10**7) for kind in kernels.FROM)
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    assert all(kernels.use(n, kind) for n in (0, 10**7) for kind in kernels.FROM)
    monkeypatch.delenv("DPLACE_KERNEL")
    for kind, at in kernels.FROM.items():
        assert kernels.use(at, kind) and (at == 0 or not kernels.use(at - 1, kind) or kind == "graph")
    monkeypatch.setitem(sys.modules, "numba", sys.modules.get("numba") or object())
    assert kernels.use(kernels.WARM_FROM, "graph") and not kernels.use(kernels.WARM_FROM - 1, "graph")
    assert not kernels.use(kernels.WARM_FROM, "large")


def test_no_other_place_reads_the_setting():
    root = Path(__file__).resolve().parents[2]
    readers = [p.relative_to(root).as_posix() for d in ("dplace", "heuristics", "formulations", "pipeline", "runtime")
               for p in (root / d).rglob("*.py") if '"DPLACE_KERNEL"' in p.read_text()]
    assert readers == ["dplace/kernels/__init__.py"]


def test_switch(monkeypatch):
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    assert not kernels.enabled()
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    assert kernels.enabled()
    f = kernels.njit(lambda x: x * 2.0)
    assert f(np.float64(1.5)) == 3.0


def test_arrays_of_a_loaded_npz_build_no_per_op_lists(tmp_path):
    from dplace.instance.io import load_instance
    from dplace.instance.npz import save_npz

    inst = random_instance(random.Random(5))
    save_npz(inst, tmp_path / "x.npz")
    loaded = load_instance(tmp_path / "x.npz")
    a = kernels.inst_arrays(loaded)
    lists = ("dur", "mem", "esrc", "edst", "ebytes", "pred", "succ", "topo", "topo_pos", "pinned", "group_of",
             "groups", "op_index")
    assert not [k for k in lists if k in loaded.__dict__]
    _check(loaded)
    assert a.dur.tolist() == [list(r) for r in inst.dur] and a.pinned.tolist() == list(inst.pinned)


# ---------------------------------------------------------------------- the compiled simulator
def _same_schedule(inst, placement, order=None):
    """The compiled event loop and the reference (``DPLACE_KERNEL=python``) time it identically."""
    import os

    import importlib

    sim_mod = importlib.import_module("dplace.schedule.simulate")

    def run(kernel):
        os.environ["DPLACE_KERNEL"] = "numba" if kernel else "python"  # numba: the kernels at every size
        try:
            return sim_mod.simulate(inst, placement, order)
        except Exception as exc:  # noqa: BLE001 - the same error, worded the same
            return f"{type(exc).__name__}: {exc}"
        finally:
            os.environ.pop("DPLACE_KERNEL")

    ref, got = run(False), run(True)
    if isinstance(ref, str):
        assert got == ref
        return None
    assert isinstance(got, sim_mod.ArraySchedule)
    assert got.start == ref.start and got.end == ref.end and got.makespan == ref.makespan
    assert got.transfers == ref.transfers and got.order == ref.order and got.placement == ref.placement
    assert got.memory == ref.memory and got.memory_ok == ref.memory_ok
    return ref


def _random_linear_order(inst, pl, rng):
    """Per device, its ops in one random topological order of the graph (a valid order)."""
    indeg = [len(p) for p in inst.pred]
    ready = [o for o in range(inst.n) if not indeg[o]]
    lists = [[] for _ in range(inst.m)]
    while ready:
        o = ready.pop(rng.randrange(len(ready)))
        lists[pl[o]].append(o)
        for e in inst.succ[o]:
            v = inst.edst[e]
            indeg[v] -= 1
            if not indeg[v]:
                ready.append(v)
    return lists


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_compiled_simulator_equals_the_reference(comm):
    from dplace.instance.io import instance_from_dict, instance_to_dict, load_instance
    from pathlib import Path

    def with_comm(i):
        return instance_from_dict({**instance_to_dict(i), "comm": comm})

    rng = random.Random(11)
    insts = [i for i in contract_instances() if i.comm == "parallel"]
    insts += [load_instance(p) for p in sorted(Path(__file__).parents[2].glob("instances/*.json"))]
    insts = [i if i.comm == comm else with_comm(i) for i in insts if i.n <= 3000 and not i.transfer_cpu]
    insts += [random_instance(rng, comm=comm, n_ops=rng.randint(1, 40), integer=rng.random() < 0.7,
                              edge_prob=rng.choice([0.1, 0.3]), n_devices=rng.randint(1, 4)) for _ in range(60)]
    for inst in insts:
        for _ in range(2):
            pl = [rng.randrange(inst.m) for _ in range(inst.n)]
            ref = _same_schedule(inst, pl)
            _same_schedule(inst, np.array(pl), [np.array(x) for x in ref.order])
            lists = _random_linear_order(inst, pl, rng)
            _same_schedule(inst, pl, lists)
            if inst.n >= 2 and inst.succ[inst.topo[0]]:  # a consumer listed before its producer: deadlock
                u = inst.topo[0]
                v = inst.edst[inst.succ[u][0]]
                pl2 = list(pl)
                pl2[v] = pl[u]
                bad = [[o for o in x if o != v] for x in _random_linear_order(inst, pl2, rng)]
                bad[pl[u]].insert(bad[pl[u]].index(u), v)
                _same_schedule(inst, pl2, bad)
        _same_schedule(inst, [inst.m] * inst.n)  # unknown device: the same message
        _same_schedule(inst, [0] * inst.n, [[]] * inst.m)  # ops missing from the order


def test_a_changed_kernel_source_clears_the_compiled_cache(tmp_path):
    """numba checks only the cached function's own file; a change in any kernel source must drop every
    cached kernel (a caller in one file inlines or calls code of another)."""
    from dplace.kernels import clear_stale_cache

    src = tmp_path / "state.py"
    src.write_text("x = 1\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    (cache / "lists.heft_loop-1.py311.nbi").write_text("old")
    (cache / "lists.heft_loop-1.py311.1.nbc").write_text("old")
    (cache / "other.pyc").write_text("keep")
    assert clear_stale_cache(str(cache), [str(src)])  # no stamp yet: cleared
    assert sorted(p.name for p in cache.iterdir()) == ["dplace-kernels.stamp", "other.pyc"]
    (cache / "lists.heft_loop-1.py311.nbi").write_text("new")
    assert not clear_stale_cache(str(cache), [str(src)])  # same sources: kept
    assert (cache / "lists.heft_loop-1.py311.nbi").exists()
    src.write_text("x = 2\n")
    assert clear_stale_cache(str(cache), [str(src)])  # a source changed: cleared
    assert not (cache / "lists.heft_loop-1.py311.nbi").exists() and (cache / "other.pyc").exists()


def test_op_and_edge_costs_on_arrays_equal_the_reference():
    """kernels.levels' costs (the twin) and dplace.schedule.ranks' (the reference): the same floats."""
    from dplace.kernels import levels
    from dplace.schedule import ranks

    rng = random.Random(21)
    insts = list(contract_instances()) + [random_instance(rng, n_devices=rng.randint(1, 5)) for _ in range(40)]
    for inst in insts:
        a = kernels.inst_arrays(inst)
        for how in ("mean", "max", "zero"):
            assert levels.edge_costs(a, how).tolist() == ranks.edge_costs(inst, how), how
        for how in ("mean", "max", "min"):
            assert levels.op_costs(a.dur, how).tolist() == ranks.op_costs(inst, how), how
        for op_cost, comm_cost in (("mean", "mean"), ("max", "max"), ("min", "zero")):
            assert ranks.upward_rank_array(inst, op_cost, comm_cost).tolist() == ranks.upward_rank(inst, op_cost, comm_cost)
