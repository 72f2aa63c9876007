"""Eviction, binding preconditions and the disruption-controller stand-in, through the client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube
from tests.fakekube.testing import RUNNING, gpu_node, pod

PDB = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "train-pdb", "namespace": "default"},
    "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "train"}}},
}


@pytest.fixture(autouse=True)
def manual_kubelet(kube: FakeKube) -> None:
    kube.kubelet.manual = True
    kube.add(gpu_node("node-1"))


@pytest.fixture
def policy(api: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api)


def workers(kube: FakeKube, count: int) -> list[str]:
    return [
        kube.add(pod(f"w{i}", labels={"app": "train"}, nodeName="node-1", status=RUNNING))[
            "metadata"
        ]["uid"]
        for i in range(count)
    ]


def evict(core: client.CoreV1Api, name: str, **options: Any) -> Any:
    body = client.V1Eviction(
        metadata=client.V1ObjectMeta(name=name, namespace="default"),
        delete_options=client.V1DeleteOptions(**options) if options else None,
    )
    return core.create_namespaced_pod_eviction(name, "default", body, _preload_content=False)


def status_of(api: client.ApiClient, raw: str | bytes) -> client.V1Status:
    text = raw.decode() if isinstance(raw, bytes) else raw
    return api.deserialize(text, "V1Status", "application/json")


def test_eviction_with_another_uid_is_a_conflict_and_spares_the_pod(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    (uid,) = workers(kube, 1)
    with pytest.raises(ApiException) as caught:
        evict(core, "w0", preconditions=client.V1Preconditions(uid="stale-uid"))
    status = status_of(api, caught.value.body)
    assert (caught.value.status, status.reason) == (409, "Conflict")
    assert status.message == (
        'Operation cannot be fulfilled on Pod "w0": the UID in the precondition (stale-uid) does '
        f"not match the UID in record ({uid}). The object might have been deleted and then "
        "recreated"
    )
    current = core.read_namespaced_pod("w0", "default")
    assert current.metadata.deletion_timestamp is None


def test_eviction_honours_the_grace_period_and_marks_a_disruption_target(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    (uid,) = workers(kube, 1)
    answer = evict(
        core, "w0", grace_period_seconds=45, preconditions=client.V1Preconditions(uid=uid)
    )
    status = status_of(api, answer.data)
    assert (answer.status, status.status, status.code) == (201, "Success", 201)
    victim = core.read_namespaced_pod("w0", "default")
    assert victim.metadata.deletion_grace_period_seconds == 45
    target = next(c for c in victim.status.conditions if c.type == "DisruptionTarget")
    assert (target.status, target.reason, target.message) == (
        "True",
        "EvictionByEvictionAPI",
        "Eviction API: evicting",
    )


def test_evicting_a_terminating_pod_skips_the_budget_and_may_shorten_its_grace(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    workers(kube, 2)
    kube.add(PDB)
    core.delete_namespaced_pod("w0", "default", grace_period_seconds=60)
    # The budget now allows nothing (1 healthy, 2 desired), yet a terminating pod is no new
    # disruption: eviction deletes it again without looking at the budget.
    assert evict(core, "w0", grace_period_seconds=10).status == 201
    assert core.read_namespaced_pod("w0", "default").metadata.deletion_grace_period_seconds == 10
    with pytest.raises(ApiException) as caught:
        evict(core, "w1")
    assert caught.value.status == 429


def test_budget_status_follows_pods_and_evictions(
    kube: FakeKube, core: client.CoreV1Api, policy: client.PolicyV1Api
) -> None:
    workers(kube, 3)
    kube.add({**PDB, "spec": {**PDB["spec"], "minAvailable": 1}})
    budget = policy.read_namespaced_pod_disruption_budget("train-pdb", "default")
    assert isinstance(budget, client.V1PodDisruptionBudget)
    assert (budget.status.current_healthy, budget.status.desired_healthy) == (3, 1)
    assert (budget.status.expected_pods, budget.status.disruptions_allowed) == (3, 2)
    assert budget.status.observed_generation == budget.metadata.generation
    assert [(c.type, c.status, c.reason) for c in budget.status.conditions] == [
        ("DisruptionAllowed", "True", "SufficientPods")
    ]
    listed = policy.list_namespaced_pod_disruption_budget("default")
    assert evict(core, "w0").status == 201
    watcher = watch.Watch()
    seen = []
    for event in watcher.stream(
        policy.list_namespaced_pod_disruption_budget,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=2,
    ):
        seen.append(event["object"].status)
    # The eviction handler wrote the decrement and the disrupted pod; the controller then saw
    # the pod terminating and dropped it from the map.
    assert seen[0].disruptions_allowed == 1 and set(seen[0].disrupted_pods) == {"w0"}
    assert seen[-1].disrupted_pods is None
    assert (seen[-1].current_healthy, seen[-1].disruptions_allowed) == (2, 1)
    assert evict(core, "w1").status == 201
    with pytest.raises(ApiException) as caught:
        evict(core, "w2")
    body = json.loads(caught.value.body)
    assert body["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget train-pdb needs 1 healthy pods and has 1 currently",
        }
    ]
    final = policy.read_namespaced_pod_disruption_budget("train-pdb", "default").status
    assert (final.expected_pods, final.disruptions_allowed) == (3, 0)
    assert final.conditions[0].reason == "InsufficientPods"
    kube.kubelet.finish_terminating()
    gone = policy.read_namespaced_pod_disruption_budget("train-pdb", "default").status
    assert (gone.expected_pods, gone.current_healthy) == (1, 1)


def test_a_failed_uid_precondition_still_spends_the_budget(
    kube: FakeKube, core: client.CoreV1Api, policy: client.PolicyV1Api
) -> None:
    workers(kube, 3)
    kube.add({**PDB, "spec": {**PDB["spec"], "minAvailable": 1}})
    with pytest.raises(ApiException) as caught:
        evict(core, "w0", preconditions=client.V1Preconditions(uid="stale-uid"))
    assert caught.value.status == 409
    # As on a real server: the budget check ran first; the pod stays in disruptedPods (not
    # healthy) until the controller gives up on it after two minutes.
    status = policy.read_namespaced_pod_disruption_budget("train-pdb", "default").status
    assert set(status.disrupted_pods) == {"w0"}
    assert (status.current_healthy, status.disruptions_allowed) == (2, 1)


def test_a_pending_pod_is_evicted_without_the_budget(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(pod("w0", labels={"app": "train"}))
    kube.add(PDB)
    assert evict(core, "w0").status == 201
    assert kube.pod("default", "w0") is None


def test_more_than_one_budget_is_a_500_status(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    workers(kube, 1)
    kube.add(PDB)
    kube.add({**PDB, "metadata": {"name": "second", "namespace": "default"}})
    with pytest.raises(ApiException) as caught:
        evict(core, "w0")
    status = status_of(api, caught.value.body)
    assert (caught.value.status, status.status, status.code) == (500, "Failure", 500)
    assert status.message == (
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
        "support."
    )


def binding(name: str, node: str, uid: str | None = None) -> client.V1Binding:
    return client.V1Binding(
        metadata=client.V1ObjectMeta(name=name, uid=uid),
        target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
    )


def test_binding_with_a_stale_uid_is_the_storage_conflict(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    uid = kube.add(pod("p1"))["metadata"]["uid"]
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding(
            "p1", "default", binding("p1", "node-1", "stale-uid"), _preload_content=False
        )
    status = status_of(api, caught.value.body)
    assert (caught.value.status, status.reason) == (409, "Conflict")
    assert status.message == (
        'Operation cannot be fulfilled on pods "p1": StorageError: invalid object, Code: 4, '
        "Key: /registry/pods/default/p1, ResourceVersion: 0, AdditionalErrorMsg: Precondition "
        f"failed: UID in precondition: stale-uid, UID in object meta: {uid}"
    )
    assert core.read_namespaced_pod("p1", "default").spec.node_name is None


def test_binding_a_terminating_pod_is_refused(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    victim = pod("p1")
    victim["metadata"].update(
        deletionTimestamp="2030-01-01T00:00:00Z", deletionGracePeriodSeconds=30
    )
    kube.add(victim)
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod_binding(
            "p1", "default", binding("p1", "node-1"), _preload_content=False
        )
    status = status_of(api, caught.value.body)
    assert status.message == (
        'Operation cannot be fulfilled on pods/binding "p1": pod p1 is being deleted, cannot be '
        "assigned to a host"
    )
