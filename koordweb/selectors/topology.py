"""Reads for the topology page: the domain tree, free resources per node and free "slots".

The tree follows koordinator.md: layers come from TopologyLayer rows (the `default`
ClusterNetworkTopology), each non-leaf layer names node label keys (the first present wins).
A node missing the label of the layer just above it gets a virtual domain named after itself;
a node missing a higher label is *outside the topology* and is reported, never dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from koordweb.models import Cluster, Node, Pod, PodPhase, TopologyLayer
from scheduler.vocabulary import CLUSTER_LAYER, NODE_LAYER

ROOT_KEY = "cluster"
# Pods that hold resources on their node: bound (still Pending) or Running.
OCCUPYING_PHASES = (PodPhase.PENDING, PodPhase.RUNNING)


@dataclass(frozen=True)
class LayerSpec:
    name: str
    parent: str
    label_keys: tuple[str, ...]


@dataclass
class Domain:
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


@dataclass
class TopologyTree:
    layers: list[str]
    domains: dict[str, Domain]
    node_path: dict[str, list[str]]
    outside: list[str]


def layer_chain(layers: Sequence[LayerSpec]) -> list[LayerSpec]:
    """The non-leaf layers ordered from the top (child of the cluster root) down to the nodes."""
    by_parent: dict[str, LayerSpec] = {}
    for layer in layers:
        if layer.name in (NODE_LAYER, CLUSTER_LAYER):
            continue
        by_parent.setdefault(layer.parent or CLUSTER_LAYER, layer)
    chain: list[LayerSpec] = []
    current = CLUSTER_LAYER
    seen: set[str] = set()
    while current in by_parent and current not in seen:
        seen.add(current)
        chain.append(by_parent[current])
        current = by_parent[current].name
    return chain


def node_domains(chain: Sequence[LayerSpec], node: str, labels: Mapping[str, str]) -> list[str]:
    """The domain keys from the top layer down for one node; [] when it is outside the tree."""
    path: list[str] = []
    for depth, layer in enumerate(chain):
        value = next((labels[k] for k in layer.label_keys if labels.get(k)), None)
        if value is None:
            if depth != len(chain) - 1:
                return []
            value = node  # the virtual domain of the layer just above the node
        path.append(f"{layer.name}/{value}")
    return path


def offer_slots(free: Mapping[str, int], shape: Mapping[str, int]) -> int:
    """How many pods of `shape` fit into `free` (every requested resource must fit)."""
    wanted = {name: amount for name, amount in shape.items() if amount > 0}
    if not wanted:
        return 0
    return max(0, min(free.get(name, 0) // amount for name, amount in wanted.items()))


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


def cluster_layers(cluster: Cluster) -> list[LayerSpec]:
    rows = TopologyLayer.objects.filter(cluster=cluster).order_by("position")
    return [LayerSpec(r.name, r.parent_name, tuple(r.label_keys or ())) for r in rows]


def gather_layer_names(cluster: Cluster) -> list[str]:
    """The layers a job may gather in: every topology layer but the node layer, in order."""
    return [spec.name for spec in cluster_layers(cluster) if spec.name != NODE_LAYER]


def topology_tree(
    cluster: Cluster,
    *,
    shape: Mapping[str, int] | None = None,
    include_nodes: bool = True,
    usage: Mapping[str, tuple[Mapping[str, int], bool]] | None = None,
) -> TopologyTree:
    """The domain tree with capacity, allocation and offer slots for `shape` summed upwards;
    with `usage` (node name -> reported usage, above a load-aware threshold) the usage too."""
    chain = layer_chain(cluster_layers(cluster))
    allocated = node_allocations(cluster)
    root = Domain(ROOT_KEY, CLUSTER_LAYER, cluster.name, "")
    domains: dict[str, Domain] = {ROOT_KEY: root}
    node_path: dict[str, list[str]] = {}
    outside: list[str] = []
    nodes = Node.objects.filter(cluster=cluster).values_list("name", "labels", "allocatable")
    for name, labels, allocatable in nodes:
        path = node_domains(chain, name, labels or {}) if chain else []
        if chain and not path:
            outside.append(name)
            continue
        node_path[name] = path
        used = allocated.get(name, {})
        free = {k: v - used.get(k, 0) for k, v in (allocatable or {}).items()}
        slots = offer_slots(free, shape or {})
        parent = ROOT_KEY
        keys = [*path, f"{NODE_LAYER}/{name}"] if include_nodes else path
        for key in keys:
            layer, _, domain_name = key.partition("/")
            domain = domains.setdefault(key, Domain(key, layer, domain_name, parent))
            parent = key
        for key in [ROOT_KEY, *keys]:
            domain = domains[key]
            _add(domain.capacity, allocatable or {})
            _add(domain.allocated, used)
            domain.slots += slots
            domain.node_count += 1
            if usage is not None and name in usage:
                reported, busy = usage[name]
                _add(domain.used, reported)
                _add(domain.reporting, {k: (allocatable or {}).get(k, 0) for k in reported})
                domain.busy_nodes += int(busy)
    return TopologyTree([layer.name for layer in chain], domains, node_path, sorted(outside))


def nodes_outside_topology(cluster: Cluster) -> list[str]:
    """Names of the nodes that a topology exists for but that miss a higher layer's label."""
    chain = layer_chain(cluster_layers(cluster))
    if not chain:
        return []
    labels = Node.objects.filter(cluster=cluster).values_list("name", "labels")
    return sorted(name for name, lab in labels if not node_domains(chain, name, lab or {}))


def accelerator_resources(cluster: Cluster) -> list[str]:
    """Extended resources that look like accelerators (GPU, NPU, MLU), for the shape form."""
    names: set[str] = set()
    for allocatable in Node.objects.filter(cluster=cluster).values_list("allocatable", flat=True):
        names.update(k for k in (allocatable or {}) if is_accelerator(k))
    return sorted(names)


def is_accelerator(resource: str) -> bool:
    """Whether an extended resource names accelerators (GPU, NPU, MLU or a GPU core share)."""
    if "/" not in resource:
        return False
    tail = resource.split("/", 1)[1]
    return tail in {"gpu", "npu"} or tail.startswith(("npu", "mlu")) or tail == "gpu-core"
