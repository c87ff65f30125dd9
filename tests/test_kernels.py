"""The kernels' array form of an instance says what the instance says (edges, CSR lists, groups, links)."""
import random

import numpy as np

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


def test_switch(monkeypatch):
    monkeypatch.setenv("DPLACE_KERNEL", "python")
    assert not kernels.enabled()
    monkeypatch.setenv("DPLACE_KERNEL", "numba")
    assert kernels.enabled()
    f = kernels.njit(lambda x: x * 2.0)
    assert f(np.float64(1.5)) == 3.0


def test_arrays_of_a_loaded_npz_build_no_per_op_lists(tmp_path):
    from dplace.io import load_instance
    from dplace.npz import save_npz

    inst = random_instance(random.Random(5))
    save_npz(inst, tmp_path / "x.npz")
    loaded = load_instance(tmp_path / "x.npz")
    a = kernels.inst_arrays(loaded)
    lists = ("dur", "mem", "esrc", "edst", "ebytes", "pred", "succ", "topo", "topo_pos", "pinned", "group_of",
             "groups", "op_index")
    assert not [k for k in lists if k in loaded.__dict__]
    _check(loaded)
    assert a.dur.tolist() == [list(r) for r in inst.dur] and a.pinned.tolist() == list(inst.pinned)
