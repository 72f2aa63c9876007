"""Scheduling rounds and what they record: decisions, preemptions and their victims; and one
round run for real on the simulated backend.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import factory
from django.utils import timezone

from koordweb import models
from tests.builders.cluster import ClusterFactory
from tests.builders.jobs import JobFactory


class RoundFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Round

    cluster = factory.SubFactory(ClusterFactory)
    state = "succeeded"
    started_at = factory.LazyFunction(timezone.now)


class DecisionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Decision

    round = factory.SubFactory(RoundFactory, cluster=factory.SelfAttribute("..job.cluster"))
    job = factory.SubFactory(JobFactory)
    outcome = "unschedulable"
    reason = "no candidate topology nodes can accommodate job"
    created_at = factory.LazyFunction(timezone.now)


class PreemptionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Preemption

    preemptor = factory.SubFactory(JobFactory)
    cluster = factory.SelfAttribute("preemptor.cluster")
    state = "enacted"
    reason = "higher priority job needs the block"
    cost = factory.LazyFunction(lambda: {"victim_jobs": 1, "max_victim_priority": 1})
    created_at = factory.LazyFunction(timezone.now)


class VictimFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.PreemptionVictim

    preemption = factory.SubFactory(PreemptionFactory)
    job = factory.SubFactory(JobFactory)
    pods = factory.LazyFunction(list)
    freed = factory.LazyFunction(lambda: {"nvidia.com/gpu": 8})


def simulated_round(cluster: models.Cluster, now: datetime | None = None) -> Any:
    """One manual round of `cluster` on the simulated backend at `now`; its outcome."""
    from koordweb.backends.simulated import SimulatedBackend
    from koordweb.engine.pipeline import round_execute

    return round_execute(
        cluster=cluster,
        backend=SimulatedBackend(),
        trigger=models.Round.Trigger.MANUAL,
        now=now or timezone.now(),
    )
