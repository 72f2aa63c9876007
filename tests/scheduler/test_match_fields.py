"""A DaemonSet pod's node affinity (`matchFields` on the node's name) and LoadAware's pass for
DaemonSet pods, as Kubernetes and Koordinator v1.7 decide them."""

from __future__ import annotations

from dataclasses import replace

from scheduler import plan_round
from scheduler.model import ClusterSnapshot, NodeSelectorRequirement, NodeSelectorTerm, PodInfo
from scheduler.plugins.node_constraints import node_matches
from scheduler.profile import Profile
from tests.scheduler.builders import CORE, cluster, node, pod

NAME = NodeSelectorRequirement("metadata.name", "In", ("b",))
NOT_A = NodeSelectorRequirement("metadata.name", "NotIn", ("a",))
ZONE_2 = NodeSelectorRequirement("zone", "In", ("z2",))


def _with_terms(p: pod, *terms: NodeSelectorTerm) -> PodInfo:
    return replace(p.build(), required_affinity=terms)


def test_a_term_matches_when_its_fields_and_its_expressions_all_hold() -> None:
    """Kubernetes' `nodeaffinity.NewNodeSelector`: fields select by the node's name, ANDed
    with the term's label expressions; terms are ORed; a term with neither matches nothing."""
    a, b = node("a").label("zone", "z2").build(), node("b").label("zone", "z1").build()
    cases = [
        (NodeSelectorTerm(match_fields=(NAME,)), [False, True]),
        (NodeSelectorTerm(match_fields=(NOT_A,)), [False, True]),
        (NodeSelectorTerm(match_expressions=(ZONE_2,), match_fields=(NAME,)), [False, False]),
        (NodeSelectorTerm(match_expressions=(ZONE_2,), match_fields=(NOT_A,)), [False, False]),
        (NodeSelectorTerm(), [False, False]),
    ]
    for term, expected in cases:
        info = _with_terms(pod("p"), term)
        assert [node_matches(info, n) for n in (a, b)] == expected, term
    either = _with_terms(
        pod("p"),
        NodeSelectorTerm(match_expressions=(ZONE_2,)),
        NodeSelectorTerm(match_fields=(NAME,)),
    )
    assert [node_matches(either, n) for n in (a, b)] == [True, True]


def test_a_daemonset_pod_lands_on_its_own_node() -> None:
    c = cluster().node(node("a").cpu(8), node("b").cpu(8), node("c").cpu(8))
    snapshot = c.snapshot()
    info = _with_terms(pod("ds-b").cpu(1), NodeSelectorTerm(match_fields=(NAME,)))
    result = plan_round(replace(snapshot, pods=(info,)), CORE)
    assert result.placements[info.key].node == "b"


def _loaded_node(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """One node reporting 90% cpu usage now: over LoadAware's default 65% threshold."""
    busy = replace(snapshot.nodes[0], usage={"cpu": 7200, "memory": 0}, usage_reported_at=0.0)
    return replace(snapshot, nodes=(busy,))


def test_load_aware_filter_lets_a_daemonset_pod_through() -> None:
    """load_aware_test.go "filter daemonset pod exceed cpu usage": Koordinator's Filter returns
    success for a pod a DaemonSet owns (`isDaemonSetPod`), whatever the node's usage; any other
    pod is refused there."""
    profile = Profile.default().without("DeviceShare")
    snapshot = _loaded_node(cluster().node(node("a").cpu(8).memory(32)).snapshot())
    plain = pod("web").cpu(1).build()
    daemon = replace(pod("agent").cpu(1).build(), daemonset=True)
    refused = plan_round(replace(snapshot, pods=(plain,)), profile)
    assert plain.key not in refused.placements
    assert "node(s) cpu usage exceed threshold" in str(refused.unschedulable[plain.key].to_dict())
    passed = plan_round(replace(snapshot, pods=(daemon,)), profile)
    assert passed.placements[daemon.key].node == "a"
