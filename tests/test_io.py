"""dplace.instance.io: the instance JSON format round-trips, and files are written whole or not at all."""
import json

import pytest
from hypothesis import given, settings

from dplace.errors import InvalidInstanceError
from dplace.instance.io import instance_from_dict, instance_to_dict, load_instance, save_instance, write_atomic_many
from dplace.testing import contract_instances, instances


@settings(max_examples=40, deadline=None)
@given(instances())
def test_instance_json_round_trip(inst):
    again = instance_from_dict(json.loads(json.dumps(instance_to_dict(inst))))
    assert instance_to_dict(again) == instance_to_dict(inst)
    assert (again.dur, again.mem, again.capacity, again.pinned, again.groups) == \
        (inst.dur, inst.mem, inst.capacity, inst.pinned, inst.groups)


def test_save_and_load_give_an_equal_instance(tmp_path):
    for inst in contract_instances():
        p = tmp_path / f"{inst.name}.json"
        save_instance(inst, p)
        assert instance_to_dict(load_instance(p)) == instance_to_dict(inst)


def test_a_failing_output_leaves_no_file_behind(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(InvalidInstanceError, match="is a directory"):
        write_atomic_many([(tmp_path / "a.json", "{}"), (tmp_path / "dir.json", "{}")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir.json"]


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(InvalidInstanceError, match=r"instance '.*nope.json': no such file"):
        load_instance(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(InvalidInstanceError, match=r"instance '.*bad.json': not JSON"):
        load_instance(bad)
