"""The cluster's accelerator cards read and counted: which cards there are (`cluster_cards`), what
the occupying pods hold of each (`card_allocations`, the one read of their device-allocated
annotations), and the cards counted per accelerator model for the overview, per node and kind
for the topology page, and over the whole cluster.

Koordinator's Device CR types NPUs and MLUs `gpu` too; the share of a card an allocation holds is
`device_allocated.card_share_percent`. The device heatmap's reads are `selectors.devices`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from django.db.models import QuerySet
from django.db.models.fields.json import KeyTextTransform

from koordweb.device_allocated import card_share_percent, parse_device_allocation
from koordweb.models import Cluster, Device, Pod
from koordweb.selectors.topology import OCCUPYING_PHASES
from scheduler.vocabulary import ANNOTATION_DEVICE_ALLOCATED, CAMBRICON_MLU, HUAWEI_NPU, NVIDIA_GPU

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


def cluster_cards(cluster: Cluster) -> QuerySet[Device]:
    """The cluster's accelerator cards: its Device rows of type gpu (Koordinator's Device CR
    types NPUs and MLUs `gpu` too), healthy or not."""
    return Device.objects.filter(node__cluster=cluster, device_type=Device.Type.GPU)


def card_allocations(
    cluster: Cluster, *columns: str, nodes: Container[str] | None = None
) -> Iterator[tuple[str, int, Mapping[str, int], tuple[Any, ...]]]:
    """(node name, minor, resources, the pod's `columns`) for every allocation of a card of type
    gpu that an occupying pod of the cluster holds (on `nodes`, None: every node), whether or not
    a Device row lists the card: the one read of the pods' allocations, for the heatmap
    (`selectors.devices`) and the counts here. Only the device-allocated annotation is read from
    the database, not the pods' whole annotations."""
    pods = (
        Pod.objects.filter(cluster=cluster, node__isnull=False, phase__in=OCCUPYING_PHASES)
        .annotate(allocated=KeyTextTransform(ANNOTATION_DEVICE_ALLOCATED, "annotations"))
        .values_list("node__name", "allocated", *columns)
    )
    for node, allocated, *values in pods:
        if not allocated or (nodes is not None and node not in nodes):
            continue
        for device_type, minor, resources in _allocation(allocated):
            if device_type == "gpu":
                yield node, minor, resources, tuple(values)


@lru_cache(maxsize=4096)
def _allocation(raw: str) -> tuple[tuple[str, int, Mapping[str, int]], ...]:
    """A device-allocated annotation read once per distinct text: at 1,000 nodes most pods of
    a gang hold the same cards the same way, and the page reads every pod on each request."""
    return tuple(
        (kind, minor, MappingProxyType(resources))
        for kind, minor, resources in parse_device_allocation(raw)
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
    rows = cluster_cards(cluster).values_list("node__name", "minor", "vendor", "model", "health")
    for node, minor, vendor, model, health in rows:
        totals[(vendor, model)] += 1
        healthy[(vendor, model)] += 1 if health else 0
        model_of[(node, minor)] = (vendor, model)
    # Every share counts, on unhealthy cards too and past a whole card (the topology's tallies
    # below count healthy cards only, each at most whole).
    used: dict[tuple[str, str], float] = defaultdict(float)
    for node, minor, resources, _ in card_allocations(cluster):
        key = model_of.get((node, minor))
        if key:
            used[key] += card_share_percent(resources) / 100
    return [
        AcceleratorUse(card_model_text(v, m), n, healthy[(v, m)], round(used[(v, m)], 2))
        for (v, m), n in sorted(totals.items())
    ]


# The whole-card resource a vendor's cards are named by ("NPUs" for an Ascend card held in AI
# cores): Koordinator's Device CR types them all `gpu`.
VENDOR_CARDS = {"nvidia": NVIDIA_GPU, "huawei": HUAWEI_NPU, "cambricon": CAMBRICON_MLU}


@dataclass
class CardTally:
    """One node's healthy cards of one kind: how many, how much of them is held (in cards,
    shares summed) and how many no pod holds any part of."""

    cards: int = 0
    held: float = 0.0
    free: int = 0


def node_card_tallies(cluster: Cluster) -> dict[str, dict[str, CardTally]]:
    """Node name -> card resource (`VENDOR_CARDS`) -> its healthy cards, held and free, from
    the Device rows and the bound pods' device-allocated annotations: the topology page names
    an Ascend or Cambricon domain by its cards even where the node reports only shares."""
    kind_of: dict[tuple[str, int], str] = {}
    tallies: dict[str, dict[str, CardTally]] = defaultdict(dict)
    devices = cluster_cards(cluster).filter(health=True)
    for node, minor, vendor in devices.values_list("node__name", "minor", "vendor"):
        kind = VENDOR_CARDS.get(vendor, NVIDIA_GPU)
        kind_of[(node, minor)] = kind
        tallies[node].setdefault(kind, CardTally()).cards += 1
    # Any holding makes a card not free, however small its share (as the heatmap's "free").
    held: dict[tuple[str, int], int] = defaultdict(int)
    for node, minor, resources, _ in card_allocations(cluster):
        if (node, minor) in kind_of:
            held[(node, minor)] += max(1, card_share_percent(resources))
    for (node, minor), kind in kind_of.items():
        tally = tallies[node][kind]
        share = min(100, held.get((node, minor), 0))
        tally.held += share / 100
        tally.free += int(share == 0)
    return tallies


def device_counts(cluster: Cluster) -> tuple[int, int, int]:
    """(cards, unhealthy cards, nodes with cards) over the whole cluster."""
    devices = cluster_cards(cluster)
    cards = devices.count()
    unhealthy = devices.filter(health=False).count()
    nodes = devices.values("node_id").distinct().count()
    return cards, unhealthy, nodes
