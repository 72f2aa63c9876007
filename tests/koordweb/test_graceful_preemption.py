"""Job-level preemption when victims take their grace period to stop (the simulated kubelet).

An eviction only starts a graceful deletion: the victims stay on their nodes, holding every card,
until their grace period has passed. Meanwhile their jobs are Preempting, the preemptor waits
nominated on their nodes, and nothing else may be bound there; once the victims are gone their jobs
are Preempted (never Succeeded) and the preemptor binds whole onto its nominated nodes.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from koordweb.backends.simulated import SimulatedBackend
from koordweb.models import Cluster, Job, JobState, Pod, PodPhase, Preemption, Round
from koordweb.rows.pods import PREEMPTED_REASON
from koordweb.tasks import run_round
from tests.builders import busy_cluster, simulated_round, urgent_spine_gang

GRACE = 60


@pytest.fixture
def busy(db, settings) -> Cluster:
    settings.KOORDWEB_CLUSTER = "default"
    settings.KOORDWEB_SIMULATED_GRACE_SECONDS = GRACE
    return busy_cluster().cluster


def one_round(cluster: Cluster, now) -> Round:
    return simulated_round(cluster, now).round


def overcommitted(cluster: Cluster) -> list[str]:
    """Nodes where pods still on them (terminating ones included) ask more than it has."""
    used: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in Pod.objects.filter(cluster=cluster, node__isnull=False).exclude(
        phase__in=[PodPhase.SUCCEEDED, PodPhase.FAILED]
    ):
        for resource, amount in pod.requests.items():
            used[pod.node_id][resource] += int(amount)
    return [
        f"{node.name}: {resource} {amount} > {node.allocatable.get(resource, 0)}"
        for node in cluster.nodes.all()
        for resource, amount in used[node.id].items()
        if resource in node.allocatable and amount > node.allocatable[resource]
    ]


def test_victims_hold_their_nodes_until_gone_and_the_preemptor_then_binds_whole(busy):
    start = timezone.now()
    one_round(busy, start)
    urgent = urgent_spine_gang(busy)
    preempt_at = start + timedelta(seconds=20)
    one_round(busy, preempt_at)
    preemption = Preemption.objects.get(preemptor=urgent)
    assert preemption.state == Preemption.State.ENACTED
    victims = [v.job for v in preemption.victims.select_related("job")]
    assert victims
    nominated = dict(urgent.pods.values_list("name", "nominated_node__name"))
    assert all(nominated.values()), nominated
    # Three rounds inside the grace period: the victims still hold every card.
    for step in (1, 2):
        one_round(busy, preempt_at + timedelta(seconds=20 * step))
        assert overcommitted(busy) == []
        assert not urgent.pods.filter(node__isnull=False).exists()
        for victim in victims:
            victim.refresh_from_db()
            assert victim.state == JobState.PREEMPTING
            # The reason names no preemptor (it may be another team's): the record does.
            assert victim.state_reason.startswith(PREEMPTED_REASON)
            assert "prod-refresh" not in victim.state_reason
            assert victim.pods.filter(terminating=True, phase=PodPhase.RUNNING).exists()
        # Nothing else is bound onto the nominated nodes meanwhile.
        others = Pod.objects.filter(
            node__name__in=set(nominated.values()), bound_at__gt=preempt_at
        ).exclude(job=urgent)
        assert not others.exists()
    # Past the grace period the victims are gone and the preemptor binds where it was nominated.
    one_round(busy, preempt_at + timedelta(seconds=GRACE + 1))
    assert overcommitted(busy) == []
    urgent.refresh_from_db()
    assert urgent.state == JobState.SCHEDULED
    placed = dict(urgent.pods.values_list("name", "node__name"))
    assert placed == nominated
    for victim in victims:
        victim.refresh_from_db()
        assert victim.state == JobState.PREEMPTED, victim.state
        assert victim.state_reason == PREEMPTED_REASON
        assert not victim.pods.exclude(phase=PodPhase.FAILED).exists()


def test_a_cancelled_jobs_pods_hold_their_nodes_until_the_kubelet_let_them_go(busy):
    from koordweb.services.jobs import job_cancel

    start = timezone.now()
    one_round(busy, start)
    running = Job.objects.filter(cluster=busy, state=JobState.SCHEDULED).first()
    admin = running.owner
    job_cancel(job=running, user=admin)
    bound = running.pods.filter(node__isnull=False)
    assert bound.exists() and all(p.terminating for p in bound)
    one_round(busy, start + timedelta(seconds=10))
    assert running.pods.filter(terminating=True, phase=PodPhase.RUNNING).exists()
    one_round(busy, start + timedelta(seconds=GRACE + 11))
    assert not running.pods.exclude(phase=PodPhase.FAILED).exists()
    running.refresh_from_db()
    assert running.state == JobState.CANCELLED


class _SlowEnact(SimulatedBackend):
    """A cluster whose answers take until the test lets them through."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self.entered, self.release = entered, release

    def enact(self, cluster, plan, *, now):
        self.entered.set()
        assert self.release.wait(30)
        return super().enact(cluster, plan, now=now)


@pytest.mark.django_db(transaction=True)
def test_rounds_asked_for_during_a_round_start_exactly_one_successor_right_after(
    settings, monkeypatch
):
    settings.KOORDWEB_CLUSTER = "default"
    cluster = busy_cluster().cluster
    entered, release = threading.Event(), threading.Event()
    monkeypatch.setattr("koordweb.tasks.backend_for", lambda c: _SlowEnact(entered, release))
    successors: list[dict] = []
    monkeypatch.setattr(
        run_round, "apply_async", lambda args, kwargs: successors.append({"args": args, **kwargs})
    )
    first: list[dict] = []

    def the_running_round() -> None:
        first.append(run_round(cluster.id))
        connection.close()

    thread = threading.Thread(target=the_running_round)
    thread.start()
    assert entered.wait(30)
    answers = [run_round(cluster.id, trigger=Round.Trigger.SUBMIT) for _ in range(3)]
    assert successors == []  # nothing starts while the round runs
    release.set()
    thread.join(30)
    assert all(a["skipped"].endswith("deferred") for a in answers)
    assert first and "round" in first[0]
    assert successors == [{"args": [cluster.id], "trigger": Round.Trigger.DEFERRED}]
    cluster.refresh_from_db()
    assert cluster.round_pending is False


def test_a_nomination_past_its_waiting_time_is_given_up(db):
    from koordweb.manifests import import_manifests
    from tests.fakekube.testing import RUNNING, TOPOLOGY, block_node, gang_pods

    cluster = Cluster.objects.create(name="nominated")
    waiting = gang_pods("late", 1, 100)[0]
    waiting["metadata"]["annotations"]["gang.scheduling.koordinator.sh/waiting-time"] = "60s"
    waiting["status"] = {
        "phase": "Pending",
        "nominatedNodeName": "node-1",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": "2026-12-01T00:00:00Z",
            }
        ],
    }
    holder = gang_pods("holder", 1, 10_000)[0]  # higher priority: never a victim
    holder["spec"]["nodeName"] = "node-1"
    holder["status"] = RUNNING
    import_manifests(cluster, [TOPOLOGY, block_node("node-1", "b1"), holder, waiting])
    since = Pod.objects.get(name="late-0").nominated_at
    one_round(cluster, since + timedelta(seconds=30))
    assert Pod.objects.get(name="late-0").nominated_node.name == "node-1"  # still waiting
    rnd = one_round(cluster, since + timedelta(seconds=61))
    late = Job.objects.get(name="late")
    assert late.state == JobState.PENDING
    # Past its waiting time it lets the node go, through an intent (so in a cluster too).
    assert Pod.objects.get(name="late-0").nominated_node is None
    # The intent that gave it up was enacted (so deleted), and counted by the round.
    assert not rnd.intents.exists()
    assert rnd.metrics["intents"] >= 1
