"""Rounds against a Kubernetes API server (the in-repo fake) through the real client, end to end.

The cluster: one spine, two blocks of two 16-CPU nodes. Our pods carry schedulerName koordweb and
Koordinator gang annotations; pods of other schedulers hold their nodes' resources.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from koordweb.backends.kube import KubeClusterClient
from koordweb.backends.kube.kinds import WATCHED_KINDS
from koordweb.backends.kubernetes import KubernetesBackend
from koordweb.engine.pipeline import round_execute
from koordweb.models import Cluster, Job, JobState, Preemption, Round
from tests.fakekube import FakeKube
from tests.fakekube.testing import (
    LAYOUT,
    eventually,
    gang_pods,
    seed_blocks,
)
from tests.koordweb.kube_helpers import fast_retry, running_pod, settle


def do_round(cluster: Cluster, client: KubeClusterClient):
    with transaction.atomic():
        return round_execute(
            cluster=cluster,
            backend=KubernetesBackend(client),
            trigger=Round.Trigger.MANUAL,
            now=timezone.now(),
        )


def node_of(kube: FakeKube, name: str, namespace: str = "ml") -> str | None:
    pod = kube.pod(namespace, name)
    return (pod or {}).get("spec", {}).get("nodeName")


def test_a_gang_is_bound_only_whole(kube, cluster_client, kube_cluster):
    for pod in gang_pods("big", 3, 10) + gang_pods("pair", 2, 10):
        kube.add(pod)
    settle(kube, cluster_client)
    outcome = do_round(kube_cluster, cluster_client)
    assert {node_of(kube, f"big-{i}") for i in range(3)} == {None}
    pair = {node_of(kube, "pair-0"), node_of(kube, "pair-1")}
    assert None not in pair and {LAYOUT[n] for n in pair} in ({"b1"}, {"b2"})
    assert outcome.summary["placed_pods"] == 2
    assert Job.objects.get(name="pair").state == JobState.SCHEDULED
    assert Job.objects.get(name="big").state == JobState.PENDING
    # Enacting again is harmless: the next round binds nothing twice.
    settle(kube, cluster_client)
    assert do_round(kube_cluster, cluster_client).summary["placed_pods"] == 0


def test_preemption_evicts_then_binds_to_the_nominated_nodes(kube, cluster_client, kube_cluster):
    kube.add(running_pod("low-1", "node-1", 1))
    kube.add(running_pod("low-2", "node-2", 1))
    kube.add(running_pod("low-3", "node-3", 1))
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)
    settle(kube, cluster_client)
    first = do_round(kube_cluster, cluster_client)
    assert first.summary["preemptions"] == 1
    preemption = Preemption.objects.get()
    assert preemption.state == Preemption.State.ENACTED
    assert kube.pod("batch", "low-3") is None  # the cheapest block: one victim
    assert kube.pod("batch", "low-1") is not None and kube.pod("batch", "low-2") is not None
    nominated = {kube.pod("ml", f"urgent-{i}")["status"].get("nominatedNodeName") for i in range(2)}
    assert nominated == {"node-3", "node-4"}
    settle(kube, cluster_client)
    eventually(
        lambda: all(
            d["metadata"]["name"] != "low-3"
            for d in cluster_client.snapshot()
            if d["kind"] == "Pod"
        )
    )
    do_round(kube_cluster, cluster_client)
    assert {node_of(kube, "urgent-0"), node_of(kube, "urgent-1")} == {"node-3", "node-4"}


def _db_pods_with_budget(kube: FakeKube) -> None:
    for i, node in enumerate(["node-1", "node-2", "node-3", "node-4"]):
        kube.add(running_pod(f"db-{i}", node, 1, labels={"app": "db"}))
    kube.add(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "batch"},
            "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "db"}}},
        }
    )
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)


def test_a_known_disruption_budget_is_honoured_by_the_engine(kube, cluster_client, kube_cluster):
    _db_pods_with_budget(kube)
    settle(kube, cluster_client)
    outcome = do_round(kube_cluster, cluster_client)
    verdict = outcome.result.unschedulable["ml/urgent"]
    assert "PodDisruptionBudget batch/db" in verdict.details["preemption"]["reason"]
    assert verdict.details["counterfactual"]["evict_jobs"]
    assert not kube.faults.requests_to(r"/eviction$", "POST")
    assert all(kube.pod("batch", f"db-{i}") is not None for i in range(4))


def test_a_budget_the_engine_cannot_see_turns_eviction_into_a_blocked_preemption(
    kube, kube_cluster
):
    """The API server enforces a budget koordweb was not allowed to read: 429s, then blocked."""
    seed_blocks(kube)
    _db_pods_with_budget(kube)
    blind = tuple(k for k in WATCHED_KINDS if k.name != "poddisruptionbudgets")
    retry = fast_retry(attempts=4)
    with KubeClusterClient.from_url(
        kube.url, retry=retry, watch_timeout=1, sync_timeout=10, budget_attempts=3, kinds=blind
    ) as client:
        settle(kube, client)
        do_round(kube_cluster, client)
    preemption = Preemption.objects.get(preemptor__name="urgent")
    assert preemption.state == Preemption.State.BLOCKED
    assert "budget" in preemption.reason.lower()
    answers = [r.status for r in kube.faults.requests_to(r"/eviction$", "POST")]
    assert answers and set(answers) == {429} and len(answers) >= 2  # retried, then given up
    assert all(kube.pod("batch", f"db-{i}") is not None for i in range(4))
    for victim in preemption.victims.all():
        assert victim.job.state != JobState.PREEMPTED


def test_a_job_submitted_to_koordweb_is_created_in_the_cluster_then_bound(
    kube, cluster_client, kube_cluster, django_user_model
):
    from koordweb.services.jobs import GatherRule, JobSpec, PodShape, job_submit

    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    settle(kube, cluster_client)
    do_round(kube_cluster, cluster_client)  # learn the nodes and the topology
    admin = django_user_model.objects.create_user("root", is_staff=True, is_superuser=True)
    job, _ = job_submit(
        user=admin,
        spec=JobSpec(
            name="sweep",
            namespace="ml",
            cluster=kube_cluster.name,
            replicas=2,
            pod=PodShape(requests={"cpu": 16000}),
            gather=(GatherRule("BlockLayer", "MustGather"),),
        ),
    )
    outcome = do_round(kube_cluster, cluster_client)
    created = [kube.pod("ml", f"sweep-{i}") for i in range(2)]
    assert all(created)
    for doc in created:
        assert doc["spec"]["schedulerName"] == "koordweb"
        assert doc["metadata"]["annotations"]["gang.scheduling.koordinator.sh/name"] == "sweep"
    nodes = {doc["spec"].get("nodeName") for doc in created}
    assert None not in nodes and len({LAYOUT[n] for n in nodes}) == 1
    assert outcome.summary["placed_pods"] == 2
    assert all(p.uid for p in job.pods.all())
    job.refresh_from_db()
    assert job.state == JobState.SCHEDULED


def test_a_job_the_cluster_refuses_fails_alone(
    kube, cluster_client, kube_cluster, django_user_model
):
    from koordweb.services.jobs import JobSpec, PodShape, job_submit

    settle(kube, cluster_client)
    do_round(kube_cluster, cluster_client)
    admin = django_user_model.objects.create_user("root", is_staff=True, is_superuser=True)
    job, _ = job_submit(
        user=admin,
        spec=JobSpec(name="lost", namespace="nowhere", cluster=kube_cluster.name, pod=PodShape({})),
    )
    outcome = do_round(kube_cluster, cluster_client)
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert 'namespaces "nowhere" not found' in job.state_reason
    assert outcome.round.state == Round.State.SUCCEEDED


def test_a_job_whose_labels_the_api_server_refuses_fails_alone_with_its_words(
    kube, cluster_client, kube_cluster, django_user_model
):
    """A row no door of ours lets in now (written before the check, say): the API server's
    validation refuses its pods with a 422, and the job fails with the server's message while
    the round goes on."""
    from koordweb.services.jobs import JobSpec, PodShape, job_submit

    kube.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    settle(kube, cluster_client)
    do_round(kube_cluster, cluster_client)
    admin = django_user_model.objects.create_user("root", is_staff=True, is_superuser=True)
    job, _ = job_submit(
        user=admin,
        spec=JobSpec(
            name="odd",
            namespace="ml",
            cluster=kube_cluster.name,
            pod=PodShape({"cpu": 1000}),
            labels={"team": "has space"},
        ),
    )
    outcome = do_round(kube_cluster, cluster_client)
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert 'Pod "odd-0" is invalid: metadata.labels: Invalid value: "has space"' in job.state_reason
    assert "(422)" in job.state_reason
    assert kube.pod("ml", "odd-0") is None
    assert outcome.round.state == Round.State.SUCCEEDED
