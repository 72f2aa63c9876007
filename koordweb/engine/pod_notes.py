"""What kubectl should show of the pods a round decided about, in kube-scheduler's words.

kube-scheduler tells a pod's story on the pod itself: a pod it cannot place gets the condition
PodScheduled=False (reason Unschedulable, or SchedulerError when binding failed) and a Warning
Event FailedScheduling with the "0/N nodes are available: ..." summary (schedule_one.go,
handleSchedulingFailure); a bound pod a Normal Event Scheduled ("Successfully assigned ns/pod
to node", action Binding); a victim a Normal Event Preempted naming its preemptor ("Preempted
by pod <uid> on node <node>", action Preempting, the preemptor as the related object:
framework/preemption/preemption.go). These notes are made here, from the round's result and
the outbox's report, and written by the backend (`ClusterBackend.explain`): best effort, after
the round's commit, never failing it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from koordweb.backends.base import (
    FAILED_SCHEDULING,
    PREEMPTED,
    SCHEDULED,
    SCHEDULER_ERROR,
    UNSCHEDULABLE,
    ClusterBackend,
    EnactPlan,
    EnactReport,
    PodNote,
)
from koordweb.engine.snapshot import SnapshotIndex
from koordweb.models import Cluster, Intent, Pod, PodPhase, Preemption
from scheduler.api import RoundResult

logger = logging.getLogger("koordweb.notes")
_BIND = Intent.Kind.BIND.value


class _Intent(Protocol):
    @property
    def pod_id(self) -> int: ...
    @property
    def on_node(self) -> int | None: ...


def fit_message(reason: str, nodes: int) -> str:
    """kube-scheduler's FitError summary: the engine's reason when it already is one ("2/4 nodes
    are available: ..."), else the reason after "0/N nodes are available"."""
    if "nodes are available" in reason:
        return reason
    return f"0/{nodes} nodes are available: {reason}"


def round_notes(result: RoundResult, index: SnapshotIndex, nodes: int) -> list[PodNote]:
    """FailedScheduling and PodScheduled=False Unschedulable for every pending pod of a job the
    round could not place (a preemptor waiting for its victims too, as kube-scheduler leaves it
    Unschedulable with its nominated node)."""
    if not result.unschedulable:
        return []
    messages = {job: fit_message(v.reason, nodes) for job, v in result.unschedulable.items()}
    notes = []
    for key, pod_id in sorted(index.pod_ids.items()):
        message = messages.get(index.job_by_pod_key.get(key, ""))
        pod = index.pod_rows.get(pod_id)
        if message is None or pod is None or not _waiting(pod):
            continue
        notes.append(
            PodNote(
                *(pod.namespace, pod.name, pod.uid, FAILED_SCHEDULING, message, "Scheduling"),
                warning=True,
                condition=UNSCHEDULABLE,
            )
        )
    return notes


def _waiting(pod: Any) -> bool:
    return bool(
        pod.uid and pod.node_id is None and pod.phase == PodPhase.PENDING and not pod.terminating
    )


def enact_notes(
    plan: EnactPlan, report: EnactReport, node_names: Mapping[int, str], batch: Collection[_Intent]
) -> list[PodNote]:
    """Scheduled for the pods bound, FailedScheduling (SchedulerError) for the bindings the
    cluster refused, Preempted for the victims evicted."""
    notes = []
    bound = set(report.bound)
    for b in plan.bindings:
        if b.pod_id in bound:
            message = f"Successfully assigned {b.namespace}/{b.name} to {b.node}"
            notes.append(PodNote(b.namespace, b.name, b.uid, SCHEDULED, message, "Binding"))
        elif (_BIND, b.pod_id) in report.refused:
            message = f"binding rejected: {report.refused[(_BIND, b.pod_id)]}"
            notes.append(
                PodNote(
                    *(b.namespace, b.name, b.uid, FAILED_SCHEDULING, message, "Scheduling"),
                    warning=True,
                    condition=SCHEDULER_ERROR,
                )
            )
    evicted = set(report.evicted)
    victims = [e for e in plan.evictions if e.pod_id in evicted]
    if victims:
        on_node = {it.pod_id: it.on_node for it in batch}
        preemptors = _preemptor_pods({e.preemption_id for e in victims if e.preemption_id})
        for e in victims:
            node_id = on_node.get(e.pod_id)
            node = node_names.get(node_id, "") if node_id is not None else ""
            by = preemptors.get(e.preemption_id or 0, {})
            related = by.get(node) or by.get("")
            uid = related[2] if related else e.preemptor
            message = f"Preempted by pod {uid} on node {node}"
            notes.append(
                PodNote(
                    e.namespace, e.name, e.uid, PREEMPTED, message, "Preempting", related=related
                )
            )
    return notes


def _preemptor_pods(records: set[int]) -> dict[int, dict[str, tuple[str, str, str]]]:
    """Per preemption, its preemptor's pod nominated on each node ("" -> its first pod): the pod
    kube-scheduler names to a victim on that node."""
    found: dict[int, dict[str, tuple[str, str, str]]] = {}
    rows = list(Preemption.objects.filter(id__in=records).values_list("id", "preemptor_id"))
    nominations = dict(Preemption.objects.filter(id__in=records).values_list("id", "nominations"))
    pods: dict[int, list[tuple[str, str, str]]] = {}
    for job_id, namespace, name, uid in (
        Pod.objects.filter(job_id__in=[job for _, job in rows])
        .order_by("name")
        .values_list("job_id", "namespace", "name", "uid")
    ):
        pods.setdefault(job_id, []).append((namespace, name, uid))
    for record, job_id in rows:
        members = pods.get(job_id, [])
        by_key = {f"{ns}/{name}": (ns, name, uid) for ns, name, uid in members}
        chosen: dict[str, tuple[str, str, str]] = {}
        for key, node in sorted((nominations.get(record) or {}).items()):
            if key in by_key:
                chosen.setdefault(node, by_key[key])
        if members:
            chosen[""] = members[0]
        found[record] = chosen
    return found


def pods_explain(
    *, cluster: Cluster, backend: ClusterBackend, notes: Sequence[PodNote], now: datetime
) -> int:
    """Hand the notes to the backend; a failure is logged and the round goes on (Events are
    best effort in Kubernetes too)."""
    explain = getattr(backend, "explain", None)  # test doubles may not implement it
    if explain is None:
        return 0
    try:
        return int(explain(cluster, notes, now=now))
    except Exception:
        logger.exception("telling the cluster what the round decided failed")
        return 0
