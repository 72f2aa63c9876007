"""The job queue (in scheduling order, with the pending reason in plain words) and job detail."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from koordweb.figures.capacity import display_amount
from koordweb.models import Decision, Job, JobState, Pod, Preemption, PreemptionVictim
from koordweb.views.cluster import placement_figure
from koordweb.views.common import current_cluster, is_admin, paginate, visible_jobs
from koordweb.views.gpu import job_idle_words, job_usage_context

ACTIVE = (JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING)
STATE_FILTERS = {"active": ACTIVE, "pending": (JobState.PENDING,), "all": ()}
# Display order and short names of the resources people recognise.
SHORT_NAMES = {
    "nvidia.com/gpu": "GPU",
    "koordinator.sh/gpu-core": "% GPU core",
    "koordinator.sh/gpu-memory-ratio": "% GPU memory",
    "huawei.com/npu": "NPU",
    "cpu": "CPU",
    "memory": "GiB",
}


OUTCOME_WORDS: dict[str, str] = {
    Decision.Outcome.UNSCHEDULABLE: "does not fit",
    Decision.Outcome.PREEMPTING: "preempting lower-priority jobs",
    Decision.Outcome.WAITING: "waiting",
    Decision.Outcome.PLACED: "placed",
}


def describe_shape(requests: Mapping[str, int]) -> str:
    """A pod's requests as people say them: '8 GPU, 32 CPU, 256 GiB'."""
    order = list(SHORT_NAMES)
    parts = []
    for name in sorted(requests, key=lambda n: (order.index(n) if n in order else len(order), n)):
        amount, unit = display_amount(name, requests[name])
        parts.append(f"{amount:g} {unit if name == 'memory' else SHORT_NAMES.get(name, name)}")
    return ", ".join(parts)


def plain_reason(outcome: str | None, reason: str | None, job: Job) -> str:
    """The latest decision in words; the job's own state (reason) when no round decided yet."""
    if job.state not in ACTIVE:
        return job.state_reason or job.state.lower()
    if not outcome:
        if job.state_reason:
            return job.state_reason
        return (
            "waiting for the next scheduling round" if job.state == JobState.PENDING else "running"
        )
    prefix = OUTCOME_WORDS.get(outcome, outcome)
    return f"{prefix}: {reason}" if reason else prefix


def counterfactual_words(counterfactual: Any, visible: set[str] | None = None) -> str:
    """The engine's counterfactual in words: 'fits in BlockLayer/b2 if team/x is preempted',
    'needs 8 more nvidia.com/gpu in quota team-a'. Jobs outside `visible` (a tenant's view) are
    counted, never named."""
    if not counterfactual:
        return ""
    if isinstance(counterfactual, str):
        return counterfactual
    if not isinstance(counterfactual, dict):
        return str(counterfactual)
    parts = []
    evict = [str(j) for j in counterfactual.get("evict_jobs") or []]
    if evict:
        shown = [j for j in evict if visible is None or j in visible]
        hidden = len(evict) - len(shown)
        names = shown + ([f"{hidden} job(s) of other tenants"] if hidden else [])
        where = counterfactual.get("fits_in")
        verb = "is" if len(evict) == 1 else "are"
        parts.append(
            f"fits{f' in {where}' if where else ''} if {', '.join(names)} {verb} preempted"
        )
    for quota, missing in (counterfactual.get("quota_increase") or {}).items():
        if isinstance(missing, dict):
            amounts = ", ".join(f"{n} more {r}" for r, n in sorted(missing.items()))
            parts.append(f"needs {amounts} in quota {quota}")
    return "; ".join(parts) or str(counterfactual)


def offer_slot_words(details: Mapping[str, Any]) -> str:
    """'desired 4; BlockLayer/b1: 2, BlockLayer/b2: 3' from a decision's offer-slot details."""
    slots = details.get("domain_offer_slots")
    if not isinstance(slots, dict) or not slots:
        return ""
    listed = ", ".join(f"{domain}: {n}" for domain, n in sorted(slots.items())[:30])
    desired = details.get("desired_offer_slots")
    return f"desired {desired}; {listed}" if desired is not None else listed


def job_queue(jobs: QuerySet[Job], states: tuple[str, ...]) -> QuerySet[Job]:
    """Scheduling order (priority desc, then submission) with the latest decision attached."""
    latest = Decision.objects.filter(job=OuterRef("pk")).order_by("-created_at", "-id")
    if states:
        jobs = jobs.filter(state__in=states)
    return (
        jobs.select_related("quota", "priority_class")
        .annotate(
            last_outcome=Subquery(latest.values("outcome")[:1]),
            last_reason=Subquery(latest.values("reason")[:1]),
        )
        .order_by("-priority", "submitted_at", "namespace", "name")
    )


def _shapes(job_ids: list[int]) -> dict[int, str]:
    first: dict[int, Mapping[str, int]] = {}
    counts: dict[int, int] = defaultdict(int)
    rows = Pod.objects.filter(job_id__in=job_ids).order_by("name").values_list("job_id", "requests")
    for job_id, requests in rows:
        counts[job_id] += 1
        first.setdefault(job_id, requests or {})
    return {jid: f"{counts[jid]} x {describe_shape(first[jid])}" for jid in first}


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "jobs.html", {"cluster": None})
    state = request.GET.get("state", "active")
    states = STATE_FILTERS.get(state, ACTIVE)
    page = paginate(request, job_queue(visible_jobs(request.user, cluster), states), per_page=50)
    shapes = _shapes([job.pk for job in page.object_list])
    idle = job_idle_words(list(page.object_list))
    rows = [
        {
            "job": job,
            "position": page.start_index() + i,
            "shape": shapes.get(job.pk) or f"{job.total_number} pod(s)",
            "reason": plain_reason(job.last_outcome, job.last_reason, job),
            "idle": idle.get(job.pk),
        }
        for i, job in enumerate(page.object_list)
    ]
    context = {
        "cluster": cluster,
        "rows": rows,
        "page": page,
        "state": state,
        "states": list(STATE_FILTERS),
    }
    return render(request, "jobs.html", context)


def get_visible_job(request: HttpRequest, pk: int) -> Job:
    """The job, or 404 when it does not exist or belongs to another tenant (no existence leak)."""
    job = (
        visible_jobs(request.user)
        .select_related("quota", "priority_class", "cluster")
        .filter(pk=pk)
        .first()
    )
    if job is None:
        raise Http404("no such job")
    return job


def _visible_job_ids(request: HttpRequest, cluster_id: int) -> set[str] | None:
    """Job ids (namespace/name) a tenant may see named; None for admins (everything)."""
    if is_admin(request.user):
        return None
    rows = visible_jobs(request.user).filter(cluster_id=cluster_id).values_list("namespace", "name")
    return {f"{namespace}/{name}" for namespace, name in rows}


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_visible_job(request, pk)
    pods = list(
        Pod.objects.filter(job=job).select_related("node", "nominated_node").order_by("name")[:500]
    )
    decisions = list(
        Decision.objects.filter(job=job)
        .select_related("round")
        .order_by("-created_at", "-id")[:100]
    )
    latest = decisions[0] if decisions else None
    details: dict[str, Any] = (
        dict(latest.details) if latest and isinstance(latest.details, dict) else {}
    )
    context = {
        "job": job,
        "pods": [(pod, describe_shape(pod.requests or {})) for pod in pods],
        "shape": describe_shape(pods[0].requests) if pods else "",
        "decisions": decisions,
        "reason": plain_reason(
            latest.outcome if latest else None, latest.reason if latest else None, job
        ),
        "counterfactual": counterfactual_words(
            details.get("counterfactual"), _visible_job_ids(request, job.cluster_id)
        ),
        "domain_slots": offer_slot_words(details),
        "preemptions_made": Preemption.objects.filter(preemptor=job).order_by("-created_at")[:20],
        "preempted_by": PreemptionVictim.objects.filter(job=job).select_related(
            "preemption__preemptor"
        )[:20],
        "placement": placement_figure(job.cluster, job) if any(p.node_id for p in pods) else None,
        "active": job.state in ACTIVE,
        **job_usage_context(job),
    }
    return render(request, "job_detail.html", context)
