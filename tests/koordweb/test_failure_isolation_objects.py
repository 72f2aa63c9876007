"""One object never stops every round (issue #33, item 2): a forbidden eviction, an unreadable
stored network-topology-spec and a pod whose affinity would cost every round fail only their
own job, or are refused at the door with the field named."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from koordweb.backends.kubernetes import KubernetesBackend
from koordweb.engine.outbox import INTENT_ATTEMPTS, intents_enact
from koordweb.engine.pipeline import round_execute
from koordweb.engine.specs import parse_topology_rule
from koordweb.kubenames import AFFINITY_TERMS_MAX, affinity_errors
from koordweb.models import Decision, Intent, Job, JobState, Preemption, Round
from koordweb.tasks import run_round
from tests.builders import busy_cluster
from tests.fakekube.testing import gang_pods
from tests.koordweb.kube_helpers import running_pod
from tests.koordweb.test_kube_preemption import kube_round


def test_a_forbidden_eviction_fails_only_its_preemption_and_is_dropped_after_its_tries(
    kube, cluster_client, kube_cluster
):
    for i in (1, 2, 3):
        kube.add(running_pod(f"low-{i}", f"node-{i}", 1))
    for pod in gang_pods("urgent", 2, 1000):
        kube.add(pod)
    kube.faults.add(path=r"/pods/low-\d/eviction$", method="POST", status=403, count=1000)
    first = kube_round(kube_cluster, cluster_client, kube)  # the round stands
    assert first.metrics["intents_refused"] >= 1
    preemption = Preemption.objects.get()
    assert preemption.state == Preemption.State.BLOCKED
    assert "refused the eviction" in preemption.reason and "(403)" in preemption.reason
    victim = Job.objects.get(name=preemption.victims.get().job.name)
    assert victim.state_reason.startswith("held: the cluster refused to evict pod batch/low-")
    pending = Intent.objects.get(kind=Intent.Kind.EVICT, state=Intent.State.PENDING)
    assert pending.attempts == 1 and pending.not_before > timezone.now()
    # Every later round goes on (the leftover waits out its back-off, then is tried again) ...
    second = kube_round(kube_cluster, cluster_client, kube)
    assert second.state == Round.State.SUCCEEDED
    # ... and after its tries the leftover is dropped with the cluster's words.
    later = timezone.now()
    for _ in range(INTENT_ATTEMPTS):
        later += timedelta(hours=1)
        intents_enact(cluster=kube_cluster, backend=KubernetesBackend(cluster_client), now=later)
    dropped = Intent.objects.get(id=pending.id)
    assert dropped.state == Intent.State.DROPPED
    assert dropped.outcome.startswith(f"refused by the cluster ({INTENT_ATTEMPTS} tries)")


def test_an_unreadable_stored_topology_spec_holds_only_its_job(db, settings):
    settings.KOORDWEB_CLUSTER = "default"
    cluster = busy_cluster().cluster
    odd = Job.objects.filter(cluster=cluster, state=JobState.PENDING).first()
    odd.topology_spec = {"podCountMultiple": "x"}  # accepted at the door before #33
    odd.save(update_fields=["topology_spec"])
    others = list(cluster.jobs.filter(state=JobState.PENDING).exclude(id=odd.id))
    summary = run_round(cluster.id)
    assert Round.objects.get(id=summary["round"]).state == Round.State.SUCCEEDED
    odd.refresh_from_db()
    assert odd.state == JobState.PENDING
    reason = odd.decisions.latest("id").reason
    assert "unreadable network-topology-spec: podCountMultiple must be a positive integer" in reason
    for job in others:
        job.refresh_from_db()
        assert job.state == JobState.SCHEDULED
    assert Decision.objects.filter(job=odd, outcome=Decision.Outcome.PLACED).count() == 0


def test_the_snapshot_reads_any_stored_topology_document_without_raising():
    for stored in (
        {"podCountMultiple": "x"},
        {"podCountMultiple": True},
        {"podCountMultiple": 0},
        {"gatherStrategy": "BlockLayer"},
        {"gatherStrategy": [{"layer": 3}]},
        {"gatherStrategy": [{"layer": "BlockLayer", "strategy": "Sometimes"}]},
        ["not", "an", "object"],
    ):
        rule = parse_topology_rule(stored)
        assert rule is not None and rule.gather[0].layer.startswith("(unreadable")
    rule = parse_topology_rule({"podCountMultiple": 4})
    assert rule is not None and rule.pod_count_multiple == 4


def test_an_affinity_with_too_many_terms_is_refused_at_the_door_with_the_field_named():
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
    required = {"nodeSelectorTerms": [term] * 60_000}
    errors = affinity_errors(
        {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    )
    path = "nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    assert errors == {
        path: f"may have at most {AFFINITY_TERMS_MAX} entries, got 60000 "
        "(koordweb's bound on what a pod costs)"
    }
    many = {"matchExpressions": [term["matchExpressions"][0]] * 101}
    errors = affinity_errors(
        {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [many]}
            }
        }
    )
    assert list(errors) == [f"{path}[0].matchExpressions"]
    ok = {"nodeSelectorTerms": [term] * AFFINITY_TERMS_MAX}
    assert (
        affinity_errors({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": ok}})
        == {}
    )


def test_round_execute_survives_a_refusal_of_a_leftover(kube, cluster_client, kube_cluster):
    """A leftover intent the cluster refuses is enacted before planning without failing the
    round (it used to raise there, before every round)."""
    for pod in gang_pods("pair", 2, 10):
        kube.add(pod)
    kube.faults.add(path=r"/pods/pair-\d/binding$", method="POST", status=403, count=1000)
    outcome = round_execute(
        cluster=kube_cluster,
        backend=KubernetesBackend(cluster_client),
        trigger=Round.Trigger.MANUAL,
        now=timezone.now(),
    )
    assert outcome.round.state == Round.State.SUCCEEDED
    assert Intent.objects.filter(kind=Intent.Kind.BIND, state=Intent.State.DROPPED).count() == 2
