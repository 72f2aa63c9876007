"""`assembly.assemble` with a kept `AssemblyCache`: it makes again only what changed (the node
tuple when a node, metric or device row changed; the blocks of the engine jobs whose rows
changed), and its result equals an assembly from nothing, snapshot and every reverse map."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from operator import is_
from typing import Any

import pytest

from koordweb.engine import assembly
from koordweb.engine import cluster_rows as rows_of
from koordweb.engine import snapshot as snap
from koordweb.models import Cluster, Job, JobState, PodPhase

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
INDEX_MAPS = [f.name for f in dataclasses.fields(snap.SnapshotIndex)]


def node_row(node_id: int, **changes: Any) -> rows_of.NodeRow:
    row = rows_of.NodeRow(
        id=node_id,
        name=f"node-{node_id:03d}",
        labels={"zone": "a"},
        annotations={},
        taints=[],
        allocatable={"cpu": 64_000, "nvidia.com/gpu": 8},
        unschedulable=False,
        ready=True,
        device_labels={},
        device_annotations={},
    )
    return row._replace(**changes)


def job_row(job_id: int, **changes: Any) -> rows_of.JobRow:
    row = rows_of.JobRow(
        id=job_id,
        kind=Job.Kind.GANG,
        namespace="team-a",
        name=f"job-{job_id}",
        gang_group="",
        quota_id=1,
        priority=100,
        submitted_at=NOW - timedelta(seconds=job_id),
        min_available=1,
        total_number=1,
        mode="Strict",
        waiting_time_seconds=600,
        topology_spec={},
        preemption_policy="PreemptLowerPriority",
        state=JobState.PENDING,
    )
    return row._replace(**changes)


def pod_row(pod_id: int, job_id: int, **changes: Any) -> rows_of.PodRow:
    row = rows_of.PodRow(
        id=pod_id,
        job_id=job_id,
        namespace="team-a",
        name=f"job-{job_id}-{pod_id}",
        uid=f"uid-{pod_id}",
        requests={"cpu": 1000, "nvidia.com/gpu": 1},
        limits={},
        node_selector={},
        affinity={},
        tolerations=[],
        labels={},
        annotations={},
        priority=100,
        preemption_policy="PreemptLowerPriority",
        node_id=None,
        nominated_node_id=None,
        phase=PodPhase.PENDING,
        terminating=False,
        topology_index=None,
        bound_at=None,
        started_at=None,
        nominated_at=None,
    )
    return row._replace(**changes)


def metric_row(node_id: int, metric_id: int, cpu: int) -> rows_of.MetricRow:
    return rows_of.MetricRow(metric_id, node_id, NOW, 60, {"cpu": cpu}, {}, {})


def running(pod: rows_of.PodRow, node_id: int) -> rows_of.PodRow:
    return pod._replace(node_id=node_id, phase=PodPhase.RUNNING, bound_at=NOW)


def cluster_rows() -> rows_of.ClusterRows:
    """Six nodes; a running gang of two, a pending gang of three, a running single pod, two jobs
    of one gang group, and a holding job without pods."""
    rows = rows_of.ClusterRows(quota_names={1: "team-a", 2: "team-b"})
    rows.nodes = {i: node_row(i) for i in range(1, 7)}
    rows.metrics = {i: metric_row(i, 100 + i, 1000 * i) for i in (1, 2, 3)}
    jobs = [
        job_row(1, state=JobState.RUNNING, total_number=2, min_available=2),
        job_row(2, total_number=3, min_available=3, quota_id=2),
        job_row(3, kind=Job.Kind.POD, state=JobState.RUNNING, name="solo"),
        job_row(4, gang_group="team-a/group"),
        job_row(5, gang_group="team-a/group"),
        job_row(6),
    ]
    rows.jobs = {job.id: job for job in jobs}
    pods = [
        running(pod_row(10, 1), 1),
        running(pod_row(11, 1), 2),
        pod_row(20, 2),
        pod_row(21, 2),
        pod_row(22, 2),
        running(pod_row(30, 3, name="solo"), 3),
        pod_row(40, 4),
        pod_row(50, 5),
    ]
    rows.pods = {pod.id: pod for pod in pods}
    return rows


def assemble(cluster: Cluster, rows: rows_of.ClusterRows, cache: assembly.AssemblyCache) -> Any:
    return assembly.assemble(cluster, rows, now=NOW, cache=cache)


def assert_same_as_fresh(
    cluster: Cluster, rows: rows_of.ClusterRows, cache: assembly.AssemblyCache
):
    """The cached assembly equals one from nothing: snapshot (order included) and every map."""
    snapshot, index = assemble(cluster, rows, cache)
    fresh, fresh_index = assemble(cluster, rows, assembly.AssemblyCache())
    assert snapshot == fresh
    for name in INDEX_MAPS:
        assert getattr(index, name) == getattr(fresh_index, name), name
    return snapshot, index


@pytest.fixture
def cluster(db: Any) -> Cluster:
    return Cluster.objects.create(name="assembly", backend=Cluster.Backend.SIMULATED)


def test_a_cached_assembly_equals_a_fresh_one_after_each_kind_of_change(cluster):
    rows = cluster_rows()
    cache = assembly.AssemblyCache()
    snapshot, index = assert_same_as_fresh(cluster, rows, cache)
    engine_ids = ["team-a/group", "team-a/job-1", "team-a/job-2", "team-a/job-6", "team-a/solo"]
    assert [job.id for job in snapshot.jobs] == engine_ids
    assert index.jobs_by_engine_id["team-a/group"] == [rows.jobs[4], rows.jobs[5]]

    # New pods: a new gang of two, and one more pod of the pending gang (sorted by name).
    rows.jobs[7] = job_row(7, total_number=2)
    rows.pods |= {70: pod_row(70, 7), 71: pod_row(71, 7), 23: pod_row(23, 2, name="job-2-0")}
    assert_same_as_fresh(cluster, rows, cache)
    # A pod finished: read no more (and one left with a finished phase, filtered out).
    del rows.pods[11]
    rows.pods[10] = rows.pods[10]._replace(phase=PodPhase.SUCCEEDED)
    assert_same_as_fresh(cluster, rows, cache)
    # A node's label changed, a metric came, a node joined.
    rows.nodes[2] = rows.nodes[2]._replace(labels={"zone": "b"})
    rows.metrics[4] = metric_row(4, 200, 7)
    rows.nodes[7] = node_row(7, name="node-000")
    assert_same_as_fresh(cluster, rows, cache)
    # The pending gang was placed; the single pod's job is being preempted, its pod terminating.
    rows.jobs[2] = rows.jobs[2]._replace(state=JobState.SCHEDULED)
    for pod_id, node_id in ((20, 4), (21, 5), (22, 6), (23, 7)):
        rows.pods[pod_id] = running(rows.pods[pod_id], node_id)
    rows.jobs[3] = rows.jobs[3]._replace(state=JobState.PREEMPTING)
    rows.pods[30] = rows.pods[30]._replace(terminating=True)
    assert_same_as_fresh(cluster, rows, cache)
    # A gang group changed: job 6 joins the group, job 5 leaves it.
    rows.jobs[6] = rows.jobs[6]._replace(gang_group="team-a/group")
    rows.jobs[5] = rows.jobs[5]._replace(gang_group="")
    snapshot, index = assert_same_as_fresh(cluster, rows, cache)
    assert [j.id for j in index.jobs_by_engine_id["team-a/group"]] == [4, 6]
    # A quota renamed, a node gone, a job gone with its pods (a cancelled job without pods).
    rows.quota_names = {1: "team-a", 2: "team-c"}
    del rows.nodes[6]
    rows.jobs[7] = rows.jobs[7]._replace(state=JobState.CANCELLED)
    del rows.pods[70], rows.pods[71]
    assert_same_as_fresh(cluster, rows, cache)
    # A pod moved to another job; a cancelled job's bound pod terminating stays.
    rows.pods[40] = rows.pods[40]._replace(job_id=6)
    rows.jobs[1] = rows.jobs[1]._replace(state=JobState.CANCELLED)
    rows.pods[10] = running(rows.pods[10], 1)._replace(terminating=True)
    assert_same_as_fresh(cluster, rows, cache)


def test_random_changes_keep_a_cached_assembly_equal_to_a_fresh_one(cluster):
    rng = random.Random(11)
    rows = cluster_rows()
    cache = assembly.AssemblyCache()
    assert_same_as_fresh(cluster, rows, cache)
    states = list(JobState)
    next_id = 1000
    for _step in range(150):
        for _ in range(rng.randint(1, 4)):
            next_id += 1
            change = rng.randrange(9)
            job_ids, pod_ids, node_ids = list(rows.jobs), list(rows.pods), list(rows.nodes)
            if change == 0 or not pod_ids or len(job_ids) < 4:  # a new job with pods
                kind = rng.choice([Job.Kind.GANG, Job.Kind.POD])
                rows.jobs[next_id] = job_row(
                    next_id, kind=kind, gang_group=rng.choice(["", "team-a/g1", "team-a/g2"])
                )
                for n in range(1 if kind == Job.Kind.POD else rng.randint(1, 3)):
                    rows.pods[next_id * 10 + n] = pod_row(next_id * 10 + n, next_id)
            elif change == 1:  # a job's state
                job_id = rng.choice(job_ids)
                rows.jobs[job_id] = rows.jobs[job_id]._replace(state=rng.choice(states))
            elif change == 2:  # a pod bound, or finished, or terminating, or gone
                pod_id = rng.choice(pod_ids)
                pod = rows.pods[pod_id]
                choice = rng.randrange(4)
                if choice == 0 and node_ids:
                    rows.pods[pod_id] = running(pod, rng.choice([*node_ids, 999]))
                elif choice == 1:
                    rows.pods[pod_id] = pod._replace(phase=PodPhase.FAILED)
                elif choice == 2:
                    rows.pods[pod_id] = pod._replace(terminating=True)
                else:
                    del rows.pods[pod_id]
            elif change == 3:  # a gang group, a quota or a priority
                job_id = rng.choice(job_ids)
                rows.jobs[job_id] = rows.jobs[job_id]._replace(
                    gang_group=rng.choice(["", "team-a/g1", "team-a/g2"]),
                    quota_id=rng.choice([None, 1, 2, 3]),
                    priority=rng.randrange(50, 150),
                )
            elif change == 4:  # a node changed, joined or left
                node_id = rng.randrange(1, 12)
                if node_id in rows.nodes and rng.random() < 0.3:
                    del rows.nodes[node_id]
                else:
                    rows.nodes[node_id] = node_row(node_id, labels={"zone": rng.choice("ab")})
            elif change == 5:  # a metric
                node_id = rng.choice(node_ids)
                rows.metrics[node_id] = metric_row(node_id, next_id, rng.randrange(10_000))
            elif change == 6:  # a quota renamed or named
                rows.quota_names[rng.randrange(1, 4)] = rng.choice(["team-a", "team-b", "x"])
            elif change == 7:  # a job gone
                del rows.jobs[rng.choice(job_ids)]
            else:  # a pod read again unchanged (a new object), or moved to another job
                pod_id = rng.choice(pod_ids)
                rows.pods[pod_id] = rows.pods[pod_id]._replace(
                    job_id=rng.choice([*job_ids, *[rows.pods[pod_id].job_id] * 3])
                )
        assert_same_as_fresh(cluster, rows, cache)


def test_unchanged_rows_reuse_the_last_engine_objects(cluster, monkeypatch):
    rows = cluster_rows()
    cache = assembly.AssemblyCache()
    first, _ = assemble(cluster, rows, cache)
    made: list[str] = []  # the engine objects made again: nodes and pods by name, blocks by id
    real_pod_info, real_node_info, real_job_block = (
        assembly.pod_info,
        assembly.node_info,
        assembly.job_block,
    )

    def pod_info(pod: rows_of.PodRow, *args: Any) -> Any:
        made.append(pod.name)
        return real_pod_info(pod, *args)

    def node_info(node: rows_of.NodeRow, *args: Any) -> Any:
        made.append(node.name)
        return real_node_info(node, *args)

    def job_block(engine_id: str, *args: Any) -> Any:
        made.append(engine_id)
        return real_job_block(engine_id, *args)

    monkeypatch.setattr(assembly, "pod_info", pod_info)
    monkeypatch.setattr(assembly, "node_info", node_info)
    monkeypatch.setattr(assembly, "job_block", job_block)

    # Nothing changed: the node tuple itself, every pod and job info, no block made again.
    again, _ = assemble(cluster, rows, cache)
    assert again.nodes is first.nodes
    assert all(map(is_, again.pods, first.pods)) and all(map(is_, again.jobs, first.jobs))
    assert made == []

    # One pod of the pending gang bound: its job's block and that pod's info are made again (the
    # job info is kept: same members, pod keys and quotas); the node tuple is kept.
    rows.pods[21] = running(rows.pods[21], 4)
    third, _ = assemble(cluster, rows, cache)
    assert made == ["team-a/job-2", "job-2-21"]
    assert third.nodes is first.nodes
    assert [a.name for a, b in zip(third.pods, first.pods, strict=True) if a is not b] == [
        "job-2-21"
    ]
    assert all(map(is_, third.jobs, first.jobs))

    # A node's label changed: that node's info only, in a new node tuple; the pods are kept.
    made.clear()
    rows.nodes[5] = rows.nodes[5]._replace(labels={"zone": "b"})
    fourth, _ = assemble(cluster, rows, cache)
    assert fourth.nodes is not first.nodes
    assert made == ["node-005"]
    assert [a is b for a, b in zip(fourth.nodes, first.nodes, strict=True)].count(False) == 1
    assert all(map(is_, fourth.pods, third.pods))
