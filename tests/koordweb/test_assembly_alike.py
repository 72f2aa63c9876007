"""The assembly's shortcut for pods alike: a pod whose row has the shape of the last row whose
info was made from it (`snapshot.PodCopier`: the very same JSON documents, equal other values,
the same quota given) gets a copy of that info with its own name, topology index, job and gang
instead of one made from its row. Whatever the pods, the copy must equal what `pod_info` makes,
and an assembly using it must equal one that makes every info from its row."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from koordweb.engine import assembly, cluster_rows
from koordweb.engine import snapshot as snap
from koordweb.models import Cluster, Job, JobState, PodPhase
from scheduler.model import PodInfo
from scheduler.vocabulary import LABEL_DISABLE_PREEMPTIBLE, QUOTA_NAME, QUOTA_PREEMPTIBLE
from tests.koordweb.test_assembly_reuse import job_row

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
INDEX_MAPS = [f.name for f in dataclasses.fields(snap.SnapshotIndex)]
NODE_NAMES = {1: "node-1", 2: "node-2", 3: "node-3"}

# The documents pods are made with, a few of each (shared objects, as `rows_read` hands them).
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}
            ]
        }
    }
}
DOCUMENTS: dict[str, list[Any]] = {
    "requests": [{"cpu": 1000}, {"cpu": 1000, "nvidia.com/gpu": 4}],
    "limits": [{}, {"cpu": 2000}],
    "node_selector": [{}, {"pool": "a"}],
    "affinity": [{}, AFFINITY, {"nodeAffinity": {}}],
    "tolerations": [
        [],
        [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "gpu", "value": "x"}],
    ],
    "labels": [
        {},
        {QUOTA_NAME: "team-b"},
        {LABEL_DISABLE_PREEMPTIBLE: "true"},
        {QUOTA_PREEMPTIBLE: "false", "app": "x"},
    ],
    "annotations": [{}, {"x": "1"}],
}
# The other values a pod row may take here.
VALUES: dict[str, list[Any]] = {
    "namespace": ["team-a", "team-b"],
    "priority": [100, 200],
    "preemption_policy": ["PreemptLowerPriority", "Never"],
    "owner_kind": ["", "DaemonSet"],
    "node_id": [None, 1, 2],
    "nominated_node_id": [None, 3],
    "phase": [PodPhase.PENDING, PodPhase.RUNNING],
    "terminating": [False, True],
    "bound_at": [None, NOW],
    "started_at": [None, NOW + timedelta(seconds=5)],
    "nominated_at": [None, NOW - timedelta(seconds=5)],
}
OWN = {"id", "job_id", "name", "uid", "topology_index"}  # may differ within a shape


def random_pod(rng: random.Random, pod_id: int) -> cluster_rows.PodRow:
    """A pod row of random documents (from `DOCUMENTS`) and values."""
    fields: dict[str, Any] = {name: rng.choice(options) for name, options in DOCUMENTS.items()}
    fields |= {name: rng.choice(options) for name, options in VALUES.items()}
    return cluster_rows.PodRow(
        id=pod_id,
        job_id=rng.choice([1, 2]),
        name=f"pod-{pod_id}",
        uid=f"uid-{pod_id}",
        topology_index=rng.choice([None, 0, 1, 2]),
        **fields,
    )


def pod_like(rng: random.Random, pod: cluster_rows.PodRow, pod_id: int) -> cluster_rows.PodRow:
    """Another pod of `pod`'s job: its own id, name, uid and topology index, and most of the
    time the same documents and values; otherwise one of them different, or one document equal
    but another object."""
    other = pod._replace(
        id=pod_id,
        job_id=rng.choice([pod.job_id, 3]),
        name=f"pod-{pod_id}",
        uid=f"uid-{pod_id}",
        topology_index=rng.randrange(8),
    )
    choice = rng.randrange(4)
    if choice == 1:
        name = rng.choice(list(DOCUMENTS))
        return other._replace(**{name: rng.choice(DOCUMENTS[name])})
    if choice == 2:
        name = rng.choice(list(VALUES))
        return other._replace(**{name: rng.choice(VALUES[name])})
    if choice == 3:
        name = rng.choice(list(DOCUMENTS))
        copy = type(getattr(pod, name))(getattr(pod, name))  # equal, another object
        return other._replace(**{name: copy})
    return other


def made(
    pod: cluster_rows.PodRow,
    quota: str | None = "team-a",
    gang: str | None = "team-a/g",
    job: str = "j",
) -> PodInfo:
    return snap.pod_info(pod, job, quota, gang, NODE_NAMES)  # type: ignore[arg-type]


def copied(
    first: cluster_rows.PodRow,
    quota: str | None,
    second: cluster_rows.PodRow,
    second_quota: str | None,
) -> PodInfo | None:
    """`second`'s info copied from `first`'s (made for another job and gang), or None."""
    template = made(first, quota, "team-a/g1", "team-a/g1")
    template.key  # noqa: B018 (a cached value the copy must not carry over)
    shape = snap.pod_copier(first, quota, template)
    assert shape is not None
    before = dict(vars(template))
    alike = shape.info_of(second, "team-b/g2", second_quota, "team-b/g2")
    assert vars(template) == before  # the template is left as it was
    return alike


def assert_same_info(alike: PodInfo, plain: PodInfo) -> None:
    """Equal fields and equal cached properties, each computed for itself."""
    assert type(alike) is PodInfo
    assert alike == plain
    assert alike.key == plain.key and alike.preemptible == plain.preemptible
    assert vars(alike) == vars(plain)


def test_pod_info_reads_no_id_uid_or_job_row() -> None:
    """The premise of the shortcut: of a pod's own values `pod_info` reads only its name and
    topology index."""
    rng = random.Random(1)
    for pod_id in range(200):
        pod = random_pod(rng, pod_id)
        assert made(pod) == made(pod._replace(id=pod_id + 10_000, uid="another", job_id=99))
    assert set(cluster_rows.PodRow._fields) - OWN == set(DOCUMENTS) | set(VALUES)


def test_a_copied_info_equals_one_made_from_the_row() -> None:
    rng = random.Random(2)
    alike_count = different_count = 0
    for pod_id in range(0, 6000, 2):
        first = random_pod(rng, pod_id)
        second = pod_like(rng, first, pod_id + 1)
        quota = rng.choice(["team-a", None])
        second_quota = rng.choice([quota, quota, "team-b", None])
        alike = copied(first, quota, second, second_quota)
        if alike is None:
            different_count += 1
            continue
        alike_count += 1
        assert second_quota == quota
        assert_same_info(alike, made(second, quota, "team-b/g2", "team-b/g2"))
    assert alike_count > 500 and different_count > 500


@pytest.mark.parametrize("name", sorted(set(DOCUMENTS) | set(VALUES)))
def test_a_pod_differing_in_anything_but_its_own_values_is_not_alike(name: str) -> None:
    rng = random.Random(3)
    pod = random_pod(rng, 1)
    own = pod._replace(id=2, job_id=7, name="other", uid="u", topology_index=7)
    assert copied(pod, "team-a", own, "team-a") is not None
    assert copied(pod, "team-a", own, "team-b") is None  # another quota given
    assert copied(pod, "team-a", own, None) is None
    for option in (DOCUMENTS | VALUES)[name]:
        other = pod._replace(**{name: option})
        assert (copied(pod, "team-a", other, "team-a") is not None) == (
            option is getattr(pod, name)
        )
    if name in DOCUMENTS:  # a document is the same only as the very same object
        copy = type(getattr(pod, name))(getattr(pod, name))
        assert copied(pod, "team-a", pod._replace(**{name: copy}), "team-a") is None


def test_no_shape_of_an_info_holding_more_than_its_fields() -> None:
    pod = random_pod(random.Random(4), 1)
    template = made(pod)
    object.__setattr__(template, "extra", 1)
    assert snap.pod_copier(pod, "team-a", template) is None


def node_row(node_id: int) -> cluster_rows.NodeRow:
    return cluster_rows.NodeRow(
        node_id, f"node-{node_id}", {}, {}, [], {"cpu": 64_000}, False, True, {}, {}
    )


def job_pods(
    rng: random.Random, job_id: int, first_id: int, count: int, like: cluster_rows.PodRow | None
) -> list[cluster_rows.PodRow]:
    """A job's pods, each like the one before (mostly the same shape), the first like `like`
    (a pod of another job) when given."""
    first = random_pod(rng, first_id) if like is None else pod_like(rng, like, first_id)
    pods = [first._replace(job_id=job_id)]
    for pod_id in range(first_id + 1, first_id + count):
        pods.append(pod_like(rng, pods[-1], pod_id)._replace(job_id=job_id))
    return pods


@pytest.fixture
def cluster(db: Any) -> Cluster:
    return Cluster.objects.create(name="alike", backend=Cluster.Backend.SIMULATED)


def test_an_assembly_with_copied_infos_equals_one_without(cluster, monkeypatch):
    """Rounds of new jobs, jobs changed and pods read again: the kept assembly (copying infos
    where it may) equals, snapshot and maps, one from nothing that makes every info from its
    row; and copies were made."""
    rng = random.Random(5)
    rows = cluster_rows.ClusterRows(quota_names={1: "team-a", 2: "team-b"})
    rows.nodes = {i: node_row(i) for i in (1, 2, 3)}
    cache = assembly.AssemblyCache()
    real_info_of = snap.PodCopier.info_of
    copies: list[str] = []

    def counted_info_of(
        shape: snap.PodCopier, pod: cluster_rows.PodRow, *args: Any
    ) -> PodInfo | None:
        info = real_info_of(shape, pod, *args)
        if info is not None:
            copies.append(pod.name)
        return info

    next_id = 100
    for _round in range(40):
        for _ in range(rng.randint(1, 3)):  # new jobs of 1-6 pods
            next_id += 1
            kind = rng.choice([Job.Kind.GANG, Job.Kind.GANG, Job.Kind.POD])
            rows.jobs[next_id] = job_row(
                next_id,
                kind=kind,
                quota_id=rng.choice([None, 1, 2]),
                gang_group=rng.choice(["", "", "team-a/group"]),
            )
            count = 1 if kind == Job.Kind.POD else rng.randint(1, 6)
            like = rng.choice(list(rows.pods.values())) if rng.random() < 0.5 else None
            for pod in job_pods(rng, next_id, next_id * 10, count, like):
                rows.pods[pod.id] = pod
        for _ in range(rng.randint(0, 3)):  # a job's state, a pod read again or changed
            job_id = rng.choice(list(rows.jobs))
            rows.jobs[job_id] = rows.jobs[job_id]._replace(state=rng.choice(list(JobState)))
            pod_id = rng.choice(list(rows.pods))
            rows.pods[pod_id] = pod_like(rng, rows.pods[pod_id], pod_id)
        with monkeypatch.context() as patch:
            patch.setattr(snap.PodCopier, "info_of", counted_info_of)
            snapshot, index = assembly.assemble(cluster, rows, now=NOW, cache=cache)
        with monkeypatch.context() as patch:
            patch.setattr(assembly, "pod_copier", lambda pod, quota, info: None)
            plain, plain_index = assembly.assemble(
                cluster, rows, now=NOW, cache=assembly.AssemblyCache()
            )
        assert snapshot == plain
        for ours, theirs in zip(snapshot.pods, plain.pods, strict=True):
            assert_same_info(ours, theirs)
        for name in INDEX_MAPS:
            assert getattr(index, name) == getattr(plain_index, name), name
    assert len(copies) > 50
