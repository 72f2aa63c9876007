"""What-if: the plan for a hypothetical job on the live state, computed without writing.

The live cluster is read into a snapshot exactly as a round reads it, the jobs the cluster's last
round left out as backed off are left out too (services/backoff.py: they could not be placed and
nothing has changed for them, so they take no room), the hypothetical job and its pods are added,
and the engine runs one round: never more work than the cluster's own round, however much a tenant
has parked. The answer is what that round decided for the hypothetical job. Jobs, pods and quotas
the user may not see are counted, never named (`koordweb.selectors.redaction`).

The held jobs are left out at the query (`whatif_snapshot`), so a what-if reads and builds only
what the round plans: their rows are not read at all while they are still all waiting (no pod
bound, nominated or past Pending) and leaving them out still changes no quota's capped demand;
otherwise every row is read and the held jobs are taken out of the built snapshot, as before.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone

from koordweb import snapshot as snapshot_adapter
from koordweb.engine.reads import cluster_read_kept
from koordweb.models import Cluster, Job, Pod, PodPhase
from koordweb.selectors.redaction import Redactor
from koordweb.services.backoff import backoff_held, left_out_is_neutral, snapshot_without
from koordweb.services.engine import engine_profile
from koordweb.services.jobs import ResolvedJob, job_pod_rows
from scheduler.api import RoundResult, plan_round
from scheduler.model import ClusterSnapshot, GangInfo, JobInfo


def _hypothetical_job(resolved: ResolvedJob) -> Job:
    spec = resolved.spec
    name = spec.name
    if Job.objects.filter(cluster=resolved.cluster, namespace=spec.namespace, name=name).exists():
        name = f"{name}-what-if"  # keep its pods' keys apart from the live job's
    return Job(
        cluster=resolved.cluster,
        namespace=spec.namespace,
        name=name,
        quota=resolved.quota,
        priority=resolved.priority,
        min_available=resolved.min_available,
        total_number=spec.replicas,
        mode=spec.mode,
        waiting_time_seconds=spec.waiting_time_seconds,
        topology_spec=resolved.topology_spec,
    )


def whatif_snapshot(cluster: Cluster, *, now: datetime) -> ClusterSnapshot:
    """The live state a what-if plans on: the cluster's snapshot without the jobs its last round
    held back; the pages' shared one (`koordweb.engine.reads`) when nothing changed since it was
    read, else read without the held rows when that is the same snapshot (see the module's
    docstring), else read whole and the held jobs taken out."""
    held = backoff_held(cluster.id)
    kept = cluster_read_kept(cluster)  # the pages' shared state, when nothing changed since
    if kept is not None:
        return snapshot_without(replace(kept.snapshot, now=now.timestamp()), held.jobs)
    if held.rows and _all_waiting(held.rows):
        live, _ = snapshot_adapter.build_for_round(cluster, now=now, without_jobs=held.rows)
        if not any(j.id in held.jobs for j in live.jobs) and left_out_is_neutral(
            live, held.touches
        ):
            return live
    live, _ = snapshot_adapter.build_for_round(cluster, now=now)
    return snapshot_without(live, held.jobs)


def _all_waiting(job_ids: Collection[int]) -> bool:
    """No pod of those jobs holds or is promised a node or is past Pending (finished ones
    aside): the round would leave them out whole."""
    return not (
        Pod.objects.filter(job__id__any=list(job_ids))
        .exclude(phase__in=snapshot_adapter.FINISHED_PHASES)
        .filter(
            Q(node__isnull=False) | Q(nominated_node__isnull=False) | ~Q(phase=PodPhase.PENDING)
        )
        .exists()
    )


def _plan(resolved: ResolvedJob) -> tuple[str, list[str], RoundResult]:
    now = timezone.now()
    live = whatif_snapshot(resolved.cluster, now=now)
    job = _hypothetical_job(resolved)
    spec = resolved.spec
    pods = job_pod_rows(job, replace(resolved, spec=replace(spec, name=job.name)), now)
    quota = resolved.quota.name if resolved.quota else None
    job_id = job.gang_id
    infos = [snapshot_adapter.pod_info(pod, job_id, quota, job.gang_id) for pod in pods]
    policy = resolved.priority_class.preemption_policy if resolved.priority_class else None
    info = JobInfo(
        id=job_id,
        pod_keys=tuple(p.key for p in infos),
        gangs=(
            GangInfo(
                id=job.gang_id,
                min_available=job.min_available,
                total=job.total_number,
                mode=job.mode,  # type: ignore[arg-type]
                waiting_seconds=job.waiting_time_seconds,
            ),
        ),
        priority=job.priority,
        quota=quota,
        topology=snapshot_adapter.parse_topology_rule(job.topology_spec),
        submission_order=now.timestamp(),
        preemption_policy=policy or "PreemptLowerPriority",  # type: ignore[arg-type]
    )
    hypothetical = replace(live, pods=(*live.pods, *infos), jobs=(*live.jobs, info))
    return (
        job_id,
        [p.key for p in infos],
        plan_round(hypothetical, engine_profile(resolved.cluster)),
    )


def job_whatif(*, user: Any, resolved: ResolvedJob) -> dict[str, Any]:
    """The hypothetical job's outcome: placement, why, and whom it would preempt."""
    job_id, pod_keys, result = _plan(resolved)
    placement = {key: result.placements[key].node for key in pod_keys if key in result.placements}
    verdict = result.unschedulable.get(job_id)
    preemption = next((p for p in result.preemptions if p.preemptor == job_id), None)
    if len(placement) == len(pod_keys):
        outcome = "placed"
    elif preemption is not None:
        outcome = "preempting"
    else:
        outcome = "unschedulable"
    redactor = Redactor(user)
    # A name already taken is planned under a suffix; the answer uses the name asked for, so it
    # never tells whether someone else's job holds that name.
    asked = f"{resolved.spec.namespace}/{resolved.spec.name}"
    answer: dict[str, Any] = {
        "job": asked,
        "outcome": outcome,
        "feasible": outcome == "placed",
        "placement": {asked + key[len(job_id) :]: node for key, node in placement.items()},
        "decision": redactor.json(result.to_dict()["decisions"].get(job_id)),
        "verdict": redactor.json(verdict.to_dict()) if verdict else None,
        "preemption": None,
    }
    if preemption is not None:
        record = redactor.json(preemption.to_dict())
        record.pop("preemptor", None)  # the hypothetical job itself
        answer["preemption"] = record
    return answer
