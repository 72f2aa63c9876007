"""Reading jobs for a user: lists, one job with its pods and decisions, and its explanation.

Every query starts from `tenancy.jobs_visible`, so a job of another tenant does not exist here.
The API and the HTML pages share `job_list` and `job_visible`; the pages' queue and the bounded
parts of a job page (`job_pods`, `job_decisions`, ...) are read here too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from django.db.models import Prefetch, QuerySet

from koordweb.backends.base import FAILED_SCHEDULING, PREEMPTED, SCHEDULED
from koordweb.models import Cluster, Decision, Job, JobState, Pod, Preemption, PreemptionVictim
from koordweb.models.records import latest_decision
from koordweb.presenters.reasons import decision_sentence, preemption_sentence
from koordweb.selectors.redaction import Redactor, preemption_cost_unnamed
from koordweb.selectors.tenancy import jobs_visible


def job_list(*, user: Any) -> QuerySet[Job]:
    return jobs_visible(user=user).select_related(
        "cluster", "quota", "priority_class", "owner", "gpu_state"
    )


def job_detail_queryset(*, user: Any) -> QuerySet[Job]:
    """One query per relation however many pods or decisions the job has."""
    pods = Pod.objects.select_related("node", "nominated_node").order_by("topology_index", "name")
    decisions = Decision.objects.order_by("-created_at", "-id")
    return job_list(user=user).prefetch_related(
        Prefetch("pods", queryset=pods),
        Prefetch("decisions", queryset=decisions),
    )


def job_visible(*, user: Any, job_id: int) -> Job | None:
    """The job with its relations, None when it does not exist or is another tenant's."""
    return job_list(user=user).filter(pk=job_id).first()


def job_queue(*, user: Any, cluster: Cluster, states: Collection[str]) -> QuerySet[Job]:
    """The cluster's jobs in scheduling order (priority desc, then submission), each with its
    latest decision's id (`last_decision_id`); all states when `states` is empty."""
    jobs = job_list(user=user).filter(cluster=cluster)
    if states:
        jobs = jobs.filter(state__in=states)
    return jobs.annotate(last_decision_id=latest_decision("id")).order_by(
        "-priority", "submitted_at", "namespace", "name"
    )


def job_queue_waiting_ahead(queue: QuerySet[Job], count: int) -> int:
    """Waiting jobs among the first `count` of a queue (only waiting jobs get a place)."""
    if count <= 0:
        return 0
    states = queue.values_list("state", flat=True)[:count]
    return sum(1 for state in states if state in JobState.WAITING)


def job_first_requests(
    job_ids: Iterable[int],
) -> tuple[dict[int, Mapping[str, int]], dict[int, int]]:
    """Each job's first pod's requests and its pod count."""
    first: dict[int, Mapping[str, int]] = {}
    counts: dict[int, int] = defaultdict(int)
    rows = Pod.objects.filter(job_id__in=list(job_ids)).values_list("job_id", "requests")
    for job_id, requests in rows:
        counts[job_id] += 1
        first.setdefault(job_id, requests or {})
    return first, counts


def decisions_by_id(ids: Iterable[int | None]) -> dict[int, Decision]:
    return Decision.objects.in_bulk([i for i in ids if i])


def job_pods(job: Job, *, limit: int = 500) -> list[Pod]:
    return list(Pod.objects.filter(job=job).select_related("node", "nominated_node")[:limit])


def job_decisions(job: Job, *, limit: int = 100) -> list[Decision]:
    """The job's latest decisions, newest first."""
    rows = Decision.objects.filter(job=job).select_related("round")
    return list(rows.order_by("-created_at", "-id")[:limit])


def job_events(
    decisions: Iterable[Decision], victims: Iterable[PreemptionVictim], *, limit: int = 100
) -> list[dict[str, Any]]:
    """The Events `kubectl describe pod` would list for the job's pods, newest first, from its
    Decision rows and the preemptions that hit it: what the kubernetes backend writes
    (koordweb/engine/pod_notes.py), shown on the simulated backend's pages, where nothing writes
    them. A FailedScheduling row carries its decision (the page words its reason, redacted);
    victims carry the preemptor's name as the page may show it (`preemptor_name`)."""
    events: list[dict[str, Any]] = []
    for d in decisions:
        if d.outcome == Decision.Outcome.PLACED:
            placements = (d.details or {}).get("placements") or {}
            for key, node in sorted(placements.items()):
                message = f"Successfully assigned {key} to {node}"
                events.append(_event(d.created_at, "Normal", SCHEDULED, key, message))
        else:
            nodes = (d.round.metrics or {}).get("nodes", "?") if d.round_id else "?"
            prefix = "" if "nodes are available" in d.reason else f"0/{nodes} nodes are available: "
            row = _event(d.created_at, "Warning", FAILED_SCHEDULING, "its pending pods", prefix)
            row["decision"] = d
            events.append(row)
    for victim in victims:
        by = getattr(victim, "preemptor_name", "") or "a higher-priority job"
        for key in victim.pods:
            message = f"Preempted by {by}"
            events.append(_event(victim.preemption.created_at, "Normal", PREEMPTED, key, message))
    events.sort(key=lambda e: e["when"], reverse=True)
    return events[:limit]


def _event(when: Any, kind: str, reason: str, pod: str, message: str) -> dict[str, Any]:
    return {"when": when, "type": kind, "reason": reason, "pod": pod, "message": message}


def job_preemptions_made(job: Job, *, limit: int = 20) -> list[Preemption]:
    return list(Preemption.objects.filter(preemptor=job).order_by("-created_at")[:limit])


def job_preempted_by(job: Job, *, limit: int = 20) -> list[PreemptionVictim]:
    return list(
        PreemptionVictim.objects.filter(job=job).select_related("preemption__preemptor")[:limit]
    )


def job_node_names(job: Job) -> set[str]:
    """The nodes the job's pods are bound to."""
    rows = Pod.objects.filter(job=job, node__isnull=False).values_list("node__name", flat=True)
    return set(rows)


def jobs_with_quota(job_ids: Iterable[int]) -> QuerySet[Job]:
    return Job.objects.filter(id__in=list(job_ids)).select_related("quota")


def job_names_visible(*, user: Any, cluster_id: int) -> set[str]:
    """The namespace/name of every job of the cluster the user may see named."""
    rows = jobs_visible(user=user).filter(cluster_id=cluster_id).values_list("namespace", "name")
    return {f"{namespace}/{name}" for namespace, name in rows}


def _why_pending(decision: Decision | None, redactor: Redactor) -> dict[str, Any] | None:
    if decision is None:
        return None
    details = redactor.json(decision.details or {})
    words = decision_sentence(decision.outcome, decision.reason, details)
    return {
        "round": decision.round_id,
        "outcome": decision.outcome,
        "reason": decision.reason,
        "reason_code": words.code,
        "sentence": words.sentence,
        "details_text": [{"item": item, "text": text} for item, text in words.details],
        "counterfactual": details.get("counterfactual"),
        "details": details,
        "decided_at": decision.created_at,
    }


def _placement_explained(
    job: Job, decision: Decision | None, redactor: Redactor
) -> dict[str, Any] | None:
    bound = [pod for pod in job.pods.all() if pod.node is not None]
    if not bound:
        return None
    details = redactor.json(decision.details or {}) if decision else {}
    return {
        "pods": {pod.name: pod.node.name for pod in bound if pod.node is not None},
        # The engine records the chosen domain and every candidate's offer slots.
        "domain": details.get("chosen_domain"),
        "offer_slots": details.get("chosen_offer_slots"),
        "desired_offer_slots": details.get("desired_offer_slots"),
        "alternatives": details.get("alternatives") or {},
        "reason": decision.reason if decision else "",
        "sentence": decision_sentence(Decision.Outcome.PLACED, "", details).sentence,
    }


def _why_preempted(job: Job, redactor: Redactor) -> list[dict[str, Any]]:
    victims = (
        PreemptionVictim.objects.filter(job=job)
        .select_related("preemption__preemptor")
        .order_by("-preemption__created_at", "-preemption_id")
    )
    return [_preemption_explained(victim, redactor) for victim in victims]


def _preemption_explained(victim: PreemptionVictim, redactor: Redactor) -> dict[str, Any]:
    """One preemption of the job: the engine's rule and reason, and both in words. The preemptor
    may belong to another team: then its priority and the rule only, neither its name nor the
    reason it did not fit (which may name its quota)."""
    preemption = victim.preemption
    cost = preemption.cost or {}
    name = redactor.job_name(preemption.preemptor.gang_id)
    priority = cost.get("preemptor_priority")
    return {
        "preemption": victim.preemption_id,
        "preemptor": name,
        # The priority it preempted with; the job's own for a record older than migration 0011.
        "preemptor_priority": priority if priority is not None else preemption.preemptor.priority,
        "state": preemption.state,
        "rule": cost.get("rule") or None,
        "reason": preemption.reason if name is not None else "",
        "sentence": preemption_sentence(preemption.reason, cost, preemptor_named=name is not None),
        "cost": cost if name is not None else preemption_cost_unnamed(cost),
        "pods": victim.pods,
        "freed": victim.freed,
        "at": preemption.created_at,
    }


def job_explain(*, job: Job, user: Any = None) -> dict[str, Any]:
    """Why the job is pending, why it runs where it runs, and why it was preempted.

    For a tenant, other teams' jobs, pods and quotas in the details are counted, not named.
    """
    redactor = Redactor(user)
    latest = job.decisions.order_by("-created_at", "-id").first()
    placed = (
        job.decisions.filter(outcome=Decision.Outcome.PLACED).order_by("-created_at", "-id").first()
    )
    return {
        "job": job.pk,
        "state": job.state,
        "state_reason": job.state_reason,
        "why_pending": _why_pending(latest, redactor) if job.state == "Pending" else None,
        "why_here": _placement_explained(job, placed, redactor),
        "why_preempted": _why_preempted(job, redactor),
        "latest_decision": _why_pending(latest, redactor),
    }
