"""Reads for the device heatmap: every accelerator card, what occupies it and how it is grouped.

Allocations come from running pods' `scheduling.koordinator.sh/device-allocated` annotation
(`{"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": 100, ...}}]}`); a card's
allocation is its gpu-core percent (NPUs and MLUs are type `gpu` in Koordinator's Device CR).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from django.db.models.fields.json import KeyTextTransform

from koordweb.device_allocated import card_ai_cores, card_share_percent, parse_device_allocation
from koordweb.models import Cluster, Device, Pod
from koordweb.selectors.topology import OCCUPYING_PHASES, label_tree, node_paths
from scheduler.vocabulary import (
    ANNOTATION_DEVICE_ALLOCATED,
    CAMBRICON_MLU,
    GPU_MEMORY_RATIO,
    HUAWEI_NPU,
    NVIDIA_GPU,
)

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
    # Per filter, how many cards each of its choices would show with the other filters as
    # they are: {"show": {"idle": 3, ...}, "team": {"team-a": 16}, "model": {"H100": 40}}.
    facets: dict[str, dict[str, int]] = field(default_factory=dict)
    model_vendors: dict[str, str] = field(default_factory=dict)  # model -> vendor, every card


# What the devices page's "cards" filter shows: every card, or those in one state.
CARD_STATES = {
    "allocated": "allocated",
    "idle": "allocated but idle",
    "free": "free",
}


@dataclass(frozen=True)
class CardFilter:
    """The devices page's filters. `model` is the Device CR's model ("H800"), `team` the quota
    of a job holding the card, `show` a key of CARD_STATES ("" every card)."""

    vendor: str = ""
    group: str = ""
    model: str = ""
    team: str = ""
    show: str = ""


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
    filters: CardFilter | None = None,
    idle_jobs: frozenset[int] = frozenset(),
    teams: set[str] | None = None,
    job_label: Callable[[int | None, str], str] = lambda job_id, name: name,
    offset: int = 0,
    limit: int = 200,
) -> DeviceGrid:
    """Cards of type gpu grouped by the domain above the node, with their pods' shares.

    `filters` narrows the cards (vendor and block in the database; model, holding team and
    state here, after every card's holders are read in one query); a node row is shown when
    one of its cards matches, with only its matching cards. `idle_jobs` are the jobs whose
    cards are idle now (a card is idle when every job holding it is); `teams` the teams a
    viewer may filter and count by (None: all). `job_label(job_id, job_name)` lets the caller
    hide jobs a tenant may not see.

    At 1,000 nodes every card is counted for the filters but only the page's cards are built
    (`Card`, `CardUse`): the counts work on plain rows, one match per distinct kind of card.
    """
    filters = filters or CardFilter(vendor=vendor, group=group)
    paths = node_paths(label_tree(cluster))
    # unordered: the page sorts nodes by block and name, cards by minor
    devices = Device.objects.filter(node__cluster=cluster, device_type=Device.Type.GPU).order_by()
    if filters.vendor:
        devices = devices.filter(vendor=filters.vendor)
    rows = list(
        devices.values_list(
            "node__name", "minor", "vendor", "model", "numa_node", "pcie_id", "health"
        )
    )
    node_group: dict[str, str] = {}
    model_vendors: dict[str, str] = {}
    for node, _, dev_vendor, model, *_ in rows:
        if node not in node_group:
            path = paths.get(node)
            node_group[node] = path[-1].partition("/")[2] if path else OUTSIDE
        model_vendors.setdefault(model, dev_vendor)
    groups = sorted(set(node_group.values()), key=natural_key)
    scope = [row for row in rows if not filters.group or node_group[row[0]] == filters.group]
    holdings = _card_holdings(cluster, {row[0] for row in scope})
    kinds: Counter[_Traits] = Counter()
    matching: dict[str, list[Any]] = defaultdict(list)
    matches: dict[_Traits, bool] = {}
    for row in scope:
        traits = _traits(row[3], holdings.get((row[0], row[1]), ()), idle_jobs, teams)
        kinds[traits] += 1
        found = matches.get(traits)
        if found is None:
            found = matches[traits] = _matches(traits, filters)
        if found:
            matching[row[0]].append(row)
    # Nodes outside the topology go last, after every block.
    ordered = sorted(
        ((node_group[n], n) for n in matching),
        key=lambda row: (row[0] == OUTSIDE, natural_key(row[0]), natural_key(row[1])),
    )
    page = ordered[offset : offset + limit]
    cards = [
        _card(row, node_group[node], holdings.get((node, row[1]), ()), job_label)
        for _, node in page
        for row in sorted(matching[node], key=lambda row: row[1])
    ]
    minors = sorted({card.minor for card in cards})
    facets = _facets(kinds, filters)
    return DeviceGrid(cards, page, minors, len(ordered), groups, facets, model_vendors)


@dataclass(frozen=True)
class _Holding:
    """One pod's allocation on one card, as read from its device-allocated annotation."""

    pod: str
    job_id: int | None
    job_name: str
    team: str
    resources: Mapping[str, int]


class _Traits(NamedTuple):
    """What the filters ask of one card: its model, the teams holding it, its state (a tuple:
    thousands of cards are counted by it)."""

    model: str
    teams: frozenset[str]
    state: str  # "free", "allocated" or "idle" (allocated, every holder idle)


def _traits(
    model: str,
    held: Sequence[_Holding],
    idle_jobs: frozenset[int],
    teams: set[str] | None,
) -> _Traits:
    job_ids = [use.job_id for use in held if use.job_id is not None]
    if not held:
        state = "free"
    elif job_ids and all(job_id in idle_jobs for job_id in job_ids):
        state = "idle"
    else:
        state = "allocated"
    named = frozenset(use.team for use in held if use.team and (teams is None or use.team in teams))
    return _Traits(model, named, state)


def _matches(traits: _Traits, filters: CardFilter, skip: str = "") -> bool:
    if skip != "model" and filters.model and traits.model != filters.model:
        return False
    if skip != "team" and filters.team and filters.team not in traits.teams:
        return False
    if skip != "show" and filters.show:
        # an idle card is allocated too
        wanted = {"allocated": ("allocated", "idle")}.get(filters.show, (filters.show,))
        if traits.state not in wanted:
            return False
    return True


def _facets(kinds: Mapping[_Traits, int], filters: CardFilter) -> dict[str, dict[str, int]]:
    """Each filter's choices counted with the other filters applied (a faceted search), over
    the distinct kinds of card and how many cards are of each."""
    facets: dict[str, dict[str, int]] = {"show": {}, "team": {}, "model": {}}
    for card, n in kinds.items():
        if _matches(card, filters, skip="model"):
            for model in ("", card.model):
                facets["model"][model] = facets["model"].get(model, 0) + n
        if _matches(card, filters, skip="team"):
            for team in ("", *card.teams):
                facets["team"][team] = facets["team"].get(team, 0) + n
        if _matches(card, filters, skip="show"):
            states = ("", card.state, "allocated") if card.state == "idle" else ("", card.state)
            for state in states:
                facets["show"][state] = facets["show"].get(state, 0) + n
    return facets


def _card_holdings(cluster: Cluster, nodes: set[str]) -> dict[tuple[str, int], list[_Holding]]:
    """(node, minor) -> the allocations the occupying pods on `nodes` hold on that card (every
    card of type gpu a pod's annotation names, whether or not a Device row lists it). Only the
    device-allocated annotation is read from the database, not the pods' whole annotations."""
    holdings: dict[tuple[str, int], list[_Holding]] = defaultdict(list)
    pods = (
        Pod.objects.filter(cluster=cluster, node__isnull=False, phase__in=OCCUPYING_PHASES)
        .annotate(allocated=KeyTextTransform(ANNOTATION_DEVICE_ALLOCATED, "annotations"))
        .values_list("node__name", "name", "job_id", "job__name", "job__quota__name", "allocated")
    )
    for node, pod, job_id, job_name, team, allocated in pods:
        if node not in nodes or not allocated:
            continue
        for device_type, minor, resources in _allocation(allocated):
            if device_type == "gpu":
                holdings[(node, minor)].append(
                    _Holding(pod, job_id, job_name or "", team or "", resources)
                )
    return holdings


@lru_cache(maxsize=4096)
def _allocation(raw: str) -> tuple[tuple[str, int, Mapping[str, int]], ...]:
    """A device-allocated annotation read once per distinct text: at 1,000 nodes most pods of
    a gang hold the same cards the same way, and the page reads every pod on each request."""
    return tuple(
        (kind, minor, MappingProxyType(resources))
        for kind, minor, resources in parse_device_allocation(raw)
    )


def _card(
    row: tuple[Any, ...],
    group: str,
    held: Sequence[_Holding],
    job_label: Callable[[int | None, str], str],
) -> Card:
    """A page's card with its pods' shares (a tenant sees other tenants' jobs unnamed)."""
    node, minor, vendor, model, numa, pcie, health = row
    card = Card(node, group, minor, vendor, model, numa, pcie, health)
    for use in held:
        label = job_label(use.job_id, use.job_name)
        card.uses.append(
            CardUse(
                job=label,
                pod=use.pod if label == use.job_name else "",
                core=card_share_percent(use.resources),
                memory_ratio=int(use.resources.get(GPU_MEMORY_RATIO, 0)),
                job_id=use.job_id,
                ai_cores=card_ai_cores(use.resources),
            )
        )
    return card


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
    devices = Device.objects.filter(
        node__cluster=cluster, device_type=Device.Type.GPU, health=True
    ).values_list("node__name", "minor", "vendor")
    for node, minor, vendor in devices:
        kind = VENDOR_CARDS.get(vendor, NVIDIA_GPU)
        kind_of[(node, minor)] = kind
        tallies[node].setdefault(kind, CardTally()).cards += 1
    held: dict[tuple[str, int], int] = defaultdict(int)
    pods = Pod.objects.filter(
        cluster=cluster, node__isnull=False, phase__in=OCCUPYING_PHASES
    ).values_list("node__name", "annotations")
    for node, pod_annotations in pods:
        for device_type, minor, resources in parse_device_allocation(
            (pod_annotations or {}).get(ANNOTATION_DEVICE_ALLOCATED)
        ):
            if device_type == "gpu" and (node, minor) in kind_of:
                held[(node, minor)] += max(1, card_share_percent(resources))
    for (node, minor), kind in kind_of.items():
        tally = tallies[node][kind]
        share = min(100, held.get((node, minor), 0))
        tally.held += share / 100
        tally.free += int(share == 0)
    return tallies


def device_counts(cluster: Cluster) -> tuple[int, int, int]:
    """(cards, unhealthy cards, nodes with cards) over the whole cluster."""
    devices = Device.objects.filter(node__cluster=cluster, device_type=Device.Type.GPU)
    cards = devices.count()
    unhealthy = devices.filter(health=False).count()
    nodes = devices.values("node_id").distinct().count()
    return cards, unhealthy, nodes
