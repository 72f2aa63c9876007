"""The kubelet stand-in through the real client: admission by capacity, affinity and cards,
terminating pods holding their resources, and the over-commit helper."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3
from kubernetes import client

from tests.fakekube import FakeKube
from tests.fakekube.testing import device, gpu_node, gpu_pod, pod

ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def bind(core: client.CoreV1Api, name: str, node: str, namespace: str = "default") -> None:
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name=name),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )
    answer = core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)
    assert answer.status == 201


def create_and_bind(core: client.CoreV1Api, body: dict[str, Any], node: str) -> client.V1Pod:
    core.create_namespaced_pod("default", body)
    bind(core, body["metadata"]["name"], node)
    return core.read_namespaced_pod(body["metadata"]["name"], "default")


def with_cards(body: dict[str, Any], minors: list[int], core_percent: int) -> dict[str, Any]:
    claim = {
        "gpu": [
            {"minor": m, "resources": {"koordinator.sh/gpu-core": core_percent}} for m in minors
        ]
    }
    body["metadata"]["annotations"] = {ALLOCATED: json.dumps(claim)}
    return body


def test_a_bound_pod_that_fits_runs_ready(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(gpu_node("node-1"))
    admitted = create_and_bind(core, gpu_pod("p1", 4), "node-1")
    assert admitted.status.phase == "Running"
    assert admitted.status.start_time is not None
    conditions = {c.type: c.status for c in admitted.status.conditions}
    assert conditions["Ready"] == "True" and conditions["PodScheduled"] == "True"
    assert [c.name for c in admitted.status.container_statuses] == ["main"]
    assert admitted.status.container_statuses[0].ready is True
    assert admitted.status.qos_class == "Burstable"


def test_a_pod_that_does_not_fit_is_rejected_as_the_kubelet_words_it(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(gpu_node("node-1"))
    create_and_bind(core, gpu_pod("p1", 6), "node-1")
    rejected = create_and_bind(core, gpu_pod("p2", 4), "node-1")
    assert rejected.status.phase == "Failed"
    assert rejected.status.reason == "OutOfnvidia.com/gpu"
    assert rejected.status.message == (
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 4, "
        "used: 6, capacity: 8"
    )
    assert rejected.spec.node_name == "node-1"
    assert kube.overcommitted() == []  # the rejected pod holds nothing


def test_cpu_is_counted_in_millicores_and_checked_before_extended_resources(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(gpu_node("node-1", cpu="2"))
    first = gpu_pod("p1", 1)
    first["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1500m"
    create_and_bind(core, first, "node-1")
    second = gpu_pod("p2", 8)
    rejected = create_and_bind(core, second, "node-1")
    assert rejected.status.reason == "OutOfcpu"
    assert rejected.status.message.endswith("cpu, requested: 1000, used: 1500, capacity: 2000")


def test_terminating_pods_still_hold_their_resources(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.kubelet.manual = True
    kube.add(gpu_node("node-1"))
    create_and_bind(core, gpu_pod("victim", 8), "node-1")
    core.delete_namespaced_pod("victim", "default")
    assert kube.pod("default", "victim")["metadata"]["deletionTimestamp"]
    early = create_and_bind(core, gpu_pod("preemptor", 8), "node-1")
    assert early.status.reason == "OutOfnvidia.com/gpu"
    assert "requested: 8, used: 8, capacity: 8" in early.status.message
    kube.kubelet.finish_terminating()
    later = create_and_bind(core, gpu_pod("preemptor-2", 8), "node-1")
    assert later.status.phase == "Running"


def test_node_affinity_and_node_selector_mismatches_are_rejected(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(gpu_node("node-1", zone="a"))
    selected = create_and_bind(core, pod("p1", nodeSelector={"zone": "b"}), "node-1")
    assert selected.status.reason == "NodeAffinity"
    assert selected.status.message == (
        "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node "
        "affinity/selector"
    )
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    assert create_and_bind(core, pod("p2", affinity=affinity), "node-1").status.phase == "Running"


def test_cards_over_claimed_by_two_pods_reject_the_second(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(gpu_node("node-1"))
    kube.add(device("node-1"))
    create_and_bind(core, with_cards(pod("p1"), [0], 60), "node-1")
    create_and_bind(core, with_cards(pod("p2"), [1], 60), "node-1")
    rejected = create_and_bind(core, with_cards(pod("p3"), [0], 60), "node-1")
    assert rejected.status.reason == "UnexpectedAdmissionError"
    assert rejected.status.message == (
        "Pod was rejected: Allocate failed due to gpu minor 0 on node node-1 has not enough "
        "koordinator.sh/gpu-core: requested: 60, used: 60, capacity: 100, which is unexpected"
    )
    shared = create_and_bind(core, with_cards(pod("p4"), [0], 40), "node-1")
    assert shared.status.phase == "Running"


def test_overcommitted_reports_nodes_and_cards(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.kubelet.admission = False  # bound pods stay Pending: nothing stops the over-commit
    kube.add(gpu_node("node-1"))
    kube.add(device("node-1"))
    kube.add(gpu_node("node-2"))
    create_and_bind(core, with_cards(gpu_pod("a", 6), [0], 100), "node-1")
    create_and_bind(core, with_cards(gpu_pod("b", 6), [0], 100), "node-1")
    create_and_bind(core, gpu_pod("c", 8), "node-2")
    found = kube.overcommitted()
    assert [(o.node, o.resource, o.requested, o.capacity) for o in found] == [
        ("node-1", "nvidia.com/gpu", 12, 8),
        ("node-1", "gpu[0]/koordinator.sh/gpu-core", 200, 100),
    ]
    assert found[0].pods == ["default/a", "default/b"]
    http = urllib3.PoolManager()
    remote = json.loads(http.request("GET", f"{kube.url}/_fake/overcommit").data)
    assert [o["resource"] for o in remote] == ["nvidia.com/gpu", "gpu[0]/koordinator.sh/gpu-core"]
    verdicts = kube.kubelet.admit_pending()
    assert {k: v.admitted for k, v in verdicts.items()} == {
        "default/a": True,
        "default/b": False,
        "default/c": True,
    }
    assert kube.overcommitted() == []


def test_terminating_pods_count_in_overcommitted(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.kubelet.manual = True
    kube.add(gpu_node("node-1"))
    create_and_bind(core, gpu_pod("victim", 8), "node-1")
    core.delete_namespaced_pod("victim", "default")
    kube.kubelet.admission = False
    create_and_bind(core, gpu_pod("preemptor", 8), "node-1")
    assert [str(o) for o in kube.overcommitted()] == [
        "node-1: nvidia.com/gpu requested 16 > capacity 8 by default/preemptor, default/victim"
    ]


def test_a_rejection_can_be_armed_over_http(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(gpu_node("node-1"))
    http = urllib3.PoolManager()
    armed = {
        "namespace": "default",
        "name": "p1",
        "reason": "UnexpectedAdmissionError",
        "message": "boom",
    }
    http.request("POST", f"{kube.url}/_fake/kubelet", json={"reject": [armed]})
    rejected = create_and_bind(core, pod("p1"), "node-1")
    assert (rejected.status.phase, rejected.status.reason) == ("Failed", "UnexpectedAdmissionError")
    assert rejected.status.message == "Pod was rejected: boom"


def test_pods_bound_to_a_node_without_a_node_object_stay_pending(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    assert create_and_bind(core, pod("p1"), "ghost").status.phase == "Pending"


def test_complete_runs_a_pod_to_the_end_and_frees_its_share(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(gpu_node("node-1"))
    create_and_bind(core, gpu_pod("p1", 8), "node-1")
    done = kube.kubelet.complete("default", "p1")
    assert done["status"]["phase"] == "Succeeded"
    assert core.read_namespaced_pod("p1", "default").status.phase == "Succeeded"
    assert create_and_bind(core, gpu_pod("p2", 8), "node-1").status.phase == "Running"


@pytest.mark.parametrize("option", [{"time_scale": "x"}, {"colour": 1}, {"terminal_phase": "Gone"}])
def test_bad_kubelet_options_are_refused(kube: FakeKube, option: dict[str, Any]) -> None:
    http = urllib3.PoolManager()
    answer = http.request("POST", f"{kube.url}/_fake/kubelet", json=option)
    assert answer.status == 400
