"""The simulated backend: the database is the cluster, and a simulated kubelet runs its pods.

On every sync the kubelet starts bound pods, finishes jobs whose declared duration has passed
(on the round's injected clock) and lets terminating pods go once their grace period
(KOORDWEB_SIMULATED_GRACE_SECONDS) has passed: until then they hold their nodes, as on a real
cluster. Enacting a plan changes nothing but what the outbox records: it only checks that the
cluster has not moved on (the node still exists, the pod is not bound elsewhere).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from koordweb.backends.base import EnactPlan, EnactReport, NodeGone, PodNote
from koordweb.models import Cluster, Job, JobState, Node, Pod, PodPhase
from koordweb.rows import pods as pod_services
from koordweb.rows.read import rows_read
from scheduler.vocabulary import FINISHED_POD_PHASES


class SimulatedBackend:
    name = "simulated"
    # Enacting is a few statements on the database that is the cluster: a round's whole plan
    # is one call.
    enact_chunk = 50_000

    def prepare(self, cluster: Cluster) -> None:
        """The database is the cluster: nothing to wait for."""

    def sync(self, cluster: Cluster, *, now: datetime) -> dict[str, Any]:
        grace = timedelta(seconds=settings.KOORDWEB_SIMULATED_GRACE_SECONDS)
        gone = cluster.pods.filter(terminating=True, terminating_since__lte=now - grace).exclude(
            phase__in=FINISHED_POD_PHASES
        )
        touched = set(gone.order_by().values_list("job_id", flat=True))
        pods_gone = gone.update(phase=PodPhase.FAILED, finished_at=now)
        started = cluster.pods.filter(node__isnull=False, phase=PodPhase.PENDING)
        touched |= set(started.order_by().values_list("job_id", flat=True))
        started.update(phase=PodPhase.RUNNING, started_at=now)
        running_jobs = cluster.jobs.filter(state__in=JobState.PLACED)
        for job in running_jobs.filter(duration_seconds__isnull=False, started_at__isnull=False):
            assert job.started_at is not None and job.duration_seconds is not None
            if job.started_at + timedelta(seconds=job.duration_seconds) <= now:
                job.pods.filter(phase=PodPhase.RUNNING).update(
                    phase=PodPhase.SUCCEEDED, finished_at=now
                )
                touched.add(job.id)
        jobs = Job.objects.filter(id__any=list(touched)).order_by()
        pod_services.job_refresh_states(jobs=jobs, now=now)
        return {"pods_gone": pods_gone}

    def enact(self, cluster: Cluster, plan: EnactPlan, *, now: datetime) -> EnactReport:
        """Every action succeeds unless the database says the cluster has moved on."""
        report = EnactReport()
        names = dict(
            rows_read(
                Node.objects.filter(cluster_id=cluster.id).order_by().values_list("id", "name")
            )
        )
        nodes = set(names.values())
        # Only pods already on a node can conflict; their node's name comes from `names`, not
        # from a join (the plan's pods are looked up by key, whatever the table holds).
        bound_to = dict(
            rows_read(
                Pod.objects.filter(id__any=[b.pod_id for b in plan.bindings], node__isnull=False)
                .order_by()
                .values_list("id", "node_id")
            )
        )
        report.evicted = [e.pod_id for e in plan.evictions]
        for binding in plan.bindings:
            node_id = bound_to.get(binding.pod_id)
            current = names.get(node_id, f"#{node_id}") if node_id is not None else None
            if binding.node not in nodes:
                report.dropped[binding.pod_id] = f"node {binding.node} no longer exists"
            elif current is not None and current != binding.node:
                report.dropped[binding.pod_id] = f"pod is already assigned to node {current}"
            else:
                report.bound.append(binding.pod_id)
        # An empty node gives a nomination up.
        report.nominated = [n.pod_id for n in plan.nominations if not n.node or n.node in nodes]
        report.deleted = [d.pod_id for d in plan.deletions]
        return report

    def refusal(self, error: Exception) -> str | None:
        """The database that is the cluster refuses nothing: an error is a fault of the round."""
        return None

    def explain(self, cluster: Cluster, notes: Sequence[PodNote], *, now: datetime) -> int:
        """Nothing to write: the job page shows the Events a real cluster would have been given,
        from the round's Decision rows (`selectors.jobs.job_events`)."""
        return 0

    def cordon(self, cluster: Cluster, node: str, *, unschedulable: bool) -> bool:
        """The node's row is the node: set its cordon. The update moves the row's change
        position, so the next round's warm snapshot reads it again (and the back-off sees a
        node changed)."""
        rows = Node.objects.filter(cluster_id=cluster.id, name=node)
        if not rows.exists():
            raise NodeGone(node)
        rows.exclude(unschedulable=unschedulable).update(unschedulable=unschedulable)
        return unschedulable
