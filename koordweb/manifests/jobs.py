"""Assemble Jobs from parsed pods: one per PodGroup, one per annotation gang, one per lone pod.

Also derives what a job's pods say together: its quota, its state, its times and its gang group.
Priority and references are resolved later, when applying, because they may name stored rows.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

from koordweb.manifests.errors import ManifestError
from koordweb.manifests.objects import POD, POD_GROUP, JobPlan, ManifestSet, ParsedObject
from koordweb.models import JobState, job_state_from_pods
from scheduler.model import gang_group_id
from scheduler.vocabulary import (
    GANG_GROUPS,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_TOPOLOGY_SPEC,
    GANG_TOTAL_NUMBER,
    GANG_WAITING_TIME,
    QUOTA_NAME,
)

# Gang settings every pod of an annotation gang must repeat alike, and where each one is read.
_GANG_FIELDS = {
    "min_available": GANG_MIN_AVAILABLE,
    "total_number": GANG_TOTAL_NUMBER,
    "mode": GANG_MODE,
    "waiting_time_seconds": GANG_WAITING_TIME,
    "gang_groups": GANG_GROUPS,
    "topology_spec": GANG_TOPOLOGY_SPEC,
}


def build_jobs(manifests: ManifestSet) -> None:
    """Fill `manifests.jobs` from its PodGroups and pods (in document order)."""
    plans: dict[tuple[str, str], JobPlan] = {}

    def plan_for(pod: ParsedObject, name: str, kind: str) -> JobPlan:
        plan = plans.get((pod.namespace, name))
        if plan is None:
            plan = JobPlan(pod.index, pod.namespace, name, kind)
            plans[(pod.namespace, name)] = plan
            if kind == "podgroup":
                plan.existing = True  # its PodGroup is not in this import: resolved when applying
        elif plan.kind != kind:
            raise ManifestError(
                pod.index,
                "metadata.name",
                f"job {pod.namespace}/{name} is both a {plan.kind} (document {plan.index}) "
                f"and a {kind}",
            )
        return plan

    for group in manifests.of_kind(POD_GROUP):
        plans[(group.namespace, group.name)] = JobPlan(
            group.index, group.namespace, group.name, "podgroup", values=dict(group.values)
        )
    for pod in manifests.of_kind(POD):
        if "pod_group" in pod.extra:
            plan = plan_for(pod, pod.extra["pod_group"], "podgroup")
        elif "gang" in pod.extra:
            plan = plan_for(pod, pod.extra["gang"], "gang")
            _gang_settings_from(plan, pod)
        else:
            plan = plan_for(pod, pod.name, "pod")
            if plan.pods:
                raise ManifestError(pod.index, "metadata.name", f"duplicate job {pod.key}")
        plan.pods.append(pod)
    unread = [plan for plan in plans.values() if plan.kind == "gang" and not plan.values]
    for plan in unread:
        _leave_out(manifests, plan)
        del plans[(plan.namespace, plan.name)]
    for plan in plans.values():
        _finish(plan)
    manifests.jobs = sorted(plans.values(), key=lambda plan: plan.index)


def _leave_out(manifests: ManifestSet, plan: JobPlan) -> None:
    """A gang none of whose pods has a min-available Koordinator reads is never initialised, so
    koord-scheduler never schedules it (`PreEnqueue`: "gang has not init"): its pods are not
    imported, and the import says so."""
    left = {id(pod) for pod in plan.pods}
    manifests.objects = [obj for obj in manifests.objects if id(obj) not in left]
    documents = ", ".join(str(pod.index) for pod in plan.pods)
    manifests.notes.append(
        f"gang {plan.gang_id}: none of its {len(plan.pods)} pods (documents {documents}) has a "
        f"{GANG_MIN_AVAILABLE} Koordinator reads: koord-scheduler never schedules it, and its "
        "pods are not imported"
    )


def _gang_settings_from(plan: JobPlan, pod: ParsedObject) -> None:
    """The gang takes the settings of its first member that has readable ones (Koordinator's
    gang is initialised once, by the first such pod); a later one must say the same."""
    settings = pod.extra["gang_settings"]
    if settings is None:
        return
    if not plan.values:
        plan.values = {**settings}
        return
    for field, annotation in _GANG_FIELDS.items():
        if settings[field] != plan.values[field]:
            raise ManifestError(
                pod.index,
                f"metadata.annotations.{annotation}",
                f"gang {plan.gang_id} has {plan.values[field]!r} (document {plan.index}), "
                f"this pod says {settings[field]!r}",
            )


def _finish(plan: JobPlan) -> None:
    pods = plan.pods
    values = plan.values
    quotas = {pod.refs["quota"] for pod in pods}
    if len(quotas) > 1:
        raise ManifestError(
            pods[-1].index,
            f"metadata.labels.{QUOTA_NAME}",
            f"the pods of job {plan.gang_id} name different quotas {sorted(quotas)}",
        )
    plan.quota_name = quotas.pop() if quotas else ""
    if plan.existing:
        return
    if plan.kind == "pod":
        values.update(min_available=1, total_number=1)
    else:
        declared = values.get("total_number")
        values["total_number"] = declared or max(values["min_available"], len(pods))
    values.setdefault("gang_groups", [])
    values.setdefault("topology_spec", {})
    values["gang_group"] = gang_group_id([*values["gang_groups"], plan.gang_id])
    if len(values["gang_group"]) > 1000:
        raise ManifestError(
            plan.index,
            f"metadata.annotations.{GANG_GROUPS}",
            "gang group id over 1000 characters",
        )
    durations = [
        pod.extra["duration_seconds"]
        for pod in pods
        if pod.extra.get("duration_seconds") is not None
    ]
    if values.get("duration_seconds") is None and durations:
        values["duration_seconds"] = max(durations)
    values.update(_derived_state(pods, values.get("submitted_at"), values["min_available"]))


def _derived_state(
    pods: list[ParsedObject], submitted_at: datetime | None, min_available: int
) -> dict[str, Any]:
    """A job's state and times from its pods (all bound and Running -> Running, and so on)."""
    phases = Counter(pod.values["phase"] for pod in pods)
    bound_pods = sum(1 for pod in pods if pod.refs["node"])
    started = bool(pods) and bound_pods >= min_available  # the gang has its nodes
    state = job_state_from_pods(phases, bound_pods, min_available, JobState.PENDING)
    created = [pod.values["created_at"] for pod in pods if pod.values["created_at"]]
    bound_times = [pod.values["bound_at"] for pod in pods if pod.values["bound_at"]]
    start_times = [pod.values["started_at"] for pod in pods if pod.values["started_at"]]
    return {
        "state": state,
        "submitted_at": submitted_at or (min(created) if created else None),
        "scheduled_at": max(bound_times) if started and bound_times else None,
        "started_at": max(start_times)
        if state in (JobState.RUNNING, JobState.SUCCEEDED) and start_times
        else None,
    }
