"""Control-plane disruptions of the fake server, read through the real client over HTTP: watch
timeouts and BOOKMARKs, 410 mid-stream, a restart, an etcd restore (504 ResourceVersionTooLarge),
API Priority and Fairness 429s, a lagging watch. The shapes are kube-apiserver's (cacher,
apimachinery's NewTimeoutError, storage's NewTooLargeResourceVersionError, the APF filter)."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import urllib3
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube
from tests.fakekube.testing import pod


def raw_events(core: client.CoreV1Api, **query: Any) -> list[dict[str, Any]]:
    """Every event of one watch of default's pods, read to the stream's end."""
    response = core.list_namespaced_pod("default", watch=True, _preload_content=False, **query)
    try:
        return [json.loads(line) for line in response if line.strip()]
    finally:
        response.release_conn()


def later(seconds: float, action: Any) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()


def test_a_watch_ends_after_its_timeout_with_bookmarks_carrying_the_version(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.settings.bookmark_interval = 0.2
    version = core.list_namespaced_pod("default").metadata.resource_version
    kube.add(pod("p1", namespace="other"))  # another namespace: the version moves, no event
    events = raw_events(
        core, resource_version=version, timeout_seconds=1, allow_watch_bookmarks=True
    )
    # the watch stayed open until its timeout, a bookmark every interval, then ended by itself
    assert len(events) >= 2 and {e["type"] for e in events} == {"BOOKMARK"}
    last = events[-1]["object"]
    assert last["kind"] == "Pod" and last["apiVersion"] == "v1"
    assert int(last["metadata"]["resourceVersion"]) == kube.store.resource_version
    # Without allowWatchBookmarks the server sends none.
    assert raw_events(core, resource_version=version, timeout_seconds=1) == []


def test_compaction_under_an_open_watch_is_a_410_error_event_mid_stream(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    version = core.list_namespaced_pod("default").metadata.resource_version
    later(0.1, lambda: kube.add(pod("p1")))
    later(0.4, kube.store.expire_watches)
    events = raw_events(core, resource_version=version, timeout_seconds=5)
    assert [e["type"] for e in events] == ["ADDED", "ERROR"]
    status = events[1]["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == "The resourceVersion for the provided watch is too old."
    # And the version it had is expired for a new watch too.
    error = raw_events(core, resource_version=version, timeout_seconds=1)[0]["object"]
    assert error["code"] == 410


def test_a_restart_cuts_open_watches_and_forgets_the_history(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    version = core.list_namespaced_pod("default").metadata.resource_version
    kube.add(pod("p1"))
    later(0.3, kube.restart)
    with pytest.raises((urllib3.exceptions.HTTPError, ConnectionError)):
        raw_events(core, resource_version=version, timeout_seconds=5)
    error = raw_events(core, resource_version=version, timeout_seconds=1)[0]["object"]
    assert error["code"] == 410


def test_after_an_etcd_restore_a_newer_version_is_too_large(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.settings.too_large_wait = 0.3
    kube.add(pod("kept"))
    kube.checkpoint()
    kube.add(pod("lost"))
    newer = core.list_namespaced_pod("default").metadata.resource_version
    kube.restore()
    assert kube.pod("default", "lost") is None and kube.pod("default", "kept") is not None
    # A watch: HTTP 200, then one ERROR event with the Timeout Status (the watch had started).
    events = raw_events(core, resource_version=newer, timeout_seconds=5)
    assert [e["type"] for e in events] == ["ERROR"]
    status = events[0]["object"]
    assert status["code"] == 504 and status["reason"] == "Timeout"
    assert status["message"] == (
        f"Timeout: Too large resource version: {newer}, current: {kube.store.resource_version}"
    )
    assert status["details"] == {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    }
    # A list at least that new: the same Status as a 504 answer.
    with pytest.raises(ApiException) as listed:
        core.list_namespaced_pod("default", resource_version=newer)
    assert listed.value.status == 504
    assert json.loads(listed.value.body)["details"]["causes"][0]["reason"] == (
        "ResourceVersionTooLarge"
    )
    # A consistent list (no version) is served: the restored objects.
    names = [p.metadata.name for p in core.list_namespaced_pod("default").items]
    assert names == ["kept"]


def test_a_version_the_store_reaches_in_time_is_served(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    ahead = str(kube.store.resource_version + 1)
    later(0.2, lambda: kube.add(pod("p1", namespace="other")))
    listed = core.list_namespaced_pod("default", resource_version=ahead)
    assert int(listed.metadata.resource_version) >= int(ahead)


def test_an_apf_rejection_is_plain_text_with_retry_after(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.faults.add(path="/api/v1/namespaces/default/pods$", status=429, apf=True, retry_after=7)
    with pytest.raises(ApiException) as rejected:
        core.list_namespaced_pod("default")
    error = rejected.value
    assert error.status == 429
    assert error.headers["Retry-After"] == "7"
    assert error.headers["X-Kubernetes-PF-PriorityLevel-UID"]
    body = error.body.decode() if isinstance(error.body, bytes) else error.body
    assert body == "Too many requests, please try again later.\n"
    logged = kube.faults.requests_to("/api/v1/namespaces/default/pods$")
    assert [(r.status, r.retry_after) for r in logged] == [(429, 7)]
    core.list_namespaced_pod("default")  # the fault fired once


def test_a_lagging_watch_delivers_each_event_its_delay_after_the_write(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.settings.watch_delay = 0.5
    kube.settings.bookmark_interval = 0.1
    version = core.list_namespaced_pod("default").metadata.resource_version
    written: dict[str, float] = {}

    def create() -> None:
        written["p1"] = time.monotonic()
        core.create_namespaced_pod("default", pod("p1"))

    later(0.1, create)
    response = core.list_namespaced_pod(
        "default",
        watch=True,
        resource_version=version,
        timeout_seconds=2,
        allow_watch_bookmarks=True,
        _preload_content=False,
    )
    seen: list[tuple[str, str, float]] = []
    for line in response:
        if line.strip():
            event = json.loads(line)
            meta = event["object"]["metadata"]
            seen.append((event["type"], meta["resourceVersion"], time.monotonic()))
    response.release_conn()
    added = [s for s in seen if s[0] == "ADDED"]
    assert len(added) == 1 and added[0][2] - written["p1"] >= 0.5
    # No bookmark claimed the pod's version before the pod itself arrived.
    before = [s for s in seen if s[2] < added[0][2] and s[0] == "BOOKMARK"]
    assert all(int(s[1]) < int(added[0][1]) for s in before)
