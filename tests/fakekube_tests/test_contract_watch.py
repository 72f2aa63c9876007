"""Watch streams of the fake server, read with the client's own `watch.Watch`."""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube
from tests.fakekube.testing import node, pod


def collect(stream: Any, until: int) -> list[dict[str, Any]]:
    events = []
    for event in stream:
        events.append(event)
        if len(events) >= until:
            break
    return events


def later(seconds: float, action: Any) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()


def test_watch_from_a_list_sees_changes_as_typed_events(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(pod("p0"))
    listed = core.list_namespaced_pod("default")

    def changes() -> None:
        core.create_namespaced_pod("default", pod("p1"))
        core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"x": "1"}}})
        core.delete_namespaced_pod("p1", "default")

    later(0.1, changes)
    watcher = watch.Watch()
    stream = watcher.stream(
        core.list_namespaced_pod,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    events = collect(stream, 4)
    watcher.stop()
    # Deleting an unbound pod is a graceful deletion with grace 0: the server writes the
    # deletionTimestamp (MODIFIED), then removes the object (DELETED).
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert all(isinstance(e["object"], client.V1Pod) for e in events)
    assert events[1]["object"].metadata.labels == {"x": "1"}
    assert events[2]["object"].metadata.deletion_grace_period_seconds == 0
    assert events[3]["object"].metadata.deletion_timestamp is not None
    assert watcher.resource_version == events[3]["object"].metadata.resource_version


def test_watch_without_a_version_starts_with_the_current_objects(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(node("node-1"))
    kube.add(node("node-2"))
    events = collect(watch.Watch().stream(core.list_node, timeout_seconds=1), 2)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("ADDED", "node-1"),
        ("ADDED", "node-2"),
    ]


def test_watch_filters_by_selector_and_reports_objects_leaving_it(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(pod("p1", schedulerName="koordweb"))
    rv = core.list_pod_for_all_namespaces().metadata.resource_version
    later(0.1, lambda: kube.add(pod("other")))
    later(
        0.2,
        lambda: core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"a": "b"}}}),
    )
    later(
        0.3,
        lambda: core.create_namespaced_pod_binding(
            "p1", "default", {"target": {"kind": "Node", "name": "n1"}}, _preload_content=False
        ),
    )
    stream = watch.Watch().stream(
        core.list_pod_for_all_namespaces,
        resource_version=rv,
        timeout_seconds=3,
        field_selector="spec.nodeName=,spec.schedulerName=koordweb",
    )
    events = collect(stream, 2)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [
        ("MODIFIED", "p1"),
        ("DELETED", "p1"),
    ]


def test_bookmarks_carry_the_current_resource_version(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.settings.bookmark_interval = 0.1
    rv = core.list_node().metadata.resource_version
    kube.add(pod("elsewhere"))  # another resource moves the version on
    watcher = watch.Watch()
    stream = watcher.stream(
        core.list_node, resource_version=rv, allow_watch_bookmarks=True, timeout_seconds=2
    )
    event = collect(stream, 1)[0]
    assert event["type"] == "BOOKMARK"
    assert event["raw_object"]["kind"] == "Node"
    assert int(watcher.resource_version) == kube.store.resource_version


def test_no_bookmarks_unless_asked(kube: FakeKube, core: client.CoreV1Api) -> None:
    kube.settings.bookmark_interval = 0.05
    rv = core.list_node().metadata.resource_version
    events = collect(
        watch.Watch().stream(core.list_node, resource_version=rv, timeout_seconds=1), 1
    )
    assert events == []  # the stream ended by itself, with no bookmark in it
    watches = [r for r in kube.faults.requests_to(r"^/api/v1/nodes$") if "watch=true" in r.query]
    assert watches and "timeoutSeconds=1" in watches[-1].query and watches[-1].status == 200


def test_an_expired_version_answers_an_error_event_with_410(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    old = core.list_node().metadata.resource_version
    kube.add(node("node-1"))
    kube.store.compact()
    answer = urllib3.PoolManager().request(
        "GET", f"{kube.url}/api/v1/nodes?watch=true&resourceVersion={old}&timeoutSeconds=1"
    )
    assert answer.status == 200  # the real server also answers the stream first
    event = json.loads(answer.data.splitlines()[0])
    assert event["type"] == "ERROR"
    assert event["object"] == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {old} ({kube.store.resource_version})",
        "reason": "Expired",
        "code": 410,
    }
    with pytest.raises(ApiException) as caught:
        collect(watch.Watch().stream(core.list_node, resource_version=old, timeout_seconds=1), 1)
    assert caught.value.status == 410


def test_the_event_window_expires_old_versions(core: client.CoreV1Api) -> None:
    with FakeKube(event_window=3) as small:
        small_core = client.CoreV1Api(client.ApiClient(client.Configuration(host=small.url)))
        old = small_core.list_node().metadata.resource_version
        for i in range(5):
            small.add(node(f"node-{i}"))
        with pytest.raises(ApiException) as caught:
            collect(
                watch.Watch().stream(small_core.list_node, resource_version=old, timeout_seconds=1),
                1,
            )
        assert caught.value.status == 410
        recent = str(small.store.resource_version - 2)
        events = collect(
            watch.Watch().stream(small_core.list_node, resource_version=recent, timeout_seconds=1),
            2,
        )
        assert [e["object"].metadata.name for e in events] == ["node-3", "node-4"]


def test_custom_resource_watch_yields_dicts(
    kube: FakeKube, custom: client.CustomObjectsApi
) -> None:
    group = ("scheduling.koordinator.sh", "v1alpha1", "devices")
    rv = custom.list_cluster_custom_object(*group)["metadata"]["resourceVersion"]
    device = {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": "node-1"},
        "spec": {"devices": [{"type": "gpu", "minor": 0}]},
    }
    later(0.1, lambda: custom.create_cluster_custom_object(*group, device))
    stream = watch.Watch().stream(
        custom.list_cluster_custom_object, *group, resource_version=rv, timeout_seconds=3
    )
    event = collect(stream, 1)[0]
    assert event["type"] == "ADDED"
    assert event["object"]["spec"] == device["spec"]


def test_a_watch_that_ran_out_leaves_its_connection_open(kube: FakeKube) -> None:
    """kube-apiserver ends a watch whose timeoutSeconds ran out with the last chunk and keeps
    the HTTP/1.1 connection for the next request, which a client's pool sends on it. The fake
    closed it after a complete answer, so a request sent at that moment was lost
    (RemoteDisconnected in CI, now and then). Here both requests go on one socket."""
    kube.add(pod("p1"))
    where = urllib3.util.parse_url(kube.url)
    with socket.create_connection((where.host, where.port), timeout=5) as conn:
        stream = conn.makefile("rb")
        conn.sendall(
            b"GET /api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1 HTTP/1.1\r\n"
            b"Host: fake\r\n\r\n"
        )
        assert stream.readline().startswith(b"HTTP/1.1 200")
        while stream.readline() not in (b"\r\n", b""):
            pass  # headers
        chunks = []
        while (size := int(stream.readline().strip(), 16)) > 0:
            chunks.append(stream.read(size + 2))
        assert stream.readline() == b"\r\n" and b'"ADDED"' in b"".join(chunks)
        conn.sendall(b"GET /api/v1/namespaces/default/pods/p1 HTTP/1.1\r\nHost: fake\r\n\r\n")
        assert stream.readline().startswith(b"HTTP/1.1 200"), "the connection was kept"
