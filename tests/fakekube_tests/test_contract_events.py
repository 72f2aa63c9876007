"""Events and PodGroup status on the fake server, as kube-apiserver serves them: Events validated
as pkg/apis/core/validation/events.go does (both APIs), listed by involvedObject field selectors;
PodGroups without a status subresource, as their CRD declares."""

from __future__ import annotations

import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube

GROUPS = ("scheduling.sigs.k8s.io", "v1alpha1")


def core_event(**overrides: object) -> dict:
    event = {
        "metadata": {"name": "p-0.1", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "p-0", "uid": "u1"},
        "reason": "FailedScheduling",
        "message": "0/4 nodes are available",
        "type": "Warning",
        "count": 1,
        "source": {"component": "koordweb"},
    }
    event.update(overrides)
    return event


@pytest.fixture
def ml(kube: FakeKube) -> None:
    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})


def causes(error: ApiException) -> list[str]:
    return [c["field"] for c in json.loads(error.body)["details"]["causes"]]


def test_a_core_event_is_listed_by_its_involved_object(ml, core: client.CoreV1Api) -> None:
    core.create_namespaced_event("ml", core_event())
    core.create_namespaced_event(
        "ml", core_event(metadata={"name": "q.1"}, involvedObject={"namespace": "ml", "name": "q"})
    )
    found = core.list_namespaced_event("ml", field_selector="involvedObject.name=p-0").items
    assert [e.metadata.name for e in found] == ["p-0.1"]
    core.patch_namespaced_event("p-0.1", "ml", {"count": 2, "lastTimestamp": None})
    assert core.read_namespaced_event("p-0.1", "ml").count == 2


def test_a_core_event_must_be_in_its_objects_namespace(ml, core: client.CoreV1Api) -> None:
    other = {"kind": "Pod", "namespace": "default", "name": "p-0"}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_event("ml", core_event(involvedObject=other))
    assert refused.value.status == 422
    assert causes(refused.value) == ["involvedObject.namespace"]


def test_a_new_style_event_needs_its_reporter_action_and_a_short_message(
    ml, core: client.CoreV1Api
) -> None:
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_event(
            "ml", core_event(eventTime="2026-01-01T00:00:00.000000Z", message="x" * 1025)
        )
    assert refused.value.status == 422
    # reportingController is named more than once: required, and empty to IsQualifiedName.
    assert list(dict.fromkeys(causes(refused.value))) == [
        "reportingController",
        "reportingInstance",
        "action",
        "message",
    ]


def test_events_api_checks_strictly(ml, api: client.ApiClient) -> None:
    events = client.EventsV1Api(api)
    body = {
        "metadata": {"name": "p-0.2", "namespace": "ml"},
        "regarding": {"kind": "Pod", "namespace": "ml", "name": "p-0"},
        "reason": "Scheduled",
        "note": "Successfully assigned ml/p-0 to node-1",
        "type": "Normal",
        "action": "Binding",
        "reportingController": "koordweb",
        "reportingInstance": "koordweb-1",
        "eventTime": "2026-01-01T00:00:00.000000Z",
    }
    events.create_namespaced_event("ml", body)
    with pytest.raises(ApiException) as refused:
        events.create_namespaced_event(
            "ml", {**body, "metadata": {"name": "p-0.3"}, "type": "Info", "deprecatedCount": 3}
        )
    assert refused.value.status == 422
    assert causes(refused.value) == ["type", "count"]


def test_a_pod_group_carries_its_status_itself(kube: FakeKube, ml, api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "grp", "namespace": "ml"},
        "spec": {"minMember": 2},
        "status": {"phase": "Pending"},
    }
    created = custom.create_namespaced_custom_object(*GROUPS, "ml", "podgroups", group)
    assert created["status"] == {"phase": "Pending"}  # no subresource: the object keeps it
    created["status"] = {"phase": "Running", "scheduled": 2, "running": 2}
    replaced = custom.replace_namespaced_custom_object(*GROUPS, "ml", "podgroups", "grp", created)
    assert replaced["status"]["phase"] == "Running"
    with pytest.raises(ApiException) as missing:
        custom.patch_namespaced_custom_object_status(
            *GROUPS, "ml", "podgroups", "grp", {"status": {"phase": "Failed"}}
        )
    assert missing.value.status == 404
