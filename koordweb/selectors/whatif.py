"""What-if: the plan for a hypothetical job on the live state, computed without writing.

The live cluster is read into a snapshot exactly as a round reads it, the hypothetical job and its
pods are added, and the engine runs one round; the answer is what that round decided for the
hypothetical job. Jobs the user may not see are counted, never named.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from django.utils import timezone

from koordweb import snapshot as snapshot_adapter
from koordweb.models import Job, Pod
from koordweb.selectors.tenancy import jobs_visible, user_is_admin
from koordweb.services.engine import engine_profile
from koordweb.services.jobs import ResolvedJob, job_pod_rows
from scheduler.model import GangInfo, JobInfo
from scheduler.result import RoundResult
from scheduler.round import run_round


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
    return job_id, [p.key for p in infos], run_round(hypothetical, engine_profile(resolved.cluster))


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
    answer: dict[str, Any] = {
        "job": job_id,
        "outcome": outcome,
        "feasible": outcome == "placed",
        "placement": placement,
        "decision": result.to_dict()["decisions"].get(job_id),
        "verdict": verdict.to_dict() if verdict else None,
        "preemption": None,
    }
    if preemption is not None:
        answer["preemption"] = _visible_preemption(user, preemption.to_dict())
    return answer


def _visible_preemption(user: Any, record: dict[str, Any]) -> dict[str, Any]:
    """The engine's preemption record with other tenants' jobs and pods counted, not named."""
    victims: list[str] = list(record["victim_jobs"])
    pods: list[str] = list(record["victim_pods"])
    hidden = 0
    if not user_is_admin(user):
        own_jobs = {
            f"{ns}/{name}" for ns, name in jobs_visible(user=user).values_list("namespace", "name")
        }
        # A victim is a gang group ("ns/a,ns/b"): visible only when all its gangs are.
        shown = [v for v in victims if set(v.split(",")) <= own_jobs]
        hidden = len(victims) - len(shown)
        victims = shown
        names = [key.partition("/")[2] for key in pods]
        own_pods = {
            f"{ns}/{name}"
            for ns, name in Pod.objects.filter(
                job__in=jobs_visible(user=user), name__in=names
            ).values_list("namespace", "name")
        }
        pods = [key for key in pods if key in own_pods]
    return {
        "victim_jobs": victims,
        "other_tenants_victim_jobs": hidden,
        "victim_pods": pods,
        "nominations": record["nominations"],
        "reason": record["reason"],
        "cost": record["cost"],
    }
