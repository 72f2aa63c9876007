"""A round's record: the engine's answer (`RoundResult`) as Decision, Preemption and
PreemptionVictim rows, and the plan (`EnactPlan`) that enacts it, built once here.

The pipeline (`pipeline.py`) calls `round_record` inside the round's transaction and writes the
plan as intents (`backends.intents`); the outbox enacts those very actions after the commit.
A decision row is written only when a job's outcome or reason changed since its last one, so a
job that waits for an hour does not write 360 identical rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from koordweb.backends.base import Binding, EnactPlan, Eviction, Nomination
from koordweb.engine import snapshot as snapshot_adapter
from koordweb.engine.cluster_rows import JobRow, PodRow
from koordweb.engine.gang_timeouts import gang_timeouts_record
from koordweb.engine.preemption_outcomes import preemption_outcomes_record
from koordweb.models import (
    Cluster,
    Decision,
    Job,
    PodPhase,
    Preemption,
    PreemptionVictim,
    Round,
)
from koordweb.models.records import latest_decision
from koordweb.rows.bulk import rows_insert
from scheduler.api import PreemptionRecord, RoundResult


def quota_runtime(result: RoundResult) -> dict[str, dict[str, int]]:
    """Runtime quota per quota at the start of the round, as the engine admitted by it."""
    return {quota: dict(amounts) for quota, amounts in result.runtime_quota.items()}


def round_record(
    cluster: Cluster,
    rnd: Round,
    result: RoundResult,
    index: snapshot_adapter.SnapshotIndex,
    now: datetime,
) -> tuple[EnactPlan, list[Preemption]]:
    """The engine's answer as rows (Decision where a job's outcome or reason changed,
    Preemption and its victims, gang timeouts, preemption outcomes) and the plan that enacts it:
    bindings, evictions of the victims still there, nominations set and given up."""
    # The snapshot's own rows (plain values): no model instance per pod.
    pods = index.pod_rows
    bindings = []
    for key, placement in sorted(result.placements.items()):
        pod = pods[index.pod_ids[key]]
        bindings.append(
            Binding(
                pod_id=pod.id,
                namespace=pod.namespace,
                name=pod.name,
                uid=pod.uid,
                node=placement.node,
                annotations=dict(placement.annotations),
            )
        )
    plain = _plain_parts(result)
    decisions: list[tuple[JobRow, str, str, dict[str, Any]]] = []
    placed_by_job: dict[str, dict[str, str]] = {}
    for key, placement in result.placements.items():
        placed_by_job.setdefault(index.job_by_pod_key.get(key, ""), {})[key] = placement.node
    for job_id, why in plain["decisions"].items():
        placed = placed_by_job.get(job_id, {})
        for job in index.jobs_by_engine_id.get(job_id, []):
            details = {**why, "placements": placed}
            decisions.append((job, Decision.Outcome.PLACED, _placed_reason(why), details))
    preempting = {p.preemptor for p in result.preemptions}
    for job_id, verdict in result.unschedulable.items():
        outcome = (
            Decision.Outcome.PREEMPTING
            if job_id in preempting
            else (
                Decision.Outcome.WAITING
                if verdict.code == "Wait"
                else Decision.Outcome.UNSCHEDULABLE
            )
        )
        for job in index.jobs_by_engine_id.get(job_id, []):
            details = plain["unschedulable"][job_id]["details"]
            decisions.append((job, outcome, verdict.reason, details))
    _write_decisions(rnd, decisions, now)
    if result.timeouts:
        timed_out = {j.id for k in result.timeouts for j in index.jobs_by_engine_id.get(k, [])}
        rows = Job.objects.in_bulk(list(timed_out))
        gang_timeouts_record(
            timeouts=result.timeouts,
            jobs={
                k: [rows[j.id] for j in index.jobs_by_engine_id.get(k, []) if j.id in rows]
                for k in result.timeouts
            },
        )

    evictions: list[Eviction] = []
    nominations: list[Nomination] = []
    records: list[Preemption] = []
    for record, record_plain in zip(result.preemptions, plain["preemptions"], strict=True):
        preemptor_jobs = index.jobs_by_engine_id.get(record.preemptor, [])
        if not preemptor_jobs:
            continue
        row = Preemption.objects.create(
            cluster=cluster,
            round=rnd,
            preemptor_id=preemptor_jobs[0].id,
            reason=record.reason,
            cost={
                **record_plain["cost"],
                **_preemption_rule(record, preemptor_jobs[0].priority),
                # why the preemptor did not fit without it, as codes and numbers (the reason's)
                "cause": record_plain.get("cause"),
            },
            nominations=dict(record.nominations),
            created_at=now,
        )
        records.append(row)
        victim_pods_by_job: dict[str, list[str]] = {}
        for key in record.victim_pods:
            victim_pods_by_job.setdefault(index.job_by_pod_key.get(key, ""), []).append(key)
        for victim_id in record.victim_jobs:
            keys = sorted(victim_pods_by_job.get(victim_id, []))
            for job in index.jobs_by_engine_id.get(victim_id, []):
                own = [
                    pods[index.pod_ids[k]]
                    for k in keys
                    if index.pod_ids.get(k) in pods and pods[index.pod_ids[k]].job_id == job.id
                ]
                freed: dict[str, int] = {}
                for pod in own:
                    for resource, amount in pod.requests.items():
                        freed[resource] = freed.get(resource, 0) + int(amount)
                PreemptionVictim.objects.create(
                    preemption=row,
                    job_id=job.id,
                    pods=[f"{p.namespace}/{p.name}" for p in own],
                    freed=freed,
                )
        for key in record.victim_pods:
            victim = pods.get(index.pod_ids.get(key, -1))
            if victim is not None and victim.phase in (PodPhase.PENDING, PodPhase.RUNNING):
                evictions.append(
                    Eviction(
                        victim.id,
                        victim.namespace,
                        victim.name,
                        record.preemptor,
                        row.id,
                        victim.uid,
                    )
                )
        for key, node in sorted(record.nominations.items()):
            nominee = pods.get(index.pod_ids.get(key, -1))
            if nominee is not None:
                nominations.append(Nomination(nominee.id, nominee.namespace, nominee.name, node))
    nominations += _nominations_given_up(result, index, pods, preempting)
    preemption_outcomes_record(cluster=cluster, result=result, index=index, new=records, now=now)
    return EnactPlan(tuple(bindings), tuple(evictions), tuple(nominations)), records


def _plain_parts(result: RoundResult) -> dict[str, Any]:
    """The parts of `result.to_dict()` a record needs (decisions, unschedulable, preemptions),
    without turning the topology status of every domain into plain data each round."""
    parts = RoundResult(
        placements={},
        preemptions=result.preemptions,
        unschedulable=result.unschedulable,
        decisions=result.decisions,
    ).to_dict()
    return {k: parts[k] for k in ("decisions", "unschedulable", "preemptions")}


def _nominations_given_up(
    result: RoundResult,
    index: snapshot_adapter.SnapshotIndex,
    pods: Mapping[int, PodRow],
    preempting: set[str],
) -> list[Nomination]:
    """A job still not placed when its waiting time has passed (the engine's `timeouts`) gives
    its nominations up, unless it preempts anew this round: an empty node clears the
    nomination, in the database and in the cluster (`status.nominatedNodeName`)."""
    given_up = {job_id for job_id in result.unschedulable if job_id in result.timeouts} - preempting
    if not given_up:
        return []
    return [
        Nomination(pod.id, pod.namespace, pod.name, "")
        for key, pod_id in sorted(index.pod_ids.items())
        if index.job_by_pod_key.get(key) in given_up
        and (pod := pods.get(pod_id)) is not None
        and pod.nominated_node_id is not None
        and pod.node_id is None
    ]


def _preemption_rule(record: PreemptionRecord, priority: int) -> dict[str, Any]:
    """The rule the engine applied (`record.rule`: LowerPriority, InQuota, QuotaReclaim) and the
    preemptor's priority, kept beside the engine's cost as data; `presenters.reasons` words them
    (migration 0011 turned the prefix older records carried in their reason into these)."""
    return {"rule": record.rule, "preemptor_priority": int(priority)}


def _write_decisions(
    rnd: Round, decisions: list[tuple[JobRow, str, str, dict[str, Any]]], now: datetime
) -> None:
    """Insert a decision only where the outcome or the reason changed since the job's last one
    (plain values in a multi-row insert: no model instance per decision)."""
    if not decisions:
        return
    ids = [job.id for job, *_ in decisions]
    last = {
        row[0]: (row[1], row[2])
        for row in Job.objects.filter(id__any=ids)
        .order_by()
        .annotate(last_outcome=latest_decision("outcome"), last_reason=latest_decision("reason"))
        .values_list("id", "last_outcome", "last_reason")
    }
    rows = [
        (rnd.id, job.id, outcome, reason, details, now)
        for job, outcome, reason, details in decisions
        if outcome == Decision.Outcome.PLACED or last.get(job.id) != (outcome, reason)
    ]
    rows_insert(Decision, _DECISION_FIELDS, rows)


_DECISION_FIELDS = ("round", "job", "outcome", "reason", "details", "created_at")


def _placed_reason(why: Mapping[str, Any]) -> str:
    """One line: the domain chosen and how many slots it and the alternatives offered."""
    domain = why.get("chosen_domain")
    if not domain:
        return "placed"
    others = len(why.get("alternatives") or {}) - 1
    text = f"placed in {domain} ({why.get('chosen_offer_slots')} slots for "
    text += f"{why.get('desired_offer_slots')} pods"
    return text + (f"; {others} other candidate domains)" if others > 0 else ")")
