"""Issue #36: pending work a round cannot use is not re-evaluated every round. A job found
unschedulable, whose inputs did not change since, is left out of the engine's snapshot until its
back-off (1 s doubling per attempt, at most 5 minutes) expires, as kube-scheduler's unschedulable
queue does; it keeps its last verdict; anything that may give it room brings it back at once."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from koordweb.engine.backoff import (
    MAX_SECONDS,
    backoff_forget,
    backoff_seconds,
    backoff_state,
)
from koordweb.models import Decision, ElasticQuota, Job, JobState, Node, PodPhase
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory, simulated_round

SMALL = {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    backoff_forget()
    yield
    backoff_forget()


def _job(cluster, name, *, cpu, quota=None, node=None, selector=None, priority=0) -> Job:
    job = JobFactory(
        cluster=cluster,
        name=name,
        quota=quota,
        total_number=1,
        min_available=1,
        priority=priority,
        submitted_at=timezone.now() - timedelta(minutes=1),
        state=JobState.RUNNING if node else JobState.PENDING,
    )
    PodFactory(
        job=job,
        name=f"{name}-0",
        requests={"cpu": cpu},
        node_selector=selector or {},
        priority=priority,
        node=node,
        phase=PodPhase.RUNNING if node else PodPhase.PENDING,
        bound_at=timezone.now() if node else None,
    )
    return job


def _round(cluster, at: datetime) -> tuple[dict[str, Any], set[str]]:
    outcome = simulated_round(cluster, now=at)
    return outcome.round.metrics, set(outcome.result.unschedulable)


def _decisions(job: Job) -> int:
    return Decision.objects.filter(job=job).count()


@pytest.fixture
def busy(db: Any) -> tuple[Any, Node, Job, Job]:
    """One 4-CPU node, 3 CPUs of it taken by `running`; `waiting` asks for 2."""
    cluster = ClusterFactory(name="backoff")
    node = NodeFactory(cluster=cluster, name="n0", allocatable=SMALL, labels={"zone": "a"})
    running = _job(cluster, "running", cpu=3000, node=node)
    waiting = _job(cluster, "waiting", cpu=2000)
    return cluster, node, running, waiting


def test_the_back_off_doubles_up_to_five_minutes():
    assert [backoff_seconds(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 8]
    assert backoff_seconds(9) == 256 and backoff_seconds(10) == MAX_SECONDS == 300
    assert backoff_seconds(1000) == MAX_SECONDS


def test_unschedulable_twice_with_nothing_changed_waits_for_its_back_off(busy):
    cluster, _, _, waiting = busy
    t0 = timezone.now()
    metrics, unschedulable = _round(cluster, t0)
    assert unschedulable == {"default/waiting"} and metrics["backoff_held_jobs"] == 0
    # 1 s of back-off after the first attempt: a round 1.5 s later tries again (attempt 2).
    metrics, unschedulable = _round(cluster, t0 + timedelta(seconds=1.5))
    assert unschedulable == {"default/waiting"} and metrics["backoff_released"] == 1
    assert backoff_state(cluster.id).jobs["default/waiting"].attempts == 2
    decisions = _decisions(waiting)
    # 2 s of back-off now (until t0 + 3.5 s): two rounds inside it leave the job out.
    for seconds in (2, 3):
        metrics, unschedulable = _round(cluster, t0 + timedelta(seconds=seconds))
        assert unschedulable == set()
        assert (metrics["backoff_held_jobs"], metrics["backoff_held_pods"]) == (1, 1)
        assert metrics["jobs_considered"] == 0
    assert _decisions(waiting) == decisions  # it keeps its last verdict
    assert Decision.objects.filter(job=waiting).latest("id").outcome == "unschedulable"
    # Expired: tried again, and backed off 4 s.
    metrics, unschedulable = _round(cluster, t0 + timedelta(seconds=4))
    assert unschedulable == {"default/waiting"} and metrics["backoff_held_jobs"] == 0
    assert backoff_state(cluster.id).jobs["default/waiting"].attempts == 3


def _backed_off(cluster, t0: datetime) -> None:
    for seconds in (0, 1.5, 2):
        _round(cluster, t0 + timedelta(seconds=seconds))
    assert backoff_state(cluster.id).jobs["default/waiting"].attempts == 2


def test_a_pod_leaving_a_node_brings_it_back_at_once(busy):
    cluster, _, running, waiting = busy
    t0 = timezone.now()
    _backed_off(cluster, t0)
    running.pods.update(phase=PodPhase.SUCCEEDED, finished_at=t0)
    Job.objects.filter(pk=running.pk).update(state=JobState.SUCCEEDED)
    metrics, unschedulable = _round(cluster, t0 + timedelta(seconds=2.5))  # inside its back-off
    assert metrics["backoff_held_jobs"] == 0 and metrics["backoff_released"] == 1
    assert unschedulable == set()
    assert waiting.pods.get().node_id is not None  # placed in the round that saw the room


def test_a_lower_priority_pod_bound_since_is_a_victim_worth_trying(busy):
    cluster, node, running, waiting = busy
    Job.objects.filter(pk=waiting.pk).update(priority=100)
    waiting.pods.update(priority=100)
    Job.objects.filter(pk=running.pk).update(priority=100)
    running.pods.update(priority=100)
    t0 = timezone.now()
    _backed_off(cluster, t0)
    _job(cluster, "small", cpu=500, node=node, priority=1)  # bound by another scheduler
    metrics, _ = _round(cluster, t0 + timedelta(seconds=2.5))
    assert metrics["backoff_released"] == 1 and metrics["backoff_held_jobs"] == 0


def test_a_job_no_node_selects_waits_for_a_node_change_not_for_room(busy):
    cluster, node, running, _ = busy
    _job(cluster, "elsewhere", cpu=100, selector={"zone": "b"})
    t0 = timezone.now()
    _backed_off(cluster, t0)
    assert backoff_state(cluster.id).jobs["default/elsewhere"].node_static
    running.pods.update(phase=PodPhase.SUCCEEDED, finished_at=t0)
    metrics, _ = _round(cluster, t0 + timedelta(seconds=2.5))
    # Room on a node it cannot use does not bring it back; the waiting job is placed.
    assert metrics["backoff_held_jobs"] == 1
    Node.objects.filter(pk=node.pk).update(labels={"zone": "b"})
    metrics, unschedulable = _round(cluster, t0 + timedelta(seconds=3))
    assert metrics["backoff_held_jobs"] == 0 and "default/elsewhere" not in unschedulable


def test_a_quota_keeps_in_what_its_runtime_quota_is_computed_from(db):
    """A pending pod counts in its quota's demand: jobs are left out only while the demand the
    engine sees (capped at the quota's max) stays the same, so no other job's outcome moves."""
    cluster = ClusterFactory(name="backoff")
    NodeFactory(cluster=cluster, name="n0", allocatable=SMALL, labels={"zone": "a"})
    quota = ElasticQuota.objects.create(
        cluster=cluster, name="parked", min={}, max={"cpu": 2000}, namespace="default"
    )
    for i in range(5):
        _job(cluster, f"parked-{i}", cpu=1000, quota=quota, selector={"zone": "nowhere"})
    t0 = timezone.now()
    for seconds in (0, 1.5):
        _round(cluster, t0 + timedelta(seconds=seconds))
    metrics, unschedulable = _round(cluster, t0 + timedelta(seconds=2))
    # 2 CPUs of demand stay in (the first two in queue order), 3 jobs are left out.
    assert metrics["backoff_held_jobs"] == 3
    assert unschedulable == {"default/parked-0", "default/parked-1"}


def test_a_failed_round_forgets_the_back_off(busy, monkeypatch):
    cluster, _, _, _ = busy
    t0 = timezone.now()
    _backed_off(cluster, t0)
    from koordweb.engine import pipeline as records

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("engine down")

    monkeypatch.setattr(records, "plan_round", broken)
    monkeypatch.setattr(records, "warm_engine", broken)
    with pytest.raises(RuntimeError):
        _round(cluster, t0 + timedelta(seconds=2.5))
    assert backoff_state(cluster.id) is None
