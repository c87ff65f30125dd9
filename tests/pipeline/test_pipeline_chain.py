"""The dplace-chain/1 format and the converters into it."""
from __future__ import annotations

import pytest
from pipeline_helpers import CHAINS, PROFILES

from dplace.errors import InvalidInstanceError
from dplace.pipeline import (chain_from_dict, chain_from_instance, chain_from_pipedream, chain_to_dict, load_chain,
                             make_chain, save_chain)


def test_chain_roundtrip(tmp_path):
    c = make_chain([(1, 2), (3, 4)], weights=[5, 6], activations=[7, 8], processors=3, memory=100, bandwidth=2.0)
    p = tmp_path / "c.json"
    save_chain(c, p)
    back = load_chain(p)
    assert back == c
    assert chain_to_dict(back)["format"] == "dplace-chain/1"


@pytest.mark.parametrize("data, msg", [
    ({"layers": []}, "at least one layer"),
    ({"format": "x", "layers": [{"id": "a", "forward": 1, "backward": 1}]}, "format must be"),
    ({"layers": [{"id": "a", "forward": -1, "backward": 1}]}, "layer 'a': forward must be >= 0, got -1"),
    ({"layers": [{"id": "a", "forward": 1}]}, "layer 'a': missing field 'backward'"),
    ({"layers": [{"id": "a", "forward": 1, "backward": 1}, {"id": "a", "forward": 1, "backward": 1}]}, "duplicate"),
    ({"layers": [{"id": "a", "forward": 1, "backward": 1}], "processors": 0}, "processors must be an integer >= 1, got 0"),
    ({"layers": [{"id": "a", "forward": 1, "backward": 1}], "bandwidth": 0}, "bandwidth must be > 0, got 0"),
    ({"layers": [{"id": "a", "forward": "x", "backward": 1}]}, "layer 'a': forward must be a number, got 'x'"),
])
def test_chain_errors_name_field_and_value(data, msg):
    with pytest.raises(InvalidInstanceError) as ei:
        chain_from_dict(data)
    assert msg in str(ei.value) and "\n" not in str(ei.value)


def test_pipedream_converter_matches_bundled():
    c = chain_from_pipedream(PROFILES / "gnmt.graph.txt", processors=4)
    assert c.L == 48
    assert c == load_chain(CHAINS / "gnmt.json")
    # times ms -> µs; a list of output sizes is summed
    assert all(float(x).is_integer() for x in c.u)


def test_bundled_chains_load():
    files = sorted(CHAINS.glob("*.json"))
    assert len(files) == 11 and (CHAINS / "LICENSE-pipedream.txt").exists()
    for f in files:
        assert load_chain(f).L >= 20


def test_chain_from_instance_pairs_backward_twins():
    from dplace.instance.io import instance_from_dict

    inst = instance_from_dict({
        "format": "dplace-instance/1", "devices": [{"name": "d0", "memory": 100}, {"name": "d1", "memory": 80}],
        "ops": [{"id": "f1", "time": 2, "memory": 3}, {"id": "f2", "time": 4, "memory": 1},
                {"id": "b2", "time": 5, "forward_of": "f2"}, {"id": "b1", "time": 6, "forward_of": "f1"},
                {"id": "upd", "time": 1, "memory": 2}],
        "edges": [{"src": "f1", "dst": "f2", "bytes": 10}, {"src": "f2", "dst": "b2", "bytes": 7},
                  {"src": "b2", "dst": "b1", "bytes": 10}, {"src": "f1", "dst": "b1", "bytes": 10},
                  {"src": "b1", "dst": "upd", "bytes": 1}],
    })
    c = chain_from_instance(inst)
    assert [ly.id for ly in c.layers] == ["f1", "f2"]
    assert c.uf == [2, 4] and c.ub == [6 + 1, 5]  # the update joins b1's layer
    assert c.a == [10, 0] and c.w == [0, 1]  # f1: 3 + upd 2 - its kept output 10 -> 0
    assert c.processors == 2 and c.memory == 80


def test_pipedream_profile_order_and_cycle(tmp_path):
    node = "node{} -- Op -- forward_compute_time=1, backward_compute_time=2, activation_size={}, parameter_size=0"
    lines = [node.format(3, 5), node.format(1, 6), node.format(2, 7), node.format(10, 8)]
    f = tmp_path / "p.graph.txt"
    f.write_text("\n".join(lines + ["\tnode1 -- node3", "\tnode2 -- node3", "\tnode3 -- node10"]) + "\n")
    c = chain_from_pipedream(f)  # ready node with the smallest number first: 1, 2, then 3, 10
    assert [ly.id for ly in c.layers] == ["node1", "node2", "node3", "node10"]
    assert c.uf == [1000.0] * 4 and c.a == [6, 7, 5, 8]
    f.write_text("\n".join(lines + ["\tnode1 -- node3", "\tnode3 -- node10", "\tnode10 -- node3"]) + "\n")
    with pytest.raises(InvalidInstanceError, match=r"graph has a cycle through 'node(3|10)'") as ei:
        chain_from_pipedream(f)
    assert "p.graph.txt" in str(ei.value) and "\n" not in str(ei.value)
