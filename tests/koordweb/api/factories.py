"""factory_boy factories for the API tests: clusters, nodes, quotas, jobs and their records."""

from __future__ import annotations

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from koordweb import models


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.django.Password("pw-for-tests-only")


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Cluster
        django_get_or_create = ("name",)

    name = "default"


class LayerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.TopologyLayer

    cluster = factory.SubFactory(ClusterFactory)
    name = "BlockLayer"


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Node

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"node-{n}")
    allocatable = factory.LazyFunction(
        lambda: {"cpu": 64000, "memory": 512 * 2**30, "pods": 110, "nvidia.com/gpu": 8}
    )
    capacity = factory.LazyAttribute(lambda node: dict(node.allocatable))


class DeviceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Device

    node = factory.SubFactory(NodeFactory)
    device_type = "gpu"
    vendor = "nvidia"
    model = "H100"
    minor = factory.Sequence(lambda n: n)
    resources = factory.LazyFunction(
        lambda: {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100}
    )


class PriorityClassFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.PriorityClass

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"class-{n}")
    value = 5000


class QuotaFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.ElasticQuota
        skip_postgeneration_save = True

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"quota-{n}")
    min = factory.LazyFunction(lambda: {"cpu": 64000, "nvidia.com/gpu": 8})
    max = factory.LazyFunction(lambda: {"cpu": 128000, "nvidia.com/gpu": 16})

    @factory.post_generation
    def members(self, create: bool, extracted: list[object] | None, **kwargs: object) -> None:
        if create and extracted:
            self.members.add(*extracted)


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
