"""Reads for the device heatmap page: every accelerator card, what occupies it and how it is
grouped, a page of node rows at a time.

A card's allocation is each holding pod's share of it, from their device-allocated annotations
(read by `selectors.card_tallies.card_allocations`, which also counts the cards for the overview
and the topology page); the page's filters and the counts beside their choices are
`selectors.device_filters`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from koordweb.device_allocated import card_ai_cores, card_share_percent
from koordweb.models import Cluster
from koordweb.selectors.card_tallies import card_allocations, cluster_cards
from koordweb.selectors.device_filters import (
    CardFilter,
    CardTraits,
    card_matches,
    card_traits,
    filter_facets,
)
from koordweb.selectors.topology import label_tree, node_paths
from scheduler.vocabulary import GPU_MEMORY_RATIO, natural_key

# The filter's labels, keyed by the vendor value Koordinator puts on nodes and devices.
VENDORS = {"nvidia": "NVIDIA", "huawei": "Ascend", "cambricon": "Cambricon"}
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


def device_grid(
    cluster: Cluster,
    *,
    vendor: str = "",
    group: str = "",
    filters: CardFilter | None = None,
    idle_cards: frozenset[tuple[str, int]] = frozenset(),
    teams: set[str] | None = None,
    job_label: Callable[[int | None, str], str] = lambda job_id, name: name,
    offset: int = 0,
    limit: int = 200,
) -> DeviceGrid:
    """Cards of type gpu grouped by the domain above the node, with their pods' shares.

    `filters` narrows the cards (vendor and block in the database; model, holding team and
    state here, after every card's holders are read in one query); a node row is shown when
    one of its cards matches, with only its matching cards. `idle_cards` are the cards
    (node name, minor) allocated but idle now (`gpu_usage.cards_idle_now`); `teams` the teams a
    viewer may filter and count by (None: all). `job_label(job_id, job_name)` lets the caller
    hide jobs a tenant may not see.

    At 1,000 nodes every card is counted for the filters but only the page's cards are built
    (`Card`, `CardUse`): the counts work on plain rows, one match per distinct kind of card.
    """
    filters = filters or CardFilter(vendor=vendor, group=group)
    paths = node_paths(label_tree(cluster))
    # unordered: the page sorts nodes by block and name, cards by minor
    devices = cluster_cards(cluster).order_by()
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
    kinds: Counter[CardTraits] = Counter()
    matching: dict[str, list[Any]] = defaultdict(list)
    matches: dict[CardTraits, bool] = {}
    for row in scope:
        card = (row[0], row[1])
        traits = card_traits(row[3], holdings.get(card, ()), card in idle_cards, teams)
        kinds[traits] += 1
        found = matches.get(traits)
        if found is None:
            found = matches[traits] = card_matches(traits, filters)
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
    facets = filter_facets(kinds, filters)
    return DeviceGrid(cards, page, minors, len(ordered), groups, facets, model_vendors)


@dataclass(frozen=True)
class _Holding:
    """One pod's allocation on one card, as read from its device-allocated annotation."""

    pod: str
    job_id: int | None
    job_name: str
    team: str
    resources: Mapping[str, int]


def _card_holdings(cluster: Cluster, nodes: set[str]) -> dict[tuple[str, int], list[_Holding]]:
    """(node, minor) -> the allocations the occupying pods on `nodes` hold on that card (every
    card of type gpu a pod's annotation names, whether or not a Device row lists it)."""
    holdings: dict[tuple[str, int], list[_Holding]] = defaultdict(list)
    allocations = card_allocations(
        cluster, "name", "job_id", "job__name", "job__quota__name", nodes=nodes
    )
    for node, minor, resources, (pod, job_id, job_name, team) in allocations:
        holdings[(node, minor)].append(_Holding(pod, job_id, job_name or "", team or "", resources))
    return holdings


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
