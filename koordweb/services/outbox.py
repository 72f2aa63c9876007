"""The round's outbox: intents written with the plan, enacted after it commits, marked done.

`intents_write` runs inside the round's transaction; `intents_enact` runs after it, outside any
transaction: it reads pending intents in enact order, asks the backend to apply them (cluster calls
only), then records the outcomes and marks the intents done in one short transaction per chunk.
Pending intents left by a worker that died are enacted by the next round before it plans; every
action is idempotent, so a chunk enacted twice binds, evicts or creates nothing twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from koordweb.backends.base import (
    Binding,
    ClusterBackend,
    Creation,
    Deletion,
    EnactPlan,
    EnactReport,
    Eviction,
    Nomination,
)
from koordweb.models import Cluster, Intent, Pod, PodPhase, Preemption
from koordweb.models.outbox import STEPS
from koordweb.models.workload import FINAL_JOB_STATES
from koordweb.services import pods as pod_services

CHUNK = 2000  # intents enacted between two outcome records
KEEP_DONE = timedelta(minutes=10)  # done intents are kept this long, for a look after the fact
KEEP_DROPPED = timedelta(days=1)  # dropped ones carry the cluster's reason: kept longer


@dataclass
class EnactSummary:
    """What one call of `intents_enact` did, over every chunk."""

    report: EnactReport
    intents: int = 0
    dropped: int = 0


def intents_write(*, cluster: Cluster, round_id: int | None, plan: EnactPlan, now: datetime) -> int:
    """The round's plan as pending intents (call inside the round's transaction)."""
    rows: list[Intent] = []

    def add(kind: str, pod_id: int, **fields: Any) -> None:
        rows.append(
            Intent(
                cluster=cluster,
                round_id=round_id,
                pod_id=pod_id,
                kind=kind,
                step=STEPS[Intent.Kind(kind)],
                created_at=now,
                **fields,
            )
        )

    for c in plan.creations:
        add(Intent.Kind.CREATE, c.pod_id)
    for b in plan.bindings:
        payload: dict[str, Any] = {"annotations": b.annotations, "labels": b.labels}
        add(Intent.Kind.BIND, b.pod_id, node=b.node, uid=b.uid, payload=payload)
    for e in plan.evictions:
        payload = {"preemptor": e.preemptor, "preemption": e.preemption_id}
        add(Intent.Kind.EVICT, e.pod_id, uid=e.uid, payload=payload)
    for n in plan.nominations:
        add(Intent.Kind.NOMINATE, n.pod_id, node=n.node)
    for d in plan.deletions:
        add(Intent.Kind.DELETE, d.pod_id, uid=d.uid)
    Intent.objects.bulk_create(rows, batch_size=1000)
    return len(rows)


def intents_pending(*, cluster: Cluster) -> int:
    return Intent.objects.filter(cluster=cluster, state=Intent.State.PENDING).count()


def intents_enact(*, cluster: Cluster, backend: ClusterBackend, now: datetime) -> EnactSummary:
    """Enact every pending intent of the cluster, oldest round first, in enact order."""
    summary = EnactSummary(EnactReport())
    _prune(cluster, now)
    while True:
        batch = list(
            Intent.objects.filter(cluster=cluster, state=Intent.State.PENDING)
            .select_related("pod", "pod__job")
            .order_by("step", "id")[:CHUNK]
        )
        if not batch:
            return summary
        nodes = {n.name: n for n in cluster.nodes.all()}
        plan, settled = _plan_of(batch, set(nodes))
        report = backend.enact(cluster, plan, now=now) if len(plan) else EnactReport()
        with transaction.atomic():
            pod_services.enact_record(cluster_nodes=nodes, plan=plan, report=report, now=now)
            _preemption_states(plan, report)
            summary.dropped += _mark(batch, report, settled, now)
        summary.intents += len(batch)
        _merge(summary.report, report)


def _plan_of(
    intents: Sequence[Intent], nodes: set[str]
) -> tuple[EnactPlan, dict[int, tuple[str, str]]]:
    """The plan of the intents that still apply; the others settled at once (state, outcome)."""
    creations: list[Creation] = []
    bindings: list[Binding] = []
    evictions: list[Eviction] = []
    nominations: list[Nomination] = []
    deletions: list[Deletion] = []
    settled: dict[int, tuple[str, str]] = {}
    for intent in intents:
        pod: Pod = intent.pod
        finished = pod.phase in (PodPhase.SUCCEEDED, PodPhase.FAILED)
        job_over = pod.job.state in FINAL_JOB_STATES
        kind = intent.kind
        if kind == Intent.Kind.CREATE:
            if pod.uid:
                settled[intent.id] = (Intent.State.DONE, "already created")
            elif job_over or finished:
                settled[intent.id] = (Intent.State.DROPPED, "the job is over")
            else:
                creations.append(Creation(pod.id, pod.job_id, pod.namespace, pod.name))
        elif kind == Intent.Kind.BIND:
            if finished or job_over or pod.terminating:
                settled[intent.id] = (Intent.State.DROPPED, "the pod is no longer waiting")
            elif intent.node not in nodes:
                settled[intent.id] = (Intent.State.DROPPED, f"node {intent.node} is gone")
            else:
                bindings.append(
                    Binding(
                        pod.id,
                        pod.namespace,
                        pod.name,
                        intent.uid or pod.uid,
                        intent.node,
                        dict(intent.payload.get("annotations") or {}),
                        dict(intent.payload.get("labels") or {}),
                    )
                )
        elif kind == Intent.Kind.EVICT:
            if finished:
                settled[intent.id] = (Intent.State.DONE, "already gone")
            else:
                evictions.append(
                    Eviction(
                        pod.id,
                        pod.namespace,
                        pod.name,
                        str(intent.payload.get("preemptor") or ""),
                        intent.payload.get("preemption"),
                        intent.uid,
                    )
                )
        elif kind == Intent.Kind.NOMINATE:
            if finished or pod.node_id is not None or (intent.node and intent.node not in nodes):
                settled[intent.id] = (Intent.State.DROPPED, "the pod is no longer waiting")
            else:
                nominations.append(Nomination(pod.id, pod.namespace, pod.name, intent.node))
        elif finished and not pod.uid:
            settled[intent.id] = (Intent.State.DONE, "already gone")
        else:
            deletions.append(Deletion(pod.id, pod.namespace, pod.name, intent.uid or pod.uid))
    plan = EnactPlan(
        tuple(bindings),
        tuple(evictions),
        tuple(nominations),
        tuple(creations),
        tuple(deletions),
    )
    return plan, settled


def _outcome(intent: Intent, report: EnactReport) -> tuple[str, str]:
    pod_id, kind = intent.pod_id, intent.kind
    failed: str | None = None
    if kind == Intent.Kind.CREATE:
        if pod_id not in report.created:
            failed = report.refused_jobs.get(intent.pod.job_id, "not created")
    elif kind == Intent.Kind.BIND:
        failed = report.dropped.get(pod_id) if pod_id not in report.bound else None
    elif kind == Intent.Kind.EVICT:
        failed = report.blocked.get(pod_id) or report.replaced.get(pod_id)
    elif kind == Intent.Kind.NOMINATE:
        failed = None if pod_id in report.nominated else "the pod is gone"
    elif pod_id not in report.deleted:
        failed = "not deleted"
    return (Intent.State.DROPPED, failed) if failed else (Intent.State.DONE, "")


def _mark(
    intents: Iterable[Intent],
    report: EnactReport,
    settled: dict[int, tuple[str, str]],
    now: datetime,
) -> int:
    """Mark the intents with their outcomes: one UPDATE per distinct outcome."""
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for intent in intents:
        state, outcome = settled.get(intent.id) or _outcome(intent, report)
        groups[(state, outcome[:2000])].append(intent.id)
    for (state, outcome), ids in groups.items():
        Intent.objects.filter(id__in=ids).update(state=state, outcome=outcome, done_at=now)
    return sum(len(ids) for (state, _), ids in groups.items() if state == Intent.State.DROPPED)


def _preemption_states(plan: EnactPlan, report: EnactReport) -> None:
    """A preemption is enacted when its evictions were accepted, blocked when a budget refused."""
    by_record: dict[int, list[Eviction]] = defaultdict(list)
    for eviction in plan.evictions:
        if eviction.preemption_id is not None:
            by_record[eviction.preemption_id].append(eviction)
    for record in Preemption.objects.filter(id__in=list(by_record)):
        evictions = by_record[record.id]
        blocked = [report.blocked[e.pod_id] for e in evictions if e.pod_id in report.blocked]
        replaced = [e for e in evictions if e.pod_id in report.replaced]
        if blocked:
            record.state = Preemption.State.BLOCKED
            record.reason = f"{record.reason}; blocked: {blocked[0]}"
        elif replaced:
            names = ", ".join(f"{e.namespace}/{e.name}" for e in replaced[:3])
            record.reason = (
                f"{record.reason}; {names} was replaced by a new pod of the same name before "
                "its eviction, so it was not evicted: the next round plans again"
            )
            if any(e.pod_id in report.evicted for e in evictions):
                record.state = Preemption.State.ENACTED
        else:
            record.state = Preemption.State.ENACTED
        record.save(update_fields=["state", "reason"])


def _merge(total: EnactReport, part: EnactReport) -> None:
    total.bound += part.bound
    total.evicted += part.evicted
    total.nominated += part.nominated
    total.deleted += part.deleted
    for name in ("dropped", "blocked", "replaced", "created", "refused_jobs"):
        getattr(total, name).update(getattr(part, name))


def _prune(cluster: Cluster, now: datetime) -> None:
    Intent.objects.filter(
        cluster=cluster, state=Intent.State.DONE, done_at__lt=now - KEEP_DONE
    ).delete()
    Intent.objects.filter(
        cluster=cluster, state=Intent.State.DROPPED, done_at__lt=now - KEEP_DROPPED
    ).delete()
