"""The network-topology domain tree of a cluster, as ClusterNetworkTopology `status.detailStatus`.

Koordinator's rules (koordinator.md): domains are keyed by (layer, name); a node takes, per layer,
the value of the first of the layer's label keys it has; a node missing the label of the layer
just above it gets a virtual domain named after itself; a node missing a higher label is left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduler.vocabulary import CLUSTER_LAYER, NODE_LAYER


@dataclass(frozen=True)
class Layer:
    name: str
    parent: str
    label_keys: tuple[str, ...]


@dataclass
class Domain:
    layer: str
    name: str
    parent: Domain | None = None
    children: dict[tuple[str, str], Domain] = field(default_factory=dict)
    node_count: int = 0


def layer_chain(layers: Sequence[Layer]) -> list[Layer]:
    """The layers from just below the root down to the node layer (the node layer's ancestry)."""
    by_name = {layer.name: layer for layer in layers}
    chain: list[Layer] = []
    current = by_name.get(NODE_LAYER)
    while current is not None and len(chain) <= len(layers):
        chain.append(current)
        current = by_name.get(current.parent)
    return list(reversed(chain))


def build_tree(layers: Sequence[Layer], nodes: Iterable[tuple[str, Mapping[str, str]]]) -> Domain:
    """The domain tree; `nodes` are (name, labels). Nodes outside the topology are skipped."""
    chain = layer_chain(layers)
    root = Domain(CLUSTER_LAYER, "")
    for node_name, labels in nodes:
        path = domain_path(chain, node_name, labels)
        if path is None:
            continue
        domain = root
        domain.node_count += 1
        for layer, name in path:
            child = domain.children.get((layer, name))
            if child is None:
                child = Domain(layer, name, parent=domain)
                domain.children[(layer, name)] = child
            child.node_count += 1
            domain = child
    return root


def domain_path(
    chain: Sequence[Layer], node_name: str, labels: Mapping[str, str]
) -> list[tuple[str, str]] | None:
    """(layer, domain name) from the top layer down to the node, or None if outside the tree."""
    path: list[tuple[str, str]] = []
    for depth, layer in enumerate(chain):
        if layer.name == NODE_LAYER:
            path.append((layer.name, node_name))
            continue
        value = next((labels[key] for key in layer.label_keys if labels.get(key)), None)
        if value is None:
            if depth != len(chain) - 2:
                return None  # a higher label is missing: outside the topology
            value = node_name  # the layer just above the node: a virtual domain of its own
        path.append((layer.name, value))
    return path


def detail_status(root: Domain) -> list[dict[str, Any]]:
    """One entry per non-leaf domain, depth first, children by name: Koordinator's shape.

    As Koordinator does, child names are listed only when the children are not nodes.
    """
    entries: list[dict[str, Any]] = []

    def visit(domain: Domain) -> None:
        if domain.layer == NODE_LAYER:
            return
        entry: dict[str, Any] = {
            "topologyInfo": {"topologyLayer": domain.layer, "topologyName": domain.name}
        }
        if domain.parent is not None:
            entry["parentTopologyInfo"] = {
                "topologyLayer": domain.parent.layer,
                "topologyName": domain.parent.name,
            }
        children = sorted(domain.children.values(), key=lambda child: child.name)
        if children:
            entry["childTopologyLayer"] = children[0].layer
            if children[0].layer != NODE_LAYER:
                entry["childTopologyNames"] = [child.name for child in children]
        entry["nodeNum"] = domain.node_count
        entries.append(entry)
        for child in children:
            visit(child)

    visit(root)
    return entries
