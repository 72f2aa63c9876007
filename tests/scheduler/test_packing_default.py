"""The default profile's packing (issue #39): a bounded size window in the queue, best fit inside
the chosen domain and, for jobs without a topology rule, the most used blocks first; and
Koordinator's reference order (`Profile.reference`) as the option that turns them off."""

from __future__ import annotations

from collections import Counter

from scheduler import plan_round
from scheduler.profile import REFERENCE_ORDER, Profile
from tests.scheduler.builders import CORE, REFERENCE, cluster, gang, node, pod, t8


def one_node_queue(big_submitted_at: float) -> cluster:
    # One 8-CPU node: a small job (one 1-CPU pod) first, then a big one filling the node.
    c = cluster().node(node("a").cpu(8).memory(64))
    return c.submit(
        gang("ml/small", pods=1).cpu(1).submitted_at(0),
        gang("ml/big", pods=2).cpu(4).submitted_at(big_submitted_at),
    )


def test_a_larger_job_submitted_within_the_window_goes_first() -> None:
    snap = one_node_queue(big_submitted_at=200).snapshot()
    assert sorted(plan_round(snap, CORE).placements) == ["ml/big-1", "ml/big-2"]
    assert sorted(plan_round(snap, REFERENCE).placements) == ["ml/small-1"]


def test_no_job_is_overtaken_by_one_submitted_more_than_the_window_later() -> None:
    # The big job's pods are the largest pending: it moves the whole window (5 minutes) ahead,
    # not more, so 400 s after the small one it comes after it.
    snap = one_node_queue(big_submitted_at=400).snapshot()
    assert sorted(plan_round(snap, CORE).placements) == ["ml/small-1"]
    wider = CORE.with_args("PrioritySort", sizeWindow="10m")
    assert sorted(plan_round(snap, wider).placements) == ["ml/big-1", "ml/big-2"]


def test_within_the_window_larger_pods_go_before_more_pods() -> None:
    # Both jobs ask for 4 CPU in all; the later one in one 4-CPU pod, the earlier in four of 1 CPU.
    # The pods' size counts first (a 4-CPU pod needs a node that a 1-CPU pod would break up).
    c = cluster().node(node("a").cpu(4).memory(64))
    c.submit(
        gang("ml/many", pods=4).cpu(1).submitted_at(0),
        gang("ml/wide", pods=1).cpu(4).submitted_at(60),
    )
    snap = c.snapshot()
    assert sorted(plan_round(snap, CORE).placements) == ["ml/wide-1"]
    assert len(plan_round(snap, REFERENCE).placements) == 4  # first come first served


def test_the_window_never_lets_a_lower_priority_job_ahead() -> None:
    c = one_node_queue(big_submitted_at=0)
    c.submit(gang("ml/urgent", pods=1).cpu(1).priority(5).submitted_at(100))
    placed = sorted(plan_round(c.snapshot(), CORE).placements)
    assert placed == ["ml/small-1", "ml/urgent-1"]  # urgent first, then small fits, big does not


def test_a_job_without_a_rule_goes_to_the_most_used_block() -> None:
    # T8 with half of node-1 (block b1) busy: two whole-node pods without a topology rule. The
    # reference order takes the first idle nodes by name; packParents starts with node-8, b1's
    # other node, so more idle blocks stay whole for gangs that must gather in one.
    snap = t8(pod("used").cpu(8).on("node-1")).submit(gang("ml/g", pods=2).cpu(16)).snapshot()
    ours = {p.node for p in plan_round(snap, CORE).placements.values()}
    assert "node-8" in ours and len(ours) == 2
    reference = {p.node for p in plan_round(snap, REFERENCE).placements.values()}
    assert reference == {"node-2", "node-3"}


def test_sub_node_pods_fill_the_partly_used_nodes_first() -> None:
    # Five 4-CPU pods without a rule (no node holds five): node-1 has 8 CPU left (two pods).
    snap = t8(pod("used").cpu(8).on("node-1")).submit(gang("ml/g", pods=5).cpu(4)).snapshot()
    ours = Counter(p.node for p in plan_round(snap, CORE).placements.values())
    assert ours == {"node-1": 2, "node-8": 3}
    reference = Counter(p.node for p in plan_round(snap, REFERENCE).placements.values())
    assert reference["node-1"] == 0


def test_the_reference_profile_is_the_default_with_the_reference_arguments() -> None:
    reference = {s.name: dict(s.args) for s in Profile.reference().plugins}
    for plugin, args in REFERENCE_ORDER.items():
        assert reference[plugin] == args
    configured = Profile.configured(REFERENCE_ORDER)
    assert configured.plugins == Profile.reference().plugins
