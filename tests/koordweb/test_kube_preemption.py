"""Preemption against an API server that behaves like the real one, through the real client.

Evictions name the pod they were decided about (UID precondition): a pod re-created under a
victim's name while the eviction is in flight is another pod and is left alone.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kubernetes import KubernetesBackend
from koordweb.engine.pipeline import round_execute
from koordweb.models import Cluster, Intent, Job, JobState, Preemption, Round
from tests.fakekube import FakeKube
from tests.fakekube.testing import LAYOUT, eventually, gang_pods
from tests.koordweb.kube_helpers import running_pod, settle


class ReplacedInFlight(KubernetesBackend):
    """The victim is deleted and created again under its name after the round decided to evict
    it and before its eviction reaches the API server (a StatefulSet controller's work)."""

    def __init__(self, client: KubeClusterClient, kube: FakeKube) -> None:
        super().__init__(client)
        self.kube = kube
        self.replaced: list[str] = []

    def enact(self, cluster, plan, *, now):
        for eviction in plan.evictions:
            self.kube.delete("v1", "Pod", eviction.name, eviction.namespace)
            self.kube.add(running_pod(eviction.name, f"node-{eviction.name[-1]}", 1))
            self.replaced.append(eviction.name)
        return super().enact(cluster, plan, now=now)


def test_a_pod_recreated_under_a_victims_name_is_not_evicted(kube, cluster_client, kube_cluster):
    for i in (1, 2, 3):
        kube.add(running_pod(f"low-{i}", f"node-{i}", 1))
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)
    settle(kube, cluster_client)
    backend = ReplacedInFlight(cluster_client, kube)
    round_execute(
        cluster=kube_cluster, backend=backend, trigger=Round.Trigger.MANUAL, now=timezone.now()
    )
    assert backend.replaced == ["low-3"]
    newcomer = kube.pod("batch", "low-3")
    assert newcomer is not None and not newcomer["metadata"].get("deletionTimestamp")
    # The DisruptionTarget condition (sent before the eviction) already names the old UID: 409.
    answers = [r.status for r in kube.faults.requests_to(r"/pods/low-3/(status|eviction)$")]
    assert answers == [409], answers
    preemption = Preemption.objects.get()
    assert "replaced by a new pod of the same name" in preemption.reason
    assert preemption.state == Preemption.State.PLANNED
    evict = Intent.objects.get(kind=Intent.Kind.EVICT)
    assert evict.state == Intent.State.DROPPED
    assert "another pod now has this name" in evict.outcome
    victim = preemption.victims.get().job
    assert victim.state not in (JobState.PREEMPTING, JobState.PREEMPTED)
    # The next round sees the new pod in the old row and plans again from what is there.
    settle(kube, cluster_client)
    round_execute(
        cluster=kube_cluster,
        backend=KubernetesBackend(cluster_client),
        trigger=Round.Trigger.MANUAL,
        now=timezone.now(),
    )
    row = victim.pods.get()
    assert row.uid == newcomer["metadata"]["uid"]


def kube_round(cluster: Cluster, client: KubeClusterClient, kube: FakeKube) -> Round:
    """One round after the mirror caught up; no node of the fake may be over-committed after."""
    settle(kube, client)
    rnd = round_execute(
        cluster=cluster,
        backend=KubernetesBackend(client),
        trigger=Round.Trigger.MANUAL,
        now=timezone.now(),
    ).round
    assert rnd.state == Round.State.SUCCEEDED, rnd.error
    assert kube.overcommitted() == [], kube.overcommitted()
    return rnd


def nodes_of(kube: FakeKube, names: list[str], namespace: str = "ml") -> list[str | None]:
    return [(kube.pod(namespace, n) or {}).get("spec", {}).get("nodeName") for n in names]


def test_preemption_waits_for_graceful_victims_then_binds_the_preemptor_whole(
    kube, cluster_client, kube_cluster
):
    kube.kubelet.manual = True  # victims terminate until the test lets them go
    for i in (1, 2, 3):
        kube.add(running_pod(f"low-{i}", f"node-{i}", 1))
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)
    urgent = ["urgent-0", "urgent-1"]
    kube_round(kube_cluster, cluster_client, kube)
    victim = kube.pod("batch", "low-3")
    assert victim is not None and victim["metadata"]["deletionTimestamp"]  # terminating
    assert kube.kubelet.terminating() == [("batch", "low-3")]
    # Several rounds inside the grace period: the victim holds node-3, nothing binds there.
    for _ in range(5):
        kube_round(kube_cluster, cluster_client, kube)
        assert nodes_of(kube, urgent) == [None, None]
        victim_job = Preemption.objects.get().victims.get().job
        victim_job.refresh_from_db()
        assert victim_job.state == JobState.PREEMPTING
        row = victim_job.pods.get()
        assert row.terminating and row.node.name == "node-3"
        nominated = {(kube.pod("ml", n) or {})["status"].get("nominatedNodeName") for n in urgent}
        assert nominated == {"node-3", "node-4"}
    assert [r.status for r in kube.faults.requests_to(r"/binding$", "POST")] == []
    # The kubelet has stopped the victim: the watch says DELETED, the preemptor binds whole.
    assert kube.kubelet.finish_terminating() == [("batch", "low-3")]
    eventually(lambda: kube.pod("batch", "low-3") is None)
    kube_round(kube_cluster, cluster_client, kube)
    assert sorted(nodes_of(kube, urgent)) == ["node-3", "node-4"]
    for name in urgent:
        assert kube.pod("ml", name)["status"]["phase"] == "Running"  # the kubelet admitted it
    kube_round(kube_cluster, cluster_client, kube)
    victim_job.refresh_from_db()
    assert victim_job.state == JobState.PREEMPTED
    assert victim_job.pods.get().phase == "Failed"
    assert Job.objects.get(name="urgent").state == JobState.RUNNING


class IntruderBeforeBinding(KubernetesBackend):
    """Something outside koordweb takes a node's CPU after the round decided to bind there."""

    def __init__(self, client: KubeClusterClient, kube: FakeKube, node: str) -> None:
        super().__init__(client)
        self.kube, self.node = kube, node

    def enact(self, cluster, plan, *, now):
        if any(b.node == self.node for b in plan.bindings):
            self.kube.add(running_pod("intruder", self.node, 10_000))  # never a victim
        return super().enact(cluster, plan, now=now)


def test_a_kubelet_refusal_of_one_member_requeues_the_gang_whole(
    kube, cluster_client, kube_cluster
):
    kube.add(running_pod("busy", "node-1", 1))  # block b1 is half full: the gang goes to b2
    for pod in gang_pods("pair", 2, 500):
        kube.add(pod)
    settle(kube, cluster_client)
    round_execute(
        cluster=kube_cluster,
        backend=IntruderBeforeBinding(cluster_client, kube, "node-3"),
        trigger=Round.Trigger.MANUAL,
        now=timezone.now(),
    )
    refused = [n for n in ("pair-0", "pair-1") if kube.pod("ml", n)["status"]["phase"] == "Failed"]
    assert len(refused) == 1  # the member bound to node-3, where the intruder took every CPU
    status = kube.pod("ml", refused[0])["status"]
    assert status["reason"] == "OutOfcpu"
    # The next round reads the refusal, reports it on the job and takes the gang off whole.
    rnd = kube_round(kube_cluster, cluster_client, kube)
    assert rnd.metrics["kubelet_rejections"] == 1
    job = Job.objects.get(name="pair")
    assert job.state in (JobState.REQUEUEING, JobState.PENDING)
    assert job.admission_rejections == 1
    assert f"the kubelet on node-3 refused pod {refused[0]}: OutOfcpu" in job.state_reason
    assert "Node didn't have enough resource: cpu" in job.state_reason
    assert "requeued whole" in job.state_reason
    deletes = [r.path for r in kube.faults.requests_to(r"/namespaces/ml/pods/pair-\d$", "DELETE")]
    assert len(deletes) == 2  # both members, not only the refused one
    # Once they are gone the gang is queued again, created anew and placed whole elsewhere.
    for _ in range(5):
        kube_round(kube_cluster, cluster_client, kube)
        placed = nodes_of(kube, ["pair-0", "pair-1"])
        if None not in placed:
            break
    assert len({LAYOUT[n] for n in placed}) == 1 and "node-3" not in placed
    for name in ("pair-0", "pair-1"):
        assert kube.pod("ml", name)["status"]["phase"] == "Running"
    job.refresh_from_db()
    assert job.state in (JobState.SCHEDULED, JobState.RUNNING)


@pytest.mark.django_db(transaction=True)
def test_no_call_to_the_api_server_happens_inside_a_database_transaction(
    kube, cluster_client, monkeypatch, django_user_model
):
    import threading

    from django.db import connection
    from kubernetes.client import ApiClient

    from koordweb.services.jobs import JobSpec, PodShape, job_submit

    cluster = Cluster.objects.create(name="k8s", backend=Cluster.Backend.KUBERNETES)
    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    for i in (1, 2, 3):
        kube.add(running_pod(f"low-{i}", f"node-{i}", 1))
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)
    calls: list[tuple[str, bool]] = []
    original = ApiClient.call_api
    main = threading.get_ident()

    def watched(self, method, url, *args, **kwargs):
        if threading.get_ident() == main:  # the round's thread, not the watch threads
            calls.append((f"{method} {url}", connection.in_atomic_block))
        return original(self, method, url, *args, **kwargs)

    monkeypatch.setattr(ApiClient, "call_api", watched)
    kube_round(cluster, cluster_client, kube)  # a preemption: status patch, eviction, nominations
    admin = django_user_model.objects.create_user("root", is_staff=True, is_superuser=True)
    job_submit(
        user=admin,
        spec=JobSpec(name="sweep", namespace="ml", cluster=cluster.name, pod=PodShape({})),
    )
    kube_round(cluster, cluster_client, kube)  # a creation and its binding
    writes = [c for c in calls if not c[0].startswith("GET")]
    assert {"POST", "PATCH"} <= {c[0].split()[0] for c in writes}
    assert [c for c in calls if c[1]] == []
