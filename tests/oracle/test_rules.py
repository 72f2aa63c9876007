"""Each rule of the oracle on small hand-made rounds: a planted mistake is flagged, the valid
answer next to it is not."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from scheduler.devices import AllocatedDevice, render_device_allocated
from scheduler.devices.names import (
    ANNOTATION_DEVICE_ALLOCATED,
    LABEL_GPU_MODEL,
    LABEL_PARTITION_POLICY,
)
from scheduler.model import (
    ClusterSnapshot,
    JobInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    QuotaInfo,
    Taint,
    Toleration,
)
from scheduler.oracle import ALL_RULES, Violation, check_round, rules_for_plugins
from scheduler.oracle.node_rules import requirement_matches, term_matches, tolerates
from scheduler.result import Placement, PreemptionRecord, RoundResult
from scheduler.vocabulary import LABEL_DISABLE_PREEMPTIBLE as PROTECT
from tests.scheduler.builders import SPINE_BLOCK, cluster, gang, node, pod
from tests.scheduler.devices.builders import GiB, gpu_node

pytestmark = pytest.mark.no_oracle  # these rounds are wrong on purpose


def answer(
    placements: dict[str, str] | None = None,
    preemptions: tuple[PreemptionRecord, ...] = (),
    devices: dict[str, list[int]] | None = None,
) -> RoundResult:
    placed = {}
    for key, where in (placements or {}).items():
        held = [AllocatedDevice("gpu", m, 100, 80 * GiB, 100) for m in (devices or {}).get(key, [])]
        cards = {"gpu": _plain(held)} if held else {}
        placed[key] = Placement(where, cards)
    return RoundResult(placed, preemptions, {}, {})


def _plain(held: list[AllocatedDevice]) -> list[dict[str, object]]:
    return list(json.loads(render_device_allocated(held))["gpu"])


def rules(snap: ClusterSnapshot, result: RoundResult) -> list[str]:
    return sorted({v.rule for v in check_round(snap, result)})


# --- TaintToleration and NodeUnschedulable ----------------------------------------------------
@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        (Toleration("", "Exists"), Taint("any", "v", "NoExecute"), True),
        (Toleration("k", "Exists"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "v"), Taint("k", "v", "NoSchedule"), True),
        (Toleration("k", "Equal", "w"), Taint("k", "v", "NoSchedule"), False),
        (Toleration("k", "Exists", "", "NoExecute"), Taint("k", "", "NoSchedule"), False),
        (Toleration("other", "Exists"), Taint("k", "", "NoSchedule"), False),
    ],
)
def test_toleration_matches_kubes_rule(
    toleration: Toleration, taint: Taint, expected: bool
) -> None:
    assert tolerates(toleration, taint) is expected


def test_a_pod_on_a_taint_it_does_not_tolerate_is_flagged() -> None:
    c = cluster().node(node("n1").cpu(4).taint("dedicated", "x", "NoExecute"))
    c.submit(pod("p").cpu(1), pod("q").cpu(1).tolerate("dedicated"))
    snap = c.snapshot()
    assert rules(snap, answer({"default/p": "n1"})) == ["TaintToleration"]
    assert rules(snap, answer({"default/q": "n1"})) == []


def test_prefer_no_schedule_taints_do_not_filter() -> None:
    c = cluster().node(node("n1").cpu(4).taint("spot", "", "PreferNoSchedule"))
    c.submit(pod("p").cpu(1))
    assert rules(c.snapshot(), answer({"default/p": "n1"})) == []


def test_a_cordoned_node_takes_only_pods_tolerating_everything() -> None:
    c = cluster().node(node("n1").cpu(4).unschedulable())
    c.submit(pod("p").cpu(1), pod("q").cpu(1).tolerate())
    snap = c.snapshot()
    assert rules(snap, answer({"default/p": "n1"})) == ["NodeUnschedulable"]
    assert rules(snap, answer({"default/q": "n1"})) == []


# --- NodeAffinity -----------------------------------------------------------------------------
LABELS = {"zone": "a", "gen": "3", "name": "x"}


@pytest.mark.parametrize(
    ("key", "operator", "values", "expected"),
    [
        ("zone", "In", ("a", "b"), True),
        ("zone", "In", ("b",), False),
        ("missing", "In", ("a",), False),
        ("zone", "NotIn", ("b",), True),
        ("missing", "NotIn", ("b",), True),
        ("zone", "NotIn", ("a",), False),
        ("zone", "Exists", (), True),
        ("missing", "Exists", (), False),
        ("missing", "DoesNotExist", (), True),
        ("zone", "DoesNotExist", (), False),
        ("gen", "Gt", ("2",), True),
        ("gen", "Gt", ("3",), False),
        ("gen", "Lt", ("4",), True),
        ("gen", "Lt", ("+3",), False),
        ("name", "Gt", ("1",), False),  # the label is no integer
        ("missing", "Lt", ("9",), False),
        # malformed: the term they are in matches nothing
        ("zone", "In", (), None),
        ("zone", "NotIn", (), None),
        ("zone", "Exists", ("a",), None),
        ("gen", "Gt", ("1", "2"), None),
        ("gen", "Gt", ("1.5",), None),
    ],
)
def test_each_affinity_operator(
    key: str, operator: str, values: tuple[str, ...], expected: bool | None
) -> None:
    req = NodeSelectorRequirement(key, operator, values)  # type: ignore[arg-type]
    assert requirement_matches(req, LABELS) is expected
    assert term_matches(NodeSelectorTerm((req,)), LABELS) is bool(expected)


def test_a_term_without_expressions_matches_nothing() -> None:
    assert term_matches(NodeSelectorTerm(()), LABELS) is False


def test_affinity_terms_are_ored_and_the_node_selector_anded() -> None:
    c = cluster().node(node("n1").cpu(4).label("zone", "a").label("disk", "ssd"))
    c.submit(pod("either").cpu(1).affinity("zone", "In", "b"))
    snap = c.snapshot()
    either = snap.pods[0]
    other = NodeSelectorTerm((NodeSelectorRequirement("disk", "Exists"),))
    ored = replace(either, required_affinity=(*either.required_affinity, other))
    selected = replace(ored, node_selector={"disk": "hdd"})
    for p, expected in ((either, ["NodeAffinity"]), (ored, []), (selected, ["NodeAffinity"])):
        assert rules(replace(snap, pods=(p,)), answer({p.key: "n1"})) == expected


# --- NodeResourcesFit ---------------------------------------------------------------------------
def test_over_commitment_is_flagged_per_resource_and_pod_count() -> None:
    c = cluster().node(node("n1").cpu(4).resource("pods", 2))
    c.running(pod("old").cpu(1).on("n1"))
    c.submit(pod("a").cpu(2), pod("b").cpu(2), pod("c"))
    snap = c.snapshot()
    assert rules(snap, answer({"default/a": "n1"})) == []
    assert rules(snap, answer({"default/a": "n1", "default/b": "n1"})) == ["NodeResourcesFit"]
    assert rules(snap, answer({"default/a": "n1", "default/c": "n1"})) == ["NodeResourcesFit"]


def test_a_node_without_a_pod_limit_takes_any_number_and_terminating_pods_hold() -> None:
    bare = replace(node("n1").cpu(4).build(), allocatable={"cpu": 4000})
    c = cluster()
    c.nodes.append(bare)
    c.running(pod("leaving").cpu(3).on("n1").terminating())
    c.submit(*(pod(f"z{i}") for i in range(5)), pod("a").cpu(2))
    snap = c.snapshot()
    assert rules(snap, answer({f"default/z{i}": "n1" for i in range(5)})) == []
    assert rules(snap, answer({"default/a": "n1"})) == ["NodeResourcesFit"]


# --- Nominated pods -----------------------------------------------------------------------------
def test_a_lower_priority_pod_may_not_take_room_nominated_to_a_higher_one() -> None:
    c = cluster().node(node("n1").cpu(4))
    c.submit(pod("high").cpu(3).priority(10).nominated("n1"))
    c.submit(pod("low").cpu(2).priority(1), pod("higher").cpu(2).priority(20))
    snap = c.snapshot()
    found = check_round(snap, answer({"default/low": "n1"}))
    assert [(v.rule, v.pod) for v in found] == [("NominatedPods", "default/low")]
    assert rules(snap, answer({"default/higher": "n1"})) == []  # kube adds only >= priority


def test_this_rounds_nominations_hold_their_room_too() -> None:
    c = cluster().node(node("n1").cpu(4))
    c.running(pod("victim").cpu(1).priority(0).on("n1"))
    c.submit(pod("big").cpu(3).priority(10), pod("low").cpu(1).priority(1))
    record = PreemptionRecord(
        "default/big", ("default/victim",), ("default/victim",), {"default/big": "n1"}, "", {}
    )
    snap = c.snapshot()
    # The victim still holds its cpu while it terminates; the nominee holds 3 more.
    assert rules(snap, answer({"default/low": "n1"}, (record,))) == ["NominatedPods"]
    assert rules(snap, answer({}, (record,))) == []


def test_a_pod_placed_before_this_rounds_preemption_is_not_held_back_by_it() -> None:
    # Same priority: the job submitted first was scheduled first, before the preemption that
    # nominated the later one, whose victims were chosen with it already there.
    c = cluster().node(node("n1").cpu(4))
    c.running(pod("victim").cpu(2).priority(0).on("n1"))
    c.submit(gang("ml/first", pods=1).cpu(2).priority(5).submitted_at(1))
    c.submit(gang("ml/later", pods=1).cpu(2).priority(5).submitted_at(2))
    record = PreemptionRecord(
        "ml/later", ("default/victim",), ("default/victim",), {"ml/later-1": "n1"}, "", {}
    )
    snap = c.snapshot()
    assert rules(snap, answer({"ml/first-1": "n1"}, (record,))) == []
    earlier = replace(snap.pods[-1], nominated_node="n1")  # nominated by an earlier round
    snap = replace(snap, pods=(*snap.pods[:-1], earlier))
    assert rules(snap, answer({"ml/first-1": "n1"}, (record,))) == ["NominatedPods"]


def test_a_jobs_own_nominated_pods_do_not_count_against_it() -> None:
    c = cluster().node(node("n1").cpu(4))
    c.submit(gang("ml/g", pods=2).cpu(2).priority(5))
    snap = c.snapshot()
    pods = (replace(snap.pods[0], nominated_node="n1"), replace(snap.pods[1], nominated_node="n1"))
    snap = replace(snap, pods=pods)
    assert rules(snap, answer({"ml/g-1": "n1", "ml/g-2": "n1"})) == []


# --- Gangs --------------------------------------------------------------------------------------
def test_a_strict_gang_split_below_min_available_is_flagged() -> None:
    c = cluster().node(node("n1").cpu(8))
    c.submit(gang("ml/g", pods=3).cpu(1))
    snap = c.snapshot()
    assert rules(snap, answer({"ml/g-1": "n1", "ml/g-2": "n1"})) == ["Gang"]
    assert rules(snap, answer({f"ml/g-{i}": "n1" for i in (1, 2, 3)})) == []


def test_running_members_count_towards_min_available() -> None:
    c = cluster().node(node("n1").cpu(8))
    job, pods = gang("ml/g", pods=3, min_available=2).cpu(1).build()
    c.jobs.append(job)
    c.pods.extend([replace(pods[0], node="n1", phase="Running"), *pods[1:]])
    snap = c.snapshot()
    assert rules(snap, answer({"ml/g-2": "n1"})) == []
    leaving = replace(snap.pods[0], terminating=True)
    snap = replace(snap, pods=(leaving, *snap.pods[1:]))
    assert rules(snap, answer({"ml/g-2": "n1"})) == ["Gang"]


# --- MustGather ---------------------------------------------------------------------------------
def test_a_must_gather_job_across_blocks_is_flagged() -> None:
    c = cluster().topology(SPINE_BLOCK)
    c.node(node("n1").cpu(4).spine("s1").block("b1"), node("n2").cpu(4).spine("s1").block("b2"))
    c.submit(gang("ml/g", pods=2).cpu(1).must_gather("BlockLayer"))
    snap = c.snapshot()
    assert rules(snap, answer({"ml/g-1": "n1", "ml/g-2": "n2"})) == ["MustGather"]
    assert rules(snap, answer({"ml/g-1": "n1", "ml/g-2": "n1"})) == []


# --- Victims ------------------------------------------------------------------------------------
def _preempt(*victims: str, to: str = "n1") -> PreemptionRecord:
    jobs = tuple(sorted({v for v in victims}))
    return PreemptionRecord("default/p", jobs, victims, {"default/p": to}, "", {})


def test_victims_are_lower_priority_unprotected_and_where_the_preemptor_goes() -> None:
    c = cluster().node(node("n1").cpu(4), node("n2").cpu(4))
    c.running(
        pod("low").cpu(4).priority(1).on("n1"),
        pod("peer").cpu(4).priority(5).on("n1"),
        pod("kept").cpu(4).priority(1).on("n1").label(PROTECT, "true"),
        pod("far").cpu(4).priority(1).on("n2"),
    )
    c.submit(pod("p").cpu(4).priority(5))
    snap = c.snapshot()
    snap = replace(snap, jobs=(*snap.jobs, _job("default/p", 5)))
    assert rules(snap, answer({}, (_preempt("default/low"),))) == []
    for bad in ("default/peer", "default/kept", "default/far"):
        assert rules(snap, answer({}, (_preempt(bad),))) == ["Victims"], bad


def _job(job_id: str, priority: int) -> JobInfo:
    return JobInfo(job_id, (job_id,), priority=priority)


# --- Devices ------------------------------------------------------------------------------------
def _busy(name: str, where: str, minors: list[int]) -> PodInfo:
    held = [AllocatedDevice("gpu", m, 100, 80 * GiB, 100) for m in minors]
    built = pod(name).cpu(1).gpu(len(minors)).on(where).build()
    return replace(built, annotations={ANNOTATION_DEVICE_ALLOCATED: render_device_allocated(held)})


def test_a_card_held_by_a_bound_pod_is_not_given_again() -> None:
    c = cluster()
    c.nodes.append(gpu_node("g1"))
    c.pods.append(_busy("busy", "g1", [0, 1]))
    c.submit(pod("p").cpu(1).gpu(2))
    snap = c.snapshot()
    assert rules(snap, answer({"default/p": "g1"}, devices={"default/p": [1, 2]})) == [
        "DeviceCards"
    ]
    assert rules(snap, answer({"default/p": "g1"}, devices={"default/p": [2, 3]})) == []
    assert rules(snap, answer({"default/p": "g1"}, devices={"default/p": [9, 3]})) == [
        "DeviceCards"
    ]


def test_an_honoured_partition_table_is_kept() -> None:
    c = cluster()
    c.nodes.append(gpu_node("g1", {LABEL_GPU_MODEL: "H100", LABEL_PARTITION_POLICY: "Honor"}))
    c.submit(pod("p").cpu(1).gpu(2))
    snap = c.snapshot()
    assert rules(snap, answer({"default/p": "g1"}, devices={"default/p": [1, 2]})) == [
        "GPUPartition"
    ]
    assert rules(snap, answer({"default/p": "g1"}, devices={"default/p": [2, 3]})) == []


# --- Quotas, placements, rule selection -------------------------------------------------------
def test_a_quota_admitted_past_its_max_is_flagged() -> None:
    c = cluster().node(node("n1").cpu(16)).quota(QuotaInfo("qa", {"cpu": 2000}, {"cpu": 4000}))
    c.running(pod("old").cpu(3).on("n1").quota("qa"))
    c.submit(pod("p").cpu(2).quota("qa"))
    assert rules(c.snapshot(), answer({"default/p": "n1"})) == ["Quota"]


def test_a_placement_outside_the_snapshot_is_flagged() -> None:
    c = cluster().node(node("n1").cpu(4))
    c.submit(pod("p").cpu(1))
    assert rules(c.snapshot(), answer({"default/p": "nowhere"})) == ["Placement"]


def test_rules_follow_the_profiles_plugins() -> None:
    c = cluster().node(node("n1").cpu(4).taint("dedicated"))
    c.submit(pod("p").cpu(1))
    snap, result = c.snapshot(), answer({"default/p": "n1"})
    kept = rules_for_plugins(["NodeResourcesFit", "Coscheduling"])
    assert "TaintToleration" not in kept and "Placement" in kept
    assert check_round(snap, result, kept) == []
    assert check_round(snap, result) == [
        Violation(
            "TaintToleration",
            "default/p",
            "default/p",
            "n1",
            "default/p placed on n1, whose taint dedicated=:NoSchedule it does not tolerate",
        )
    ]
    assert rules_for_plugins([]) < ALL_RULES
    with pytest.raises(ValueError, match="unknown oracle rules"):
        check_round(snap, result, {"Nonsense"})
