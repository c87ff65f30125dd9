"""The per-op dispatch cost (dplace.runtime.dispatch): the probe in this process, and the fold into op times."""
import pytest

from dplace.instance.model import Device, Edge, Instance, Op
from dplace.schedule.simulate import simulate


def _inst():
    return Instance("t", [Device("a", 100), Device("b", 100)], [Op("x", 3.0), Op("y", {"a": 1.0, "b": 0.0})],
                    [Edge("x", "y", 0.0)])


def test_with_dispatch_adds_the_cost_to_every_op():
    from dplace.runtime.dispatch import with_dispatch

    inst = _inst()
    out = with_dispatch(inst, 2.5)
    assert out.dur == [[5.5, 5.5], [3.5, 2.5]]
    assert simulate(out, [0, 0]).makespan == simulate(inst, [0, 0]).makespan + 2 * 2.5
    assert with_dispatch(inst, 2.5, 0.25).dur == [[5.5, 5.5], [3.5, 0.25]]  # timed 0: the inline figure
    assert with_dispatch(inst, 0.0) is inst


def test_dispatch_probe_times_a_chain_of_tiny_ops():
    pytest.importorskip("tensorflow")
    from dplace.runtime.dispatch import chain_graph, fit_dispatch_cost

    g, _ = chain_graph(30, "/device:CPU:0")
    assert sum(op.type == "Mul" and op.name.startswith("Mul") for op in g.get_operations()) == 30
    fit = fit_dispatch_cost("", "/device:CPU:0", n=50, rounds=2, steps=3)
    assert 0.0 < fit.kernel_us < 1000.0  # ns resolution: a tiny kernel is not rounded to 0 µs
    assert fit.us == pytest.approx(max(0.0, fit.per_op_us - fit.kernel_us), abs=2e-3)  # each rounded to 1e-3
    assert len(fit.rounds) == 2


def test_fold_dispatch_records_both_fits():
    pytest.importorskip("tensorflow")
    from dplace.runtime.dispatch import fold_dispatch

    out, (inline, heavy) = fold_dispatch(_inst(), "", "/device:CPU:0", rounds=1)
    assert heavy.size == 64 and inline.size == 0 and heavy.kernel_us > inline.kernel_us
    assert out.dur[0][0] == pytest.approx(3.0 + heavy.us) and out.dur[1][1] == pytest.approx(inline.us)
    assert out.extra["tf"]["profile"]["dispatch"]["expensive"]["us"] == heavy.us
