"""What `kubectl describe pod` shows of koordweb's pods (issue #33, item 1), read back through the
real client as kubectl reads it: the pod's status.conditions and the Events listed with
fieldSelector involvedObject.name=<pod> in its namespace."""

from __future__ import annotations

from typing import Any

from kubernetes.client import CoreV1Api

from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kube.events import EventRecorder, ObjectRef
from koordweb.models import Job
from tests.fakekube import FakeKube
from tests.fakekube.testing import gang_pods
from tests.koordweb.kube_helpers import fast_retry, running_pod, settle
from tests.koordweb.test_kube_preemption import kube_round


def describe(client: KubeClusterClient, namespace: str, name: str) -> tuple[Any, list[Any]]:
    """The PodScheduled condition and the Events of a pod, as kubectl describe reads them."""
    core = CoreV1Api(client.api)
    events = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name}"
    ).items
    pod = core.read_namespaced_pod(name, namespace) if _exists(core, namespace, name) else None
    conditions = (pod.status.conditions or []) if pod else []
    scheduled = next((c for c in conditions if c.type == "PodScheduled"), None)
    return scheduled, events


def _exists(core: CoreV1Api, namespace: str, name: str) -> bool:
    return any(p.metadata.name == name for p in core.list_namespaced_pod(namespace).items)


def test_a_pending_pod_shows_unschedulable_and_one_failed_scheduling_event(
    kube, cluster_client, kube_cluster
):
    for pod in gang_pods("big", 3, 10):  # three 16-CPU pods in one 2-node block: never fits
        kube.add(pod)
    kube_round(kube_cluster, cluster_client, kube)
    kube_round(kube_cluster, cluster_client, kube)
    condition, events = describe(cluster_client, "ml", "big-0")
    assert condition.status == "False" and condition.reason == "Unschedulable"
    assert "nodes are available" in condition.message
    assert [(e.type, e.reason) for e in events] == [("Warning", "FailedScheduling")]
    assert events[0].message == condition.message
    assert events[0].involved_object.uid == kube.pod("ml", "big-0")["metadata"]["uid"]
    assert events[0].source.component == "koordweb" and events[0].count == 1


def test_a_bound_pod_shows_scheduled(kube, cluster_client, kube_cluster):
    for pod in gang_pods("pair", 2, 10):
        kube.add(pod)
    kube_round(kube_cluster, cluster_client, kube)
    node = kube.pod("ml", "pair-0")["spec"]["nodeName"]
    _, events = describe(cluster_client, "ml", "pair-0")
    assert [(e.type, e.reason, e.message) for e in events] == [
        ("Normal", "Scheduled", f"Successfully assigned ml/pair-0 to {node}")
    ]


def test_a_preempted_pod_is_told_who_preempted_it(kube, cluster_client, kube_cluster):
    for i in (1, 2, 3):
        kube.add(running_pod(f"low-{i}", f"node-{i}", 1))
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)
    kube_round(kube_cluster, cluster_client, kube)
    _, events = describe(cluster_client, "batch", "low-3")
    preempted = [e for e in events if e.reason == "Preempted"]
    assert len(preempted) == 1
    nominee = next(
        kube.pod("ml", n)
        for n in ("urgent-0", "urgent-1")
        if kube.pod("ml", n)["status"].get("nominatedNodeName") == "node-3"
    )
    uid = nominee["metadata"]["uid"]
    assert preempted[0].message == f"Preempted by pod {uid} on node node-3"
    assert preempted[0].related.name == nominee["metadata"]["name"]
    assert preempted[0].action == "Preempting" and preempted[0].type == "Normal"
    # The preemptor waits for its victims: Unschedulable, with its nominated node.
    condition, events = describe(cluster_client, "ml", nominee["metadata"]["name"])
    assert condition.reason == "Unschedulable"
    assert [e.reason for e in events] == ["FailedScheduling"]


def test_a_forbidden_binding_shows_scheduler_error_and_fails_only_its_job(
    kube, cluster_client, kube_cluster
):
    for pod in gang_pods("pair", 2, 10):
        kube.add(pod)
    for pod in gang_pods("other", 1, 10, namespace="team"):
        kube.add(pod)
    kube.faults.add(
        path=r"/namespaces/ml/pods/pair-\d/binding$", method="POST", status=403, count=100
    )
    rnd = kube_round(kube_cluster, cluster_client, kube)  # succeeds: one job's 403 fails only it
    assert rnd.metrics["intents_refused"] == 2
    assert kube.pod("team", "other-0")["spec"].get("nodeName")  # the other job was placed
    condition, events = describe(cluster_client, "ml", "pair-0")
    assert condition.status == "False" and condition.reason == "SchedulerError"
    assert "binding rejected" in condition.message and "(403)" in condition.message
    assert [(e.type, e.reason) for e in events] == [("Warning", "FailedScheduling")]
    job = Job.objects.get(name="pair")
    assert job.state_reason.startswith("held: the cluster refused to bind pod ml/pair-")


def test_repeated_events_become_one_event_with_a_count(kube: FakeKube, kube_client):
    """client-go's correlator: the same reason and message on the same object is one Event whose
    count grows (a PATCH), written at most once per `refresh`; the spam filter drops the rest."""
    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    clock = [1000.0]
    recorder = EventRecorder(kube_client.api, fast_retry(), refresh=60, clock=lambda: clock[0])
    pod = ObjectRef("Pod", "ml", "p-0", "uid-1")
    said = {"warning": True, "reason": "FailedScheduling", "action": "Scheduling"}
    assert recorder.record(pod, message="0/4 nodes are available", **said)
    assert not recorder.record(pod, message="0/4 nodes are available", **said)  # within refresh
    clock[0] += 61
    assert recorder.record(pod, message="0/4 nodes are available", **said)
    assert recorder.record(pod, message="another reason", **said)  # another message: a new Event
    events = (
        CoreV1Api(kube_client.api)
        .list_namespaced_event("ml", field_selector="involvedObject.name=p-0")
        .items
    )
    assert sorted((e.message, e.count) for e in events) == [
        ("0/4 nodes are available", 3),
        ("another reason", 1),
    ]
    for _ in range(40):  # past the burst of 25 per object: one more write per 5 minutes
        clock[0] += 61
        recorder.record(pod, message="0/4 nodes are available", **said)
    patches = kube.faults.requests_to(r"/namespaces/ml/events/", "PATCH")
    assert 25 <= len(patches) < 35
    (event,) = [
        e
        for e in CoreV1Api(kube_client.api).list_namespaced_event("ml").items
        if e.message != "another reason"
    ]
    assert event.count == 42  # every observation counted, though fewer were written


def test_a_pod_group_whose_pods_run_gets_its_status(kube, cluster_client, kube_cluster):
    kube.add(
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "grp", "namespace": "ml"},
            "spec": {"minMember": 2},
        }
    )
    for i in range(2):
        pod = gang_pods("grp", 2, 10)[i]
        pod["metadata"]["annotations"] = {}
        pod["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": "grp"}
        kube.add(pod)
    kube_round(kube_cluster, cluster_client, kube)
    settle(kube, cluster_client)
    kube_round(kube_cluster, cluster_client, kube)
    status = (
        kube.get("scheduling.sigs.k8s.io/v1alpha1", "PodGroup", "grp", "ml").get("status") or {}
    )
    assert status["phase"] == "Running"
    assert (status["scheduled"], status["running"]) == (2, 2)
