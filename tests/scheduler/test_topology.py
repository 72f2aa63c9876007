"""The topology tree, the reference placement walk, its failure message and the profile options."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from scheduler import plan_round
from scheduler.model import LayerGather, TopologyLayerSpec, TopologyRule, TopologySpec
from scheduler.placement import NodeScores, PlacementOptions, PlacementOutcome, place
from scheduler.profile import Profile
from scheduler.topology import TopologyTree, detail_status
from tests.scheduler.builders import CORE, REFERENCE, SPINE_BLOCK, cluster, gang, node, pod, t8


def test_node_without_block_label_gets_a_virtual_block_and_without_spine_is_outside() -> None:
    c = cluster().topology(SPINE_BLOCK)
    c.node(node("n1").cpu(8).spine("s1").block("b1"), node("n2").cpu(8).spine("s1"))
    c.node(node("n3").cpu(8).block("b9"))
    snap = c.snapshot()
    tree = TopologyTree.build(snap.topology, sorted(snap.nodes, key=lambda n: n.name))
    assert tree.domain_names == [["s1"], ["b1", "n2"]]
    assert tree.outside.tolist() == [False, False, True]
    result = plan_round(snap, CORE)
    assert result.outside_topology == ("n3",)
    spine_entries = [
        e for e in detail_status(tree) if e["topologyInfo"]["topologyLayer"] == "SpineLayer"
    ]
    assert spine_entries[0]["childTopologyNames"] == ["b1", "n2"]
    assert spine_entries[0]["nodeNum"] == 2


def test_an_empty_label_value_is_no_label() -> None:
    """Koordinator's getTreeNodesMeta skips an empty value: an empty block makes a virtual
    block, an empty spine leaves the node outside; no domain is named ""."""
    c = cluster().topology(SPINE_BLOCK)
    c.node(node("n1").cpu(8).spine("s1").block(""), node("n2").cpu(8).spine("").block("b2"))
    snap = c.snapshot()
    tree = TopologyTree.build(snap.topology, sorted(snap.nodes, key=lambda n: n.name))
    assert tree.domain_names == [["s1"], ["n1"]]
    assert tree.outside.tolist() == [False, True]


def test_outside_nodes_take_no_topology_jobs_but_take_plain_pods() -> None:
    c = cluster().topology(SPINE_BLOCK).node(node("lonely").cpu(16))
    c.submit(gang("ml/topo", pods=1).cpu(1).prefer_gather("SpineLayer"), pod("plain").cpu(1))
    result = plan_round(c.snapshot(), CORE)
    assert result.placements["default/plain"].node == "lonely"
    assert "ml/topo" in result.unschedulable


def test_unknown_must_gather_layer_is_a_validation_error() -> None:
    snap = t8().submit(gang("ml/g", pods=2).cpu(1).must_gather("RackLayer")).snapshot()
    verdict = plan_round(snap, CORE).unschedulable["ml/g"]
    assert verdict.code == "Invalid"
    assert "unknown topology layer(s) RackLayer" in verdict.reason


def test_malformed_topology_spec_is_reported_for_topology_jobs() -> None:
    broken = TopologySpec((TopologyLayerSpec("SpineLayer", None, ("spine",)),))
    c = cluster().topology(broken).node(node("n1").cpu(8).label("spine", "s"))
    c.submit(gang("ml/g", pods=1).cpu(1).prefer_gather("SpineLayer"), pod("plain").cpu(1))
    result = plan_round(c.snapshot(), CORE)
    assert result.unschedulable["ml/g"].code == "Invalid"
    assert "NodeTopologyLayer must be listed" in result.unschedulable["ml/g"].reason
    assert result.placements["default/plain"].node == "n1"


def test_must_gather_block_failure_lists_every_block() -> None:
    busy = [pod(f"low-{i}").cpu(16).priority(1).on(f"node-{i}") for i in (1, 2, 3, 4)]
    snap = t8(*busy).submit(gang("ml/g", pods=2).cpu(16).must_gather("BlockLayer").never_preempt())
    verdict = plan_round(snap.snapshot(), CORE).unschedulable["ml/g"]
    assert verdict.details["domain_offer_slots"] == {
        "BlockLayer/b1": 1,
        "BlockLayer/b2": 1,
        "BlockLayer/b3": 1,
        "BlockLayer/b4": 1,
    }
    assert verdict.reason.endswith(
        "BlockLayer/b1: 1; BlockLayer/b2: 1; BlockLayer/b3: 1; BlockLayer/b4: 1"
    )


def test_binpack_picks_the_spine_with_fewest_covering_slots() -> None:
    # no block holds 3; s2 (node-3 used) offers 3, s1 offers 4: the tighter s2 wins over the name
    snap = t8(pod("used").cpu(16).on("node-3")).submit(
        gang("ml/g", pods=3).cpu(16).prefer_gather("BlockLayer").prefer_gather("SpineLayer")
    )
    result = plan_round(snap.snapshot(), CORE)
    assert result.decisions["ml/g"]["chosen_domain"] == "SpineLayer/s2"
    assert sorted(p.node for p in result.placements.values()) == ["node-4", "node-5", "node-6"]


def test_spread_job_falls_back_to_the_root_when_no_spine_fits() -> None:
    snap = t8().submit(gang("ml/big", pods=6).cpu(16).prefer_gather("SpineLayer"))
    result = plan_round(snap.snapshot(), CORE)
    assert result.decisions["ml/big"]["chosen_domain"] == "ClusterTopologyLayer/"
    assert len(result.placements) == 6


def test_pod_count_multiple_keeps_pairs_on_a_node() -> None:
    c = cluster().topology(SPINE_BLOCK)
    c.node(node("n1").cpu(24).spine("s").block("b"), node("n2").cpu(32).spine("s").block("b"))
    c.submit(gang("ml/g", pods=4).cpu(8).prefer_gather("BlockLayer").pod_count_multiple(2))
    result = plan_round(c.snapshot(), CORE)
    counts = {}
    for placed in result.placements.values():
        counts[placed.node] = counts.get(placed.node, 0) + 1
    assert all(v % 2 == 0 for v in counts.values()), counts


def test_pod_count_multiple_must_divide_the_job() -> None:
    snap = t8().submit(
        gang("ml/g", pods=3).cpu(1).prefer_gather("BlockLayer").pod_count_multiple(2)
    )
    verdict = plan_round(snap.snapshot(), CORE).unschedulable["ml/g"]
    assert verdict.code == "Invalid"


def test_parent_fragmentation_option_breaks_slot_ties_toward_used_spines() -> None:
    # b1 (spine s1) and b3 (spine s2) both offer 2; s2 is partly used, so the option picks b3
    busy = [pod("used").cpu(16).on("node-4")]
    job = gang("ml/g", pods=2).cpu(16).must_gather("BlockLayer")
    snap = t8(*busy).submit(job).snapshot()
    default = plan_round(snap, CORE)
    assert default.decisions["ml/g"]["chosen_domain"] == "BlockLayer/b1"
    option = CORE.with_args("NetworkTopology", parentFragmentation=True)
    assert plan_round(snap, option).decisions["ml/g"]["chosen_domain"] == "BlockLayer/b3"


def test_topology_index_orders_pod_assignment() -> None:
    from dataclasses import replace

    snap = t8().submit(gang("ml/g", pods=2).cpu(16).must_gather("BlockLayer")).snapshot()
    pods = tuple(
        replace(p, topology_index={"g-1": 1, "g-2": 0}[p.name]) if p.job_id == "ml/g" else p
        for p in snap.pods
    )
    result = plan_round(replace(snap, pods=pods), CORE)
    assert result.placements["ml/g-2"].node == "node-1"
    assert result.placements["ml/g-1"].node == "node-8"


def test_domain_sums_match_a_python_loop() -> None:
    snap = t8().snapshot()
    tree = TopologyTree.build(snap.topology, sorted(snap.nodes, key=lambda n: n.name))
    slots = np.arange(8, dtype=np.int64)
    spines = tree.domain_sums(1, slots)
    names = [n.name for n in sorted(snap.nodes, key=lambda n: n.name)]
    s1 = sum(int(slots[names.index(f"node-{i}")]) for i in (1, 2, 7, 8))
    assert spines.tolist() == [s1, int(slots.sum()) - s1]


def test_prefer_gather_score_option_fills_a_fragmented_spine_first() -> None:
    # s2 keeps one free node per block (2 slots); the reference walk takes block b1 of idle s1,
    # the score option takes the equally tight but already fragmented s2, keeping s1 whole.
    busy = [pod("used-3").cpu(16).on("node-3"), pod("used-4").cpu(16).on("node-4")]
    snap = t8(*busy).submit(gang("ml/g", pods=2).cpu(16).prefer_gather("SpineLayer")).snapshot()
    assert plan_round(snap, CORE).decisions["ml/g"]["chosen_domain"] == "BlockLayer/b1"
    option = CORE.with_args("NetworkTopology", preferGatherScore=True)
    result = plan_round(snap, option)
    assert result.decisions["ml/g"]["chosen_domain"] == "SpineLayer/s2"
    assert sorted(p.node for p in result.placements.values()) == ["node-5", "node-6"]


def test_sums_over_a_few_nodes_equal_sums_over_all() -> None:
    c = cluster().topology(SPINE_BLOCK)
    for i in range(24):
        built = node(f"n{i:02d}").cpu(8)
        if i % 7:  # every seventh node has no spine: outside the tree
            built.spine(f"s{i % 2}").block(f"b{i % 5}")
        c.node(built)
    snap = c.snapshot()
    tree = TopologyTree.build(snap.topology, sorted(snap.nodes, key=lambda n: n.name))
    rng = np.random.default_rng(3)
    for _ in range(20):
        among = np.sort(rng.choice(24, size=int(rng.integers(1, 24)), replace=False))
        slots = np.zeros(24, dtype=np.int64)
        slots[among] = rng.integers(0, 9, size=len(among))
        slots[tree.outside] = 0
        for level in range(len(tree.levels)):
            expected = tree.domain_sums(level, slots)
            assert tree.domain_sums_among(level, slots, among).tolist() == expected.tolist()
    for level in (1, 2):  # a domain's nodes, ascending, from the cached grouping
        for index in range(len(tree.domain_names[level - 1])):
            members = np.flatnonzero(tree.node_domain[level - 1] == index).tolist()
            assert tree.nodes_in(level, index).tolist() == members


def test_a_placement_among_a_few_nodes_is_the_placement_over_all() -> None:
    # A preemption attempt's placement reads only its nodes; its outcome must be the one the
    # same slots (zero elsewhere) give when every node is read, or more nodes without slots.
    c = cluster().topology(SPINE_BLOCK)
    for i in range(32):
        built = node(f"n{i:02d}").cpu(8)
        if i % 9:  # every ninth node has no spine: outside the tree
            built.spine(f"s{i % 3}").block(f"b{i % 6}")
        c.node(built)
    snap = c.snapshot()
    tree = TopologyTree.build(snap.topology, sorted(snap.nodes, key=lambda n: n.name))
    rules = [
        None,
        TopologyRule((LayerGather("BlockLayer", "MustGather"),)),
        TopologyRule(
            (LayerGather("BlockLayer", "PreferGather"), LayerGather("SpineLayer", "PreferGather"))
        ),
    ]
    options = [
        PlacementOptions(),
        PlacementOptions(parent_fragmentation=True, best_fit=True),
        PlacementOptions(prefer_gather_score=True),
    ]
    rng = np.random.default_rng(5)
    compared = 0
    for _ in range(300):
        among = np.sort(rng.choice(32, size=int(rng.integers(1, 12)), replace=False))
        slots = np.zeros(32, dtype=np.int64)
        slots[among] = rng.integers(0, 5, size=len(among))
        per_node = rng.integers(0, 3, size=32).astype(np.float64)  # ties are common
        rule = rules[int(rng.integers(len(rules)))]
        option = options[int(rng.integers(len(options)))]
        desired = int(rng.integers(1, 9))
        idle = np.flatnonzero(slots == 0)
        padded = np.union1d(among, rng.choice(idle, size=min(len(idle), 4), replace=False))
        outcomes = [
            place(tree, slots, desired, rule, NodeScores(tree, per_node), option, nodes)
            for nodes in (among, None, padded)
        ]
        few, every, padded_outcome = (_outcome(o) for o in outcomes)
        assert few == every == padded_outcome
        compared += outcomes[0].ok
    assert compared > 100


def _outcome(outcome: PlacementOutcome) -> tuple[Any, ...]:
    order, counts = outcome.node_order, outcome.counts
    return (
        None if order is None else order.tolist(),
        None if counts is None else counts.tolist(),
        outcome.decision,
        outcome.candidates,
        outcome.message,
    )


def test_best_fit_option_fills_the_partly_used_node_of_the_chosen_block_first() -> None:
    # Five pods of 4 CPU, MustGather Block: no node holds five, b1 offers the fewest slots (node-1
    # has room for two, idle node-8 for four). The reference fills b1's emptiest node first,
    # bestFit its fullest, so the hole on node-1 is used and node-8 keeps the room left.
    busy = [pod("used").cpu(8).on("node-1")]
    snap = t8(*busy).submit(gang("ml/g", pods=5).cpu(4).must_gather("BlockLayer")).snapshot()

    def per_node(profile: Profile) -> dict[str, int]:
        result = plan_round(snap, profile)
        assert result.decisions["ml/g"]["chosen_domain"] == "BlockLayer/b1"
        return dict(Counter(p.node for p in result.placements.values()))

    assert per_node(REFERENCE) == {"node-8": 4, "node-1": 1}
    assert per_node(REFERENCE.with_args("NetworkTopology", bestFit=True)) == {
        "node-1": 2,
        "node-8": 3,
    }
    assert per_node(CORE) == {"node-1": 2, "node-8": 3}  # bestFit is the default
