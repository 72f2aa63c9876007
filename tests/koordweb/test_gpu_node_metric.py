"""Koordinator's NodeMetric card usage (v1.7 `apis/slo/v1alpha1`: `ResourceMap.devices[]` are
scheduling DeviceInfo entries: type, id, minor, resources) parsed, exported and ingested."""

from __future__ import annotations

import json

import pytest

from koordweb.manifests import export_manifests, import_manifests, load_documents
from koordweb.models import CardSample, Cluster, Device, Node, NodeMetric
from koordweb.models.gpu_usage import epoch
from koordweb.services.gpu_usage import gpu_samples_ingest
from tests import builders as f

GI = 1024**3
NODE_METRIC = """
apiVersion: slo.koordinator.sh/v1alpha1
kind: NodeMetric
metadata: {name: gpu-node}
spec: {metricCollectPolicy: {reportIntervalSeconds: 60}}
status:
  updateTime: "2026-01-05T08:00:50Z"
  nodeMetric:
    nodeUsage:
      resources: {cpu: "12", memory: 100Gi}
      devices:
      - {type: gpu, id: GPU-aaaa, minor: 0, health: false,
         resources: {koordinator.sh/gpu-core: "70", koordinator.sh/gpu-memory: 20Gi,
                     koordinator.sh/gpu-memory-ratio: "25"}}
      - {type: gpu, id: GPU-bbbb, minor: 1, health: false,
         resources: {koordinator.sh/gpu-core: "0", koordinator.sh/gpu-memory: "0",
                     koordinator.sh/gpu-memory-ratio: "0"}}
  podsMetric:
  - name: train-0
    namespace: team-a
    podUsage:
      resources: {cpu: "8"}
      devices:
      - {type: gpu, id: GPU-aaaa, minor: 0,
         resources: {koordinator.sh/gpu-core: "70", koordinator.sh/gpu-memory: 20Gi}}
"""


@pytest.mark.django_db
def test_node_and_pod_card_usage_are_read_exported_and_ingested() -> None:
    cluster = f.ClusterFactory(name="kube")
    node = f.NodeFactory(cluster=cluster, name="gpu-node")
    for minor in range(2):
        f.DeviceFactory(node=node, minor=minor)
    import_manifests(cluster, load_documents(NODE_METRIC.encode()))
    metric = NodeMetric.objects.get(node=node)
    assert metric.gpu_usage["0"]["koordinator.sh/gpu-core"] == 70
    assert metric.gpu_usage["0"]["koordinator.sh/gpu-memory"] == 20 * GI
    assert metric.pod_gpu_usage == {
        "team-a/train-0": {
            "0": {"koordinator.sh/gpu-core": 70, "koordinator.sh/gpu-memory": 20 * GI}
        }
    }
    exported = [d for d in export_manifests(cluster) if d["kind"] == "NodeMetric"]
    assert exported[0]["status"]["podsMetric"][0]["name"] == "train-0"
    again = Cluster.objects.create(name="again")
    Node.objects.create(cluster=again, name="gpu-node")
    import_manifests(again, exported)
    assert NodeMetric.objects.get(node__cluster=again).pod_gpu_usage == metric.pod_gpu_usage

    quota = f.QuotaFactory(cluster=cluster, name="team-a")
    job = f.JobFactory(
        cluster=cluster,
        quota=quota,
        namespace="team-a",
        name="train",
        state="Running",
        total_number=1,
        min_available=1,
    )
    allocated = {"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "100"}}]}
    f.PodFactory(
        job=job,
        name="train-0",
        node=node,
        phase="Running",
        annotations={"scheduling.koordinator.sh/device-allocated": json.dumps(allocated)},
    )
    start = epoch(metric.reported_at) // 60 * 60
    gpu_samples_ingest(cluster=cluster, now=metric.reported_at, period_start=start)
    rows = {r.minor: r for r in CardSample.objects.all()}
    assert rows[0].job_id == job.id and rows[0].used == 70 * 60 and rows[0].memory_mib == 20 * 1024
    assert rows[1].job_id is None and rows[1].used == 0
    assert Device.objects.filter(node=node).count() == 2
