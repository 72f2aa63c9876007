"""Resources, selectors, affinity, taints and cordons: table-driven, with kube-style messages."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler import plan_round
from tests.scheduler.builders import CORE, cluster, gang, node, pod


def one_pod_lands(nodes: list[node], p: pod) -> str | None:
    result = plan_round(cluster().node(*nodes).submit(p).snapshot(), CORE)
    placed = result.placements.get(p.build().key)
    return placed.node if placed else None


ZONE = "topology.kubernetes.io/zone"

CASES = [
    # (case, nodes, pod, expected node or None)
    ("fits by cpu", [node("a").cpu(4)], pod("p").cpu(2), "a"),
    ("too big", [node("a").cpu(4)], pod("p").cpu(8), None),
    ("extended resource", [node("a").cpu(8), node("b").cpu(8).gpus(1)], pod("p").gpu(1), "b"),
    ("rdma missing", [node("a").cpu(8)], pod("p").request("koordinator.sh/rdma", 1), None),
    ("pods count full", [node("a").cpu(8).resource("pods", 0)], pod("p").cpu(1), None),
    (
        "node selector",
        [node("a").cpu(8).label(ZONE, "z1"), node("b").cpu(8).label(ZONE, "z2")],
        pod("p").cpu(1).select(ZONE, "z2"),
        "b",
    ),
    (
        "affinity In",
        [node("a").cpu(8).label(ZONE, "z1"), node("b").cpu(8).label(ZONE, "z2")],
        pod("p").cpu(1).affinity(ZONE, "In", "z2", "z3"),
        "b",
    ),
    (
        "affinity NotIn",
        [node("a").cpu(8).label(ZONE, "z1"), node("b").cpu(8).label(ZONE, "z2")],
        pod("p").cpu(1).affinity(ZONE, "NotIn", "z1"),
        "b",
    ),
    (
        "affinity Exists",
        [node("a").cpu(8), node("b").cpu(8).label("gpu", "yes")],
        pod("p").cpu(1).affinity("gpu", "Exists"),
        "b",
    ),
    (
        "affinity DoesNotExist",
        [node("a").cpu(8).label("gpu", "yes"), node("b").cpu(8)],
        pod("p").cpu(1).affinity("gpu", "DoesNotExist"),
        "b",
    ),
    (
        "affinity Gt",
        [node("a").cpu(8).label("gen", "3"), node("b").cpu(8).label("gen", "5")],
        pod("p").cpu(1).affinity("gen", "Gt", "4"),
        "b",
    ),
    (
        "affinity Lt non-integer never matches",
        [node("a").cpu(8).label("gen", "x")],
        pod("p").cpu(1).affinity("gen", "Lt", "4"),
        None,
    ),
    ("NoSchedule taint", [node("a").cpu(8).taint("dedicated", "x")], pod("p").cpu(1), None),
    (
        "NoExecute taint tolerated",
        [node("a").cpu(8).taint("dedicated", "x", "NoExecute")],
        pod("p").cpu(1).tolerate("dedicated"),
        "a",
    ),
    (
        "PreferNoSchedule is soft",
        [node("a").cpu(8).taint("dedicated", "x", "PreferNoSchedule")],
        pod("p").cpu(1),
        "a",
    ),
    (
        "toleration for another key",
        [node("a").cpu(8).taint("dedicated", "x")],
        pod("p").cpu(1).tolerate("other"),
        None,
    ),
    ("cordoned", [node("a").cpu(8).unschedulable(), node("b").cpu(8)], pod("p").cpu(1), "b"),
]


@pytest.mark.parametrize(("case", "nodes", "p", "expected"), CASES, ids=[c[0] for c in CASES])
def test_where_a_single_pod_lands(
    case: str, nodes: list[node], p: pod, expected: str | None
) -> None:
    assert one_pod_lands(nodes, p) == expected


def test_offer_slots_tie_so_single_pods_fill_nodes_in_name_order() -> None:
    # Offer slots count only the job's own pods, so every node with room offers 1: name decides.
    c = cluster().node(node("a").cpu(8), node("b").cpu(8), node("c").cpu(8))
    c.running(pod("busy").cpu(7).on("a"))
    result = plan_round(c.submit(pod("p").cpu(2), pod("q").cpu(2)).snapshot(), CORE)
    assert result.placements["default/p"].node == "b"
    assert result.placements["default/q"].node == "b"  # later jobs see earlier placements
    assert result.decisions["default/p"]["alternatives"] == {
        "NodeTopologyLayer/b": 1,
        "NodeTopologyLayer/c": 1,
    }


def test_kube_style_message_counts_each_failing_filter() -> None:
    nodes = [node(f"gpu-{i}").cpu(8).label("pool", "gpu") for i in range(3)]
    nodes += [node(f"cpu-{i}").cpu(8).label("pool", "cpu").gpus(1) for i in range(2)]
    c = cluster().node(*nodes).submit(pod("p").gpu(1).select("pool", "gpu"))
    verdict = plan_round(c.snapshot(), CORE).unschedulable["default/p"]
    assert verdict.reason == (
        "0/5 nodes are available: 3 Insufficient nvidia.com/gpu, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
    assert verdict.details["node_reasons"] == {
        "Insufficient nvidia.com/gpu": 3,
        "node(s) didn't match Pod's node affinity/selector": 2,
    }


def test_gang_shortfall_message_names_slots() -> None:
    c = cluster().node(node("a").cpu(8), node("b").cpu(3)).submit(gang("ml/g", pods=3).cpu(4))
    verdict = plan_round(c.snapshot()).unschedulable["ml/g"]
    assert verdict.reason == (
        "1/2 nodes are available: 1 Insufficient cpu. "
        "The job needs 3 offer slots, the nodes offer 2."
    )
    assert verdict.details["desired_offer_slots"] == 3
    assert verdict.details["offer_slots"] == 2


@pytest.mark.parametrize("without", ["NodeResourcesFit", "ElasticQuota"])
def test_node_masks_hold_whichever_slot_limit_plugins_a_profile_enables(without: str) -> None:
    # The framework applies every node-mask Filter itself: a profile without NodeResourcesFit
    # (or another slot-limit plugin) still keeps pods off tainted, cordoned and unselected nodes.
    nodes = [
        node("a-tainted").cpu(8).label("zone", "z1").taint("dedicated", "x"),
        node("b-cordoned").cpu(8).label("zone", "z1").unschedulable(),
        node("c-other-zone").cpu(8).label("zone", "z2"),
        node("d-fits").cpu(8).label("zone", "z1"),
    ]
    c = cluster().node(*nodes).submit(gang("ml/g", pods=1).cpu(1).select("zone", "z1"))
    profile = CORE.without(without) if without in {p.name for p in CORE.plugins} else CORE
    result = plan_round(c.snapshot(), profile)
    assert {p.node for p in result.placements.values()} == {"d-fits"}
    c = cluster().node(*nodes[:3]).submit(pod("p").cpu(1).select("zone", "z1"))
    verdict = plan_round(c.snapshot(), profile).unschedulable["default/p"]
    assert verdict.reason.startswith("0/3 nodes are available: ")
    assert "1 node(s) had untolerated taint" in verdict.reason
    assert "1 node(s) were unschedulable" in verdict.reason
    assert "1 node(s) didn't match Pod's node affinity/selector" in verdict.reason


def test_a_pod_tolerating_the_cordon_taint_may_go_to_a_cordoned_node() -> None:
    # kube-scheduler's NodeUnschedulable: tolerating node.kubernetes.io/unschedulable:NoSchedule
    # (as DaemonSet pods do) lets a pod onto a cordoned node; other pods stay off it.
    from scheduler.model import Toleration
    from scheduler.vocabulary import TAINT_NODE_UNSCHEDULABLE

    c = cluster().node(node("a").cpu(8).unschedulable())
    tolerant = pod("agent").cpu(1).build()
    tolerant = replace(
        tolerant, tolerations=(Toleration(TAINT_NODE_UNSCHEDULABLE, "Exists", "", "NoSchedule"),)
    )
    c.pods.append(tolerant)
    c.submit(pod("plain").cpu(1))
    result = plan_round(c.snapshot(), CORE)
    assert {k: p.node for k, p in result.placements.items()} == {"default/agent": "a"}
    assert "default/plain" in result.unschedulable
