"""Object writes of the kubernetes backend: create-or-replace, a job's pods with its PodGroup."""

from __future__ import annotations

import pytest

from koordweb.backends.kube import KubeClusterClient, gang_pods
from tests.fakekube import FakeKube

KOORD = "scheduling.koordinator.sh/v1alpha1"
SIGS = "scheduling.sigs.k8s.io/v1alpha1"


def topology(*layers: str) -> dict:
    return {
        "apiVersion": KOORD,
        "kind": "ClusterNetworkTopology",
        "metadata": {"name": "default"},
        "spec": {"networkTopologySpec": [{"topologyLayer": layer} for layer in layers]},
    }


def test_apply_creates_then_replaces(kube: FakeKube, kube_client: KubeClusterClient) -> None:
    created = kube_client.apply_object(topology("NodeTopologyLayer"))
    assert created["metadata"]["generation"] == 1
    replaced = kube_client.apply_object(topology("BlockLayer", "NodeTopologyLayer"))
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    assert replaced["metadata"]["generation"] == 2
    stored = kube.get(KOORD, "ClusterNetworkTopology", "default")
    assert [x["topologyLayer"] for x in stored["spec"]["networkTopologySpec"]] == [
        "BlockLayer",
        "NodeTopologyLayer",
    ]


def test_apply_namespaced_quota_and_builtins(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    quota = {
        "apiVersion": SIGS,
        "kind": "ElasticQuota",
        "metadata": {
            "name": "team-a",
            "namespace": "default",
            "labels": {"quota.scheduling.koordinator.sh/parent": "root"},
        },
        "spec": {"min": {"cpu": "8"}, "max": {"cpu": "16"}},
    }
    kube_client.apply_object(quota)
    quota["spec"]["max"]["cpu"] = "32"
    kube_client.apply_object(quota)
    assert kube.get(SIGS, "ElasticQuota", "team-a", "default")["spec"]["max"] == {"cpu": "32"}
    kube_client.apply_object(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        }
    )
    assert kube.get("scheduling.k8s.io/v1", "PriorityClass", "high")["value"] == 1000
    with pytest.raises(ValueError, match="does not manage"):
        kube_client.apply_object(
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}
        )


def test_apply_survives_a_lost_create_answer(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube.faults.add(path="clusternetworktopologies$", method="POST", drop_after=True)
    applied = kube_client.apply_object(topology("NodeTopologyLayer"))
    assert applied["metadata"]["name"] == "default"
    posts = kube.faults.requests_to("clusternetworktopologies$", "POST")
    assert [r.status for r in posts] == [None, 409]  # the retry found it created


def test_apply_rereads_after_a_conflicting_write(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube_client.apply_object(topology("NodeTopologyLayer"))
    # Someone else writes between our read and our replace: the first PUT conflicts.
    kube.faults.add(path="clusternetworktopologies/default$", method="PUT", status=409)
    kube_client.apply_object(topology("SpineLayer", "NodeTopologyLayer"))
    stored = kube.get(KOORD, "ClusterNetworkTopology", "default")
    assert stored["spec"]["networkTopologySpec"][0]["topologyLayer"] == "SpineLayer"


def test_create_job_pods_with_a_pod_group_is_idempotent(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    template = {
        "metadata": {"labels": {"pod-group.scheduling.sigs.k8s.io": "job-a"}},
        "spec": {
            "containers": [
                {"name": "main", "image": "trainer", "resources": {"requests": {"cpu": "16"}}}
            ]
        },
    }
    pods = gang_pods("job-a", template, 2, min_available=2)
    group = {
        "apiVersion": SIGS,
        "kind": "PodGroup",
        "metadata": {"name": "job-a"},
        "spec": {"minMember": 2, "scheduleTimeoutSeconds": 600},
    }
    kube.faults.add(path="/namespaces/team-a/pods$", method="POST", status=503)
    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    first = kube_client.create_job_pods("team-a", pods, pod_group=group)
    assert [p["metadata"]["name"] for p in first] == ["job-a-0", "job-a-1"]
    assert all(p["spec"]["schedulerName"] == "koordweb" for p in first)
    assert first[0]["metadata"]["annotations"]["gang.scheduling.koordinator.sh/name"] == "job-a"
    assert kube.get(SIGS, "PodGroup", "job-a", "team-a")["spec"]["minMember"] == 2
    again = kube_client.create_job_pods("team-a", pods, pod_group=group)
    assert [p["metadata"]["uid"] for p in again] == [p["metadata"]["uid"] for p in first]
