"""Pod and job state changes that follow what happened in the cluster (bind, evict, run, finish).

Both backends call these after the cluster accepted an action, so the database tells the same
story whichever backend ran the round. Writes are batched: a round binding 5,000 pods issues a
handful of statements, not 5,000.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import Count, Field, Model

from koordweb.models import Job, JobState, Node, Pod, PodPhase

if TYPE_CHECKING:
    from koordweb.backends.base import EnactPlan, EnactReport

FINAL_JOB_STATES = (JobState.SUCCEEDED, JobState.FAILED, JobState.PREEMPTED, JobState.CANCELLED)


def pod_evict_record(*, pod: Pod, now: datetime) -> None:
    """The pod is gone from its node; its job is preempted (a job is evicted whole)."""
    pod.phase = PodPhase.FAILED
    pod.terminating = False
    pod.finished_at = now
    pod.save(update_fields=["phase", "terminating", "finished_at"])


def _job_end(*, job: Job, state: str, reason: str, now: datetime) -> None:
    if job.state in FINAL_JOB_STATES:
        return
    job.state = state
    job.state_reason = reason
    job.finished_at = now
    job.save(update_fields=["state", "state_reason", "finished_at"])
    job.pods.filter(phase__in=[PodPhase.PENDING, PodPhase.RUNNING]).update(
        phase=PodPhase.FAILED, finished_at=now, nominated_node=None
    )


def job_mark_preempted(*, job: Job, reason: str, now: datetime) -> None:
    _job_end(job=job, state=JobState.PREEMPTED, reason=reason, now=now)


def job_mark_failed(*, job: Job, reason: str, now: datetime) -> None:
    _job_end(job=job, state=JobState.FAILED, reason=reason, now=now)


def _derived_state(job: Job, phases: Counter[str], bound: int) -> str:
    total = sum(phases.values())
    if phases[PodPhase.SUCCEEDED] == total:
        return JobState.SUCCEEDED
    if phases[PodPhase.FAILED]:
        return JobState.FAILED
    if phases[PodPhase.RUNNING] == total:
        return JobState.RUNNING
    if bound >= job.min_available:
        return JobState.SCHEDULED
    return job.state


def job_refresh_states(*, jobs: Iterable[Job], now: datetime) -> None:
    """Derive each active job's state from its pods (Pending -> Scheduled -> Running -> done).

    One aggregate query over the jobs' pods, one batched write of the jobs that changed."""
    active = {job.id: job for job in jobs if job.state not in FINAL_JOB_STATES}
    if not active:
        return
    phases: dict[int, Counter[str]] = defaultdict(Counter)
    bound: dict[int, int] = defaultdict(int)
    for row in (
        Pod.objects.filter(job_id__in=list(active))
        .values("job_id", "phase")
        .annotate(pods=Count("id"), bound=Count("node_id"))
        .order_by()
    ):
        phases[row["job_id"]][row["phase"]] += row["pods"]
        bound[row["job_id"]] += row["bound"]
    changed: list[Job] = []
    for job_id, job in active.items():
        if not phases.get(job_id):
            continue
        state = _derived_state(job, phases[job_id], bound[job_id])
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
        changed.append(job)
    rows_update(Job, changed, ["state", "scheduled_at", "started_at", "finished_at"])


def rows_update(model: type[Model], rows: list[Any], fields: list[str]) -> None:
    """Write `fields` of many rows with one prepared UPDATE run for each row.

    bulk_update builds CASE expressions that cost seconds of Python at 5,000 rows; a prepared
    statement costs the round trip."""
    if not rows:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    columns = [field for name in fields if isinstance(field := model._meta.get_field(name), Field)]
    assignments = ", ".join(
        f"{connection.ops.quote_name(c.column or c.name)} = %s" for c in columns
    )
    params = [
        [c.get_db_prep_save(getattr(row, c.attname), connection) for c in columns] + [row.pk]
        for row in rows
    ]
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {table} SET {assignments} WHERE id = %s", params)


def enact_record(
    *, cluster_nodes: dict[str, Node], plan: EnactPlan, report: EnactReport, now: datetime
) -> None:
    """Write down what the cluster accepted of a plan (both backends call this)."""
    ids = (
        [b.pod_id for b in plan.bindings]
        + [e.pod_id for e in plan.evictions]
        + [n.pod_id for n in plan.nominations]
    )
    pods = {
        p.id: p
        for p in Pod.objects.filter(id__in=ids)
        .select_related("job")
        .only("id", "job", "phase", "annotations", "node_id", "nominated_node_id")
    }
    evicted = set(report.evicted)
    for eviction in plan.evictions:
        pod = pods[eviction.pod_id]
        if pod.id not in evicted:
            continue
        if pod.phase in (PodPhase.PENDING, PodPhase.RUNNING):
            pod_evict_record(pod=pod, now=now)
        job_mark_preempted(job=pod.job, reason=f"preempted by {eviction.preemptor}", now=now)
    bound = set(report.bound)
    to_bind: list[Pod] = []
    for binding in plan.bindings:
        if binding.pod_id not in bound:
            continue
        pod = pods[binding.pod_id]
        pod.node = cluster_nodes[binding.node]
        pod.nominated_node = None
        pod.bound_at = now
        pod.annotations = {**pod.annotations, **binding.annotations}
        to_bind.append(pod)
    rows_update(Pod, to_bind, ["node", "nominated_node", "bound_at", "annotations"])
    nominated = set(report.nominated)
    to_nominate: list[Pod] = []
    for nomination in plan.nominations:
        if nomination.pod_id in nominated:
            pod = pods[nomination.pod_id]
            pod.nominated_node = cluster_nodes[nomination.node]
            pod.nominated_at = now
            to_nominate.append(pod)
    rows_update(Pod, to_nominate, ["nominated_node", "nominated_at"])
    touched = {pods[i].job_id for i in bound}
    job_refresh_states(jobs=Job.objects.filter(id__in=touched), now=now)
