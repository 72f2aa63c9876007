"""What-if: the plan for a hypothetical job on the live state, computed without writing.

The live cluster is read into a snapshot exactly as a round reads it, the jobs the cluster's last
round left out as backed off are left out too (services/backoff.py: they could not be placed and
nothing has changed for them, so they take no room), the hypothetical job and its pods are added,
and the engine runs one round: never more work than the cluster's own round, however much a tenant
has parked. The answer is what that round decided for the hypothetical job. Jobs, pods and quotas
the user may not see are counted, never named (`koordweb.selectors.redaction`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.utils import timezone

from koordweb import snapshot as snapshot_adapter
from koordweb.models import Job
from koordweb.selectors.redaction import Redactor
from koordweb.services.backoff import backoff_held_jobs, snapshot_without
from koordweb.services.engine import engine_profile
from koordweb.services.jobs import ResolvedJob, job_pod_rows
from scheduler.model import GangInfo, JobInfo
from scheduler.result import RoundResult
from scheduler.round import plan_round


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


def _plan(resolved: ResolvedJob) -> tuple[str, list[str], RoundResult]:
    now = timezone.now()
    live, _ = snapshot_adapter.build_for_round(resolved.cluster, now=now)
    live = snapshot_without(live, backoff_held_jobs(resolved.cluster.id))
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
