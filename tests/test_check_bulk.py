"""The checker's bulk pass agrees with its rule-by-rule reference: whenever it calls a result valid, the
reference finds no error and the same memory verdict; it recognises the valid results it is given."""
from __future__ import annotations

import copy
import importlib
import random

import pytest

import dplace
from dplace.verify.check_bulk import valid_in_bulk
from dplace.formats import transformer_training
from dplace.testing import random_instance

check_mod = importlib.import_module("dplace.verify.check")  # the module (dplace.check is also the function)


def _reference(inst, data, monkeypatch):
    monkeypatch.setattr(check_mod, "BULK_FROM", 10**12)
    return check_mod.check(inst, data)


def _spoil_transfer(d: dict, rng: random.Random) -> dict:
    """One transfer row changed (sequential comm): moved, shortened, lighter, from another device, dropped
    or sent twice."""
    trs = d["transfers"]
    i = rng.randrange(len(trs))
    t = trs[i]
    kind = rng.randrange(6)
    if kind == 0:
        t["start"] -= 0.5
        t["end"] -= 0.5
    elif kind == 1:
        t["end"] -= 0.25
    elif kind == 2:
        t["bytes"] = t["bytes"] / 2
    elif kind == 3:
        t["src"] = rng.choice(sorted(set(d["placement"].values())))
    elif kind == 4:
        del trs[i]
    else:
        trs.append(dict(t))
    return d


def _spoil(data: dict, rng: random.Random) -> dict:
    d = copy.deepcopy(data)
    if d.get("transfers") and rng.random() < 0.4:
        return _spoil_transfer(d, rng)
    rows = d["schedule"]
    r = rng.choice(rows)
    kind = rng.randrange(6)
    if kind == 0:
        r["start"] -= rng.choice([0.5, 3.0])
    elif kind == 1:
        r["end"] += 0.25
    elif kind == 2:
        dev = rng.choice(sorted(set(d["placement"].values())))
        d["placement"][r["op"]] = dev
        r["device"] = dev
    elif kind == 3:
        d["makespan"] = d["makespan"] + 1.0
    elif kind == 4:
        d["memory_ok"] = not d["memory_ok"]
    else:
        for lst in d["order"].values():
            lst.reverse()
        d["order_given"] = True
    return d


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
@pytest.mark.parametrize("seed", range(60))
def test_bulk_agrees_with_the_rules_one_by_one(seed, comm, monkeypatch):
    rng = random.Random(seed)
    inst = random_instance(rng, n_ops=rng.randint(2, 30), comm=comm, memory_slack=3.0)
    res = dplace.solve(inst, rng.choice(["heft", "m_etf", "single", "dpos"]))
    data = res.to_dict()
    assert valid_in_bulk(inst, data) == _reference(inst, data, monkeypatch).memory_ok
    for _ in range(6 if comm == "sequential" else 4):
        bad = _spoil(data, rng)
        verdict = valid_in_bulk(inst, bad)
        ref = _reference(inst, bad, monkeypatch)
        if verdict is not None:
            assert ref.ok and ref.memory_ok == verdict, (bad, ref.errors)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
def test_large_schedule_goes_through_bulk_and_stays_valid(comm):
    from dplace.verify.check_bulk import valid_result_in_bulk

    inst = transformer_training(1500, 4, seed=2, comm=comm)
    res = dplace.solve(inst, "heft")
    assert inst.n >= check_mod.BULK_FROM and valid_in_bulk(inst, res.to_dict()) is not None
    assert valid_result_in_bulk(inst, res) is not None
    assert check_mod.check(inst, res).ok
    data = res.to_dict()
    data["schedule"][5]["start"] += 1e3
    rep = check_mod.check(inst, data)  # the reference words what bulk would not accept
    assert not rep.ok and data["schedule"][5]["op"] in rep.summary()
    if comm == "sequential":
        data = res.to_dict()
        t = data["transfers"][3]
        t["end"] += 1e3
        rep = check_mod.check(inst, data)
        assert valid_in_bulk(inst, data) is None and not rep.ok and t["op"] in rep.summary()


def _spoil_result(res, rng: random.Random):
    """A Result object with one number changed (start, end, device, makespan, memory verdict, order)."""
    from dataclasses import replace

    from dplace.schedule.simulate import Schedule

    s = res.schedule
    f = dict(placement=list(res.placement), start=list(s.start), end=list(s.end), transfers=list(s.transfers),
             makespan=s.makespan, memory=list(s.memory), memory_ok=s.memory_ok, order=[list(x) for x in s.order])
    o = rng.randrange(res.instance.n)
    kind = rng.randrange(6)
    order = res.order
    if kind == 0:
        f["start"][o] -= rng.choice([0.5, 3.0])
    elif kind == 1:
        f["end"][o] += 0.25
    elif kind == 2:
        f["placement"][o] = rng.randrange(res.instance.m)
    elif kind == 3:
        f["makespan"] += 1.0
    elif kind == 4:
        f["memory_ok"] = not f["memory_ok"]
    else:
        order = [list(reversed(x)) for x in s.order]
    return replace(res, placement=f["placement"], schedule=Schedule(**f), order=order)


@pytest.mark.parametrize("comm", ["parallel", "sequential"])
@pytest.mark.parametrize("seed", range(20))
def test_bulk_on_result_objects_agrees_with_the_rules_one_by_one(seed, comm, monkeypatch):
    from dplace.verify.check_bulk import valid_result_in_bulk

    rng = random.Random(100 + seed)
    inst = random_instance(rng, n_ops=rng.randint(2, 30), comm=comm, memory_slack=3.0)
    res = dplace.solve(inst, rng.choice(["heft", "m_etf", "single", "dpos"]))
    assert valid_result_in_bulk(inst, res) == _reference(inst, res.to_dict(), monkeypatch).memory_ok
    for _ in range(6):
        bad = _spoil_result(res, rng)
        verdict = valid_result_in_bulk(inst, bad)
        ref = _reference(inst, bad.to_dict(), monkeypatch)
        if verdict is not None:
            assert ref.ok and ref.memory_ok == verdict, ref.errors
