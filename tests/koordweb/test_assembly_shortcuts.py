"""The assembly's cheaper ways of making a job's share of the snapshot, each against the plain
computation it replaces: `held_pods` (filtered by state once, sorted by an attrgetter key),
`engine_job_info` (a single member leads outright, maps instead of generators) and the topology
rules parsed once per document (`InfoMaker.topology`)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from koordweb.engine import assembly, cluster_rows, specs
from koordweb.engine import snapshot as snap
from koordweb.models import Job, JobState, PodPhase
from scheduler.model import GangInfo, JobInfo
from scheduler.vocabulary import FINISHED_POD_PHASES

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
SPECS: list[dict[str, Any]] = [
    {},
    {"gatherStrategy": [{"layer": "block", "strategy": "MustGather"}]},
    {"gatherStrategy": [{"layer": "spine", "strategy": "PreferGather"}]},
    {"podCountMultiple": 2},
    {"gatherStrategy": [], "podCountMultiple": 1},
]


def plain_held_pods(
    job: cluster_rows.JobRow, pods: list[cluster_rows.PodRow]
) -> tuple[cluster_rows.PodRow, ...]:
    """`held_pods` as it was written first."""
    state = job.state
    return tuple(
        sorted(
            (
                pod
                for pod in pods
                if pod.phase not in FINISHED_POD_PHASES
                and (
                    state in JobState.ACTIVE
                    or (pod.node_id is not None and (state in JobState.HOLDING or pod.terminating))
                )
            ),
            key=lambda p: (p.namespace, p.name),
        )
    )


def plain_engine_job_info(
    job_id: str,
    members: list[cluster_rows.JobRow],
    keys: tuple[str, ...],
    quota_names: dict[int, str],
) -> JobInfo:
    """`engine_job_info` as it was written first."""
    lead = min(members, key=lambda j: (-j.priority, j.submitted_at, j.id))
    return JobInfo(
        id=job_id,
        pod_keys=keys,
        gangs=tuple(
            GangInfo(
                id=j.gang_id,
                min_available=j.min_available,
                total=j.total_number,
                mode=j.mode,  # type: ignore[arg-type]
                waiting_seconds=j.waiting_time_seconds,
            )
            for j in members
            if j.kind != Job.Kind.POD
        ),
        priority=max(j.priority for j in members),
        quota=quota_names.get(lead.quota_id) if lead.quota_id else None,
        topology=specs.parse_topology_rule(lead.topology_spec or {}),
        submission_order=min(j.submitted_at for j in members).timestamp(),
        preemption_policy=lead.preemption_policy,  # type: ignore[arg-type]
    )


def random_job(rng: random.Random, job_id: int) -> cluster_rows.JobRow:
    return cluster_rows.JobRow(
        id=job_id,
        kind=rng.choice([Job.Kind.GANG, Job.Kind.POD]),
        namespace=rng.choice(["team-a", "team-b"]),
        name=f"job-{job_id}",
        gang_group="",
        quota_id=rng.choice([None, 1, 2, 3]),
        priority=rng.choice([100, 200]),
        submitted_at=NOW - timedelta(seconds=rng.randrange(3)),
        min_available=rng.randint(1, 4),
        total_number=4,
        mode=rng.choice(["Strict", "NonStrict"]),
        waiting_time_seconds=600,
        topology_spec=rng.choice(SPECS),
        preemption_policy=rng.choice(["PreemptLowerPriority", "Never"]),
        state=rng.choice(list(JobState)),
    )


def random_pod(rng: random.Random, pod_id: int, job_id: int) -> cluster_rows.PodRow:
    return cluster_rows.PodRow(
        id=pod_id,
        job_id=job_id,
        namespace=rng.choice(["team-a", "team-b"]),
        name=rng.choice(["a", "b", "c", "b-1", "b-10", "b-2"]) + f"-{pod_id % 3}",
        uid=f"uid-{pod_id}",
        requests={},
        limits={},
        node_selector={},
        affinity={},
        tolerations=[],
        labels={},
        annotations={},
        priority=100,
        preemption_policy="PreemptLowerPriority",
        node_id=rng.choice([None, 1]),
        nominated_node_id=None,
        phase=rng.choice(list(PodPhase)),
        terminating=rng.random() < 0.3,
        topology_index=None,
        bound_at=None,
        started_at=None,
        nominated_at=None,
    )


def test_held_pods_are_the_plain_filter_and_order() -> None:
    rng = random.Random(1)
    for job_id in range(1500):
        job = random_job(rng, job_id)
        pods = [random_pod(rng, job_id * 10 + n, job_id) for n in range(rng.randint(0, 8))]
        held = assembly.held_pods(job, pods)
        assert held == plain_held_pods(job, pods)
        assert all(map(lambda a, b: a is b, held, plain_held_pods(job, pods)))


def test_an_engine_job_info_is_the_plain_one_with_or_without_the_topology_memo() -> None:
    rng = random.Random(2)
    maker = assembly.InfoMaker({})
    quota_names = {1: "team-a", 2: "team-b"}
    for n in range(1500):
        members = [random_job(rng, n * 10 + i) for i in range(rng.choice([1, 1, 2, 3, 4]))]
        keys = tuple(f"team-a/p-{i}" for i in range(rng.randint(0, 3)))
        plain = plain_engine_job_info(f"e-{n}", members, keys, quota_names)
        assert snap.engine_job_info(f"e-{n}", members, keys, quota_names) == plain
        made = snap.engine_job_info(f"e-{n}", members, keys, quota_names, maker.topology)
        assert made == plain


def test_the_topology_memo_parses_each_document_object_once(monkeypatch) -> None:
    maker = assembly.InfoMaker({})
    parsed: list[Any] = []
    real = specs.parse_topology_rule

    def counted(spec: Any) -> Any:
        parsed.append(spec)
        return real(spec)

    monkeypatch.setattr(assembly, "parse_topology_rule", counted)
    for spec in SPECS * 3:
        assert maker.topology(spec) == real(spec)
    equal = {"gatherStrategy": [{"layer": "block", "strategy": "MustGather"}]}
    assert maker.topology(equal) == real(equal)  # an equal document, another object
    assert parsed == [*SPECS, equal]
