"""The watch mirror as client-go's reflector (issue #33 items 4 and 5), over the fake API server
through the real client: relist after an etcd restore (504 ResourceVersionTooLarge) and after a
410 mid-stream or a restart, BOOKMARKs and watch timeouts taken in stride, and every Retry-After
of an API Priority and Fairness 429 honoured, by the mirror and by the enacting calls alike."""

from __future__ import annotations

import logging
import time

import pytest
from kubernetes.client.rest import ApiException

from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kube.mirror import is_too_large
from tests.fakekube import FakeKube
from tests.fakekube.testing import eventually, node, pod
from tests.koordweb.kube_helpers import fast_retry

PODS = r"^/api/v1/pods$"


def pod_names(client: KubeClusterClient) -> set[str]:
    return {d["metadata"]["name"] for d in client.mirror.documents("pods")}


def test_the_mirror_relists_after_an_etcd_restore(
    kube: FakeKube, kube_client: KubeClusterClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Item 4: the server's store went back; the mirror's version is ahead of it. Watching from
    it is answered ResourceVersionTooLarge (504) forever: only a relist gets out."""
    kube.settings.too_large_wait = 0.2
    kube.add(pod("before", schedulerName="koordweb"))
    kube.checkpoint()
    for i in range(5):  # the backup is 5 versions behind
        kube.add(pod(f"lost-{i}", schedulerName="koordweb"))
    kube_client.snapshot()
    eventually(lambda: len(pod_names(kube_client)) == 6)
    pods = kube_client.mirror.reflectors["pods"]
    relists = pods.relists
    with caplog.at_level(logging.WARNING, logger="koordweb.backends.kube.mirror"):
        kube.restore()
        kube.add(pod("new", schedulerName="koordweb"))  # written after the restore
        eventually(lambda: pod_names(kube_client) == {"before", "new"}, timeout=10)
    assert pods.relists > relists
    assert any("ahead of the server" in r.getMessage() for r in caplog.records)
    kube.add(pod("later", schedulerName="koordweb"))
    eventually(lambda: "later" in pod_names(kube_client))


def test_a_410_mid_stream_and_a_restart_relist(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube.add(pod("p1", schedulerName="koordweb"))
    kube_client.snapshot()
    pods = kube_client.mirror.reflectors["pods"]
    relists = pods.relists
    time.sleep(0.2)  # the watch is open
    kube.store.expire_watches()
    kube.add(pod("p2", schedulerName="koordweb"))
    eventually(lambda: pod_names(kube_client) == {"p1", "p2"})
    assert pods.relists == relists + 1
    # A restart cuts the watch; the new watch cache serves the version the mirror has reached.
    kube.restart()
    kube.delete("v1", "Pod", "p1", "default")
    eventually(lambda: pod_names(kube_client) == {"p2"})


def test_bookmarks_move_the_version_and_watch_timeouts_are_not_failures(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube.settings.bookmark_interval = 0.2
    kube.add(node("n1"))
    kube_client.snapshot()
    pods = kube_client.mirror.reflectors["pods"]
    kube.add(node("n2"))  # another kind: only a bookmark tells the pod watch
    eventually(lambda: int(pods.resource_version or 0) == kube.store.resource_version)
    watches = pods.watches
    time.sleep(2.5)  # watch_timeout=1: the server ends each watch within 2 s
    assert pods.watches > watches
    assert pods.relists == 1 and pods.last_error is None
    watched = [r for r in kube.faults.requests_to(PODS) if "watch=true" in r.query]
    assert all("allowWatchBookmarks=true" in r.query for r in watched)


def test_the_mirror_never_retries_before_retry_after(kube: FakeKube) -> None:
    """Item 5: API Priority and Fairness 429s on the lists and the watches."""
    kube.add(pod("p1", schedulerName="koordweb"))
    kube.faults.add(path=PODS, method="GET", status=429, apf=True, retry_after=1, count=3)
    with KubeClusterClient.from_url(
        kube.url, retry=fast_retry(), watch_timeout=1, sync_timeout=10
    ) as client:
        client.snapshot()
        eventually(lambda: len(kube.faults.requests_to(PODS)) >= 5, timeout=10)
    log = kube.faults.requests_to(PODS)
    rejected = [i for i, r in enumerate(log) if r.status == 429]
    assert len(rejected) == 3
    for i in rejected:
        assert log[i + 1].at - log[i].at >= 0.95, (log[i], log[i + 1])


def test_enacting_never_retries_before_retry_after(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    """Item 5: a binding's 429 says 2 s; the policy's own backoff (50 ms) must not win."""
    kube.add(node("n1"))
    kube.add(pod("p1", schedulerName="koordweb"))
    binding = r"/pods/p1/binding$"
    kube.faults.add(path=binding, method="POST", status=429, apf=True, retry_after=2)
    assert kube_client.bind("default", "p1", None, "n1").ok
    log = kube.faults.requests_to(binding)
    assert [r.status for r in log] == [429, 201]
    assert log[1].at - log[0].at >= 1.95


def test_too_large_is_read_from_the_cause_or_an_old_servers_message() -> None:
    cause = ApiException(status=504, reason="Timeout")
    cause.body = (
        '{"reason": "Timeout", "code": 504, "message": "Timeout: x", "details": '
        '{"causes": [{"reason": "ResourceVersionTooLarge"}]}}'
    )
    old = ApiException(status=504, reason="Timeout")
    old.body = (
        '{"reason": "Timeout", "message": "Timeout: Too large resource version: 9, current: 3"}'
    )
    other = ApiException(status=504, reason="Timeout")
    other.body = '{"reason": "Timeout", "message": "the server was unable to return a response"}'
    assert is_too_large(cause) and is_too_large(old) and not is_too_large(other)
