"""The job queue (in scheduling order, with the pending reason in plain words) and job detail."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping
from typing import Any

from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from koordweb.models import Decision, Job, JobState, Pod, Preemption, PreemptionVictim
from koordweb.presenters.quantities import shape_text
from koordweb.presenters.reasons import (
    NEVER_FITS_PREFIX,
    Explanation,
    counterfactual_sentence,
    decision_sentence,
    state_sentence,
)
from koordweb.selectors.devices import natural_key
from koordweb.selectors.preemptions import OTHER_TEAMS_JOB
from koordweb.selectors.redaction import Redactor
from koordweb.services.feasibility import ClusterRoom
from koordweb.views.cluster import placement_figure
from koordweb.views.common import (
    current_cluster,
    is_admin,
    paginate,
    select_cluster,
    visible_jobs,
)
from koordweb.views.gpu import job_idle_words, job_usage_context

# The "active" list shows every job still holding nodes (a preempting job's pods are terminating,
# a requeueing job's are being deleted); "pending" the jobs waiting for a placement.
STATE_FILTERS = {"active": JobState.HOLDING, "pending": JobState.WAITING, "all": frozenset()}
LIVE_SECONDS = 5


def job_explanation(
    job: Job,
    decision: Decision | None,
    room: ClusterRoom | None,
    requests: Mapping[str, int] | None,
) -> Explanation:
    """The job's state in words: a job that can never run says so, whatever the last round
    said; otherwise the latest decision (or the job's own state when no round decided yet)."""
    if job.state in JobState.WAITING and room is not None and requests:
        never = room.never_fits(requests, job.min_available or job.total_number, job.topology_spec)
        if never:
            return decision_sentence("unschedulable", NEVER_FITS_PREFIX + never)
    if job.state not in JobState.ACTIVE:
        return state_sentence(job.state, job.state_reason)
    if decision is None:
        return decision_sentence(None, job.state_reason, state=job.state)
    return decision_sentence(decision.outcome, decision.reason, decision.details, state=job.state)


def what_would_help(
    counterfactual: Any,
    explanation: Explanation,
    room: ClusterRoom,
    requests: Mapping[str, int],
    pod_count: int,
    topology_spec: Mapping[str, Any] | None,
    visible: set[str] | None,
) -> str:
    """The engine's counterfactual, only where it would work: for a job that can never run,
    fewer pods or a looser rule (checked on the empty cluster), never quota; a quota increase
    only when the free room the job may use holds it now (a dry run of the room)."""
    if explanation.code == "never-fits":
        return room.what_would_fit(requests, pod_count, topology_spec)
    if not isinstance(counterfactual, Mapping):
        return counterfactual_sentence(counterfactual, visible)
    counterfactual = dict(counterfactual)
    note = ""
    if counterfactual.get("quota_increase"):
        now = room.room(requests, topology_spec, empty=False)
        if now is not None and now.best < pod_count:
            counterfactual.pop("quota_increase")
            note = (
                "More quota alone would not let it start now: the free room it may use holds "
                f"{now.best} of the {pod_count} pods it needs."
            )
    return " ".join(p for p in (counterfactual_sentence(counterfactual, visible), note) if p)


def job_queue(jobs: QuerySet[Job], states: Collection[str]) -> QuerySet[Job]:
    """Scheduling order (priority desc, then submission) with the latest decision's id."""
    latest = Decision.objects.filter(job=OuterRef("pk")).order_by("-created_at", "-id")
    if states:
        jobs = jobs.filter(state__in=states)
    return (
        jobs.select_related("quota", "priority_class")
        .annotate(last_decision_id=Subquery(latest.values("id")[:1]))
        .order_by("-priority", "submitted_at", "namespace", "name")
    )


def _first_requests(job_ids: list[int]) -> tuple[dict[int, Mapping[str, int]], dict[int, int]]:
    """Each job's first pod's requests and its pod count."""
    first: dict[int, Mapping[str, int]] = {}
    counts: dict[int, int] = defaultdict(int)
    rows = Pod.objects.filter(job_id__in=job_ids).values_list("job_id", "requests")
    for job_id, requests in rows:
        counts[job_id] += 1
        first.setdefault(job_id, requests or {})
    return first, counts


def _waiting_ahead(queue: QuerySet[Job], page_start: int) -> int:
    """Waiting jobs ahead of the page (only waiting jobs get a place in the queue)."""
    if page_start <= 1:
        return 0
    states = queue.values_list("state", flat=True)[: page_start - 1]
    return sum(1 for state in states if state in JobState.WAITING)


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "jobs.html", {"cluster": None})
    state = request.GET.get("state", "active")
    states = STATE_FILTERS.get(state, JobState.HOLDING)
    queue = job_queue(visible_jobs(request.user, cluster), states)
    page = paginate(request, queue, per_page=50)
    jobs = list(page.object_list)
    first, counts = _first_requests([job.pk for job in jobs])
    decisions = Decision.objects.in_bulk([j.last_decision_id for j in jobs if j.last_decision_id])
    room = ClusterRoom(cluster)
    position = _waiting_ahead(queue, page.start_index())
    idle = job_idle_words(jobs)
    rows = []
    for job in jobs:
        requests = first.get(job.pk)
        if job.state in JobState.WAITING:
            position += 1
        rows.append(
            {
                "job": job,
                "position": position if job.state in JobState.WAITING else None,
                "shape": f"{counts[job.pk]} x {shape_text(requests)}"
                if requests
                else f"{job.total_number} pod(s)",
                "why": job_explanation(job, decisions.get(job.last_decision_id), room, requests),
                "idle": idle.get(job.pk),
            }
        )
    context = {
        "cluster": cluster,
        "rows": rows,
        "page": page,
        "state": state,
        "states": list(STATE_FILTERS),
        "live_seconds": LIVE_SECONDS,
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


def _preempted_by(request: HttpRequest, job: Job) -> list[PreemptionVictim]:
    """The preemptions that hit the job; another team's preemptor is not named (issue #16)."""
    redactor = Redactor(request.user)
    victims = list(
        PreemptionVictim.objects.filter(job=job).select_related("preemption__preemptor")[:20]
    )
    for victim in victims:
        name = redactor.job_name(victim.preemption.preemptor.gang_id)
        victim.preemptor_name = name or OTHER_TEAMS_JOB  # type: ignore[attr-defined]
    return victims


def _placed_on(pods: list[Pod], decisions: list[Decision]) -> dict[str, Any] | None:
    """'placed on node-a, node-b (round #12)' for a job with bound pods."""
    nodes = sorted({p.node.name for p in pods if p.node is not None}, key=natural_key)
    if not nodes:
        return None
    placed = next((d for d in decisions if d.outcome == Decision.Outcome.PLACED), None)
    return {"nodes": nodes[:12], "more": max(0, len(nodes) - 12), "decision": placed}


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_visible_job(request, pk)
    select_cluster(request, job.cluster)  # the header shows the job's cluster from now on
    pods = sorted(
        Pod.objects.filter(job=job).select_related("node", "nominated_node")[:500],
        key=lambda pod: (pod.topology_index, natural_key(pod.name)),
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
    requests = pods[0].requests if pods else {}
    room = ClusterRoom(job.cluster)
    why = job_explanation(job, latest, room, requests)
    visible = _visible_job_ids(request, job.cluster_id)
    context = {
        "job": job,
        "pods": [(pod, shape_text(pod.requests or {})) for pod in pods],
        "shape": shape_text(requests) if pods else "",
        "decisions": decisions,
        "why": why,
        "counterfactual": what_would_help(
            details.get("counterfactual"),
            why,
            room,
            requests,
            job.min_available or job.total_number,
            job.topology_spec,
            visible,
        )
        if job.state in JobState.WAITING
        else "",
        "placed_on": _placed_on(pods, decisions),
        "preemptions_made": Preemption.objects.filter(preemptor=job).order_by("-created_at")[:20],
        "preempted_by": _preempted_by(request, job),
        "placement": placement_figure(job.cluster, job) if any(p.node_id for p in pods) else None,
        "active": job.state in JobState.HOLDING,
        "live_seconds": LIVE_SECONDS,
        **job_usage_context(job),
    }
    return render(request, "job_detail.html", context)
