"""Graceful pod deletion through the real client: deletionTimestamp, grace periods, DELETED."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.fakekube import FakeKube
from tests.fakekube.testing import RUNNING, eventually, gpu_node, pod


@pytest.fixture(autouse=True)
def manual_kubelet(kube: FakeKube) -> None:
    kube.kubelet.manual = True  # terminating pods stay until the test finishes them
    kube.add(gpu_node("node-1"))


def running(name: str, **spec: Any) -> dict[str, Any]:
    return pod(name, nodeName="node-1", status=RUNNING, **spec)


def seconds_between(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def test_deleting_a_bound_pod_marks_it_terminating_with_the_spec_grace(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(running("p1", terminationGracePeriodSeconds=120))
    before = core.read_namespaced_pod("p1", "default")
    answer = core.delete_namespaced_pod("p1", "default")
    assert isinstance(answer, client.V1Pod)
    assert answer.metadata.deletion_grace_period_seconds == 120
    created = before.metadata.creation_timestamp
    assert 119 <= seconds_between(answer.metadata.deletion_timestamp, created) <= 125
    assert answer.metadata.generation == before.metadata.generation + 1
    still = core.read_namespaced_pod("p1", "default")
    assert still.metadata.deletion_timestamp == answer.metadata.deletion_timestamp
    assert still.status.phase == "Running"
    assert kube.kubelet.terminating() == [("default", "p1")]


def test_a_pod_without_a_spec_grace_gets_the_default_30_seconds(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    created = core.create_namespaced_pod("default", pod("p1", nodeName="node-1"))
    assert created.spec.termination_grace_period_seconds == 30
    assert core.delete_namespaced_pod("p1", "default").metadata.deletion_grace_period_seconds == 30


def test_the_options_grace_wins_and_may_only_shorten_later(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(running("p1", terminationGracePeriodSeconds=120))
    first = core.delete_namespaced_pod("p1", "default", grace_period_seconds=60)
    assert first.metadata.deletion_grace_period_seconds == 60
    longer = core.delete_namespaced_pod(
        "p1", "default", body=client.V1DeleteOptions(grace_period_seconds=90)
    )
    assert longer.metadata.deletion_grace_period_seconds == 60
    assert longer.metadata.deletion_timestamp == first.metadata.deletion_timestamp
    assert longer.metadata.resource_version == first.metadata.resource_version
    shorter = core.delete_namespaced_pod("p1", "default", grace_period_seconds=20)
    assert shorter.metadata.deletion_grace_period_seconds == 20
    moved = seconds_between(first.metadata.deletion_timestamp, shorter.metadata.deletion_timestamp)
    assert moved == 40
    assert kube.pod("default", "p1") is not None


def test_unbound_terminal_and_zero_grace_pods_go_at_once(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(pod("pending"))
    kube.add(pod("done", nodeName="node-1", status={"phase": "Succeeded"}))
    kube.add(running("forced"))
    for name, grace in (("pending", None), ("done", None), ("forced", 0)):
        answer = core.delete_namespaced_pod(name, "default", grace_period_seconds=grace)
        assert answer.metadata.deletion_grace_period_seconds == 0
        assert kube.pod("default", name) is None
    assert kube.kubelet.terminating() == []


def test_a_terminating_pod_is_force_deleted_with_grace_zero(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.add(running("p1"))
    core.delete_namespaced_pod("p1", "default")
    core.delete_namespaced_pod("p1", "default", grace_period_seconds=0)
    assert kube.pod("default", "p1") is None


def test_the_kubelet_finishes_it_and_deleted_carries_the_last_state(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    started = {"running": {"startedAt": "2026-12-01T00:00:00Z"}}
    container = {"name": "main", "image": "busybox", "imageID": "", "ready": True}
    status = {**RUNNING, "containerStatuses": [{**container, "restartCount": 0, "state": started}]}
    kube.add(pod("p1", nodeName="node-1", status=status, terminationGracePeriodSeconds=5))
    listed = core.list_namespaced_pod("default")
    core.delete_namespaced_pod("p1", "default")
    assert kube.kubelet.finish_terminating() == [("default", "p1")]
    watcher = watch.Watch()
    events = []
    for event in watcher.stream(
        core.list_namespaced_pod,
        "default",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    ):
        events.append(event)
        if event["type"] == "DELETED":
            watcher.stop()
    assert [e["type"] for e in events] == ["MODIFIED", "MODIFIED", "DELETED"]
    marked, killed, gone = (e["object"] for e in events)
    assert marked.metadata.deletion_grace_period_seconds == 5
    assert killed.status.phase == "Failed"
    (main,) = killed.status.container_statuses
    assert (main.name, main.ready, main.state.running) == ("main", False, None)
    assert main.state.terminated.exit_code == 143  # killed: SIGTERM, not a clean exit
    assert gone.status.phase == "Failed"
    assert gone.metadata.deletion_timestamp == marked.metadata.deletion_timestamp
    assert int(gone.metadata.resource_version) > int(killed.metadata.resource_version)


def test_time_scale_finishes_terminating_pods_by_themselves(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    kube.kubelet.configure(manual=False, time_scale=0.01)  # 30 s of grace: 0.3 s
    kube.add(running("p1"))
    assert core.delete_namespaced_pod("p1", "default").metadata.deletion_timestamp is not None
    eventually(lambda: kube.pod("default", "p1") is None)


def test_manual_mode_keeps_victims_terminating_until_told(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    import urllib3

    http = urllib3.PoolManager()
    state = json.loads(
        http.request("POST", f"{kube.url}/_fake/kubelet", json={"manual": True}).data
    )
    assert state["manual"] is True
    for i in range(3):
        kube.add(running(f"v{i}", terminationGracePeriodSeconds=1))
        core.delete_namespaced_pod(f"v{i}", "default")
    for _round in range(3):  # several "rounds": nothing moves on its own
        listed = core.list_namespaced_pod("default")
        assert [p.metadata.name for p in listed.items] == ["v0", "v1", "v2"]
        assert all(p.metadata.deletion_timestamp for p in listed.items)
    one = http.request(
        "POST",
        f"{kube.url}/_fake/kubelet",
        json={"finish": {"namespace": "default", "name": "v1"}},
    )
    assert json.loads(one.data)["finished"] == [{"namespace": "default", "name": "v1"}]
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["v0", "v2"]
    rest = json.loads(http.request("POST", f"{kube.url}/_fake/kubelet", json={"finish": True}).data)
    assert rest["terminating"] == [] and len(rest["finished"]) == 2
    assert core.list_namespaced_pod("default").items == []


def test_delete_preconditions_answer_the_servers_409(
    kube: FakeKube, core: client.CoreV1Api, api: client.ApiClient
) -> None:
    uid = kube.add(running("p1"))["metadata"]["uid"]
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="other"))
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod("p1", "default", body=options)
    status = api.deserialize(caught.value.body, "V1Status", "application/json")
    assert (status.code, status.reason) == (409, "Conflict")
    assert status.message == (
        'Operation cannot be fulfilled on Pod "p1": the UID in the precondition (other) does not '
        f"match the UID in record ({uid}). The object might have been deleted and then recreated"
    )
    assert (status.details.kind, status.details.name) == ("Pod", "p1")
    assert kube.pod("default", "p1")["metadata"].get("deletionTimestamp") is None


def test_a_pod_recreated_under_the_same_name_is_not_deleted(
    kube: FakeKube, core: client.CoreV1Api
) -> None:
    old_uid = kube.add(running("p1", terminationGracePeriodSeconds=1))["metadata"]["uid"]
    core.delete_namespaced_pod("p1", "default")
    kube.kubelet.finish_terminating()
    kube.add(running("p1"))
    options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=old_uid))
    with pytest.raises(ApiException) as caught:
        core.delete_namespaced_pod("p1", "default", body=options)
    assert caught.value.status == 409
    assert kube.pod("default", "p1")["metadata"].get("deletionTimestamp") is None


def test_seeded_terminating_pods_are_finished_too(kube: FakeKube) -> None:
    stamp = (datetime.now() + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    victim = running("p1")
    victim["metadata"].update(deletionTimestamp=stamp, deletionGracePeriodSeconds=30)
    kube.add(victim)
    assert kube.kubelet.terminating() == [("default", "p1")]
    assert kube.kubelet.finish_terminating("default") == [("default", "p1")]
    assert kube.pod("default", "p1") is None
