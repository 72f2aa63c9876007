"""The kubernetes backend's mirror: list, then watch, relist after 410, over the fake server."""

from __future__ import annotations

import pytest

from koordweb.backends.kube import KubeClusterClient, KubeUnavailable
from tests.fakekube import FakeKube
from tests.fakekube.resources import served
from tests.fakekube.testing import RUNNING, eventually, node, pod
from tests.koordweb.kube_helpers import fast_retry


def names(documents: list[dict], kind: str) -> list[str]:
    return [d["metadata"]["name"] for d in documents if d["kind"] == kind]


def seed(kube: FakeKube) -> None:
    kube.add(node("node-1", **{"network.topology.nvidia.com/block": "b1"}))
    kube.add(pod("ours-pending", schedulerName="koordweb"))
    kube.add(pod("ours-done", schedulerName="koordweb", status={"phase": "Succeeded"}))
    kube.add(pod("system", namespace="kube-system", nodeName="node-1", status=RUNNING))
    kube.add(pod("theirs-pending"))
    kube.add(pod("theirs-done", nodeName="node-1", status={"phase": "Failed"}))
    kube.add(
        {
            "apiVersion": "scheduling.koordinator.sh/v1alpha1",
            "kind": "Device",
            "metadata": {"name": "node-1"},
            "spec": {"devices": [{"type": "gpu", "minor": 0}]},
        }
    )
    kube.add(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "job-a", "namespace": "default"},
            "spec": {"minMember": 2},
        }
    )
    kube.add(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )


def test_snapshot_lists_every_kind_as_manifests(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    seed(kube)
    documents = kube_client.snapshot()
    assert names(documents, "Node") == ["node-1"]
    # Ours whatever their state; others only while they hold a node's resources.
    assert sorted(names(documents, "Pod")) == ["ours-done", "ours-pending", "system"]
    assert names(documents, "Device") == ["node-1"]
    assert names(documents, "PodGroup") == ["job-a"]
    assert names(documents, "PriorityClass") == ["high"]
    node_doc = next(d for d in documents if d["kind"] == "Node")
    assert node_doc["apiVersion"] == "v1"
    assert node_doc["metadata"]["labels"] == {"network.topology.nvidia.com/block": "b1"}
    assert node_doc["status"]["allocatable"] == {"cpu": "16", "memory": "64Gi"}
    assert [d["kind"] for d in documents][:1] == ["Node"]


def test_lists_are_paged(kube: FakeKube, kube_client: KubeClusterClient, monkeypatch) -> None:
    from koordweb.backends.kube import mirror

    monkeypatch.setattr(mirror, "PAGE_SIZE", 2)
    for i in range(5):
        kube.add(node(f"node-{i}"))
    assert names(kube_client.snapshot(), "Node") == [f"node-{i}" for i in range(5)]
    node_lists = [r for r in kube.faults.requests_to("/api/v1/nodes$") if "watch" not in r.query]
    assert len(node_lists) == 3


def test_changes_arrive_by_watch_without_relisting(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube.add(node("node-1"))
    kube.add(pod("p1", schedulerName="koordweb"))
    kube_client.snapshot()
    kube.add(node("node-2"))
    kube.delete("v1", "Pod", "p1", "default")
    kube.add(pod("p2", schedulerName="koordweb"))

    def caught_up() -> bool:
        documents = kube_client.snapshot()
        return names(documents, "Node") == ["node-1", "node-2"] and names(documents, "Pod") == [
            "p2"
        ]

    eventually(caught_up)
    assert kube_client.mirror.reflectors["nodes"].relists == 1
    assert kube_client.mirror.reflectors["pods"].relists == 1
    assert kube_client.resource_versions()["pods"] is not None


def test_an_expired_watch_relists(kube: FakeKube, kube_client: KubeClusterClient) -> None:
    kube.add(node("node-1"))
    kube_client.snapshot()
    # Keep the node watch from reconnecting while history is compacted away under it.
    outage = kube.faults.add(path="/api/v1/nodes$", status=503, count=10_000)
    eventually(lambda: outage.fired >= 1)
    kube.add(node("node-2"))
    kube.store.compact()
    kube.faults.clear()
    eventually(lambda: names(kube_client.snapshot(), "Node") == ["node-1", "node-2"])
    assert kube_client.mirror.reflectors["nodes"].relists == 2
    watches = [r for r in kube.faults.requests_to("/api/v1/nodes$") if "watch=true" in r.query]
    assert any(r.status == 200 for r in watches)


def test_transient_failures_do_not_lose_objects(kube: FakeKube) -> None:
    for i in range(3):
        kube.add(node(f"node-{i}"))
    kube.faults.add(path="/api/v1/nodes$", status=503, count=2)
    kube.faults.add(path="/api/v1/pods$", drop=True, count=2)
    with KubeClusterClient.from_url(kube.url, retry=fast_retry(), watch_timeout=1) as client:
        assert names(client.snapshot(), "Node") == ["node-0", "node-1", "node-2"]


def test_an_unreachable_cluster_is_reported(kube: FakeKube) -> None:
    kube.faults.add(path="/apis/slo.koordinator.sh", status=500, count=10_000)
    client = KubeClusterClient.from_url(kube.url, retry=fast_retry(), watch_timeout=1)
    with client, pytest.raises(KubeUnavailable, match="nodemetrics"):
        client.snapshot(timeout=0.5)


def test_an_earlier_snapshot_is_not_changed_by_later_events(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube.add(node("node-1", rack="r1"))
    before = kube_client.snapshot()
    kube.store.update(
        served("v1", "Node"),
        None,
        "node-1",
        lambda n: {**n, "metadata": {**n["metadata"], "labels": {"rack": "r2"}}},
    )

    def rack(documents: list[dict]) -> str:
        return next(d for d in documents if d["kind"] == "Node")["metadata"]["labels"]["rack"]

    eventually(lambda: rack(kube_client.snapshot()) == "r2")
    assert rack(before) == "r1"


def test_namespaced_custom_objects_follow_changes(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube_client.snapshot()
    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "namespace": "default"},
        "spec": {"max": {"cpu": "8"}},
    }
    kube_client.apply_object(quota)
    quota["spec"]["max"]["cpu"] = "16"
    kube_client.apply_object(quota)

    def quota_max() -> object:
        found = [d for d in kube_client.snapshot() if d["kind"] == "ElasticQuota"]
        return found[0]["spec"]["max"]["cpu"] if found else None

    eventually(lambda: quota_max() == "16")
    assert kube_client.mirror.reflectors["elasticquotas"].relists == 1


def test_connects_through_a_kubeconfig(kube: FakeKube, tmp_path) -> None:
    kube.add(node("node-1"))
    path = kube.write_kubeconfig(tmp_path / "kubeconfig")
    with KubeClusterClient.from_kubeconfig(str(path), retry=fast_retry()) as client:
        assert names(client.snapshot(), "Node") == ["node-1"]
    sent = kube.faults.requests_to("/api/v1/nodes$")[0]
    assert sent.status == 200
