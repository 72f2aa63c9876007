"""Pod and job state changes that follow what happened in the cluster (bind, evict, run, finish).

Both backends call these after the cluster accepted an action, so the database tells the same
story whichever backend ran the round.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Q

from koordweb.models import Job, JobState, Node, Pod, PodPhase

FINAL_JOB_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.PREEMPTED, JobState.CANCELLED)


def pod_bind_record(*, pod: Pod, node: Node, annotations: dict[str, str], now: datetime) -> None:
    pod.node = node
    pod.nominated_node = None
    pod.bound_at = now
    pod.annotations = {**pod.annotations, **annotations}
    pod.save(update_fields=["node", "nominated_node", "bound_at", "annotations"])


def pod_nominate_record(*, pod: Pod, node: Node) -> None:
    pod.nominated_node = node
    pod.save(update_fields=["nominated_node"])


def pod_evict_record(*, pod: Pod, now: datetime) -> None:
    """The pod is gone from its node; its job is preempted (a job is evicted whole)."""
    pod.phase = PodPhase.FAILED
    pod.terminating = False
    pod.finished_at = now
    pod.save(update_fields=["phase", "terminating", "finished_at"])


def job_mark_preempted(*, job: Job, reason: str, now: datetime) -> None:
    if job.state in FINAL_JOB_STATES:
        return
    job.state = JobState.PREEMPTED
    job.state_reason = reason
    job.finished_at = now
    job.save(update_fields=["state", "state_reason", "finished_at"])
    job.pods.filter(phase__in=[PodPhase.PENDING, PodPhase.RUNNING]).update(
        phase=PodPhase.FAILED, finished_at=now, nominated_node=None
    )


def job_mark_failed(*, job: Job, reason: str, now: datetime) -> None:
    if job.state in FINAL_JOB_STATES:
        return
    job.state = JobState.FAILED
    job.state_reason = reason
    job.finished_at = now
    job.save(update_fields=["state", "state_reason", "finished_at"])
    job.pods.filter(phase__in=[PodPhase.PENDING, PodPhase.RUNNING]).update(
        phase=PodPhase.FAILED, finished_at=now, nominated_node=None
    )


def job_refresh_states(*, jobs: Iterable[Job], now: datetime) -> None:
    """Derive each active job's state from its pods (Pending -> Scheduled -> Running -> done)."""
    for job in jobs:
        if job.state in FINAL_JOB_STATES:
            continue
        pods = list(job.pods.all())
        if not pods:
            continue
        phases = [p.phase for p in pods]
        bound = sum(1 for p in pods if p.node_id is not None)
        state = job.state
        if all(ph == PodPhase.SUCCEEDED for ph in phases):
            state = JobState.SUCCEEDED
        elif any(ph == PodPhase.FAILED for ph in phases):
            state = JobState.FAILED
        elif all(ph == PodPhase.RUNNING for ph in phases):
            state = JobState.RUNNING
        elif bound >= job.min_available:
            state = JobState.SCHEDULED
        if state == job.state:
            continue
        job.state = state
        if state == JobState.SCHEDULED and job.scheduled_at is None:
            job.scheduled_at = now
        if state == JobState.RUNNING:
            job.scheduled_at = job.scheduled_at or now
            job.started_at = job.started_at or now
        if state in FINAL_JOB_STATES:
            job.finished_at = now
        job.save(update_fields=["state", "scheduled_at", "started_at", "finished_at"])


def active_pods_q() -> Q:
    """Pods that hold resources on their node (bound and not finished)."""
    return Q(node__isnull=False, phase__in=[PodPhase.PENDING, PodPhase.RUNNING])


def enact_record(
    *, cluster_nodes: dict[str, Node], plan: object, report: object, now: datetime
) -> None:
    """Write down what the cluster accepted of a plan (both backends call this)."""
    from koordweb.backends.base import EnactPlan, EnactReport

    assert isinstance(plan, EnactPlan) and isinstance(report, EnactReport)
    ids = (
        [b.pod_id for b in plan.bindings]
        + [e.pod_id for e in plan.evictions]
        + [n.pod_id for n in plan.nominations]
    )
    pods = {p.id: p for p in Pod.objects.filter(id__in=ids).select_related("job")}
    evicted = set(report.evicted)
    for eviction in plan.evictions:
        pod = pods[eviction.pod_id]
        if pod.id not in evicted:
            continue
        if pod.phase in (PodPhase.PENDING, PodPhase.RUNNING):
            pod_evict_record(pod=pod, now=now)
        job_mark_preempted(job=pod.job, reason=f"preempted by {eviction.preemptor}", now=now)
    bound = set(report.bound)
    for binding in plan.bindings:
        if binding.pod_id in bound:
            pod_bind_record(
                pod=pods[binding.pod_id],
                node=cluster_nodes[binding.node],
                annotations=binding.annotations,
                now=now,
            )
    nominated = set(report.nominated)
    for nomination in plan.nominations:
        if nomination.pod_id in nominated:
            pod_nominate_record(pod=pods[nomination.pod_id], node=cluster_nodes[nomination.node])
    touched = {pods[i].job_id for i in bound}
    job_refresh_states(jobs=Job.objects.filter(id__in=touched).prefetch_related("pods"), now=now)
