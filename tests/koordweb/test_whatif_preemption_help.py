"""Why a what-if said "Preempting would not help" for a production job of quota `train` while
`train` runs lower-priority jobs (the 1,000-node page benchmark, benchmarks/ui_pages.py).

The benchmark's simulated koordlet last reports when its world is built; the pages are timed
minutes later, by which time every NodeMetric is older than Koordinator's expiry (180 s,
`nodeMetricExpirationSeconds`). LoadAware then refuses every reported node as "nodeMetric expired"
(Koordinator v1.7 load_aware.go Filter), with or without the victims: a preemption's dry run
still finds no node, so preempting does not help. With reports as fresh as a running koordlet
keeps them, the same what-if preempts `train`'s lower-priority job.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from koordweb.backends.simulated_usage import node_metrics_report
from koordweb.models import Cluster, JobState, NodeMetric
from koordweb.presenters.reasons import decision_sentence
from koordweb.services.jobs import JobSpec, PodShape, job_spec_resolve
from koordweb.services.whatif import job_whatif
from tests import builders as f

GIB = 1024**3
EXPIRY_SECONDS = 180  # Koordinator's default nodeMetricExpirationSeconds


def _train_full(cluster: Cluster) -> list[str]:
    """Two 8-card nodes, each held whole by a priority-5000 job of quota `train`, which is then
    at its max (16 cards): the ids of those jobs."""
    f.PriorityClassFactory(cluster=cluster, name="koord-prod", value=9000)
    batch = f.PriorityClassFactory(cluster=cluster, name="koord-batch", value=5000)
    train = f.QuotaFactory(
        cluster=cluster,
        name="train",
        namespace="train",
        min={"cpu": 64_000, "nvidia.com/gpu": 8},
        max={"cpu": 128_000, "nvidia.com/gpu": 16},
    )
    bound = timezone.now() - timedelta(minutes=10)
    jobs = []
    for i in range(2):
        node = f.gpu_node(cluster, f"gpu-{i}", block=f"b{i}")
        job = f.gang(
            cluster,
            f"batch-{i}",
            quota=train,
            priority_class=batch,
            namespace="train",
            nodes=[node],
            requests={"cpu": 8_000, "memory": 64 * GIB, "nvidia.com/gpu": 8},
            annotations=f.whole_cards(8),
            now=bound,
        )
        jobs.append(job.gang_group)
    return jobs


def _what_if(cluster: Cluster) -> dict:
    admin = f.UserFactory(username="admin", is_staff=True, is_superuser=True)
    spec = JobSpec(
        name="probe",
        namespace="train",
        cluster=cluster.name,
        quota="train",
        priority_class="koord-prod",
        pod=PodShape(requests={"cpu": 16_000, "memory": 128 * GIB, "nvidia.com/gpu": 8}),
    )
    return job_whatif(user=admin, resolved=job_spec_resolve(user=admin, spec=spec))


@pytest.mark.django_db
def test_with_fresh_reports_the_prod_job_preempts_a_lower_priority_train_job() -> None:
    cluster = f.ClusterFactory(name="default")
    victims = _train_full(cluster)
    node_metrics_report(cluster, now=timezone.now() - timedelta(seconds=30))
    plan = _what_if(cluster)
    assert plan["outcome"] == "preempting", plan["verdict"]
    assert len(plan["preemption"]["victim_jobs"]) == 1
    assert set(plan["preemption"]["victim_jobs"]) <= set(victims)
    assert plan["preemption"]["rule"] == "InQuota"


@pytest.mark.django_db
def test_with_expired_reports_every_node_is_refused_so_preempting_cannot_help() -> None:
    cluster = f.ClusterFactory(name="default")
    _train_full(cluster)
    node_metrics_report(cluster, now=timezone.now() - timedelta(seconds=EXPIRY_SECONDS + 20))
    assert NodeMetric.objects.filter(node__cluster=cluster).count() == 2
    plan = _what_if(cluster)
    assert plan["outcome"] == "unschedulable"
    assert cluster.jobs.filter(state=JobState.RUNNING).count() == 2
    verdict = plan["verdict"]
    preemption = verdict["details"]["preemption"]
    # The engine says why: no node is left even with every candidate evicted, as all are expired.
    assert preemption["cause"] == "PreemptionNotHelpful"
    assert "2 node(s) nodeMetric expired" in preemption["reason"]
    explained = decision_sentence("unschedulable", verdict["reason"], verdict["details"])
    assert "Preempting would not help" in explained.sentence
