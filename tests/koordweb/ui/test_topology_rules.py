"""The topology and device rules the pages rely on, as pure functions (no database)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from koordweb.device_allocated import parse_device_allocation
from koordweb.selectors.topology import LayerSpec, layer_chain, node_domains, offer_slots

SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"
LAYERS = [
    LayerSpec("NodeTopologyLayer", "BlockLayer", ()),
    LayerSpec("BlockLayer", "SpineLayer", (BLOCK,)),
    LayerSpec("SpineLayer", "", (SPINE, "fabric.topograph.run/tier-2")),
]


def test_layer_chain_orders_from_the_top_whatever_the_row_order() -> None:
    assert [layer.name for layer in layer_chain(LAYERS)] == ["SpineLayer", "BlockLayer"]
    assert layer_chain([]) == []


def test_node_domains_follow_koordinator_rules() -> None:
    chain = layer_chain(LAYERS)
    assert node_domains(chain, "n1", {SPINE: "s1", BLOCK: "b1"}) == [
        "SpineLayer/s1",
        "BlockLayer/b1",
    ]
    # The first label key present wins (topograph's labels are accepted too).
    assert (
        node_domains(chain, "n2", {"fabric.topograph.run/tier-2": "t", BLOCK: "b"})[0]
        == "SpineLayer/t"
    )
    # Missing the label just above the node: a virtual domain named after the node.
    assert node_domains(chain, "n3", {SPINE: "s1"}) == ["SpineLayer/s1", "BlockLayer/n3"]
    # Missing a higher label: outside the topology.
    assert node_domains(chain, "n4", {BLOCK: "b1"}) == []


def test_offer_slots_counts_the_scarcest_resource() -> None:
    free = {"nvidia.com/gpu": 8, "cpu": 20000}
    assert offer_slots(free, {"nvidia.com/gpu": 2}) == 4
    assert offer_slots(free, {"nvidia.com/gpu": 2, "cpu": 8000}) == 2
    assert offer_slots(free, {"huawei.com/npu": 1}) == 0
    assert offer_slots({"nvidia.com/gpu": -2}, {"nvidia.com/gpu": 1}) == 0
    assert offer_slots(free, {}) == 0


@settings(max_examples=50, deadline=None)
@given(
    free=st.dictionaries(st.sampled_from(["cpu", "gpu", "mem"]), st.integers(0, 10_000)),
    shape=st.dictionaries(st.sampled_from(["cpu", "gpu", "mem"]), st.integers(1, 500), min_size=1),
)
def test_offer_slots_fit_and_one_more_does_not(free: dict[str, int], shape: dict[str, int]) -> None:
    slots = offer_slots(free, shape)
    assert all(slots * amount <= free.get(name, 0) for name, amount in shape.items())
    assert any((slots + 1) * amount > free.get(name, 0) for name, amount in shape.items())


def test_parse_device_allocation_reads_koordinator_format_and_tolerates_junk() -> None:
    raw = json.dumps(
        {
            "gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": 50}}, {"minor": "x"}],
            "rdma": [
                {"minor": 1, "resources": {"koordinator.sh/rdma": 1}, "extension": {"vfs": []}}
            ],
        }
    )
    assert parse_device_allocation(raw) == [
        ("gpu", 0, {"koordinator.sh/gpu-core": 50}),
        ("rdma", 1, {"koordinator.sh/rdma": 1}),
    ]
    assert parse_device_allocation("{not json") == []
    assert parse_device_allocation(None) == []
    assert parse_device_allocation("[1, 2]") == []
