"""pods/binding and pods/eviction of the fake server: codes, bodies and effects."""

from __future__ import annotations

import json
import time
from typing import Any

import pydantic
import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube
from tests.fakekube.testing import RUNNING, pod

EVICTION = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w0"}}


def binding(name: str, node: str, uid: str | None = None) -> client.V1Binding:
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=name, uid=uid),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )


def post_binding(core: client.CoreV1Api, name: str, node: str, uid: str | None = None) -> Any:
    # The typed call fails to read a Status as a V1Binding, so read the raw answer instead.
    return core.create_namespaced_pod_binding(
        name, "default", binding(name, node, uid), _preload_content=False
    )


def test_binding_answers_a_201_status_and_assigns_the_node(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    uid = kube.add(pod("p1", schedulerName="koordweb"))["metadata"]["uid"]
    answer = post_binding(core, "p1", "node-1", uid)
    assert answer.status == 201
    status = api.deserialize(answer.data.decode(), "V1Status", "application/json")
    assert (status.status, status.code) == ("Success", 201)
    bound = core.read_namespaced_pod("p1", "default")
    assert bound.spec.node_name == "node-1"
    assert [(c.type, c.status) for c in bound.status.conditions] == [("PodScheduled", "True")]


def test_the_typed_binding_call_cannot_read_the_status(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(pod("p1"))
    with pytest.raises(pydantic.ValidationError) as caught:
        core.create_namespaced_pod_binding("p1", "default", binding("p1", "node-1"))
    assert "target" in str(caught.value)
    assert core.read_namespaced_pod("p1", "default").spec.node_name == "node-1"


def test_binding_twice_is_a_conflict_naming_the_node(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(pod("p1"))
    post_binding(core, "p1", "node-1")
    with pytest.raises(ApiException) as caught:
        post_binding(core, "p1", "node-2")
    body = json.loads(caught.value.body)
    assert (caught.value.status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        'Operation cannot be fulfilled on pods/binding "p1": '
        'pod p1 is already assigned to node "node-1"'
    )
    assert core.read_namespaced_pod("p1", "default").spec.node_name == "node-1"


def test_binding_with_a_wrong_uid_is_a_conflict(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(pod("p1"))
    with pytest.raises(ApiException) as caught:
        post_binding(core, "p1", "node-1", uid="not-the-pod")
    assert caught.value.status == 409
    assert "Precondition failed: UID in precondition: not-the-pod" in caught.value.body
    assert core.read_namespaced_pod("p1", "default").spec.node_name is None


def test_binding_a_missing_pod_is_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        post_binding(core, "ghost", "node-1")
    assert caught.value.status == 404


def evict(core: client.CoreV1Api, name: str) -> Any:
    body = {**EVICTION, "metadata": {"name": name, "namespace": "default"}}
    return core.create_namespaced_pod_eviction(name, "default", body, _preload_content=False)


def test_eviction_deletes_the_pod(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.add(pod("w0", nodeName="node-1", status=RUNNING))
    answer = evict(core, "w0")
    assert answer.status == 201
    assert json.loads(answer.data)["status"] == "Success"
    assert kube.pod("default", "w0") is None


def test_eviction_of_a_missing_pod_is_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        evict(core, "ghost")
    assert caught.value.status == 404
    assert json.loads(caught.value.body)["message"] == 'pods "ghost" not found'


def add_workers(kube: FakeKube, count: int) -> None:
    for i in range(count):
        kube.add(pod(f"w{i}", labels={"app": "train"}, nodeName="node-1", status=RUNNING))


def test_a_disruption_budget_answers_429_with_its_cause(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    add_workers(kube, 2)
    kube.add(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train-pdb", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}},
        }
    )
    with pytest.raises(ApiException) as caught:
        evict(core, "w0")
    assert caught.value.status == 429
    assert caught.value.headers["Retry-After"] == "1"
    body = json.loads(caught.value.body)
    assert body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget train-pdb needs 2 healthy pods and has 2 currently",
        }
    ]
    assert kube.pod("default", "w0") is not None
    pdb = kube.get("policy/v1", "PodDisruptionBudget", "train-pdb", "default")
    assert pdb["status"]["disruptionsAllowed"] == 0 and pdb["status"]["expectedPods"] == 2


def test_max_unavailable_allows_one_eviction_then_blocks(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    add_workers(kube, 3)
    kube.add(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train-pdb", "namespace": "default"},
            "spec": {"maxUnavailable": "34%", "selector": {"matchLabels": {"app": "train"}}},
        }
    )
    assert evict(core, "w0").status == 201
    # 34% of 3 rounds up to 2 unavailable; an evicted pod still counts as expected.
    assert evict(core, "w1").status == 201
    with pytest.raises(ApiException) as caught:
        evict(core, "w2")
    assert caught.value.status == 429


def test_graceful_eviction_marks_the_pod_terminating_first(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.settings.pod_grace_seconds = 0.3
    add_workers(kube, 1)
    assert evict(core, "w0").status == 201
    terminating = core.read_namespaced_pod("w0", "default")
    assert terminating.metadata.deletion_timestamp is not None
    assert evict(core, "w0").status == 201  # evicting a terminating pod is a no-op success
    deadline = time.monotonic() + 3
    while kube.pod("default", "w0") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kube.pod("default", "w0") is None
