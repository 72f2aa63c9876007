"""Reads for the device heatmap: every accelerator card, what occupies it and how it is grouped.

Allocations come from running pods' `scheduling.koordinator.sh/device-allocated` annotation
(`{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": 100, ...}}]}`); a card's
allocation is its gpu-core percent (NPUs and MLUs are type `gpu` in Koordinator's Device CR).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from koordweb.device_allocated import card_ai_cores, card_share_percent, parse_device_allocation
from koordweb.models import Cluster, Device, Pod
from koordweb.selectors.topology import (
    OCCUPYING_PHASES,
    cluster_layers,
    layer_chain,
    node_domains,
)
from scheduler.vocabulary import ANNOTATION_DEVICE_ALLOCATED, GPU_MEMORY_RATIO

# The filter's labels, keyed by the vendor value Koordinator puts on nodes and devices.
VENDORS = {"nvidia": "NVIDIA", "huawei": "Ascend", "cambricon": "Cambricon"}
# A vendor's words before its model, as people say the card: "Huawei Ascend 910B3".
VENDOR_WORDS = {"nvidia": "NVIDIA", "huawei": "Huawei Ascend", "cambricon": "Cambricon"}


def card_model_text(vendor: str, model: str) -> str:
    """'Huawei Ascend 910B3' for ("huawei", "Ascend-910B3"), 'NVIDIA H800': the vendor's words
    once, even when the model label repeats them."""
    words = VENDOR_WORDS.get(vendor, vendor)
    for word in words.split():
        if model.lower().startswith(word.lower()):
            model = model[len(word) :].lstrip(" -_")
    return f"{words} {model}".strip() or "?"


# NVLink partition tables Koordinator builds in for these 8-card models: pairs and quads.
NVLINK_MODELS = ("H100", "H800", "H20")
NVLINK_PARTITIONS = ((0, 1, 2, 3), (4, 5, 6, 7))
OUTSIDE = "(outside)"


@dataclass
class CardUse:
    """One pod's share of one card (`core`: percent of the card, `device_allocated`), and the
    Ascend AI cores it holds."""

    job: str
    pod: str
    core: int
    memory_ratio: int
    job_id: int | None = None
    ai_cores: int = 0


@dataclass
class Card:
    node: str
    group: str
    minor: int
    vendor: str
    model: str
    numa: int | None
    pcie: str
    healthy: bool
    uses: list[CardUse] = field(default_factory=list)

    @property
    def core_used(self) -> int:
        """The share of the card its pods hold, percent."""
        return min(100, sum(use.core for use in self.uses))

    @property
    def shared(self) -> bool:
        """A card split between pods, or holding a fractional request."""
        return len(self.uses) > 1 or 0 < self.core_used < 100

    @property
    def nvlink(self) -> str:
        if not any(m in self.model for m in NVLINK_MODELS):
            return ""
        part = next((p for p in NVLINK_PARTITIONS if self.minor in p), None)
        return f"{part[0]}-{part[-1]}" if part else ""


@dataclass
class DeviceGrid:
    cards: list[Card]
    rows: list[tuple[str, str]]  # (group, node), in display order
    minors: list[int]
    row_count: int  # before pagination
    groups: list[str]


def natural_key(name: str) -> tuple[tuple[int, int | str], ...]:
    """Sort 'b2' before 'b10': digit runs compare as numbers."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", name) if part
    )


def device_grid(
    cluster: Cluster,
    *,
    vendor: str = "",
    group: str = "",
    job_label: Callable[[int, str], str] = lambda job_id, name: name,
    offset: int = 0,
    limit: int = 200,
) -> DeviceGrid:
    """Cards of type gpu grouped by the domain above the node, with their pods' shares.

    `job_label(job_id, job_name)` lets the caller hide jobs a tenant may not see.
    """
    chain = layer_chain(cluster_layers(cluster))
    devices = Device.objects.filter(node__cluster=cluster, device_type=Device.Type.GPU)
    if vendor:
        devices = devices.filter(vendor=vendor)
    rows = devices.values_list(
        "node__name", "node__labels", "minor", "vendor", "model", "numa_node", "pcie_id", "health"
    )
    by_node: dict[str, list[Card]] = defaultdict(list)
    node_group: dict[str, str] = {}
    for node, labels, minor, dev_vendor, model, numa, pcie, health in rows:
        if node not in node_group:
            path = node_domains(chain, node, labels or {}) if chain else []
            node_group[node] = path[-1].partition("/")[2] if path else OUTSIDE
        card = Card(node, node_group[node], minor, dev_vendor, model, numa, pcie, health)
        by_node[node].append(card)
    groups = sorted(set(node_group.values()), key=natural_key)
    # Nodes outside the topology go last, after every block.
    ordered = sorted(
        ((node_group[n], n) for n in by_node if not group or node_group[n] == group),
        key=lambda row: (row[0] == OUTSIDE, natural_key(row[0]), natural_key(row[1])),
    )
    page = ordered[offset : offset + limit]
    shown = {node for _, node in page}
    cards = [card for node in shown for card in by_node[node]]
    _attach_uses(cluster, {(c.node, c.minor): c for c in cards}, shown, job_label)
    minors = sorted({card.minor for card in cards})
    return DeviceGrid(cards, page, minors, len(ordered), groups)


def _attach_uses(
    cluster: Cluster,
    index: dict[tuple[str, int], Card],
    nodes: set[str],
    job_label: Callable[[int, str], str],
) -> None:
    pods = Pod.objects.filter(
        cluster=cluster, node__name__in=nodes, phase__in=OCCUPYING_PHASES
    ).values_list("node__name", "name", "job_id", "job__name", "annotations")
    for node, pod, job_id, job_name, pod_annotations in pods:
        for device_type, minor, resources in parse_device_allocation(
            (pod_annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
        ):
            card = index.get((node, minor))
            if device_type != "gpu" or card is None:
                continue
            label = job_label(job_id, job_name)
            card.uses.append(
                CardUse(
                    job=label,
                    pod=pod if label == job_name else "",
                    core=card_share_percent(resources),
                    memory_ratio=int(resources.get(GPU_MEMORY_RATIO, 0)),
                    job_id=job_id,
                    ai_cores=card_ai_cores(resources),
                )
            )


@dataclass(frozen=True)
class AcceleratorUse:
    """Cards of one accelerator model: all, healthy, and allocated (shares summed)."""

    model: str
    total: int
    healthy: int
    allocated: float


def device_type_usage(cluster: Cluster) -> list[AcceleratorUse]:
    """Cards, healthy cards and cards allocated per accelerator model, for the overview."""
    totals: dict[tuple[str, str], int] = defaultdict(int)
    healthy: dict[tuple[str, str], int] = defaultdict(int)
    model_of: dict[tuple[str, int], tuple[str, str]] = {}
    devices = Device.objects.filter(node__cluster=cluster, device_type=Device.Type.GPU)
    rows = devices.values_list("node__name", "minor", "vendor", "model", "health")
    for node, minor, vendor, model, health in rows:
        totals[(vendor, model)] += 1
        healthy[(vendor, model)] += 1 if health else 0
        model_of[(node, minor)] = (vendor, model)
    used: dict[tuple[str, str], float] = defaultdict(float)
    pods = Pod.objects.filter(
        cluster=cluster, node__isnull=False, phase__in=OCCUPYING_PHASES
    ).values_list("node__name", "annotations")
    for node, pod_annotations in pods:
        for device_type, minor, resources in parse_device_allocation(
            (pod_annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
        ):
            key = model_of.get((node, minor))
            if device_type == "gpu" and key:
                used[key] += card_share_percent(resources) / 100
    return [
        AcceleratorUse(card_model_text(v, m), n, healthy[(v, m)], round(used[(v, m)], 2))
        for (v, m), n in sorted(totals.items())
    ]


def device_counts(cluster: Cluster) -> tuple[int, int, int]:
    """(cards, unhealthy cards, nodes with cards) over the whole cluster."""
    devices = Device.objects.filter(node__cluster=cluster, device_type=Device.Type.GPU)
    cards = devices.count()
    unhealthy = devices.filter(health=False).count()
    nodes = devices.values("node_id").distinct().count()
    return cards, unhealthy, nodes
