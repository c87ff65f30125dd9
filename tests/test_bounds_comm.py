"""Dominance of the comm modes (dplace/bounds/__init__.py, "Comm modes"): a sequential-comm schedule is no
faster than the parallel model's schedule of the same placement and order, so every parallel-comm bound is a
sequential-comm bound. Checked: the brute-force optima of both modes; the parallel copy's cheap bound against
the sequential optimum (``audit_bound``); each cheap part and the segment bound of a sequential instance at
least the same part of its parallel copy (random instances and the bundled graphs)."""
import os
import random

import pytest

from dplace.bounds import lower_bound, lower_bound_parts
from dplace.bounds import check_memory_feasible
from dplace.errors import InfeasibleError, InvalidInstanceError
from dplace.formulations.bounds_segments import segment_bound
from dplace.instance.io import load_instance
from dplace.testing import audit_bound, random_instance
from dplace.verify.oracle import brute_force

TOL = 1e-6
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pairs(seed: int, count: int, ops: tuple[int, int] = (2, 6)):
    """(sequential, parallel) copies of random instances (those memory does not rule out)."""
    rng = random.Random(seed)
    for _ in range(count):
        try:
            inst = random_instance(rng, n_ops=rng.randint(*ops), n_devices=rng.randint(2, 3), comm="sequential")
            check_memory_feasible(inst)
        except (InvalidInstanceError, InfeasibleError):
            continue
        yield inst, inst.replace(comm="parallel")


def test_parallel_optimum_at_most_the_sequential_one_and_its_bound_too():
    """The brute force's optimum in parallel comm is at most the sequential one (the dominance itself), and
    the parallel copy's cheap bound is never above the sequential optimum."""
    compared = 0
    for seq, par in _pairs(71, 80):
        a, b = brute_force(seq), brute_force(par)
        if a.optimum is None:
            continue
        assert b.optimum is not None and b.optimum <= a.optimum + TOL * max(1.0, a.optimum), (seq.name, a.optimum,
                                                                                             b.optimum)
        compared += 1
    assert compared >= 50
    checked, _, positive = audit_bound((s for s, _ in _pairs(72, 80)), lambda i: lower_bound(i.replace(comm="parallel")),
                                       "parallel_copy")
    assert checked >= 50 and positive >= 40


def _at_least(seq, par) -> None:
    ps, pp = lower_bound_parts(seq), lower_bound_parts(par)
    assert set(ps) == set(pp)
    for k, v in pp.items():
        assert ps[k] >= v - TOL * max(1.0, v), (seq.name, k, ps[k], v)
    assert lower_bound(seq) >= lower_bound(par) - TOL * max(1.0, lower_bound(par))


def test_each_cheap_part_in_sequential_comm_is_at_least_the_parallel_one():
    n = 0
    for seq, par in _pairs(73, 300, ops=(2, 12)):
        _at_least(seq, par)
        n += 1
    assert n >= 250


@pytest.mark.parametrize("name", ["inceptionv3_training_4dev", "bert12_training_4dev", "resnet50_training_4dev"])
def test_bundled_graphs_cheap_parts_in_sequential_comm_at_least_the_parallel_ones(name):
    par = load_instance(os.path.join(ROOT, "instances", f"{name}.json"))
    _at_least(par.replace(comm="sequential"), par)


def test_segment_bound_in_sequential_comm_at_least_the_parallel_one():
    """Step 1 of the segment bound relaxes sequential comm to parallel and step 5 adds ``fan_in``: on
    instances whose segments CP-SAT solves, the sequential value is at least the parallel one."""
    n = 0
    for seq, par in _pairs(74, 30, ops=(6, 12)):
        a, b = segment_bound(seq, time_limit_s=10.0), segment_bound(par, time_limit_s=10.0)
        if a.proven_optimal < a.n_segments or b.proven_optimal < b.n_segments:
            continue
        assert a.best[0] >= b.best[0] - TOL * max(1.0, b.best[0]), (seq.name, a.best, b.best)
        n += 1
    assert n >= 15


@pytest.mark.parametrize("integer", [True, False])
def test_segment_bound_solving_pieces_in_sequential_comm_stays_below_the_brute_force(integer):
    """Step 7 of the segment bound (each piece also solved in sequential comm, without the zero-byte edges
    through dropped ops) against the oracle's sequential optimum, with windows that drop ops (0) and keep
    them (2); and on some instances the sequential piece proves more than the parallel one."""
    rng = random.Random(81 if integer else 82)
    sees = []

    def made():
        for _ in range(70):
            try:
                inst = random_instance(rng, n_ops=rng.randint(4, 7), n_devices=rng.randint(2, 3), comm="sequential",
                                       edge_prob=0.4, integer=integer)
                check_memory_feasible(inst)
            except (InvalidInstanceError, InfeasibleError):
                continue
            yield inst

    def bound(inst):
        out = 0.0
        for w in (0, 2):
            sb = segment_bound(inst, windows=(w,), time_limit_s=5.0, seq_pieces=True)
            sees.append(any(p.get("sequential_us") is not None and p["sequential_us"] > p["parallel_us"] + 1e-9
                            for p in sb.pieces))
            out = max(out, sb.best[0])
        return out

    checked, _, positive = audit_bound(made(), bound, "segments")
    assert checked >= 40 and positive >= 30
    assert sum(sees) >= 2


def test_segment_bound_sequential_pieces_off_in_parallel_comm_and_by_default():
    """Parallel comm never runs step 7; by default (``seq_pieces=False``) the sequential bound stays at steps
    1-6, and with it on the bound is no lower."""
    for seq, par in _pairs(84, 20, ops=(5, 7)):
        assert all(p.get("sequential_us") is None
                   for p in segment_bound(par, windows=(0,), time_limit_s=5.0, seq_pieces=True).pieces)
        a = segment_bound(seq, windows=(0,), time_limit_s=5.0, seq_pieces=True)
        b = segment_bound(seq, windows=(0,), time_limit_s=5.0)
        assert all(p.get("sequential_us") is None for p in b.pieces)
        assert a.value >= b.value - TOL * max(1.0, b.value)
