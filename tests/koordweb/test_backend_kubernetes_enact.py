"""The kubernetes backend's writes over HTTP against the fake server, with injected faults."""

from __future__ import annotations

import threading

import pytest

from koordweb.backends.base import Binding, EnactPlan, Eviction, Nomination
from koordweb.backends.kube import (
    BindOutcome,
    EvictOutcome,
    KubeClusterClient,
    KubeUnavailable,
)
from tests.fakekube import FakeKube, policy
from tests.fakekube.testing import RUNNING, eventually, pod
from tests.koordweb.kube_helpers import fast_retry

DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def add_pending(kube: FakeKube, name: str = "p1") -> str:
    return str(kube.add(pod(name, schedulerName="koordweb"))["metadata"]["uid"])


def test_bind_writes_annotations_then_binds(kube: FakeKube, kube_client: KubeClusterClient) -> None:
    uid = add_pending(kube)
    result = kube_client.bind(
        "default",
        "p1",
        uid,
        "node-1",
        annotations={DEVICE_ALLOCATED: '{"gpu":[{"minor":0}]}'},
        labels={"pod-group.scheduling.sigs.k8s.io": "job-a"},
    )
    assert (result.outcome, result.ok, result.node) == (BindOutcome.BOUND, True, "node-1")
    bound = kube.pod("default", "p1")
    assert bound is not None
    assert bound["spec"]["nodeName"] == "node-1"
    assert bound["metadata"]["annotations"][DEVICE_ALLOCATED] == '{"gpu":[{"minor":0}]}'
    assert bound["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] == "job-a"
    writes = [
        (r.method, r.path.rsplit("/", 1)[-1])
        for r in kube.faults.requests
        if r.method != "GET" and "p1" in r.path
    ]
    assert writes == [("PATCH", "p1"), ("POST", "binding")]
    binding = kube.faults.requests_to("/binding$")[0].body
    assert binding["metadata"]["uid"] == uid and binding["target"]["name"] == "node-1"


def test_a_second_bind_to_our_node_is_success(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    uid = add_pending(kube)
    assert kube_client.bind("default", "p1", uid, "node-1").outcome is BindOutcome.BOUND
    again = kube_client.bind("default", "p1", uid, "node-1")
    assert (again.outcome, again.ok) == (BindOutcome.ALREADY_BOUND, True)


def test_bound_elsewhere_replaced_or_gone_is_dropped(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    uid = add_pending(kube)
    policy.bind(kube.store, "default", "p1", {"target": {"kind": "Node", "name": "node-7"}})
    elsewhere = kube_client.bind("default", "p1", uid, "node-1")
    assert (elsewhere.outcome, elsewhere.node) == (BindOutcome.DROPPED, "node-7")
    add_pending(kube, "p2")
    replaced = kube_client.bind("default", "p2", "an-older-uid", "node-1")
    assert replaced.outcome is BindOutcome.DROPPED and "replaced" in replaced.message
    gone = kube_client.bind("default", "ghost", None, "node-1")
    assert gone.outcome is BindOutcome.DROPPED and "not found" in gone.message
    assert kube.faults.requests_to("/binding$") == []  # nothing was posted for any of them


def test_losing_the_race_to_another_binder_is_dropped(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    uid = add_pending(kube)
    kube.faults.add(path="/binding$", latency=0.3)
    result = {}
    worker = threading.Thread(
        target=lambda: result.update(r=kube_client.bind("default", "p1", uid, "node-1"))
    )
    worker.start()
    # Once our GET has seen the pod unbound (its binding is held up), someone else binds it.
    eventually(lambda: bool(kube.faults.requests_to(r"/namespaces/default/pods/p1$", "GET")))
    policy.bind(kube.store, "default", "p1", {"target": {"kind": "Node", "name": "node-2"}})
    worker.join(5)
    assert (result["r"].outcome, result["r"].node) == (BindOutcome.DROPPED, "node-2")


def test_a_lost_binding_answer_is_retried_into_success(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    uid = add_pending(kube)
    kube.faults.add(path="/binding$", drop_after=True)
    result = kube_client.bind("default", "p1", uid, "node-1")
    assert result.ok and result.outcome is BindOutcome.ALREADY_BOUND
    assert [r.status for r in kube.faults.requests_to("/binding$")] == [None, 409]


def test_server_errors_are_retried_then_reported(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    uid = add_pending(kube)
    kube.faults.add(path="/binding$", status=503, count=2)
    kube.faults.add(path="/pods/p1$", method="PATCH", drop=True)
    assert kube_client.bind("default", "p1", uid, "node-1", labels={"a": "b"}).outcome is (
        BindOutcome.BOUND
    )
    assert [r.status for r in kube.faults.requests_to("/binding$")] == [503, 503, 201]
    add_pending(kube, "p2")
    kube.faults.add(path="/binding$", status=500, count=100)
    with pytest.raises(KubeUnavailable, match="bind default/p2 to node-1"):
        kube_client.bind("default", "p2", None, "node-1")


def test_evict_marks_the_victim_then_evicts(kube: FakeKube, kube_client: KubeClusterClient) -> None:
    kube.settings.pod_grace_seconds = 30  # keep the victim visible while it terminates
    kube.add(pod("victim", nodeName="node-1", status=RUNNING))
    result = kube_client.evict("default", "victim", preemptor="default/job-a")
    assert (result.outcome, result.ok) == (EvictOutcome.EVICTED, True)
    victim = kube.pod("default", "victim")
    assert victim is not None and victim["metadata"]["deletionTimestamp"]
    # koordweb marks the victim first; the eviction handler then writes its own reason over it.
    [marked] = [r.body for r in kube.faults.requests_to(r"/pods/victim/status$", "PATCH")]
    [ours] = marked["status"]["conditions"]
    assert (ours["type"], ours["status"]) == ("DisruptionTarget", "True")
    assert ours["reason"] == "PreemptionByScheduler" and "default/job-a" in ours["message"]
    condition = next(c for c in victim["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (condition["status"], condition["reason"]) == ("True", "EvictionByEvictionAPI")
    eviction = kube.faults.requests_to("/eviction$")[0].body
    assert (eviction["apiVersion"], eviction["kind"]) == ("policy/v1", "Eviction")


def test_evicting_a_missing_pod_is_success(kube_client: KubeClusterClient) -> None:
    result = kube_client.evict("default", "ghost", preemptor="default/job-a")
    assert (result.outcome, result.ok) == (EvictOutcome.GONE, True)


def add_budgeted_workers(kube: FakeKube, count: int, min_available: int) -> None:
    for i in range(count):
        kube.add(pod(f"w{i}", labels={"app": "train"}, nodeName="node-1", status=RUNNING))
    kube.add(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "train"}}},
        }
    )


def test_a_disruption_budget_blocks_after_bounded_retries(kube: FakeKube) -> None:
    add_budgeted_workers(kube, 1, min_available=1)
    waits: list[float] = []
    retry = fast_retry(max_delay=30.0, sleep=waits.append)
    with KubeClusterClient.from_url(kube.url, retry=retry, budget_attempts=3) as client:
        result = client.evict("default", "w0", preemptor="default/job-a")
    assert (result.outcome, result.ok) == (EvictOutcome.BLOCKED, False)
    assert result.budget_refusals == 3
    assert "disruption budget" in result.message
    assert waits == [1.0, 1.0]  # the server's Retry-After, between the three attempts
    assert kube.pod("default", "w0") is not None


def test_an_eviction_goes_through_once_the_budget_allows(kube: FakeKube) -> None:
    add_budgeted_workers(kube, 1, min_available=1)

    def a_replica_becomes_ready(seconds: float) -> None:
        kube.add(pod("w-new", labels={"app": "train"}, nodeName="node-2", status=RUNNING))

    retry = fast_retry(sleep=a_replica_becomes_ready)
    with KubeClusterClient.from_url(kube.url, retry=retry, budget_attempts=3) as client:
        result = client.evict("default", "w0", preemptor="default/job-a")
    assert (result.outcome, result.budget_refusals) == (EvictOutcome.EVICTED, 1)
    assert kube.pod("default", "w0") is None


def test_nominate_sets_and_clears(kube: FakeKube, kube_client: KubeClusterClient) -> None:
    add_pending(kube)
    assert kube_client.nominate("default", "p1", "node-3")
    stored = kube.pod("default", "p1")
    assert stored is not None and stored["status"]["nominatedNodeName"] == "node-3"
    assert kube_client.nominate("default", "p1", None)
    stored = kube.pod("default", "p1")
    assert stored is not None and "nominatedNodeName" not in stored["status"]
    assert not kube_client.nominate("default", "ghost", "node-3")


def test_enact_reports_each_pod_by_id(kube: FakeKube) -> None:
    uid = add_pending(kube, "placed")
    add_pending(kube, "preemptor")
    add_pending(kube, "taken")
    policy.bind(kube.store, "default", "taken", {"target": {"kind": "Node", "name": "node-9"}})
    add_budgeted_workers(kube, 1, min_available=1)
    kube.add(pod("victim", nodeName="node-2", status=RUNNING))
    plan = EnactPlan(
        bindings=(
            Binding(1, "default", "placed", uid, "node-1"),
            Binding(2, "default", "taken", "", "node-1"),
        ),
        evictions=(
            Eviction(3, "default", "victim", "default/preemptor"),
            Eviction(4, "default", "w0", "default/preemptor"),
        ),
        nominations=(Nomination(5, "default", "preemptor", "node-2"),),
    )
    with KubeClusterClient.from_url(
        kube.url, retry=fast_retry(sleep=lambda s: None), budget_attempts=2
    ) as client:
        report = client.enact(plan)
    assert report.bound == [1]
    assert report.dropped == {2: "already bound to node-9"}
    assert report.evicted == [3]
    assert list(report.blocked) == [4]
    assert report.nominated == [5]


def test_evicting_a_recreated_pod_leaves_the_new_one(
    kube: FakeKube, kube_client: KubeClusterClient
) -> None:
    kube.add(pod("victim", nodeName="node-1", status=RUNNING))
    result = kube_client.evict("default", "victim", preemptor="default/job-a", uid="the-old-pod")
    assert (result.outcome, result.ok) == (EvictOutcome.REPLACED, False)
    assert "another pod now has this name" in result.message
    survivor = kube.pod("default", "victim")
    assert survivor is not None
    assert all(c["type"] != "DisruptionTarget" for c in survivor["status"]["conditions"])
