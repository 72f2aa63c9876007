"""Bindings (and evictions) in parallel under a client budget (issue #33 item 7), over the fake API
server through the real client: a bounded number in flight, kube-scheduler's QPS/burst limiter,
idempotent as before, the fake's accounting never over-committed, and no read of a pod the watch
already showed (its resourceVersion is the patch's precondition, so a changed pod is read anew)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordweb.backends.base import Binding, EnactPlan, Eviction
from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kube.connection import TokenBucket
from tests.fakekube import FakeKube
from tests.fakekube.faults import LoggedRequest
from tests.fakekube.resources import served
from tests.fakekube.testing import RUNNING, eventually, gpu_node, pod
from tests.koordweb.kube_helpers import fast_retry

NODES = 8
PODS = 64
ANNOTATION = "scheduling.koordinator.sh/device-allocated"


def seed(kube: FakeKube, pods: int = PODS) -> None:
    for n in range(NODES):
        kube.add(gpu_node(f"node-{n}", cpu="64"))
    for i in range(pods):
        body = pod(f"p-{i}", schedulerName="koordweb")
        body["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
        kube.add(body)


def plan(kube: FakeKube, pods: int = PODS, annotated: bool = True) -> EnactPlan:
    bindings = []
    for i in range(pods):
        uid = kube.pod("default", f"p-{i}")["metadata"]["uid"]
        notes = {ANNOTATION: f'{{"slot": {i}}}'} if annotated else {}
        bindings.append(Binding(i, "default", f"p-{i}", uid, f"node-{i % NODES}", notes))
    return EnactPlan(bindings=tuple(bindings))


def in_flight(requests: list[LoggedRequest]) -> int:
    """The most requests the server was handling at once."""
    edges = sorted([(r.at, 1) for r in requests] + [(r.done, -1) for r in requests])
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


@pytest.fixture
def connect(kube: FakeKube) -> Iterator:
    opened: list[KubeClusterClient] = []

    def open_client(**options) -> KubeClusterClient:
        client = KubeClusterClient.from_url(
            kube.url, retry=fast_retry(), watch_timeout=1, sync_timeout=10, **options
        )
        opened.append(client)
        client.snapshot()
        return client

    yield open_client
    for client in opened:
        client.close()


def bound(kube: FakeKube, pods: int = PODS) -> dict[str, str | None]:
    return {f"p-{i}": kube.pod("default", f"p-{i}")["spec"].get("nodeName") for i in range(pods)}


def test_bindings_run_in_parallel_up_to_the_bound(kube: FakeKube, connect) -> None:
    seed(kube)
    client = connect(parallelism=8, qps=0)
    eventually(lambda: len(client.mirror.documents("pods")) == PODS)
    kube.faults.add(path=r"/pods/p-\d+(/binding)?$", latency=0.05, count=10**6)
    report = client.enact(plan(kube))
    assert sorted(report.bound) == list(range(PODS)) and not report.dropped
    writes = kube.faults.requests_to(r"/pods/p-\d+(/binding)?$")
    # The watch's copy spares the read: a patch (resourceVersion as precondition), a binding.
    assert sorted({r.method for r in writes}) == ["PATCH", "POST"] and len(writes) == 2 * PODS
    assert all(r.body["metadata"]["resourceVersion"] for r in writes if r.method == "PATCH")
    assert 4 <= in_flight(writes) <= 8
    assert bound(kube) == {f"p-{i}": f"node-{i % NODES}" for i in range(PODS)}
    assert kube.overcommitted() == []


def test_the_budget_holds_requests_to_qps_after_the_burst(kube: FakeKube, connect) -> None:
    # client-go's token bucket, on a clock the test moves: the burst passes at once, then one
    # request every 1/qps seconds
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    bucket = TokenBucket(20, 5, clock=lambda: now[0], sleep=sleep)
    for _ in range(40):
        bucket.take()
    assert len(slept) == 35 and sum(slept) == pytest.approx((40 - 5) / 20)
    # and every request of a client goes through its bucket: a budget of 20/s binds them all
    seed(kube, 40)
    client = connect(parallelism=16, qps=20, burst=5)
    eventually(lambda: len(client.mirror.documents("pods")) == 40)
    report = client.enact(plan(kube, 40, annotated=False))  # one POST a pod
    assert len(report.bound) == 40


def test_enacting_again_is_idempotent_and_binds_nothing_twice(kube: FakeKube, connect) -> None:
    seed(kube)
    client = connect(parallelism=16, qps=0)
    eventually(lambda: len(client.mirror.documents("pods")) == PODS)
    first = client.enact(plan(kube))
    again = client.enact(plan(kube))  # the watch may or may not show the bindings yet
    assert len(first.bound) == len(again.bound) == PODS and not again.dropped
    created = [r for r in kube.faults.requests_to(r"/binding$") if r.status == 201]
    assert len(created) == PODS
    assert kube.overcommitted() == []


def test_a_pod_changed_since_the_watch_showed_it_is_read_afresh(kube: FakeKube, connect) -> None:
    """The mirror shows p-0 unbound; meanwhile another scheduler bound it. The patch's
    resourceVersion fails (409), the pod is read, and the binding is dropped, its annotations
    left as they were."""
    seed(kube, 1)
    client = connect(parallelism=4, qps=0)
    eventually(lambda: len(client.mirror.documents("pods")) == 1)
    client.mirror.reflectors["pods"].stop()  # the mirror stays as it was
    kube.store.update(
        served("v1", "Pod"),
        "default",
        "p-0",
        lambda p: {**p, "spec": {**p["spec"], "nodeName": "node-7"}},
    )
    result = client.bind("default", "p-0", None, "node-0", {ANNOTATION: "x"})
    assert not result.ok and "node-7" in result.message
    assert ANNOTATION not in (kube.pod("default", "p-0")["metadata"].get("annotations") or {})
    methods = [r.method for r in kube.faults.requests_to(r"/pods/p-0(/binding)?$")]
    assert methods == ["PATCH", "GET"]


def test_evictions_run_in_parallel_too(kube: FakeKube, connect) -> None:
    for n in range(NODES):
        kube.add(gpu_node(f"node-{n}", cpu="64"))
    for i in range(32):
        kube.add(pod(f"v-{i}", nodeName=f"node-{i % NODES}", status=RUNNING))
    client = connect(parallelism=8, qps=0)
    kube.faults.add(path=r"/pods/v-\d+/(eviction|status)$", latency=0.05, count=10**6)
    evictions = tuple(Eviction(i, "default", f"v-{i}", "urgent") for i in range(32))
    report = client.enact(EnactPlan(evictions=evictions))
    assert sorted(report.evicted) == list(range(32))
    assert 4 <= in_flight(kube.faults.requests_to(r"/pods/v-\d+/eviction$")) <= 8
