"""Reading jobs for a user: lists, one job with its pods and decisions, and its explanation.

Every query starts from `tenancy.jobs_visible`, so a job of another tenant does not exist here.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from koordweb.models import Decision, Job, Pod, PreemptionVictim
from koordweb.selectors.tenancy import jobs_visible, user_is_admin


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


def _why_pending(decision: Decision | None) -> dict[str, Any] | None:
    if decision is None:
        return None
    details = decision.details or {}
    return {
        "round": decision.round_id,
        "outcome": decision.outcome,
        "reason": decision.reason,
        "counterfactual": details.get("counterfactual"),
        "details": details,
        "decided_at": decision.created_at,
    }


def _why_here(job: Job, decision: Decision | None) -> dict[str, Any] | None:
    bound = [pod for pod in job.pods.all() if pod.node is not None]
    if not bound:
        return None
    details = (decision.details or {}) if decision else {}
    return {
        "pods": {pod.name: pod.node.name for pod in bound if pod.node is not None},
        # The engine records the chosen domain and every candidate's offer slots.
        "domain": details.get("chosen_domain"),
        "offer_slots": details.get("chosen_offer_slots"),
        "desired_offer_slots": details.get("desired_offer_slots"),
        "alternatives": details.get("alternatives") or {},
        "reason": decision.reason if decision else "",
    }


def _why_preempted(job: Job) -> list[dict[str, Any]]:
    victims = (
        PreemptionVictim.objects.filter(job=job)
        .select_related("preemption__preemptor")
        .order_by("-preemption__created_at", "-preemption_id")
    )
    return [
        {
            "preemption": victim.preemption_id,
            # The preemptor may belong to another tenant: name and priority only, no details.
            "preemptor": victim.preemption.preemptor.gang_id,
            "preemptor_priority": victim.preemption.preemptor.priority,
            "state": victim.preemption.state,
            "reason": victim.preemption.reason,
            "cost": victim.preemption.cost,
            "pods": victim.pods,
            "freed": victim.freed,
            "at": victim.preemption.created_at,
        }
        for victim in victims
    ]


def _redacted(decision: Decision | None, user: Any) -> Decision | None:
    """The decision with other tenants' job names in its counterfactual replaced by a count."""
    if decision is None or user is None or user_is_admin(user):
        return decision
    details = dict(decision.details or {})
    counterfactual = details.get("counterfactual")
    if not isinstance(counterfactual, dict) or not counterfactual.get("evict_jobs"):
        return decision
    names = [str(n) for n in counterfactual["evict_jobs"]]
    visible = {
        f"{ns}/{name}"
        for ns, name in jobs_visible(user=user)
        .filter(name__in=[n.rsplit("/", 1)[-1] for n in names])
        .values_list("namespace", "name")
    }
    shown = [n for n in names if n in visible]
    hidden = len(names) - len(shown)
    details["counterfactual"] = {
        **counterfactual,
        "evict_jobs": shown,
        "other_tenants_jobs": hidden,
    }
    decision.details = details
    return decision


def job_explain(*, job: Job, user: Any = None) -> dict[str, Any]:
    """Why the job is pending, why it runs where it runs, and why it was preempted.

    For a tenant, jobs of other tenants that a counterfactual would evict are counted, not named.
    """
    latest = _redacted(job.decisions.order_by("-created_at", "-id").first(), user)
    placed = (
        job.decisions.filter(outcome=Decision.Outcome.PLACED).order_by("-created_at", "-id").first()
    )
    return {
        "job": job.pk,
        "state": job.state,
        "state_reason": job.state_reason,
        "why_pending": _why_pending(latest) if job.state == "Pending" else None,
        "why_here": _why_here(job, placed),
        "why_preempted": _why_preempted(job),
        "latest_decision": _why_pending(latest),
    }
