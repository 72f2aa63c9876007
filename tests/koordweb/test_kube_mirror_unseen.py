"""Absence from a mirror is not deletion (issue #33 item 6), over the fake API server through the
real client: two workers on one cluster, the watch 1.5 s late; the second worker's sync must not
take the pods the first just created and bound as gone (and so fail their job, or free their nodes).
A pod is gone from a DELETED event or from a list started after it was known, never before."""

from __future__ import annotations

import time

import pytest
from django.utils import timezone

from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kube import client as kube_client_module
from koordweb.backends.kubernetes import KubernetesBackend
from koordweb.models import JobState, Node, PodPhase
from tests.builders import JobFactory, PodFactory
from tests.fakekube import FakeKube
from tests.fakekube.testing import eventually, gang_pods, pod
from tests.koordweb.kube_helpers import fast_retry, settle


@pytest.fixture
def second_worker(kube: FakeKube, cluster_client: KubeClusterClient):
    with KubeClusterClient.from_url(
        kube.url, retry=fast_retry(attempts=4), watch_timeout=1, sync_timeout=10
    ) as other:
        yield other


def test_rows_of_pods_another_worker_just_bound_are_not_gone_to_a_late_mirror(
    kube, cluster_client, second_worker, kube_cluster
):
    """Worker A creates and binds two pods and writes their rows (as its outbox does); worker
    B's sync, its watch 1.5 s behind, must leave them as they are."""
    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    backend = KubernetesBackend(second_worker)
    backend.sync(kube_cluster, now=timezone.now())  # B knows the nodes
    settle(kube, second_worker)
    kube.settings.watch_delay = 1.5
    docs = gang_pods("sweep", 2, 10)
    created = cluster_client.create_job_pods("ml", docs)  # worker A
    job = JobFactory(cluster=kube_cluster, namespace="ml", name="sweep", state=JobState.SCHEDULED)
    for doc, node in zip(created, ("node-1", "node-2"), strict=True):
        meta = doc["metadata"]
        assert cluster_client.bind("ml", meta["name"], meta["uid"], node).ok
        PodFactory(
            job=job,
            name=meta["name"],
            uid=meta["uid"],
            node=Node.objects.get(cluster=kube_cluster, name=node),
            phase=PodPhase.PENDING,
        )
    assert not {"sweep-0", "sweep-1"} & {
        d["metadata"]["name"] for d in second_worker.mirror.documents("pods")
    }
    backend.sync(kube_cluster, now=timezone.now())  # worker B, at once
    job.refresh_from_db()
    assert job.state == JobState.SCHEDULED, job.state_reason
    assert {(p.phase, p.node.name) for p in job.pods.all()} == {
        (PodPhase.PENDING, "node-1"),
        (PodPhase.PENDING, "node-2"),
    }
    # Caught up, B reads the pods as the cluster has them.
    settle(kube, second_worker)
    backend.sync(kube_cluster, now=timezone.now())
    job.refresh_from_db()
    assert job.state != JobState.FAILED
    assert not job.pods.filter(phase=PodPhase.FAILED).exists()


def test_gone_only_from_a_deleted_event_or_a_list_started_after(
    kube: FakeKube, kube_client: KubeClusterClient, monkeypatch
) -> None:
    monkeypatch.setattr(kube_client_module, "UNSEEN_PROOF_SECONDS", 0.2)
    kube.add(pod("watched", schedulerName="koordweb"))
    kube_client.snapshot()
    watched = kube.pod("default", "watched")["metadata"]["uid"]
    never_seen = "0c5a1e7e-0000-4000-8000-000000000000"  # a row's uid the cluster no longer has
    assert kube_client.unseen({watched, never_seen}) == {never_seen}
    # A DELETED event says gone at once.
    kube.delete("v1", "Pod", "watched", "default")
    eventually(lambda: watched not in kube_client.unseen({watched}))
    # Merely absent: unseen until a list started after it was first asked about lacks it.
    assert kube_client.unseen({never_seen}) == {never_seen}
    time.sleep(0.3)
    eventually(lambda: kube_client.unseen({never_seen}) == set())
    assert len(kube.faults.requests_to(r"^/api/v1/pods$", "GET")) >= 2  # the fresh list
