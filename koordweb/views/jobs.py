"""The job queue (in scheduling order, with the pending reason in plain words) and job detail."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from koordweb.engine.feasibility import ClusterRoom
from koordweb.models import Cluster, Decision, Job, JobState, Pod, PreemptionVictim
from koordweb.presenters.quantities import (
    cards_text,
    elapsed_text,
    number,
    shape_text,
)
from koordweb.presenters.reasons import (
    NEVER_FITS_PREFIX,
    Explanation,
    counterfactual_sentence,
    decision_sentence,
    state_sentence,
)
from koordweb.presenters.words import (
    gang_text,
    job_priority_sentence,
    priority_class_text,
    priority_text,
)
from koordweb.selectors.job_table import (
    DEVICE_KINDS,
    JOB_SORTS,
    STATE_CHOICES,
    JobFilter,
    cluster_priority_classes,
    job_queue_positions,
    job_table,
)
from koordweb.selectors.jobs import (
    decisions_by_id,
    job_decisions,
    job_events,
    job_first_requests,
    job_names_visible,
    job_node_names,
    job_pods,
    job_preempted_by,
    job_visible,
)
from koordweb.selectors.preemptions import OTHER_TEAMS_JOB, job_preemption_history
from koordweb.selectors.redaction import Redactor
from koordweb.selectors.tenancy import quotas_visible
from koordweb.views.cluster import placement_figure
from koordweb.views.common import (
    current_cluster,
    is_admin,
    paginate,
    select_cluster,
    visible_jobs,
)
from koordweb.views.gpu import job_idle_words, job_usage_context
from scheduler.vocabulary import CAMBRICON_MLU_VCORE, NPU_CORE, natural_key

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


def _jobs_filter(request: HttpRequest, cluster: Cluster) -> JobFilter:
    """The API's job filter set on the page's query (state "active" unless asked), with the
    cluster's teams and priority classes as choices."""
    data = request.GET.copy()
    if not data.get("state"):
        data.setlist("state", ["active"])
    jobs = visible_jobs(request.user, cluster).select_related(
        "cluster", "quota", "priority_class", "owner", "gpu_state"
    )
    found = JobFilter(data, queryset=jobs)
    teams = quotas_visible(user=request.user).filter(cluster=cluster, is_parent=False)
    classes = cluster_priority_classes(cluster)
    form = found.form
    form.fields["team"].widget = forms.Select(
        choices=[("", "all teams"), *((q, q) for q in teams.values_list("name", flat=True))]
    )
    form.fields["priority_class"].widget = forms.Select(
        choices=[("", "all priorities"), *((c.name, priority_class_text(c)) for c in classes)]
    )
    form.fields["state"].widget = OneOfSelect(choices=STATE_CHOICES)
    form.fields["device"].empty_label = "all devices"
    form.fields["device"].widget.choices = [("", "all devices"), *DEVICE_CHOICES]
    return found


class OneOfSelect(forms.Select):
    """One choice picked on the page for a filter that takes several (the API's `state`)."""

    def value_from_datadict(self, data: Any, files: Any, name: str) -> Any:
        return data.getlist(name) if hasattr(data, "getlist") else data.get(name)


DEVICE_CHOICES = [(key, label) for key, (label, _) in DEVICE_KINDS.items()]
SHOWN_FILTERS = ("q", "state", "team", "device", "priority_class")


def job_cards_text(requests: Mapping[str, int], pods: int) -> str:
    """The jobs table's cards: whole cards or a GPU share ('16 GPUs', '1.5 shared GPUs'), else
    an Ascend share ('NPU share, 20 AI cores') or a Cambricon slice ('MLU share, 0.5 of a
    card'): an NPU notebook holds a card, never '—'."""
    text = cards_text(requests, pods)
    if text != "—":
        return text
    if requests.get(NPU_CORE):
        # a share, not a card count: the cards sort leaves it with the jobs of no whole card
        return f"NPU share, {number(int(requests[NPU_CORE]) * pods)} AI cores"
    if requests.get(CAMBRICON_MLU_VCORE):
        shared = int(requests[CAMBRICON_MLU_VCORE]) * pods / 100
        return f"MLU share, {number(shared)} of a card"
    return text


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "jobs.html", {"cluster": None})
    found = _jobs_filter(request, cluster)
    if not found.is_valid():
        # A hand-made query with a value the filters do not know: the form says which.
        context = {"cluster": cluster, "filter": found, "rows": [], "page": None, "sorts": []}
        return render(request, "jobs.html", context, status=400)
    sort = request.GET.get("sort", "queue")
    sort = sort if sort in JOB_SORTS else "queue"
    now = timezone.now()
    table = job_table(found.qs, now=now, sort=sort)
    page = paginate(request, table, per_page=50)
    jobs = list(page.object_list)
    first, counts = job_first_requests(job.pk for job in jobs)
    decisions = decisions_by_id(job.last_decision_id for job in jobs)  # type: ignore[attr-defined]
    room = ClusterRoom(cluster)
    positions = job_queue_positions(visible_jobs(request.user, cluster))
    idle = job_idle_words(jobs)
    rows = []
    for job in jobs:
        requests = first.get(job.pk)
        rows.append(
            {
                "job": job,
                "position": positions.get(job.pk),
                "shape": f"{counts[job.pk]} x {shape_text(requests)}"
                if requests
                else f"{job.total_number} pod(s)",
                "cards": job_cards_text(requests or {}, counts[job.pk]),
                "wait": elapsed_text(job.wait),  # type: ignore[attr-defined]
                "runtime": elapsed_text(
                    (job.finished_at or now) - job.started_at if job.started_at else None
                ),
                "priority": priority_text(job.priority, job.priority_class),
                "why": job_explanation(job, decisions.get(job.last_decision_id), room, requests),  # type: ignore[attr-defined]
                "idle": idle.get(job.pk),
            }
        )
    query = request.GET.copy()
    query.pop("page", None)
    unsorted = query.copy()
    unsorted.pop("sort", None)
    context = {
        "cluster": cluster,
        "filter": found,
        "rows": rows,
        "page": page,
        "query": query.urlencode(),
        "unsorted": unsorted.urlencode(),
        "sort": sort,
        "sorts": [(key, label) for key, (label, _) in JOB_SORTS.items()],
        "total": page.paginator.count,
        "live_seconds": LIVE_SECONDS,
    }
    return render(request, "jobs.html", context)


def get_visible_job(request: HttpRequest, pk: int) -> Job:
    """The job, or 404 when it does not exist or belongs to another tenant (no existence leak)."""
    job = job_visible(user=request.user, job_id=pk)
    if job is None:
        raise Http404("no such job")
    return job


def _preempted_by(request: HttpRequest, job: Job) -> list[PreemptionVictim]:
    """The preemptions that hit the job; another team's preemptor is not named (issue #16)."""
    redactor = Redactor(request.user)
    victims = job_preempted_by(job)
    for victim in victims:
        name = redactor.job_name(victim.preemption.preemptor.gang_id)
        victim.preemptor_name = name or OTHER_TEAMS_JOB  # type: ignore[attr-defined]
        victim.preemptor_named = name is not None  # type: ignore[attr-defined]
    return victims


def _preemption_history(request: HttpRequest, job: Job) -> dict[str, Any]:
    """The preemptions the job made, in order, each beside the one that followed it (a
    "preempted again" links to the next attempt), and the preemptions it was a victim of."""
    history = job_preemption_history(job, user=request.user)
    made = history.made
    return {
        "preemptions_made": list(zip(made, [*made[1:], None], strict=False)),
        "preemptions_suffered": history.suffered,
    }


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
    pods = sorted(job_pods(job), key=lambda pod: (pod.topology_index, natural_key(pod.name)))
    decisions = job_decisions(job)
    latest = decisions[0] if decisions else None
    details: dict[str, Any] = (
        dict(latest.details) if latest and isinstance(latest.details, dict) else {}
    )
    requests = pods[0].requests if pods else {}
    room = ClusterRoom(job.cluster)
    why = job_explanation(job, latest, room, requests)
    # The jobs a tenant may see named; None for admins (everything).
    visible = (
        None
        if is_admin(request.user)
        else job_names_visible(user=request.user, cluster_id=job.cluster_id)
    )
    preempted_by = _preempted_by(request, job)
    context = {
        "job": job,
        "pods": [(pod, shape_text(pod.requests or {})) for pod in pods],
        "shape": shape_text(requests) if pods else "",
        "priority_words": job_priority_sentence(
            job.priority, job.priority_class, job.preemption_policy
        ),
        "gang_words": gang_text(job.min_available, job.total_number, job.mode),
        "decisions": decisions,
        # What kubectl would list: a real cluster holds them, a simulated one is shown them.
        "events": []
        if job.cluster.backend == Cluster.Backend.KUBERNETES
        else job_events(decisions, preempted_by),
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
        **_preemption_history(request, job),
        "placement": placement_figure(job.cluster, job_node_names(job))
        if any(p.node_id for p in pods)
        else None,
        # A finished job's pods have left their nodes: it was placed, it is not "not placed".
        "placement_empty": (
            "Finished: its pods have left their nodes."
            if job.state in JobState.FINAL
            else "Not placed: no pod is bound to a node."
        ),
        "active": job.state in JobState.HOLDING,
        "live_seconds": LIVE_SECONDS,
        **job_usage_context(job),
    }
    return render(request, "job_detail.html", context)
