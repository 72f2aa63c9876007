"""The topology and device rules the pages rely on, as pure functions (no database)."""

from __future__ import annotations

import json

from koordweb.device_allocated import parse_device_allocation
from koordweb.manifests.topology import Layer, build_tree

SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"
LAYERS = [
    Layer("NodeTopologyLayer", "BlockLayer", ()),
    Layer("BlockLayer", "SpineLayer", (BLOCK,)),
    Layer("SpineLayer", "", (SPINE, "fabric.topograph.run/tier-2")),
]


def test_the_tree_orders_layers_from_the_top_whatever_the_row_order() -> None:
    assert build_tree(LAYERS, []).layers == ["SpineLayer", "BlockLayer"]
    assert build_tree([], [("n1", {})]).layers == []


def test_node_domains_follow_koordinator_rules() -> None:
    nodes = [
        ("n1", {SPINE: "s1", BLOCK: "b1"}),
        # The first label key present wins (topograph's labels are accepted too).
        ("n2", {"fabric.topograph.run/tier-2": "t", BLOCK: "b"}),
        # Missing the label just above the node: a virtual domain named after the node.
        ("n3", {SPINE: "s1"}),
        # Missing a higher label: outside the topology.
        ("n4", {BLOCK: "b1"}),
    ]
    tree = build_tree(LAYERS, nodes)
    assert tree.domain_labels(1) == ["SpineLayer/s1", "SpineLayer/t"]
    assert tree.domain_labels(2) == ["BlockLayer/b", "BlockLayer/b1", "BlockLayer/n3"]
    assert tree.outside.tolist() == [False, False, False, True]


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
