"""The simulated koordlet lists each running pod's own use in its node reports (`podsMetric`), so
Koordinator's load-aware rule (an estimate only for bound pods a report does not list, or that
were bound within its last interval) does not count a reported pod twice."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from koordweb.backends.simulated_usage import node_metrics_report
from koordweb.models import Decision, Job, JobState, NodeMetric
from tests import builders as f

CPU_CORES = 64
# Two running pods of 24 cores each: 28.8 of 64 cores used (45%), under the 65% threshold. Their
# estimates (85% of requests, 40.8 cores) on top of that use would be 109%.
RUNNING_CPU = 24_000
NEW_CPU = 8_000  # estimated 6.8 cores: 35.6 of 64 cores (56%) with the reported use


@pytest.mark.django_db
def test_a_node_under_the_threshold_takes_a_pod_and_its_report_lists_its_pods() -> None:
    now = timezone.now()
    cluster = f.ClusterFactory(name="sim")
    node = f.gpu_node(cluster, "gpu-0", block="b0", cpu=CPU_CORES * 1000)
    quota = f.QuotaFactory(cluster=cluster, name="team-a", namespace="team-a")
    running = f.gang(
        cluster,
        "train",
        quota=quota,
        replicas=2,
        requests={"cpu": RUNNING_CPU, "nvidia.com/gpu": 2},
        now=now,
    )
    for minute in range(3):  # bound in the first round, started in the next
        f.simulated_round(cluster, now + timedelta(minutes=minute))
    running.refresh_from_db()
    assert running.state == JobState.RUNNING

    reported_at = now + timedelta(minutes=5)
    assert node_metrics_report(cluster, now=reported_at) == 1
    report = NodeMetric.objects.get(node=node)
    assert report.usage["cpu"] == 2 * RUNNING_CPU * 6 // 10
    assert report.pod_usages == {
        f"team-a/train-{i}": {"cpu": RUNNING_CPU * 6 // 10, "memory": 0} for i in range(2)
    }

    later = f.gang(
        cluster,
        "eval",
        quota=quota,
        requests={"cpu": NEW_CPU, "nvidia.com/gpu": 1},
        now=reported_at,
    )
    f.simulated_round(cluster, reported_at + timedelta(seconds=20))
    later.refresh_from_db()
    reasons = list(Decision.objects.filter(job=later).values_list("reason", flat=True))
    assert not any("usage exceed threshold" in reason for reason in reasons), reasons
    assert later.state in JobState.PLACED and later.pods.get().node_id == node.id


@pytest.mark.django_db
def test_pods_not_running_are_not_listed() -> None:
    now = timezone.now()
    cluster = f.ClusterFactory(name="sim")
    node = f.gpu_node(cluster, "gpu-0", block="b0")
    quota = f.QuotaFactory(cluster=cluster, name="team-a", namespace="team-a")
    f.gang(cluster, "waiting", quota=quota, requests={"cpu": 4000, "nvidia.com/gpu": 1}, now=now)
    assert node_metrics_report(cluster, now=now) == 1
    report = NodeMetric.objects.get(node=node)
    assert report.pod_usages == {} and report.usage == {"cpu": 0, "memory": 0}
    assert Job.objects.get(name="waiting").state == JobState.PENDING
