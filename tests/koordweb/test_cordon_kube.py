"""Cordon and uncordon on the kubernetes backend, through the real client against the in-repo fake
API server over HTTP: the Node's `spec.unschedulable` is patched as kubectl cordon does, the
mirror brings it back to the next sync, the shipped ClusterRole grants the request, and the
cluster's refusals are said in words."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kubernetes import KubernetesBackend
from koordweb.models import Cluster, Node
from koordweb.services.cordon import CordonError, node_cordon, node_uncordon
from tests.fakekube import FakeKube
from tests.fakekube.testing import eventually, node
from tests.koordweb.test_backend_kubernetes_rbac import granted, needed


def _sync(cluster: Cluster, client: KubeClusterClient) -> None:
    with transaction.atomic():
        KubernetesBackend(client).sync(cluster, now=timezone.now())


def _mirrored(client: KubeClusterClient, name: str) -> bool:
    doc = next(
        d for d in client.snapshot() if d["kind"] == "Node" and d["metadata"]["name"] == name
    )
    return bool((doc.get("spec") or {}).get("unschedulable"))


@pytest.fixture
def admin(db: Any) -> Any:
    return get_user_model().objects.create_user("root", is_staff=True)


def test_cordon_patches_the_node_and_the_mirror_brings_it_back(
    kube: FakeKube, kube_client: KubeClusterClient, kube_cluster: Cluster, admin: Any
) -> None:
    kube.add(node("node-1"))
    kube.add(node("node-2"))
    _sync(kube_cluster, kube_client)
    backend = KubernetesBackend(kube_client)
    result = node_cordon(cluster=kube_cluster, name="node-1", user=admin, backend=backend)
    assert result.cordoned and result.changed
    assert kube.get("v1", "Node", "node-1")["spec"]["unschedulable"] is True
    assert not kube.get("v1", "Node", "node-2").get("spec", {}).get("unschedulable")
    # kubectl's request: a strategic merge patch of the Node, which the ClusterRole grants.
    patches = [r for r in kube.faults.requests if r.method == "PATCH"]
    assert [(r.path, r.content_type, r.body["spec"]) for r in patches] == [
        ("/api/v1/nodes/node-1", "application/strategic-merge-patch+json", {"unschedulable": True})
    ]
    assert needed(patches[0]) == ("", "nodes", "patch") and needed(patches[0]) in granted()
    # The page shows the cluster's answer at once; the watch brings the same to the next sync.
    assert Node.objects.get(cluster=kube_cluster, name="node-1").unschedulable
    eventually(lambda: _mirrored(kube_client, "node-1"))
    _sync(kube_cluster, kube_client)
    assert Node.objects.get(cluster=kube_cluster, name="node-1").unschedulable
    # Uncordon removes the field (false is its default), as kubectl uncordon does.
    result = node_uncordon(cluster=kube_cluster, name="node-1", user=admin, backend=backend)
    assert not result.cordoned and result.changed
    assert "unschedulable" not in kube.get("v1", "Node", "node-1")["spec"]
    eventually(lambda: not _mirrored(kube_client, "node-1"))
    _sync(kube_cluster, kube_client)
    assert not Node.objects.get(cluster=kube_cluster, name="node-1").unschedulable
    assert [e.change_message.split(":")[0] for e in LogEntry.objects.order_by("id")] == [
        "Cordoned",
        "Uncordoned",
    ]


def test_a_node_cordoned_with_kubectl_reads_as_cordoned_and_is_not_patched_twice(
    kube: FakeKube, kube_client: KubeClusterClient, kube_cluster: Cluster, admin: Any
) -> None:
    cordoned = node("node-1")
    cordoned.setdefault("spec", {})["unschedulable"] = True
    kube.add(cordoned)
    _sync(kube_cluster, kube_client)
    assert Node.objects.get(cluster=kube_cluster, name="node-1").unschedulable
    result = node_cordon(
        cluster=kube_cluster, name="node-1", user=admin, backend=KubernetesBackend(kube_client)
    )
    assert result.cordoned and not result.changed
    assert result.message == "Node node-1 was already cordoned."


def test_the_clusters_refusals_are_said_in_words(
    kube: FakeKube, kube_client: KubeClusterClient, kube_cluster: Cluster, admin: Any
) -> None:
    kube.add(node("node-1"))
    kube.add(node("node-2"))
    _sync(kube_cluster, kube_client)
    backend = KubernetesBackend(kube_client)
    # Without RBAC's patch on nodes the API server answers 403: nothing changes.
    kube.faults.add(path="/api/v1/nodes/node-1$", method="PATCH", status=403)
    with pytest.raises(CordonError, match=r"The cluster refused to cordon node node-1: .*403"):
        node_cordon(cluster=kube_cluster, name="node-1", user=admin, backend=backend)
    assert not Node.objects.get(cluster=kube_cluster, name="node-1").unschedulable
    assert not kube.get("v1", "Node", "node-1").get("spec", {}).get("unschedulable")
    # A node deleted from the cluster since the last sync.
    kube.delete("v1", "Node", "node-2")
    with pytest.raises(CordonError, match="Node node-2 is no longer in cluster k8s"):
        node_cordon(cluster=kube_cluster, name="node-2", user=admin, backend=backend)
    assert LogEntry.objects.count() == 0
