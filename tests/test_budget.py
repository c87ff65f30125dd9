"""The one time budget (dplace.Budget): children never end after their parent, shares and reserves,
an injected clock (no test waits or times anything), and the registry handing it to the methods."""
import math

import pytest

import dplace
from dplace.budget import Budget, within


class FakeClock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_left_expired_elapsed_on_an_injected_clock():
    c = FakeClock()
    b = Budget(10.0, clock=c)
    assert b.limited and b.left() == 10.0 and b.deadline == 110.0 and b.limit_s == 10.0
    c.t += 4.0
    assert b.left() == 6.0 and b.elapsed() == 4.0 and not b.expired()
    c.t += 7.0
    assert b.left() == 0.0 and b.expired()  # never negative


def test_unlimited():
    for b in (Budget(), Budget(None), Budget.unlimited()):
        assert b.left() == math.inf and not b.expired() and not b.limited and b.limit_s is None
        assert b.share(0.5).left() == math.inf and b.child(reserve=3.0).left() == math.inf
        assert b.child(seconds=2.0).left() == pytest.approx(2.0, abs=0.5)


def test_share_and_child_never_outlive_the_parent():
    c = FakeClock()
    b = Budget(10.0, clock=c)
    c.t += 2.0
    s = b.share(0.25)
    assert s.left() == pytest.approx(2.0) and s.deadline == pytest.approx(104.0)
    assert b.child(seconds=3.0).deadline == 105.0
    assert b.child(seconds=30.0).deadline == b.deadline  # capped by the parent
    assert b.child(reserve=1.5).deadline == 108.5
    assert b.child(seconds=3.0, reserve=7.0).deadline == 103.0  # the reserve wins (110 - 7)
    assert b.child(seconds=1.0, reserve=7.0).deadline == 103.0  # ... or the seconds
    assert b.child(reserve=50.0).expired()  # a reserve larger than what is left: nothing left, not negative
    grand = s.child(seconds=100.0)
    assert grand.deadline == s.deadline
    c.t += 2.0
    assert s.expired() and not b.expired() and b.left() == 6.0
    with pytest.raises(ValueError):
        b.share(1.5)


def test_resolve_what_a_method_does_with_its_keywords():
    c = FakeClock()
    given = Budget(10.0, clock=c)
    assert Budget.resolve(given) is given
    assert Budget.resolve(given, time_limit_s=3.0).deadline == 103.0
    assert Budget.resolve(None, 5.0).limit_s == pytest.approx(5.0, abs=0.5)
    assert not Budget.resolve(None, None).limited
    assert Budget.resolve(None, None, default_s=60.0).limit_s == pytest.approx(60.0, abs=0.5)
    free = Budget.unlimited(clock=c)
    assert Budget.resolve(free, None, default_s=60.0).deadline == 160.0  # a method's default applies
    with pytest.raises(ValueError):
        Budget("3")


def test_on_expiry_calls_back_only_past_the_deadline():
    import threading

    hit = threading.Event()
    with Budget(0.0).on_expiry(hit.set):
        assert hit.wait(5.0)  # an expired budget fires at once
    missed = threading.Event()
    with Budget(3600.0).on_expiry(missed.set):
        pass
    assert not missed.is_set()  # cancelled when the block ends first
    with Budget.unlimited().on_expiry(missed.set):
        pass
    assert not missed.is_set()


def test_within_is_the_readme_promise():
    assert within(20.0, 22.0) and not within(20.0, 22.01)
    assert within(5.0, 6.0) and not within(5.0, 6.01)
    assert within(60.0, 66.0) and not within(60.0, 66.1)


def test_solve_hands_one_budget_to_the_method_and_times_on_its_clock():
    seen = {}

    @dplace.register("_budget_probe")
    def probe(inst, *, time_limit_s=None, seed=0, budget=None):
        seen["budget"], seen["limit"] = budget, time_limit_s
        if isinstance(budget.clock, FakeClock):
            budget.clock.t += 3.0  # the method "takes" 3 s of the injected clock
        return dplace.get_method("heft")(inst)

    try:
        inst = dplace.load_instance("instances/bert12_training_4dev.json")
        c = FakeClock()
        res = dplace.solve(inst, "_budget_probe", budget=Budget(10.0, clock=c))
        assert isinstance(seen["budget"], Budget) and seen["budget"].deadline == 110.0
        assert seen["limit"] == pytest.approx(10.0)
        assert res.solve_time_s == pytest.approx(3.0)  # measured on the budget's clock
        dplace.solve(inst, "_budget_probe", time_limit_s=7.0)
        assert seen["budget"].limit_s == pytest.approx(7.0, abs=0.5)
        with pytest.raises(dplace.InvalidInstanceError):
            dplace.solve(inst, "_budget_probe", budget=7.0)
    finally:
        from dplace import registry

        registry._METHODS.pop("_budget_probe", None)


def test_budget_is_exported():
    assert dplace.Budget is Budget


def test_no_remaining_time_computed_by_hand():
    """Time flows one way: the product's phases ask a Budget how much is left; nobody adds a limit to a
    clock reading or subtracts one from a deadline by hand. (Process watchdogs that kill a solver child
    a grace after its limit keep their own stopwatch: formulations/highs_worker.py, milp._run_cbc, the
    bench harness in dplace/study.)"""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    pattern = re.compile(r"(perf_counter|monotonic)\(\) *\+ *\w*(limit|left|budget)|deadline *- *time\.|"
                         r"time_limit_s *- *\(|limit *- *\(time\.")
    found = []
    for pkg in ("dplace", "formulations", "heuristics", "pipeline"):
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in ("dplace/budget.py", "formulations/highs_worker.py") or rel.startswith("dplace/study/"):
                continue
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if pattern.search(line):
                    found.append(f"{rel}:{i}: {line.strip()}")
    assert not found, "\n".join(found)


def test_every_registered_method_takes_a_budget():
    from dplace.registry import method_info, methods, takes_budget

    assert [m for m in methods() if not takes_budget(method_info(m).func)] == []
