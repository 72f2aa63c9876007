"""Preemption against an API server that behaves like the real one, through the real client.

Evictions name the pod they were decided about (UID precondition): a pod re-created under a
victim's name while the eviction is in flight is another pod and is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.utils import timezone

from koordweb.backends.kube import KubeClusterClient, RetryPolicy
from koordweb.backends.kubernetes import KubernetesBackend
from koordweb.models import Cluster, Intent, JobState, Preemption, Round
from koordweb.services.records import round_execute
from tests.fakekube import FakeKube
from tests.fakekube.testing import fake_kube, gang_pods, seed_blocks
from tests.koordweb.test_kube_rounds import running_pod, settle

kube = pytest.fixture(fake_kube, name="kube")


@pytest.fixture
def cluster_client(kube: FakeKube) -> Iterator[KubeClusterClient]:
    seed_blocks(kube)
    retry = RetryPolicy(attempts=4, base_delay=0.01, max_delay=0.05)
    with KubeClusterClient.from_url(
        kube.url, retry=retry, watch_timeout=1, sync_timeout=10, budget_attempts=3
    ) as connected:
        yield connected


@pytest.fixture
def cluster(db) -> Cluster:
    return Cluster.objects.create(name="k8s", backend=Cluster.Backend.KUBERNETES)


class ReplacedInFlight(KubernetesBackend):
    """The victim is deleted and created again under its name after the round decided to evict
    it and before its eviction reaches the API server (a StatefulSet controller's work)."""

    def __init__(self, client: KubeClusterClient, kube: FakeKube) -> None:
        super().__init__(client)
        self.kube = kube
        self.replaced: list[str] = []

    def enact(self, cluster, plan, *, now):
        for eviction in plan.evictions:
            self.kube.delete("v1", "Pod", eviction.name, eviction.namespace)
            self.kube.add(running_pod(eviction.name, f"node-{eviction.name[-1]}", 1))
            self.replaced.append(eviction.name)
        return super().enact(cluster, plan, now=now)


def test_a_pod_recreated_under_a_victims_name_is_not_evicted(kube, cluster_client, cluster):
    for i in (1, 2, 3):
        kube.add(running_pod(f"low-{i}", f"node-{i}", 1))
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)
    settle(kube, cluster_client)
    backend = ReplacedInFlight(cluster_client, kube)
    round_execute(
        cluster=cluster, backend=backend, trigger=Round.Trigger.MANUAL, now=timezone.now()
    )
    assert backend.replaced == ["low-3"]
    newcomer = kube.pod("batch", "low-3")
    assert newcomer is not None and not newcomer["metadata"].get("deletionTimestamp")
    # The DisruptionTarget condition (sent before the eviction) already names the old UID: 409.
    answers = [r.status for r in kube.faults.requests_to(r"/pods/low-3/(status|eviction)$")]
    assert answers == [409], answers
    preemption = Preemption.objects.get()
    assert "replaced by a new pod of the same name" in preemption.reason
    assert preemption.state == Preemption.State.PLANNED
    evict = Intent.objects.get(kind=Intent.Kind.EVICT)
    assert evict.state == Intent.State.DROPPED
    assert "another pod now has this name" in evict.outcome
    victim = preemption.victims.get().job
    assert victim.state not in (JobState.PREEMPTING, JobState.PREEMPTED)
    # The next round sees the new pod in the old row and plans again from what is there.
    settle(kube, cluster_client)
    round_execute(
        cluster=cluster,
        backend=KubernetesBackend(cluster_client),
        trigger=Round.Trigger.MANUAL,
        now=timezone.now(),
    )
    row = victim.pods.get()
    assert row.uid == newcomer["metadata"]["uid"]
