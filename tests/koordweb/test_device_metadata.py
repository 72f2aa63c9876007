"""The Device CR's own labels and annotations (partition table and policy) through the
kubernetes backend's reconcile path, as Koordinator's device cache reads them."""

from __future__ import annotations

import pytest
from django.utils import timezone

from koordweb.backends.reconcile import cluster_reconcile
from koordweb.models import Cluster, Node


@pytest.mark.django_db
def test_the_reconcile_path_keeps_the_device_crs_partition_table_and_policy() -> None:
    # The kubernetes backend reads Device CRs through the same parser: the table and the policy
    # label stay with the Device (Koordinator's device cache), not with the Node.
    cluster = Cluster.objects.create(name="k8s-devices", backend=Cluster.Backend.KUBERNETES)
    table = '{"2":[{"minors":[0,1],"gpuLinkType":"NVLink","allocationScore":1}]}'
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}, "status": {}}
    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {
            "name": "gpu-1",
            "labels": {"node.koordinator.sh/gpu-partition-policy": "Honor"},
            "annotations": {"scheduling.koordinator.sh/gpu-partitions": table},
        },
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True}]},
    }
    cluster_reconcile(cluster=cluster, documents=[node, device], now=timezone.now())
    stored = Node.objects.get(cluster=cluster, name="gpu-1")
    assert stored.device_labels == {"node.koordinator.sh/gpu-partition-policy": "Honor"}
    assert stored.device_annotations == {"scheduling.koordinator.sh/gpu-partitions": table}
    device["metadata"]["labels"] = {}
    cluster_reconcile(cluster=cluster, documents=[node, device], now=timezone.now())
    stored.refresh_from_db()
    assert stored.device_labels == {}
