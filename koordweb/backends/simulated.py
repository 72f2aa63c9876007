"""The simulated backend: the database is the cluster, and a simulated kubelet runs its pods.

On every sync the kubelet starts bound pods, finishes jobs whose declared duration has passed
(on the round's injected clock) and lets evicted pods go. Enacting a plan is writing it down.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from koordweb.backends.base import EnactPlan, EnactReport
from koordweb.models import Cluster, Job, JobState, Node, Pod, PodPhase
from koordweb.services import pods as pod_services


class SimulatedBackend:
    name = "simulated"

    def sync(self, cluster: Cluster, *, now: datetime) -> None:
        started = cluster.pods.filter(node__isnull=False, phase=PodPhase.PENDING)
        touched = set(started.values_list("job_id", flat=True))
        started.update(phase=PodPhase.RUNNING, started_at=now)
        running_jobs = cluster.jobs.filter(state__in=[JobState.SCHEDULED, JobState.RUNNING])
        for job in running_jobs.filter(duration_seconds__isnull=False, started_at__isnull=False):
            assert job.started_at is not None and job.duration_seconds is not None
            if job.started_at + timedelta(seconds=job.duration_seconds) <= now:
                job.pods.filter(phase=PodPhase.RUNNING).update(
                    phase=PodPhase.SUCCEEDED, finished_at=now
                )
                touched.add(job.id)
        jobs = Job.objects.filter(id__in=touched).prefetch_related("pods")
        pod_services.job_refresh_states(jobs=jobs, now=now)

    def enact(self, cluster: Cluster, plan: EnactPlan, *, now: datetime) -> EnactReport:
        report = EnactReport()
        ids = (
            [b.pod_id for b in plan.bindings]
            + [e.pod_id for e in plan.evictions]
            + [n.pod_id for n in plan.nominations]
        )
        pods = {p.id: p for p in Pod.objects.filter(id__in=ids).select_related("job")}
        nodes = {n.name: n for n in cluster.nodes.all()}
        for eviction in plan.evictions:
            pod = pods[eviction.pod_id]
            if pod.phase in (PodPhase.PENDING, PodPhase.RUNNING):
                pod_services.pod_evict_record(pod=pod, now=now)
            pod_services.job_mark_preempted(
                job=pod.job, reason=f"preempted by {eviction.preemptor}", now=now
            )
            report.evicted.append(pod.id)
        for binding in plan.bindings:
            pod = pods[binding.pod_id]
            node: Node | None = nodes.get(binding.node)
            if node is None:
                report.dropped[pod.id] = f"node {binding.node} no longer exists"
                continue
            if pod.node_id is not None and pod.node_id != node.id:
                report.dropped[pod.id] = f"pod is already assigned to node {pod.node}"
                continue
            pod_services.pod_bind_record(
                pod=pod, node=node, annotations=binding.annotations, now=now
            )
            report.bound.append(pod.id)
        for nomination in plan.nominations:
            pod = pods[nomination.pod_id]
            node = nodes.get(nomination.node)
            if node is not None and pod.node_id is None:
                pod_services.pod_nominate_record(pod=pod, node=node)
                report.nominated.append(pod.id)
        touched = {pods[i].job_id for i in report.bound}
        pod_services.job_refresh_states(
            jobs=Job.objects.filter(id__in=touched).prefetch_related("pods"), now=now
        )
        return report
