"""A cluster's own rows: the cluster, its nodes, its priority classes and its quotas."""

from __future__ import annotations

import factory

from koordweb import models

# Bytes in a GiB, for memory amounts.
GIB = 1024**3


class ClusterFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Cluster
        django_get_or_create = ("name",)

    name = "default"


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.Node

    cluster = factory.SubFactory(ClusterFactory)
    name = factory.Sequence(lambda n: f"node-{n}")
    allocatable = factory.LazyFunction(
        lambda: {"cpu": 64000, "memory": 512 * 2**30, "pods": 110, "nvidia.com/gpu": 8}
    )
    capacity = factory.LazyAttribute(lambda node: dict(node.allocatable))


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
