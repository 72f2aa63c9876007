"""Topology: the layers of a cluster, and the spine > block > node shape tests share."""

from __future__ import annotations

import factory

from koordweb import models
from tests.builders.cluster import ClusterFactory

SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"


class LayerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = models.TopologyLayer

    cluster = factory.SubFactory(ClusterFactory)
    name = "BlockLayer"


def topology(cluster: models.Cluster) -> None:
    """Spine > block > node, read from the SPINE and BLOCK node labels."""
    layers = (
        ("SpineLayer", "", [SPINE]),
        ("BlockLayer", "SpineLayer", [BLOCK]),
        ("NodeTopologyLayer", "BlockLayer", []),
    )
    for position, (name, parent, keys) in enumerate(layers):
        LayerFactory(
            cluster=cluster, name=name, parent_name=parent, label_keys=keys, position=position
        )
