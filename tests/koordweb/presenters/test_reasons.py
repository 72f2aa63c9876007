"""Every reason code -> its sentence, from the engine's own messages and details."""

from __future__ import annotations

from typing import Any

import pytest

from koordweb.presenters import reasons as r
from koordweb.presenters.details import cost_lines, detail_lines, preemption_status_sentence
from koordweb.presenters.reasons import (
    counterfactual_sentence,
    decision_sentence,
    preemption_sentence,
)

ENGINE_WORDS = ("desiredOfferSlot", "exceedDimensions", "None slots", "quotaName", "{'", "e+")

# The engine's message, garbled: every sentence below comes from codes and numbers only.
GARBLED = "%%% words nobody should read: 7/9 nodes are available, desiredOfferSlot: 3 %%%"


def cause(
    code: str, plugin: str, values: dict[str, Any] | None = None, *reasons: dict[str, Any]
) -> dict[str, Any]:
    """A `Cause` as a decision row keeps it (`Cause.to_dict()`)."""
    return {"code": code, "plugin": plugin, "values": values or {}, "node_reasons": list(reasons)}


def refused(code: str, nodes: int, resource: str = "", text: str = "?") -> dict[str, Any]:
    return {"code": code, "nodes": nodes, "plugin": "", "text": text, "resource": resource}


# (outcome, engine reason, details, expected code, expected sentence)
CASES: list[tuple[str | None, str, dict[str, Any], str, str]] = [
    (
        "placed",
        "placed in BlockLayer/b1 (15 slots for 10 pods; 3 other candidate domains)",
        {
            "chosen_domain": "BlockLayer/b1",
            "chosen_offer_slots": 15,
            "desired_offer_slots": 10,
            "alternatives": {"BlockLayer/b1": 15, "BlockLayer/b2": 16, "BlockLayer/b3": 20},
        },
        r.PLACED,
        "Placed in block b1, which had room for 15 pods (10 pods needed); 2 other domains could "
        "also hold it.",
    ),
    (
        "placed",
        "placed in ClusterTopologyLayer/ (15 slots for 10 pods)",
        {
            "chosen_domain": "ClusterTopologyLayer/",
            "chosen_offer_slots": 15,
            "desired_offer_slots": 10,
        },
        r.PLACED,
        "Placed in the whole cluster, which had room for 15 pods (10 pods needed).",
    ),
    (
        "placed",
        "placed in nominated nodes (None slots for None pods)",
        {"chosen_domain": "nominated nodes", "nominated": True},
        r.PLACED_NOMINATED,
        "Placed on the nodes a preemption reserved for it.",
    ),
    (
        "unschedulable",
        GARBLED,
        {
            "plugin": "NetworkTopology",
            "cause": cause(
                "TopologyNoDomain",
                "NetworkTopology",
                {
                    "job_pods": 24,
                    "pods": 24,
                    "layer": "SpineLayer",
                    "best_domain": "SpineLayer/s1",
                    "best_offer_slots": 3,
                },
            ),
        },
        r.TOPOLOGY,
        "No spine has room for all 24 pods of the job together: the roomiest, spine s1, has "
        "room for 3 pods now.",
    ),
    (
        "unschedulable",
        GARBLED,
        {
            "plugin": "ElasticQuota",
            "quota": "team-nlp",
            "exceeded_dimensions": ["nvidia.com/gpu"],
            "quota_shortfall": {"team-nlp": {"nvidia.com/gpu": 8}},
            "cause": cause("QuotaInsufficient", "ElasticQuota", {"quota": "team-nlp"}),
        },
        r.QUOTA,
        "Quota team-nlp has too little left: it needs 8 GPUs more.",
    ),
    (
        "unschedulable",
        GARBLED,
        {
            "plugin": "NodeResourcesFit",
            "node_reasons": {"Insufficient nvidia.com/gpu": 1012},
            "cause": cause(
                "NodesUnavailable",
                "NodeResourcesFit",
                {
                    "job_pods": 40,
                    "pods": 40,
                    "available_nodes": 12,
                    "total_nodes": 1024,
                    "offer_slots": 12,
                },
                refused("Insufficient", 1000, "nvidia.com/gpu", "%%%"),
                refused("Insufficient", 12, "gpu", "%%%"),
            ),
        },
        r.NODE_RESOURCES,
        "12 of 1,024 nodes can take one of its pods; the others: 1,012 with too little free "
        "GPUs. Together they have room for 12 pods, the job needs 40 pods.",
    ),
    (
        "waiting",
        GARBLED,
        {
            "plugin": "Coscheduling",
            "cause": cause("GangIncomplete", "Coscheduling", {"pods": 3, "min_available": 4}),
        },
        r.GANG_WAITING,
        "Waiting for its gang: 3 of the 4 pods it needs exist.",
    ),
    (
        "unschedulable",
        GARBLED,
        {
            "plugin": "Coscheduling",
            "cause": cause("GangShort", "Coscheduling", {"reached": 2, "min_available": 4}),
        },
        r.GANG_SHORT,
        "Only 2 pods would fit at once; the gang needs 4 pods together.",
    ),
    (
        "waiting",
        GARBLED,
        {
            "plugin": "NodeResourcesFit",
            "cause": cause("NodesUnavailable", "NodeResourcesFit"),
            "preemption": {
                "status": "Wait",
                "reason": GARBLED,
                "cause": "VictimsTerminating",
                "values": {"nodes": ["node-1", "node-2"]},
            },
        },
        r.VICTIMS_TERMINATING,
        "Waiting for the pods it preempted to terminate on node-1, node-2.",
    ),
    (
        "preempting",
        GARBLED,
        {"nominations": {"default/a-0": "node-1", "default/a-1": "node-2"}},
        r.PREEMPTING,
        "Preempting lower-priority jobs to make room; 2 pods will start on the freed nodes.",
    ),
    (
        "unschedulable",
        GARBLED,
        {
            "plugin": "DeviceShare",
            "cause": cause(
                "DevicesUnfit",
                "DeviceShare",
                {
                    "pod": "default/a-0",
                    "node": "node-1",
                    "resource": "gpu",
                    "needed": 4,
                    "free": 2,
                    "cards": 8,
                },
            ),
        },
        r.DEVICES,
        "No free cards fit the request for pod default/a-0 on node-1: it needs 4 cards, 2 fit "
        "of the node's 8.",
    ),
    (
        "unschedulable",
        GARBLED,
        {
            "plugin": "NetworkTopology",
            "cause": cause(
                "TopologyUnknownLayer",
                "NetworkTopology",
                {"unknown_layers": ["RackLayer"], "cluster_layers": ["SpineLayer", "BlockLayer"]},
            ),
        },
        r.INVALID,
        "Its topology rule names layers the cluster does not have (RackLayer); the cluster has: "
        "spine, block.",
    ),
    (
        "unschedulable",
        "can never run: the largest block has room for 8 pods, the job needs 10",
        {},
        r.NEVER_FITS,
        "Can never run: the largest block has room for 8 pods, the job needs 10.",
    ),
    (None, "", {}, r.NOT_DECIDED, "Waiting for the next scheduling round."),
    (
        "unschedulable",
        "something new the engine says",
        {"cause": cause("SomethingNew", "PreferLabel")},
        r.OTHER,
        "Not placed by the prefer label check: something new the engine says.",
    ),
]


@pytest.mark.parametrize(("outcome", "reason", "details", "code", "sentence"), CASES)
def test_every_reason_code_has_its_sentence(
    outcome: str | None, reason: str, details: dict[str, Any], code: str, sentence: str
) -> None:
    words = decision_sentence(outcome, reason, details, state="Pending")
    assert words.code == code
    assert words.sentence == sentence
    shown = " ".join([words.sentence, *(f"{label} {text}" for label, text in words.details)])
    assert not any(word in shown for word in ENGINE_WORDS), shown


def test_the_table_covers_every_code() -> None:
    codes = {
        value
        for name, value in vars(r).items()
        if name.isupper()
        and name
        in {
            "PLACED",
            "PLACED_NOMINATED",
            "TOPOLOGY",
            "NODE_RESOURCES",
            "QUOTA",
            "GANG_WAITING",
            "GANG_SHORT",
            "VICTIMS_TERMINATING",
            "PREEMPTING",
            "DEVICES",
            "INVALID",
            "NEVER_FITS",
            "NOT_DECIDED",
            "OTHER",
        }
    }
    assert codes == set(r._SENTENCES) == {case[3] for case in CASES}


def test_preemption_not_helping_is_said_after_the_reason() -> None:
    words = decision_sentence(
        "unschedulable",
        GARBLED,
        {
            "plugin": "ElasticQuota",
            "quota": "team-a",
            "cause": cause("QuotaInsufficient", "ElasticQuota", {"quota": "team-a"}),
            "preemption": {
                "status": "UnschedulableAndUnresolvable",
                "reason": GARBLED,
                "cause": "NoVictims",
            },
        },
    )
    assert words.sentence.endswith(
        "Preempting would not help: no lower-priority job can be evicted."
    )


def test_details_are_formatted_lines_never_dicts() -> None:
    lines = dict(
        detail_lines(
            {
                "plugin": "ElasticQuota",
                "quota_shortfall": {"team-nlp": {"nvidia.com/gpu": 8, "memory": 64 * 1024**3}},
                "runtime": {"cambricon.com/mlu.smlu.vmemory": 8589934592},
                "domain_offer_slots": {"BlockLayer/b1": 2, "BlockLayer/b2": 3},
                "counterfactual": {"evict_jobs": ["other/secret"]},
            }
        )
    )
    assert lines["Decided by"] == "the quota check"
    assert lines["Quota short by"] == "team-nlp: 64 GiB and 8 GPUs"
    assert lines["The quota may use now"] == "8 GiB"
    assert lines["Room per domain"] == "block b2: 3 pods, block b1: 2 pods"
    assert "secret" not in str(lines)  # said apart, with other tenants' jobs counted


def test_counterfactual_names_visible_jobs_and_counts_the_others() -> None:
    evict = {"evict_jobs": ["a/x", "b/y"], "fits_in": "BlockLayer/b2", "cost": {}}
    assert (
        counterfactual_sentence(evict) == "It would fit in block b2 if a/x and b/y were preempted."
    )
    assert counterfactual_sentence(evict, {"a/x"}) == (
        "It would fit in block b2 if a/x and 1 job of another tenant were preempted."
    )
    quota = {"quota_increase": {"team-a": {"nvidia.com/gpu": 8}}}
    assert counterfactual_sentence(quota) == "It would run with 8 GPUs more in quota team-a."
    assert counterfactual_sentence(None) == ""


def test_preemption_cost_and_reason_in_words() -> None:
    cost = {
        "highest_victim_priority": 5000,
        "victim_jobs": 2,
        "victim_pods": 16,
        "resources": {"nvidia.com/gpu": 128, "cpu": 256000},
        "pdb_violations": {},
    }
    assert cost_lines(cost) == [
        ("Evicted", "2 jobs, 16 pods"),
        ("Highest victim priority", "5000"),
        ("Freed", "256 cores and 128 GPUs"),
        ("Disruption budgets broken", "none"),
    ]
    topology = cause(
        "TopologyNoDomain",
        "NetworkTopology",
        {"job_pods": 4, "pods": 4, "layer": "BlockLayer", "best_domain": "BlockLayer/b1"}
        | {"best_offer_slots": 2},
    )
    sentence = preemption_sentence(
        GARBLED, {**cost, "rule": "LowerPriority", "preemptor_priority": 9000, "cause": topology}
    )
    assert sentence == (
        "Evicted lower-priority jobs: the preemptor has priority 9000, the victims 5000 at "
        "most. Without that it did not fit, because no block has room for all 4 pods of the job "
        "together: the roomiest, block b1, has room for 2 pods now."
    )


@pytest.mark.parametrize(
    ("state", "reason", "sentence"),
    [
        (
            "Preempting",
            "",
            "Being preempted: its pods are terminating and still hold their nodes; it is "
            "Preempted once they are gone.",
        ),
        (
            "Requeueing",
            "kubelet refused pod x: OutOfnvidia.com/gpu",
            "A node refused one of its pods: its pods are being deleted, then it waits in the "
            "queue again. Kubelet refused pod x: OutOfnvidia.com/gpu.",
        ),
        ("Succeeded", "", "Finished."),
        ("Cancelled", "cancelled by alice", "Cancelled by alice."),
    ],
)
def test_job_states_without_a_decision_in_words(state: str, reason: str, sentence: str) -> None:
    assert r.state_sentence(state, reason).sentence == sentence


def test_a_topology_refusal_states_the_jobs_size_and_the_layer_it_needs() -> None:
    # 16 pods of 4 CPU need a whole spine of T8 (4 nodes x 16 CPU); one busy node in each spine
    # leaves room for 12 in either, so no spine holds the job (blocks hold 8: never enough).
    from scheduler import plan_round
    from tests.scheduler.builders import CORE, gang, pod, t8

    busy = [pod("a").cpu(16).on("node-1"), pod("b").cpu(16).on("node-3")]
    job = gang("ml/big", pods=16).cpu(4).must_gather("SpineLayer").never_preempt()
    verdict = plan_round(t8(*busy).submit(job).snapshot(), CORE).unschedulable["ml/big"]
    details = verdict.to_dict()["details"]
    assert details["cause"]["code"] == "TopologyNoDomain"
    explained = decision_sentence("unschedulable", verdict.reason, details)
    assert explained.code == r.TOPOLOGY
    assert explained.sentence.startswith(
        "No spine has room for all 16 pods of the job together: the roomiest, spine s2, has "
        "room for 12 pods now."
    )


QUOTA_REASON = "Insufficient quotas, quotaName: team-a, exceedDimensions: [nvidia.com/gpu]"
QUOTA_CAUSE = cause("QuotaInsufficient", "ElasticQuota", {"quota": "team-a"})
RULE_NAMES = ("LowerPriority", "InQuota", "QuotaReclaim")


def _rule(rule: str, highest: int | None = 5000) -> dict[str, Any]:
    return {
        "rule": rule,
        "preemptor_priority": 9000,
        "highest_victim_priority": highest,
        "cause": QUOTA_CAUSE,
    }


@pytest.mark.parametrize(
    ("cost", "rule_sentence"),
    [
        (
            _rule("LowerPriority"),
            "Evicted lower-priority jobs: the preemptor has priority 9000, the victims 5000 at "
            "most.",
        ),
        (
            _rule("InQuota", 7000),
            "Evicted lower-priority jobs of its own quota, to make room within the quota: the "
            "preemptor has priority 9000, the victims 7000 at most.",
        ),
        (
            # the victims' priority may be higher: reclaim does not depend on it
            _rule("QuotaReclaim", 9500),
            "Took back quota that other quotas had borrowed beyond their guaranteed minimum: the "
            "preemptor's quota is still within its own minimum.",
        ),
        (_rule("LowerPriority", None), "Evicted lower-priority jobs."),
    ],
)
def test_preemption_sentence_says_the_rule_then_why_the_preemptor_did_not_fit(
    cost: dict[str, Any], rule_sentence: str
) -> None:
    assert preemption_sentence(GARBLED, cost) == (
        f"{rule_sentence} Without that it did not fit, because quota team-a has too little left."
    )
    # Another team's preemptor: the rule only, never the reason (it names that team's quota).
    assert preemption_sentence(QUOTA_REASON, cost, preemptor_named=False) == rule_sentence
    for sentence in (
        preemption_sentence(GARBLED, cost),
        preemption_sentence("", cost),
        preemption_sentence("something the engine said", cost),
    ):
        assert not any(name in sentence for name in RULE_NAMES), sentence
        assert not any(word in sentence for word in ENGINE_WORDS), sentence


def test_a_preemption_without_a_rule_is_said_by_its_cause_never_by_its_reason() -> None:
    # A record older than migration 0011 that it could not convert, or a rule this version does
    # not know: the reason in words from its cause; recorded without one, only that it made
    # room (the reason is in the engine's words); a tenant of another team reads no reason.
    for cost in ({}, {"victim_jobs": 1}, {"rule": "SomePluginsRule", "preemptor_priority": 1}):
        assert preemption_sentence(GARBLED, {**cost, "cause": QUOTA_CAUSE}) == (
            "Quota team-a has too little left."
        )
        assert preemption_sentence(QUOTA_REASON, cost) == "Evicted to make room for it."
        assert preemption_sentence(QUOTA_REASON, cost, preemptor_named=False) == (
            "Evicted to make room for it."
        )
    assert preemption_sentence("", None) == "Evicted to make room for it."
    assert preemption_sentence("train-a needs block b1", {}) == "Evicted to make room for it."
    assert preemption_sentence("the node was drained", _rule("LowerPriority") | {"cause": {}}) == (
        "Evicted lower-priority jobs: the preemptor has priority 9000, the victims 5000 at most."
        " Without that it did not fit."
    )


def test_preemption_not_helpful_says_which_nodes_stay_ruled_out_from_the_dry_runs_numbers() -> None:
    dry = cause(
        "NodesUnavailable",
        "NodeResourcesFit",
        {"total_nodes": 1024, "available_nodes": 0},
        refused("NodeMetricExpired", 1000, text="%%%"),
        refused("Insufficient", 12, "nvidia.com/gpu", "%%%"),
        refused("NodeUnschedulable", 12, text="%%%"),
    )
    answer = {"reason": GARBLED, "cause": "PreemptionNotHelpful", "values": {"dry_run": dry}}
    assert preemption_status_sentence(answer) == (
        "Preempting would not help: evicting every lower-priority job still leaves no room "
        "(of 1,024 nodes, ruled out even then: 1,000 with a usage report out of date "
        "(load-aware), 12 cordoned, 12 with too little free GPUs)."
    )
    no_numbers = {"reason": GARBLED, "cause": "PreemptionNotHelpful"}
    assert preemption_status_sentence(no_numbers).endswith("leaves no room.")
    # recorded before the engine coded its answers: its words are the engine's, never shown
    assert preemption_status_sentence({"reason": "preemption not helpful"}) == (
        "Preempting did not make room for it."
    )


def test_a_decision_recorded_without_a_cause_says_its_case_in_plain_words() -> None:
    # An older row: its case from its plugin, in plain words without numbers (the engine's
    # message is never shown on a page); a quota its details name is said with its numbers.
    reason = "12/1024 nodes are available: 1012 Insufficient nvidia.com/gpu."
    words = decision_sentence(
        "unschedulable",
        reason,
        {"plugin": "NodeResourcesFit", "node_reasons": {"Insufficient nvidia.com/gpu": 1012}},
    )
    assert words.code == r.NODE_RESOURCES
    assert words.sentence == "No node had enough free resources for its pods."
    assert dict(words.details)["Nodes ruled out"] == "1,012: Insufficient nvidia.com/gpu"
    quota = decision_sentence("unschedulable", QUOTA_REASON, {"plugin": "ElasticQuota"})
    assert (quota.code, quota.sentence) == (r.QUOTA, "Its quota had too little left for it.")
    named = decision_sentence(
        "unschedulable",
        QUOTA_REASON,
        {
            "plugin": "ElasticQuota",
            "quota": "team-a",
            "quota_shortfall": {"team-a": {"nvidia.com/gpu": 8}},
        },
    )
    assert named.sentence == "Quota team-a has too little left: it needs 8 GPUs more."
    gang = decision_sentence(
        "waiting", "gang g has 3 of min-available 4 pods", {"plugin": "Coscheduling"}
    )
    assert gang.code == r.GANG_WAITING
    terminating = decision_sentence(
        "waiting", "x", {"preemption": {"status": "Wait", "reason": "waiting on node-1"}}
    )
    assert terminating.sentence == "Waiting for the pods it preempted to terminate."


def test_a_decisions_numbers_come_from_its_cause_not_from_its_details_text() -> None:
    # The same decision with its message and its per-node reason text rewritten: same words.
    details = dict(CASES[5][2])
    again = {**details, "node_reasons": {"something else entirely": 1012}}
    first = decision_sentence("unschedulable", "one message", details)
    second = decision_sentence("unschedulable", "another message", again)
    assert first.sentence == second.sentence == CASES[5][4]
    assert dict(second.details)["Nodes ruled out"] == "1,012 with too little free GPUs"
