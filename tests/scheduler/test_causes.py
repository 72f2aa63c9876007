"""Causes are handed over as codes and numbers by the plugin that decided, never read back from
its words: a verdict keeps its code when the words change, and a preemption that would not help
carries the dry run's numbers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler import causes as c
from scheduler import plan_round
from scheduler.model import QuotaInfo
from scheduler.plugins import node_constraints, quota
from scheduler.result import Cause
from tests.scheduler.builders import CORE, cluster, gang, node, pod


def _reasons(cause: Cause) -> dict[tuple[str, str], int]:
    return {(r.code, r.resource): r.nodes for r in cause.node_reasons}


def test_node_reasons_keep_their_codes_when_the_filters_words_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(node_constraints, "REASON_UNSCHEDULABLE", "these nodes said no")
    monkeypatch.setattr(node_constraints, "REASON_TAINT", "Insufficient patience")
    snapshot = (
        cluster()
        .node(node("a").cpu(4).unschedulable(), node("b").cpu(4).taint("gpu-only"))
        .node(node("c").cpu(4), node("d").cpu(4).resource("pods", 1))
        .running(pod("busy").cpu(1).on("d"))
        .submit(gang("ml/g", pods=1).cpu(8).never_preempt())
        .snapshot()
    )
    verdict = plan_round(snapshot, CORE).unschedulable["ml/g"]
    cause = verdict.cause
    assert cause is not None and cause.code == c.NODES_UNAVAILABLE
    assert _reasons(cause) == {
        (c.NODE_CORDONED, ""): 1,
        # a reason worded like kube-scheduler's shortage is still the taint it is
        (c.TAINT_UNTOLERATED, ""): 1,
        (c.INSUFFICIENT, "cpu"): 2,
        (c.TOO_MANY_PODS, "pods"): 1,
    }
    assert cause.values["total_nodes"] == 4 and cause.values["available_nodes"] == 0
    texts = {r.code: r.text for r in cause.node_reasons}
    assert texts[c.NODE_CORDONED] == "these nodes said no"


def test_a_verdicts_code_is_the_plugins_whatever_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(quota, "INSUFFICIENT", "Not enough room in the budget")
    snapshot = (
        cluster()
        .node(node("a").cpu(16))
        .quota(QuotaInfo("team", min={"cpu": 1000}, max={"cpu": 2000}))
        .submit(gang("ml/g", pods=1).cpu(4).quota("team"))
        .snapshot()
    )
    verdict = plan_round(snapshot, CORE).unschedulable["ml/g"]
    assert verdict.reason.startswith("Not enough room in the budget")
    assert verdict.cause is not None
    assert (verdict.cause.code, verdict.cause.values["quota"]) == (c.QUOTA_INSUFFICIENT, "team")


def test_preemption_that_would_not_help_carries_the_dry_runs_numbers() -> None:
    # Evicting the low-priority pod frees node a, but the job needs 24 cores on one node.
    snapshot = (
        cluster()
        .node(node("a").cpu(16), node("b").cpu(16))
        .running(pod("low").cpu(16).priority(1).on("a"))
        .submit(gang("ml/g", pods=1).cpu(24).priority(9))
        .snapshot()
    )
    result = plan_round(snapshot, CORE)
    assert result.preemptions == ()
    preemption = result.unschedulable["ml/g"].details["preemption"]
    assert preemption["cause"] == c.PREEMPTION_NOT_HELPFUL
    dry = preemption["values"]["dry_run"]
    assert isinstance(dry, Cause) and dry.code == c.NODES_UNAVAILABLE
    assert (dry.values["total_nodes"], dry.values["available_nodes"]) == (2, 0)
    assert _reasons(dry) == {(c.INSUFFICIENT, "cpu"): 2}
    plain = result.to_dict()["unschedulable"]["ml/g"]["details"]["preemption"]
    assert plain["values"]["dry_run"]["node_reasons"][0]["nodes"] == 2


def test_waiting_for_victims_names_the_nodes_as_values() -> None:
    snapshot = (
        cluster()
        .node(node("a").cpu(16))
        .running(pod("low").cpu(16).priority(1).on("a").terminating())
        .submit(gang("ml/g", pods=1).cpu(16).priority(9))
        .snapshot()
    )
    pending = [p for p in snapshot.pods if p.job_id == "ml/g"]
    nominated = tuple(replace(p, nominated_node="a") if p in pending else p for p in snapshot.pods)
    verdict = plan_round(replace(snapshot, pods=nominated), CORE).unschedulable["ml/g"]
    preemption = verdict.details["preemption"]
    assert preemption["cause"] == c.VICTIMS_TERMINATING
    assert preemption["values"]["nodes"] == ("a",)


def test_a_preemption_record_carries_the_cause_it_answers() -> None:
    snapshot = (
        cluster()
        .node(node("a").cpu(16))
        .running(pod("low").cpu(16).priority(1).on("a"))
        .submit(gang("ml/g", pods=1).cpu(16).priority(9))
        .snapshot()
    )
    [record] = plan_round(snapshot, CORE).preemptions
    assert record.cause is not None and record.cause.code == c.NODES_UNAVAILABLE
    assert record.to_dict()["cause"]["values"]["total_nodes"] == 1
