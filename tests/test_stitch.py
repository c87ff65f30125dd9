"""stitch: the segment bound's schedules put together into a schedule of the whole instance."""
import random

import pytest

from dplace.bounds_segments import segment_bound
from dplace.check import check
from dplace.formulations.stitch import stitch
from dplace.result import make_result
from dplace.simulate import simulate

from dplace.testing import series_composition

pytestmark = pytest.mark.solver  # the segment bound runs CP-SAT


@pytest.mark.parametrize("seed,blocks", [(1, [4] * 8), (2, [5, 3, 4, 5, 4, 3, 5, 4, 5, 4, 3])])
def test_stitch_reaches_the_optimum_of_series_compositions(seed, blocks):
    # every block is a segment solved exactly (test_bounds proves the optimum is the sum of the blocks'):
    # placed back to back, the pieces' schedules are an optimal schedule of the whole
    inst, opt = series_composition(random.Random(seed), blocks)
    sols = []
    segment_bound(inst, time_limit_s=20.0, solutions=sols)
    assert sols and all(len(s["members"]) == len(s["placement"]) == len(s["start"]) for s in sols)
    pl, od = stitch(inst, sols)
    res = make_result(inst, "stitch", pl, od)
    assert check(inst, res).ok
    assert res.makespan == pytest.approx(opt)


def test_stitch_keeps_colocation_and_memory():
    from dplace.formats.generate import transformer_training

    inst = transformer_training(400, 3, seed=2)
    sols = []
    segment_bound(inst, time_limit_s=5.0, segment_time_s=0.5, solutions=sols)
    pl, od = stitch(inst, sols)
    assert min(pl) >= 0
    for g in inst.groups:
        assert len({pl[o] for o in g}) == 1
    s = simulate(inst, pl, od)
    assert s.memory_ok
    assert check(inst, make_result(inst, "stitch", pl, od)).ok
