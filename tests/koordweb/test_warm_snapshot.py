"""The warm snapshot (koordweb.engine.warm) against a cold build of the same rows.

A seeded random sequence of what happens to a cluster (submissions, jobs finishing, cancellations,
nodes going down and coming back, new metrics, preemptions by high-priority jobs with a grace
period) runs through real rounds on the simulated backend; before each round the warm snapshot and
a cold build are made side by side and must give the engine the same input, and the engine the
same answer.
"""

from __future__ import annotations

import contextlib
import random
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from koordweb.backends.simulated import SimulatedBackend
from koordweb.engine import assembly
from koordweb.engine.pipeline import round_execute
from koordweb.engine.profile import engine_profile
from koordweb.engine.warm import WarmMismatch, warm_forget, warm_snapshot, warm_state
from koordweb.models import (
    Cluster,
    Job,
    JobState,
    Node,
    NodeMetric,
    Pod,
    PodPhase,
    Preemption,
    Round,
)
from koordweb.services.demo import demo_seed
from koordweb.services.jobs import JobConflict, JobSpec, PodShape, job_cancel, job_submit
from scheduler.profile import ProfileError
from scheduler.round import plan_round

TEAMS = (("team-vision", "alice"), ("team-nlp", "bob"), ("team-speech", "carol"))
CLASSES = ("koord-free", "koord-batch", "koord-mid", "koord-prod")


@pytest.fixture
def demo(transactional_db, settings):
    """Committed rows (no test-wide transaction): on PostgreSQL every write of a test run in one
    transaction shares its id, so each round would read every row as changed."""
    settings.KOORDWEB_CLUSTER = "default"
    settings.KOORDWEB_SIMULATED_GRACE_SECONDS = 30
    settings.KOORDWEB_WARM_CHECK_ROUNDS = 0  # compared here, every round
    demo_seed()
    return Cluster.objects.get(name="default")


def one_round(cluster: Cluster, now) -> Round:
    return round_execute(
        cluster=cluster, backend=SimulatedBackend(), trigger=Round.Trigger.MANUAL, now=now
    ).round


def side_by_side(cluster: Cluster, now) -> str:
    """Warm and cold snapshots of the same rows: the same engine input and the same answer."""
    with transaction.atomic():
        warm, warm_index, report = warm_snapshot(cluster, now=now)
        cold, cold_index = assembly.build_for_round(cluster, now=now)
    assert warm == cold
    assert warm_index.pod_ids == cold_index.pod_ids
    assert warm_index.engine_id_by_job == cold_index.engine_id_by_job
    profile = engine_profile(cluster)
    assert plan_round(warm, profile).to_dict() == plan_round(cold, profile).to_dict()
    return report.mode


def act(rng: random.Random, cluster: Cluster, now, number: int) -> str:
    """One random thing happening to the cluster, through the services a user or kubelet uses."""
    users = {team: get_user_model().objects.get(username=user) for team, user in TEAMS}
    action = rng.choice(["submit", "submit", "finish", "cancel", "node", "metric", "preempt"])
    if action in ("submit", "preempt"):
        team = rng.choice([t for t, _ in TEAMS])
        high = action == "preempt"
        job_submit(
            user=users[team],
            spec=JobSpec(
                name=f"w{number}",
                namespace=team,
                quota=team,
                priority_class="koord-prod" if high else rng.choice(CLASSES[:3]),
                replicas=rng.choice([16, 24]) if high else rng.choice([1, 2, 4, 8]),
                pod=PodShape(
                    requests={"cpu": 4000, "nvidia.com/gpu": 8 if high else rng.choice([2, 4, 8])}
                ),
            ),
        )
    elif action == "finish":
        running = list(Job.objects.filter(cluster=cluster, state=JobState.RUNNING).order_by("id"))
        if running:
            job = rng.choice(running)
            job.pods.filter(phase=PodPhase.RUNNING).update(
                phase=PodPhase.SUCCEEDED, finished_at=now
            )
    elif action == "cancel":
        active = list(
            Job.objects.filter(
                cluster=cluster, state__in=[JobState.PENDING, JobState.RUNNING]
            ).order_by("id")
        )
        if active:
            job = rng.choice(active)
            team = job.namespace if job.namespace in users else TEAMS[0][0]
            with contextlib.suppress(JobConflict):
                job_cancel(job=job, user=users[team])
    elif action == "node":
        node = rng.choice(list(Node.objects.filter(cluster=cluster).order_by("name")))
        Node.objects.filter(id=node.id).update(ready=not node.ready)
    else:
        node = rng.choice(list(Node.objects.filter(cluster=cluster).order_by("name")))
        NodeMetric.objects.create(
            node=node, reported_at=now, usage={"cpu": rng.randrange(0, 64_000)}
        )
    return action


def test_warm_and_cold_agree_over_fifty_random_rounds(demo):
    rng = random.Random(2026)
    now = timezone.now()
    modes = []
    actions = []
    for _round in range(50):
        for _ in range(rng.randint(1, 3)):
            actions.append(act(rng, demo, now, len(actions)))
        modes.append(side_by_side(demo, now))
        rnd = one_round(demo, now)
        assert rnd.state == Round.State.SUCCEEDED, rnd.error
        now += timedelta(seconds=rng.choice([5, 10, 40]))
    assert modes[0] == "cold" and modes[1:].count("warm") == 49
    # The sequence went through what it is meant to exercise.
    assert {"submit", "finish", "cancel", "node", "metric", "preempt"} <= set(actions)
    assert Preemption.objects.filter(cluster=demo).exists()
    assert (
        Pod.objects.filter(cluster=demo, terminating=True).exists()
        or Job.objects.filter(cluster=demo, state=JobState.PREEMPTED).exists()
    )


def test_a_restart_or_a_position_mismatch_builds_cold(demo):
    now = timezone.now()
    assert one_round(demo, now).metrics["snapshot"] == "cold"
    assert one_round(demo, now).metrics["snapshot"] == "warm"
    warm_forget(demo.id)  # what a worker restart leaves: no state in the process
    rnd = one_round(demo, now)
    assert rnd.metrics["snapshot"] == "cold"
    assert rnd.metrics["snapshot_cold_reason"] == "first round in this process"
    state = warm_state(demo.id)
    assert state is not None
    state.since += 10**9  # a state ahead of the database: another database, or a rollback
    rnd = one_round(demo, now)
    assert rnd.metrics["snapshot"] == "cold"
    assert "change position" in rnd.metrics["snapshot_cold_reason"]
    assert one_round(demo, now).metrics["snapshot"] == "warm"


def test_a_failed_round_forgets_the_warm_state(demo, settings):
    now = timezone.now()
    one_round(demo, now)
    assert warm_state(demo.id) is not None
    demo.scheduler_args = {"profiles": "not a list"}
    demo.save(update_fields=["scheduler_args"])
    with pytest.raises(ProfileError):
        one_round(demo, now)
    assert warm_state(demo.id) is None


def test_the_periodic_check_reports_a_planted_difference(demo, settings, caplog):
    settings.KOORDWEB_WARM_CHECK_ROUNDS = 2
    now = timezone.now()
    one_round(demo, now)  # cold
    assert one_round(demo, now).metrics["snapshot"] == "warm"
    state = warm_state(demo.id)
    assert state is not None
    node_id, row = sorted(state.rows.nodes.items())[0]
    # A bug's effect: the warm state believes a node offers twice its GPUs.
    doubled = {k: v * 2 for k, v in row.allocatable.items()}
    state.rows.nodes[node_id] = row._replace(allocatable=doubled)
    state.last = None
    rnd = one_round(demo, now)
    assert rnd.metrics["snapshot"] == "checked"
    assert f"nodes [{node_id}]" in rnd.metrics["warm_mismatch"]
    assert "differs from a cold build" in caplog.text
    # The cold snapshot was used and replaced the warm state.
    fresh = warm_state(demo.id)
    assert fresh is not None and fresh.rows.nodes[node_id].allocatable == row.allocatable
    assert one_round(demo, now).metrics["snapshot"] == "warm"
    assert "warm_mismatch" not in one_round(demo, now).metrics  # checked again: no difference


def test_strict_checking_fails_the_round_on_a_difference(demo, settings):
    settings.KOORDWEB_WARM_CHECK_ROUNDS = 1
    settings.KOORDWEB_WARM_CHECK_STRICT = True
    now = timezone.now()
    one_round(demo, now)
    state = warm_state(demo.id)
    assert state is not None
    pod_id, pod = sorted(state.rows.pods.items())[0]
    state.rows.pods[pod_id] = pod._replace(priority=pod.priority + 1)
    with pytest.raises(WarmMismatch):
        one_round(demo, now)
    assert Round.objects.filter(cluster=demo, state=Round.State.FAILED).exists()


def test_heap_settle_freezes_warm_heap_and_reclaims_cycles_at_the_next_cold_build() -> None:
    import gc
    import weakref

    from koordweb.engine.warm import warm_heap_settle

    class Node:
        pass

    try:
        cycle = Node()
        cycle.me = cycle  # type: ignore[attr-defined]
        alive = weakref.ref(cycle)
        warm_heap_settle("warm")
        assert gc.get_freeze_count() > 0
        del cycle
        gc.collect()
        assert alive() is not None  # frozen: full collections leave it alone
        warm_heap_settle("cold")
        assert alive() is None  # unfrozen and collected before freezing again
    finally:
        gc.unfreeze()
