"""Reads for the topology page and API: the engine's domain tree with totals and offer slots.

The tree, its domain keys and the free "slots" are the engine's (`scheduler.api`), asked on the
snapshot a round reads: a block name used under two spines is two blocks here as in a decision,
a cordoned or tainted node offers no slots, and GPUs are counted as the resource-fit filter
counts them. This module only sums the engine's per-node answers into the domains the page
shows, with the reported usage beside them. Nodes outside the tree are listed, never dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from koordweb.engine.reads import cluster_read
from koordweb.models import Cluster, Node, Pod, PodPhase, TopologyLayer
from scheduler.api import PodTemplate, topology_domains, whole_cards
from scheduler.api import TopologyTree as EngineTree
from scheduler.api import topology_tree as engine_topology_tree
from scheduler.model import NodeInfo, TopologyLayerSpec, TopologySpec
from scheduler.vocabulary import CLUSTER_LAYER, NODE_LAYER

ROOT_KEY = f"{CLUSTER_LAYER}/"  # the engine's key of the root domain
# Pods that hold resources on their node: bound (still Pending) or Running.
OCCUPYING_PHASES = (PodPhase.PENDING, PodPhase.RUNNING)


@dataclass
class DomainTotals:
    """One topology domain (or the root, or a node leaf) with totals summed from its nodes."""

    key: str
    layer: str
    name: str
    parent: str
    capacity: dict[str, int] = field(default_factory=dict)
    allocated: dict[str, int] = field(default_factory=dict)
    slots: int = 0
    node_count: int = 0
    # Reported usage (NodeMetric) of the nodes that report, their allocatable, and how many
    # nodes are above a load-aware threshold.
    used: dict[str, int] = field(default_factory=dict)
    reporting: dict[str, int] = field(default_factory=dict)
    busy_nodes: int = 0
    # Healthy cards per card resource (nvidia.com/gpu, huawei.com/npu, cambricon.com/mlu) from
    # the Device rows: how many, the part held (in cards) and the cards nobody holds.
    cards: dict[str, int] = field(default_factory=dict)
    cards_held: dict[str, float] = field(default_factory=dict)
    cards_free: dict[str, int] = field(default_factory=dict)


@dataclass
class TopologyTotals:
    layers: list[str]
    domains: dict[str, DomainTotals]  # parents before children, depth first
    node_path: dict[str, list[str]]  # node name -> the keys of its domains, top layer first
    outside: list[str]


def _add(into: dict[str, int], amounts: Mapping[str, int]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, 0) + int(amount)


def node_allocations(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Requested resources summed per node name over the pods that occupy it."""
    allocated: dict[str, dict[str, int]] = defaultdict(dict)
    pods = Pod.objects.filter(
        cluster=cluster, node__isnull=False, phase__in=OCCUPYING_PHASES
    ).values_list("node__name", "requests")
    for node_name, requests in pods:
        _add(allocated[node_name], requests or {})
    return allocated


def cluster_topology(cluster: Cluster) -> TopologySpec | None:
    """The cluster's ClusterNetworkTopology layers as the engine reads them (None: no layers)."""
    rows = TopologyLayer.objects.filter(cluster=cluster).order_by("position")
    layers = tuple(
        TopologyLayerSpec(r.name, r.parent_name or None, tuple(r.label_keys or ())) for r in rows
    )
    return TopologySpec(layers) if layers else None


def gather_layer_names(cluster: Cluster) -> list[str]:
    """The layers a job may gather in: every topology layer but the node layer, in order."""
    return list(
        TopologyLayer.objects.filter(cluster=cluster)
        .exclude(name=NODE_LAYER)
        .order_by("position")
        .values_list("name", flat=True)
    )


def label_tree(cluster: Cluster) -> EngineTree:
    """The engine's tree of the cluster from node labels alone (no snapshot needed)."""
    nodes = [
        NodeInfo(name=name, allocatable={}, labels=labels or {})
        for name, labels in Node.objects.filter(cluster=cluster).values_list("name", "labels")
    ]
    return engine_topology_tree(cluster_topology(cluster), nodes)


def nodes_outside_topology(cluster: Cluster) -> list[str]:
    """Names of the nodes that a topology exists for but that miss a higher layer's label."""
    tree = label_tree(cluster)
    return sorted(name for name, out in zip(tree.node_names, tree.outside, strict=True) if out)


def node_paths(tree: EngineTree) -> dict[str, list[str]]:
    """Node name -> the keys of its domains, top layer first ([] without layers); nodes outside
    the tree are left out."""
    paths: dict[str, list[str]] = {
        n: [] for n, out in zip(tree.node_names, tree.outside, strict=True) if not out
    }
    for found in topology_domains(tree, leaves=False):
        if found.level > 0:
            for i in found.nodes.tolist():
                paths[tree.node_names[i]].append(found.key)
    return paths


@dataclass(frozen=True)
class LayerChain:
    """The engine's tree of a cluster as `selectors/devices.py` still asks for it (through
    `cluster_layers`, `layer_chain`, `node_domains`), until it reads `node_paths` itself."""

    paths: dict[str, list[str]]
    layers: list[str]

    def __bool__(self) -> bool:
        return bool(self.layers)


def cluster_layers(cluster: Cluster) -> LayerChain:
    tree = label_tree(cluster)
    return LayerChain(node_paths(tree), list(tree.layers))


def layer_chain(chain: LayerChain) -> LayerChain:
    return chain


def node_domains(chain: LayerChain, node: str, labels: Mapping[str, str]) -> list[str]:
    """The node's domain keys from the top layer down ([] outside); the labels are the ones
    the tree was built from."""
    return chain.paths.get(node, [])


def topology_tree(
    cluster: Cluster,
    *,
    shape: Mapping[str, int] | None = None,
    include_nodes: bool = True,
    usage: Mapping[str, tuple[Mapping[str, int], bool]] | None = None,
    cards: Mapping[str, Mapping[str, Any]] | None = None,
) -> TopologyTotals:
    """The engine's domain tree with capacity, allocation and offer slots for `shape` summed
    upwards; with `usage` (node name -> reported usage, above a load-aware threshold) the
    usage too; with `cards` (node name -> card resource -> a tally with `cards`, `held` and
    `free`, `selectors.devices.node_card_tallies`) each domain's cards by kind."""
    read = cluster_read(cluster)
    engine = read.live()
    nodes = engine.nodes
    held = engine.held()
    slots = read.offer_slots(PodTemplate(dict(shape or {}))).tolist() if shape else None
    tree = engine.tree
    domains: dict[str, DomainTotals] = {}
    for found in topology_domains(tree, leaves=include_nodes):
        name = cluster.name if found.level == 0 else found.name
        domain = domains[found.key] = DomainTotals(found.key, found.layer, name, found.parent)
        for i in found.nodes.tolist():
            node = nodes[i]
            _add(domain.capacity, node.allocatable)
            _add(domain.allocated, held[i])
            domain.slots += slots[i] if slots is not None else 0
            domain.node_count += 1
            if usage is not None and node.name in usage:
                reported, busy = usage[node.name]
                _add(domain.used, reported)
                _add(domain.reporting, {k: node.allocatable.get(k, 0) for k in reported})
                domain.busy_nodes += int(busy)
            for kind, tally in (cards or {}).get(node.name, {}).items():
                domain.cards[kind] = domain.cards.get(kind, 0) + tally.cards
                domain.cards_held[kind] = domain.cards_held.get(kind, 0.0) + tally.held
                domain.cards_free[kind] = domain.cards_free.get(kind, 0) + tally.free
    outside = sorted(n.name for n, out in zip(nodes, tree.outside, strict=True) if out)
    return TopologyTotals(list(tree.layers), domains, node_paths(tree), outside)


def card_counts(cluster: Cluster) -> dict[str, dict[str, int]]:
    """Node name -> its whole cards per card resource (nvidia.com/gpu, huawei.com/npu,
    cambricon.com/mlu), counted by the engine's rule (`scheduler.api.whole_cards`): as the node
    reports them, else its healthy cards, GPUs never on an Ascend or Cambricon node. Read from
    the nodes-only read the pages share (its nodes offer `scheduler.api.node_offers`; what a node
    offers does not depend on the pods on it)."""
    nodes = cluster_read(cluster, nodes_only=True).snapshot.nodes
    return {node.name: whole_cards(node.allocatable) for node in nodes}


def accelerator_resources(cluster: Cluster) -> list[str]:
    """Extended resources that look like accelerators (GPU, NPU, MLU), for the shape form: as
    nodes report them, and whole cards as the engine counts them from the Device CRs."""
    names = {r for cards in card_counts(cluster).values() for r in cards}
    for reported in Node.objects.filter(cluster=cluster).values_list("allocatable", flat=True):
        names.update(k for k in (reported or {}) if is_accelerator(k))
    return sorted(names)


def is_accelerator(resource: str) -> bool:
    """Whether an extended resource names accelerators (GPU, NPU, MLU or a GPU core share)."""
    if "/" not in resource:
        return False
    tail = resource.split("/", 1)[1]
    return tail in {"gpu", "npu"} or tail.startswith(("npu", "mlu")) or tail == "gpu-core"
