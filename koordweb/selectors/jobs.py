"""Reading jobs for a user: lists, one job with its pods and decisions, and its explanation.

Every query starts from `tenancy.jobs_visible`, so a job of another tenant does not exist here.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from koordweb.models import Decision, Job, Pod, PreemptionVictim
from koordweb.presenters.reasons import decision_sentence, preemption_reason_sentence
from koordweb.selectors.redaction import Redactor
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


def job_get(*, user: Any, job_id: int) -> Job | None:
    return job_detail_queryset(user=user).filter(pk=job_id).first()


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
    return [
        {
            "preemption": victim.preemption_id,
            # The preemptor may belong to another team: its priority only, no name.
            "preemptor": redactor.job_name(victim.preemption.preemptor.gang_id),
            "preemptor_priority": victim.preemption.preemptor.priority,
            "state": victim.preemption.state,
            "reason": victim.preemption.reason,
            "sentence": preemption_reason_sentence(victim.preemption.reason),
            "cost": victim.preemption.cost,
            "pods": victim.pods,
            "freed": victim.freed,
            "at": victim.preemption.created_at,
        }
        for victim in victims
    ]


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
