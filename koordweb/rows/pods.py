"""Pod and job state changes that follow what happened in the cluster (bind, evict, run, finish).

Both backends call these after the cluster accepted an action, so the database tells the same
story whichever backend ran the round. Writes are batched: a round binding 5,000 pods issues a
handful of statements, not 5,000.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import connection
from django.db.models import Count

from koordweb.models import Intent, Job, JobState, Node, Pod, PodPhase, job_state_from_pods
from koordweb.rows.bulk import rows_update
from koordweb.rows.changes import change_position_set
from koordweb.rows.lookups import id_list_sql
from scheduler import vocabulary as names
from scheduler.vocabulary import FINISHED_POD_PHASES

# The vocabulary's finished phases under the name backends/simulated.py still imports.
# What a binding writes on a pod: a pod created again must not carry its previous life's cards.
SCHEDULER_WRITTEN = frozenset(
    {
        names.ANNOTATION_DEVICE_ALLOCATED,
        names.ANNOTATION_CAMBRICON_PROFILE,
        names.ANNOTATION_CAMBRICON_ASSIGNED,
        names.ANNOTATION_HUAWEI_NPU_CORE,
    }
)

# What deriving a job's state reads and writes (jobs loaded for it need nothing else).
JOB_STATE_FIELDS = (
    "id",
    "state",
    "state_reason",
    "min_available",
    "scheduled_at",
    "started_at",
    "finished_at",
)
ADMISSION_REQUEUE_LIMIT = 3  # a job refused this many times by kubelets fails instead


def pods_bind(*, intent_ids: Sequence[int], now: datetime) -> int:
    """The pods of bind intents the cluster accepted take the intent's node, its annotations
    over their own (`SCHEDULER_WRITTEN` and the like) and `now` as their bound time; their
    nomination is spent. A pod that finished or began terminating since the intent was decided
    (its job cancelled meanwhile, say) is left as it is. One statement: the values go from the
    intent rows to the pod rows inside the database, never through Python (a round binds
    thousands). Returns the pods written."""
    if not intent_ids:
        return 0
    q = connection.ops.quote_name
    pod, intent, node = (q(m._meta.db_table) for m in (Pod, Intent, Node))
    if connection.vendor == "postgresql":
        merged = f"{pod}.annotations || COALESCE(i.payload -> 'annotations', '{{}}'::jsonb)"
    else:
        # SQLite: JSON is text; json_patch merges two objects the same way for string values.
        merged = (
            f"json_patch({pod}.annotations, COALESCE(json_extract(i.payload, '$.annotations'), "
            "'{}'))"
        )
    ids_sql, ids = id_list_sql(connection, "i.id", intent_ids)
    sql = (
        f"UPDATE {pod} SET node_id = n.id, nominated_node_id = NULL, bound_at = %s, "
        f"annotations = {merged}{change_position_set(Pod)} "
        f"FROM {intent} AS i JOIN {node} AS n ON n.cluster_id = i.cluster_id AND n.name = i.node "
        f"WHERE {ids_sql} AND {pod}.id = i.pod_id AND NOT {pod}.terminating "
        f"AND {pod}.phase NOT IN (%s, %s)"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql, [connection.ops.adapt_datetimefield_value(now), ids, *FINISHED_POD_PHASES]
        )
        return cursor.rowcount


def _job_end(*, job: Job, state: str, reason: str, now: datetime) -> None:
    if job.state in JobState.FINAL:
        return
    job.state = state
    job.state_reason = reason
    job.finished_at = now
    job.save(update_fields=["state", "state_reason", "finished_at"])
    job.pods.filter(phase__in=[PodPhase.PENDING, PodPhase.RUNNING]).update(
        phase=PodPhase.FAILED, finished_at=now, nominated_node=None
    )


def job_mark_failed(*, job: Job, reason: str, now: datetime) -> None:
    _job_end(job=job, state=JobState.FAILED, reason=reason, now=now)


def pods_terminating(*, pods: Iterable[Pod], now: datetime) -> None:
    """The cluster accepted these pods' deletion: they stay on their nodes until they are gone."""
    rows = [p for p in pods if not p.terminating]
    for pod in rows:
        pod.terminating = True
        pod.terminating_since = now
        pod.nominated_node = None
    rows_update(Pod, rows, ["terminating", "terminating_since", "nominated_node"])


# A victim's reason names no preemptor: its owner may be another team, whose jobs a tenant sees
# counted, never named. Who preempted it is in the Preemption record, shown to each reader as
# they may see it.
PREEMPTED_REASON = "evicted to make room for another job"


def job_mark_preempting(*, job: Job) -> None:
    """Evicted whole: Preempting while its pods terminate, Preempted once they are all gone."""
    if job.state in JobState.FINAL or job.state == JobState.PREEMPTING:
        return
    job.state = JobState.PREEMPTING
    job.state_reason = f"{PREEMPTED_REASON}; waiting for its pods to stop"
    job.save(update_fields=["state", "state_reason"])


def job_requeue_refused(*, job: Job, reason: str, now: datetime) -> list[Pod]:
    """A kubelet refused a pod of this job: take the whole gang off its nodes and queue it again.

    Returns the pods to delete from the cluster (every pod of the job still there); the job is
    `Requeueing` until they are gone, then Pending with fresh pods. Past ADMISSION_REQUEUE_LIMIT
    refusals the job fails instead, with the kubelet's words."""
    job.admission_rejections += 1
    job.save(update_fields=["admission_rejections"])
    doomed = list(job.pods.exclude(phase__in=FINISHED_POD_PHASES).exclude(uid=""))
    if job.admission_rejections >= ADMISSION_REQUEUE_LIMIT:
        _job_end(
            job=job,
            state=JobState.FAILED,
            reason=f"{reason}; refused {job.admission_rejections} times, so it is not requeued",
            now=now,
        )
        return doomed
    job.state = JobState.REQUEUEING
    job.state_reason = f"{reason}; requeued whole (refusal {job.admission_rejections})"
    job.scheduled_at = None
    job.save(update_fields=["state", "state_reason", "scheduled_at"])
    pods_terminating(pods=doomed, now=now)
    return doomed


def jobs_settle_terminations(*, jobs: Iterable[Job], now: datetime) -> None:
    """Jobs whose pods were terminating and are now all gone move on.

    Preempting -> Preempted. Requeueing -> Pending, its pods fresh (no node, no uid: they are
    created again, under the same names, by the next round)."""
    waiting = {j.id: j for j in jobs if j.state in JobState.TERMINATING}
    if not waiting:
        return
    holding = set(
        Pod.objects.filter(job_id__in=list(waiting))
        .exclude(phase__in=FINISHED_POD_PHASES)
        .values_list("job_id", flat=True)
    )
    for job_id, job in waiting.items():
        if job_id in holding:
            continue
        if job.state == JobState.PREEMPTING:
            job.state = JobState.PREEMPTED
            job.state_reason = job.state_reason.replace("; waiting for its pods to stop", "")
            job.finished_at = now
            job.save(update_fields=["state", "state_reason", "finished_at"])
            continue
        job.pods.update(
            uid="",
            node=None,
            nominated_node=None,
            phase=PodPhase.PENDING,
            terminating=False,
            terminating_since=None,
            bound_at=None,
            started_at=None,
            finished_at=None,
        )
        for pod in job.pods.all():
            kept = {k: v for k, v in pod.annotations.items() if k not in SCHEDULER_WRITTEN}
            if kept != pod.annotations:
                pod.annotations = kept
                pod.save(update_fields=["annotations"])
        job.state = JobState.PENDING
        job.save(update_fields=["state"])


def job_refresh_states(*, jobs: Iterable[Job], now: datetime) -> None:
    """Derive each active job's state from its pods (Pending -> Scheduled -> Running -> done).

    One aggregate query over the jobs' pods, one batched write of the jobs that changed."""
    jobs = list(jobs)
    jobs_settle_terminations(jobs=jobs, now=now)
    # Preempting and requeueing jobs follow their terminations, not their pods' phases.
    active = {
        job.id: job
        for job in jobs
        if job.state not in JobState.FINAL and job.state not in JobState.TERMINATING
    }
    if not active:
        return
    phases: dict[int, Counter[str]] = defaultdict(Counter)
    bound: dict[int, int] = defaultdict(int)
    for row in (
        Pod.objects.filter(job__id__any=list(active))
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
        state = job_state_from_pods(phases[job_id], bound[job_id], job.min_available, job.state)
        if state == job.state:
            continue
        job.state = state
        if state == JobState.SCHEDULED and job.scheduled_at is None:
            job.scheduled_at = now
        if state == JobState.RUNNING:
            job.scheduled_at = job.scheduled_at or now
            job.started_at = job.started_at or now
        if state in JobState.FINAL:
            job.finished_at = now
        changed.append(job)
    rows_update(Job, changed, ["state", "scheduled_at", "started_at", "finished_at"])
