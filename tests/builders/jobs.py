"""Jobs and their pods: the rows, a gang of pods (pending, or running on nodes) and an API body."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import factory
from django.utils import timezone

from koordweb import models
from koordweb.models import JobState, PodPhase
from tests.builders.cluster import ClusterFactory, QuotaFactory


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Job

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"job-{n}")
    quota = factory.SubFactory(QuotaFactory, cluster=factory.SelfAttribute("..cluster"))
    submitted_at = factory.LazyFunction(timezone.now)
    total_number = 2
    min_available = 2


class PodFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Pod

    job = factory.SubFactory(JobFactory)
    cluster = factory.SelfAttribute("job.cluster")
    namespace = factory.SelfAttribute("job.namespace")
    name = factory.Sequence(lambda n: f"pod-{n}")
    requests = factory.LazyFunction(lambda: {"cpu": 4000, "nvidia.com/gpu": 1})
    created_at = factory.LazyFunction(timezone.now)


def gang(
    cluster: models.Cluster,
    name: str,
    *,
    quota: models.ElasticQuota,
    priority_class: models.PriorityClass | None = None,
    replicas: int = 1,
    requests: dict[str, int] | None = None,
    gather: tuple[str, str] | None = None,
    nodes: list[models.Node] | None = None,
    annotations: dict[str, str] | None = None,
    now: datetime | None = None,
    **job_fields: Any,
) -> models.Job:
    """A gang job of `replicas` pods, all or none; on `nodes` (one pod each) it is running.

    `gather` is (layer, strategy), e.g. ("BlockLayer", "MustGather").
    """
    now = now or timezone.now()
    spec = {"gatherStrategy": [{"layer": gather[0], "strategy": gather[1]}]} if gather else {}
    job_fields.setdefault("submitted_at", now - timedelta(minutes=5))
    if nodes:
        job_fields.setdefault("state", JobState.RUNNING)
        job_fields.setdefault("started_at", now)
    namespace = job_fields.pop("namespace", quota.namespace or "default")
    job = JobFactory(
        cluster=cluster,
        name=name,
        namespace=namespace,
        quota=quota,
        priority_class=priority_class,
        priority=priority_class.value if priority_class else 0,
        total_number=replicas,
        min_available=replicas,
        topology_spec=spec,
        gang_group=f"{namespace}/{name}",
        **job_fields,
    )
    for index in range(replicas):
        node = nodes[index] if nodes else None
        PodFactory(
            job=job,
            name=f"{name}-{index}",
            requests=dict(requests or {"cpu": 8000, "nvidia.com/gpu": 8}),
            priority=job.priority,
            priority_class_name=priority_class.name if priority_class else "",
            labels={"quota.scheduling.koordinator.sh/name": quota.name},
            annotations=dict(annotations or {}),
            node=node,
            phase=PodPhase.RUNNING if node else PodPhase.PENDING,
            bound_at=now if node else None,
            started_at=now if node else None,
            created_at=now,
        )
    return job


def submission(**overrides: Any) -> dict[str, Any]:
    """A valid job submission for team-a of `teams()`, with `overrides`."""
    body: dict[str, Any] = {
        "name": "train",
        "quota": "team-a",
        "priority_class": "koord-prod",
        "replicas": 2,
        "pod": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}},
        "topology": {"gather": [{"layer": "BlockLayer", "strategy": "MustGather"}]},
        "duration_seconds": 3600,
    }
    body.update(overrides)
    return body
