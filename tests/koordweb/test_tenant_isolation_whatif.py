"""Issue #36: one tenant's parked work costs another tenant's what-if nothing. The jobs the round
holds back are published with their job rows and what their demand touches; a what-if then reads
the cluster without their rows, and plans on the very snapshot it would have made by reading every
row and taking them out. When that would not be the same snapshot (a held job's pod bound since,
its quota's demand fallen below its max) it reads every row, as before."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import caches
from django.utils import timezone

from koordweb.engine import assembly, cluster_rows
from koordweb.engine.backoff import (
    backoff_forget,
    backoff_held,
    backoff_state,
    demand_sums,
    snapshot_without,
)
from koordweb.engine.whatif import whatif_snapshot
from koordweb.models import ElasticQuota, Job, JobState, Node, PodPhase
from scheduler.quota_tree import QuotaTree, quota_sums
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory, simulated_round

SMALL = {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}
PARKED = [f"default/parked-{i}" for i in range(5)]


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    backoff_forget()
    yield
    backoff_forget()


def _job(cluster, name, *, cpu, quota=None, node=None, selector=None, phase=None) -> Job:
    job = JobFactory(
        cluster=cluster,
        name=name,
        quota=quota,
        total_number=1,
        min_available=1,
        submitted_at=timezone.now() - timedelta(minutes=1),
        state=JobState.RUNNING if node else JobState.PENDING,
    )
    PodFactory(
        job=job,
        name=f"{name}-0",
        requests={"cpu": cpu},
        node_selector=selector or {},
        node=node,
        phase=phase or (PodPhase.RUNNING if node else PodPhase.PENDING),
        bound_at=timezone.now() if node else None,
    )
    return job


@pytest.fixture
def parked(db: Any) -> Any:
    """A team whose quota admits 2 CPUs parks five 1-CPU jobs no node selects; after three
    rounds the last three are held back (the first two stay in: its capped demand)."""
    cluster = ClusterFactory(name="isolation")
    node = NodeFactory(cluster=cluster, name="n0", allocatable=SMALL, labels={"zone": "a"})
    quota = ElasticQuota.objects.create(
        cluster=cluster, name="parked", min={}, max={"cpu": 2000}, namespace="default"
    )
    jobs = [
        _job(cluster, f"parked-{i}", cpu=1000, quota=quota, selector={"zone": "nowhere"})
        for i in range(5)
    ]
    _job(cluster, "running", cpu=1000, node=node)
    t0 = timezone.now()
    for seconds in (0, 1.5, 2):
        outcome = simulated_round(cluster, now=t0 + timedelta(seconds=seconds))
    assert outcome.round.metrics["backoff_held_jobs"] == 3
    return cluster, node, jobs, t0


def _read_whole(cluster: Any, now: Any) -> Any:
    """What a what-if planned on before: every row read, the held jobs taken out."""
    full, _ = assembly.build_for_round(cluster, now=now)
    return snapshot_without(full, backoff_held(cluster.id).jobs)


def _job_ids(snapshot: Any) -> set[str]:
    return {job.id for job in snapshot.jobs}


def test_the_round_publishes_the_held_jobs_rows_and_what_their_demand_touches(parked):
    cluster, _, jobs, _ = parked
    held = backoff_held(cluster.id)
    assert held.jobs == set(PARKED[2:])
    assert sorted(held.rows) == sorted(job.id for job in jobs[2:])
    assert held.touches == {"parked": ("cpu",)}
    # Each held job keeps its own demand, so a round does not sum it from its pods again.
    assert backoff_state(cluster.id).jobs["default/parked-4"].demand == {"parked": {"cpu": 1000}}


def test_a_what_if_reads_none_of_the_held_rows_and_plans_on_the_same_snapshot(parked):
    cluster, _, _, _ = parked
    held = backoff_held(cluster.id)
    rows = cluster_rows.read_rows(cluster.id, devices=False, without_jobs=held.rows)
    assert not {pod.job_id for pod in rows.pods.values()} & set(held.rows)
    assert not rows.jobs.keys() & set(held.rows)
    now = timezone.now()
    planned = whatif_snapshot(cluster, now=now)
    assert planned == _read_whole(cluster, now)
    assert _job_ids(planned) == {*PARKED[:2], "default/running"}


def test_a_held_job_whose_pod_was_bound_since_is_read_again(parked):
    cluster, node, jobs, _ = parked
    # Another scheduler bound it: the round would not leave it out, nor does the what-if.
    jobs[4].pods.update(node=node, phase=PodPhase.RUNNING, bound_at=timezone.now())
    now = timezone.now()
    planned = whatif_snapshot(cluster, now=now)
    assert "default/parked-4" in _job_ids(planned)
    assert planned == _read_whole(cluster, now)


def test_held_jobs_come_back_when_their_quota_needs_their_demand(parked):
    cluster, _, jobs, _ = parked
    # The two jobs that carried the quota's demand are gone: leaving out all three held ones
    # would lower its capped demand, so two of them are planned again (as the round would).
    for job in jobs[:2]:
        job.pods.update(phase=PodPhase.FAILED, finished_at=timezone.now())
        Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    now = timezone.now()
    planned = whatif_snapshot(cluster, now=now)
    assert planned == _read_whole(cluster, now)
    assert len(_job_ids(planned) & set(PARKED[2:])) == 2


def test_without_word_from_the_round_a_what_if_reads_every_row(parked):
    cluster, _, _, _ = parked
    caches["default"].clear()
    assert backoff_held(cluster.id).jobs == frozenset()
    now = timezone.now()
    planned = whatif_snapshot(cluster, now=now)
    full, _ = assembly.build_for_round(cluster, now=now)
    assert planned == full and set(PARKED) <= _job_ids(planned)


def test_a_cold_round_names_no_rows_and_what_ifs_read_every_row(parked, settings):
    cluster, _, _, t0 = parked
    settings.KOORDWEB_WARM_SNAPSHOT = False
    # inside the held jobs' back-off (2 s from t0 + 1.5 s)
    outcome = simulated_round(cluster, now=t0 + timedelta(seconds=2.5))
    assert outcome.round.metrics["backoff_held_jobs"] == 3
    held = backoff_held(cluster.id)
    assert held.jobs == set(PARKED[2:]) and held.rows == ()
    now = timezone.now()
    assert whatif_snapshot(cluster, now=now) == _read_whole(cluster, now)


def test_a_checked_round_still_names_the_held_rows(parked, settings):
    """The periodic cold check hands out the build the warm state keeps, so the held jobs' rows
    are still known (what-ifs keep reading without them)."""
    cluster, _, jobs, t0 = parked
    settings.KOORDWEB_WARM_CHECK_ROUNDS = 1
    outcome = simulated_round(cluster, now=t0 + timedelta(seconds=2.5))
    assert outcome.round.metrics["snapshot"] == "checked"
    assert outcome.round.metrics["backoff_held_jobs"] == 3
    assert sorted(backoff_held(cluster.id).rows) == sorted(job.id for job in jobs[2:])


def test_a_question_about_the_empty_cluster_reads_no_pod(parked):
    """`nodes_only`: the nodes, their devices and the small tables as a round reads them, and
    none of the rows tenants submitted (what an empty cluster offers does not depend on them)."""
    cluster, _, _, _ = parked
    now = timezone.now()
    rows = cluster_rows.read_rows(cluster.id, devices=True, nodes_only=True)
    assert rows.pods == {} and rows.jobs == {} and rows.nodes
    empty, _ = assembly.build_for_round(cluster, now=now, nodes_only=True)
    full, _ = assembly.build_for_round(cluster, now=now)
    assert empty.pods == () and empty.jobs == ()
    assert (empty.nodes, empty.quotas, empty.topology) == (full.nodes, full.quotas, full.topology)


def test_demand_sums_are_the_engines_quota_sums(db):
    """Bound, nominated, pending, finished and quota-less pods under a parent and two children:
    the back-off's sums (counted by shared requests documents) are the engine's own."""
    cluster = ClusterFactory(name="sums")
    node = NodeFactory(cluster=cluster, name="n0", allocatable=SMALL)
    NodeFactory(cluster=cluster, name="n1", allocatable=SMALL)
    root = ElasticQuota.objects.create(
        cluster=cluster, name="root", min={}, max={"cpu": 9000}, is_parent=True
    )
    a = ElasticQuota.objects.create(cluster=cluster, name="a", parent=root, max={"cpu": 5000})
    b = ElasticQuota.objects.create(cluster=cluster, name="b", parent=root, max={"cpu": 5000})
    for i in range(3):
        _job(cluster, f"a-run-{i}", cpu=500, quota=a, node=node)
        _job(cluster, f"a-wait-{i}", cpu=700, quota=a)
        _job(cluster, f"b-wait-{i}", cpu=700, quota=b, selector={"zone": "x"})
    _job(cluster, "b-done", cpu=300, quota=b, node=node, phase=PodPhase.SUCCEEDED)
    _job(cluster, "none", cpu=100, node=node)
    nominated = _job(cluster, "b-nominated", cpu=200, quota=b)
    nominated.pods.update(nominated_node=Node.objects.get(name="n1"))
    snapshot, _ = assembly.build_for_round(cluster, now=timezone.now())
    tree = QuotaTree.build(snapshot.quotas)
    expected = quota_sums(tree, snapshot.pods, include_pending=True)
    assert demand_sums(snapshot) == expected
    assert expected["root"]["cpu"] == 3 * 500 + 3 * 700 + 3 * 700 + 200
