"""Accelerators: GPU (or NPU) nodes with their cards, pods' card allocations and koordlet's
card usage reports.
"""

from __future__ import annotations

import json
from datetime import datetime

import factory

from koordweb import models
from tests.builders.cluster import GIB, NodeFactory
from tests.builders.jobs import gang
from tests.builders.topology import BLOCK, SPINE

DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"


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


def gpu_node(
    cluster: models.Cluster,
    name: str,
    *,
    block: str,
    spine: str = "",
    cards: int = 8,
    vendor: str = "nvidia",
    model: str = "H100",
    resource: str = "nvidia.com/gpu",
    cpu: int = 64000,
    unhealthy: tuple[int, ...] = (),
) -> models.Node:
    """A node in `block` (and `spine`, when given) with `cards` accelerators of one kind."""
    labels = {BLOCK: block, "node.koordinator.sh/gpu-vendor": vendor}
    if spine:
        labels[SPINE] = spine
    node = NodeFactory(
        cluster=cluster,
        name=name,
        labels=labels,
        allocatable={"cpu": cpu, "memory": 512 * GIB, "pods": 110, resource: cards},
    )
    for minor in range(cards):
        DeviceFactory(
            node=node,
            vendor=vendor,
            model=model,
            minor=minor,
            numa_node=minor // 4,
            pcie_id=f"pci{minor // 2}",
            health=minor not in unhealthy,
        )
    return node


def card_allocation(shares: dict[int, int]) -> dict[str, str]:
    """The device-allocated annotation of a pod holding, per card minor, a gpu-core percent."""
    cards = [{"minor": m, "resources": {"koordinator.sh/gpu-core": c}} for m, c in shares.items()]
    return {DEVICE_ALLOCATED: json.dumps({"gpu": cards})}


def whole_cards(count: int) -> dict[str, str]:
    """The device-allocated annotation of a pod holding cards 0 .. count-1 whole."""
    return card_allocation(dict.fromkeys(range(count), 100))


def card_report(
    node: models.Node, at: datetime, cards: dict[int, int], pods: dict[str, dict[int, int]]
) -> models.NodeMetric:
    """A koordlet NodeMetric: each card's busy percent, and per pod (namespace/name) its busy
    percent on each card it holds."""
    return models.NodeMetric.objects.create(
        node=node,
        reported_at=at,
        gpu_usage={
            str(m): {"koordinator.sh/gpu-core": b, "koordinator.sh/gpu-memory": 10 * GIB}
            for m, b in cards.items()
        },
        pod_gpu_usage={
            pod: {str(m): {"koordinator.sh/gpu-core": b} for m, b in usage.items()}
            for pod, usage in pods.items()
        },
    )


def card_holder(
    quota: models.ElasticQuota, node: models.Node, shares: dict[int, int], name: str
) -> models.Job:
    """A running one-pod job of `quota` (in its namespace) on `node`, holding per card minor a
    gpu-core percent."""
    return gang(
        node.cluster,
        name,
        quota=quota,
        namespace=quota.name,
        nodes=[node],
        requests={"cpu": 4000, "nvidia.com/gpu": 1},
        annotations=card_allocation(shares),
    )
