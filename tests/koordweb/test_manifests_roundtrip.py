"""Import -> export -> import of every supported kind is lossless, and imports what it says."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command

from koordweb.manifests import export_manifests, import_manifests, load_documents
from koordweb.models import (
    Cluster,
    Device,
    DeviceTemplateConfig,
    ElasticQuota,
    Job,
    JobState,
    Node,
    NodeMetric,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    TopologyLayer,
)

ALL_KINDS = Path(__file__).parent / "data" / "all_kinds.yaml"
GI, MI = 1024**3, 1024**2


def _import(name: str, documents: list) -> Cluster:
    cluster = Cluster.objects.create(name=name)
    import_manifests(cluster, documents)
    return cluster


@pytest.fixture
def imported(db) -> Cluster:
    return _import("src", load_documents(ALL_KINDS.read_bytes()))


@pytest.mark.django_db
def test_export_of_import_is_a_fixed_point(imported):
    first = export_manifests(imported)
    second = export_manifests(_import("copy", first))
    assert first == second
    kinds = {doc["kind"] for doc in first}
    assert kinds == {
        "PriorityClass",
        "ClusterNetworkTopology",
        "ConfigMap",
        "Node",
        "Device",
        "NodeMetric",
        "ElasticQuota",
        "PodGroup",
        "Pod",
        "PodDisruptionBudget",
    }


@pytest.mark.django_db
def test_commands_round_trip_through_files(tmp_path):
    out = StringIO()
    call_command("import_manifests", str(ALL_KINDS), cluster="lab", stdout=out)
    assert "Pod: 6" in out.getvalue() and "Node: 4" in out.getvalue() and "Job: 4" in out.getvalue()
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    call_command("export_manifests", cluster="lab", output=str(first))
    call_command("import_manifests", str(first), cluster="lab2", stdout=StringIO())
    call_command("export_manifests", cluster="lab2", output=str(second))
    assert first.read_text() == second.read_text()
    assert len(list(yaml.safe_load_all(first.read_text()))) == 22


@pytest.mark.django_db
def test_nodes_devices_and_metrics(imported):
    node = Node.objects.get(cluster=imported, name="node-1")
    assert node.allocatable["cpu"] == 63500
    assert node.allocatable["memory"] == 500 * GI
    assert node.allocatable["ephemeral-storage"] == 1000 * 10**9
    assert node.capacity["hugepages-2Mi"] == GI
    assert node.allocatable["koordinator.sh/gpu-memory-ratio"] == 200
    node2 = Node.objects.get(cluster=imported, name="node-2")
    assert (node2.ready, node2.unschedulable, node2.allocatable) == (False, True, node2.capacity)
    assert Node.objects.get(cluster=imported, name="node-3").capacity["cpu"] == 20000
    gpus = Device.objects.filter(node=node, device_type="gpu").order_by("minor")
    assert [(d.minor, d.uuid, d.health, d.vendor, d.model) for d in gpus] == [
        (0, "GPU-0a1b", True, "nvidia", "H100"),
        (1, "GPU-2c3d", False, "nvidia", "H100"),
    ]
    assert gpus[1].pcie_id == "1" and gpus[0].resources["koordinator.sh/gpu-memory"] == 80 * GI
    # The Device CR's own labels and annotations (partition policy and table) stay with it.
    assert node.device_labels == {"node.koordinator.sh/gpu-partition-policy": "Honor"}
    assert "scheduling.koordinator.sh/gpu-partitions" in node.device_annotations
    assert "node.koordinator.sh/gpu-partition-policy" not in node.labels
    device_doc = next(d for d in export_manifests(imported) if d["kind"] == "Device")
    assert device_doc["metadata"]["labels"] == node.device_labels
    assert device_doc["metadata"]["annotations"] == node.device_annotations
    rdma = Device.objects.get(node=node, device_type="rdma")
    assert rdma.vfs[0]["vfs"][0]["busID"] == "0000:1f:00.2" and rdma.vendor == ""
    metric = NodeMetric.objects.get(node=node)
    assert metric.usage == {"cpu": 12500, "memory": 100 * GI}
    assert metric.gpu_usage == {
        "0": {"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory": 20 * GI}
    }
    assert metric.report_interval_seconds == 30
    assert metric.aggregated_usages == {"p95": {"300": {"cpu": 20000, "memory": 200 * GI}}}
    assert metric.pod_usages == {"default/running-1": {"cpu": 2000, "memory": 4 * GI}}
    layers = TopologyLayer.objects.filter(cluster=imported).order_by("position")
    assert [(layer.name, layer.parent_name) for layer in layers] == [
        ("SpineLayer", ""),
        ("BlockLayer", "SpineLayer"),
        ("NodeTopologyLayer", "BlockLayer"),
    ]
    assert DeviceTemplateConfig.objects.get(cluster=imported).namespace == "kube-system"


@pytest.mark.django_db
def test_topology_status_has_koordinator_shape(imported):
    topo = next(d for d in export_manifests(imported) if d["kind"] == "ClusterNetworkTopology")
    status = topo["status"]["detailStatus"]
    # node-4 has no spine label: outside the tree; node-3 lacks a block: a virtual block "node-3".
    assert status == [
        {
            "topologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
            "childTopologyLayer": "SpineLayer",
            "childTopologyNames": ["s1", "s2"],
            "nodeNum": 3,
        },
        {
            "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
            "parentTopologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
            "childTopologyLayer": "BlockLayer",
            "childTopologyNames": ["b1", "b2"],
            "nodeNum": 2,
        },
        {
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b1"},
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
            "childTopologyLayer": "NodeTopologyLayer",
            "nodeNum": 1,
        },
        {
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "b2"},
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s1"},
            "childTopologyLayer": "NodeTopologyLayer",
            "nodeNum": 1,
        },
        {
            "topologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
            "parentTopologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""},
            "childTopologyLayer": "BlockLayer",
            "childTopologyNames": ["node-3"],
            "nodeNum": 1,
        },
        {
            "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "node-3"},
            "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "s2"},
            "childTopologyLayer": "NodeTopologyLayer",
            "nodeNum": 1,
        },
    ]


@pytest.mark.django_db
def test_jobs_built_from_pods(imported):
    jobs = {job.name: job for job in Job.objects.filter(cluster=imported)}
    assert set(jobs) == {"train", "infer", "gang-a", "lonely"}
    train = jobs["train"]
    assert (train.kind, train.min_available, train.total_number, train.waiting_time_seconds) == (
        "podgroup",
        2,
        2,
        300,
    )
    assert train.quota.name == "team-a" and train.priority == 9000
    assert train.priority_class.name == "koord-prod" and train.state == JobState.PENDING
    assert train.topology_spec["gatherStrategy"][0]["layer"] == "BlockLayer"
    assert jobs["infer"].pod_group_api == "scheduling.x-k8s.io/v1alpha1"
    assert jobs["infer"].priority == 100
    gang = jobs["gang-a"]
    assert (gang.kind, gang.min_available, gang.total_number, gang.mode) == (
        "gang",
        2,
        3,
        "NonStrict",
    )
    assert gang.waiting_time_seconds == 600 and gang.duration_seconds == 3600
    assert gang.gang_group == "team-a/gang-a,team-a/gang-b"
    assert gang.state == JobState.RUNNING and gang.preemption_policy == "Never"
    lonely = jobs["lonely"]
    # No priority given: the global default class (koord-batch, Never) applies.
    assert (lonely.kind, lonely.priority, lonely.preemption_policy) == ("pod", 5000, "Never")


@pytest.mark.django_db
def test_pods_sum_containers_and_keep_scheduling_fields(imported):
    pods = {pod.name: pod for pod in Pod.objects.filter(cluster=imported)}
    train0 = pods["train-0"]
    assert train0.requests == {"cpu": 2000, "memory": GI // 2 + 64 * MI, "nvidia.com/gpu": 1}
    assert train0.scheduler_name == "koord-scheduler" and train0.node.name == "node-1"
    assert train0.topology_index == 0 and train0.uid.startswith("1b4e28ba")
    assert "quota.scheduling.koordinator.sh/name" not in train0.labels
    train1 = pods["train-1"]
    assert train1.requests == {"cpu": 2000, "memory": GI, "nvidia.com/gpu": 1}  # from limits
    assert train1.node is None and train1.nominated_node.name == "node-2"
    assert train1.phase == "Pending" and train1.tolerations[0]["key"] == "maintenance"
    gang0 = pods["gang-a-0"]
    assert gang0.requests == {"cpu": 4000, "memory": 10**9}  # the init container dominates cpu
    assert gang0.annotations == {} and gang0.node_selector == {"kubernetes.io/arch": "amd64"}
    assert pods["gang-a-1"].finished_at.isoformat() == "2026-01-02T02:00:00+00:00"
    assert pods["lonely"].terminating and pods["lonely"].scheduler_name == "koordweb"
    assert pods["lonely"].requests["ephemeral-storage"] == GI


@pytest.mark.django_db
def test_quotas_and_budgets(imported):
    org = ElasticQuota.objects.get(cluster=imported, name="org")
    team = ElasticQuota.objects.get(cluster=imported, name="team-a")
    assert org.parent is None and org.is_parent and org.min == {"cpu": 40000, "memory": 200 * GI}
    assert team.parent == org and not team.allow_lent and not team.is_parent
    assert team.shared_weight == {"cpu": 2000, "memory": 10 * GI}
    assert team.labels == {"team": "a"} and team.annotations == {}
    pdbs = {pdb.name: pdb for pdb in PodDisruptionBudget.objects.filter(cluster=imported)}
    assert (pdbs["train-pdb"].min_available, pdbs["infer-pdb"].max_unavailable) == ("1", "50%")
    assert PriorityClass.objects.get(cluster=imported, name="koord-batch").global_default
