"""The network-topology domain tree of a cluster, as ClusterNetworkTopology `status.detailStatus`.

The tree is the engine's (`scheduler.api`): the layers and node labels a round reads give the
same domains here, and `detail_status` writes them in Koordinator's shape. Where Koordinator keys
a domain by (layer, name) the engine keys it by its path, so a block name used under two spines
is two entries, one under each spine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduler.api import TopologyTree
from scheduler.api import detail_status as engine_detail_status
from scheduler.api import topology_tree as engine_topology_tree
from scheduler.model import NodeInfo, TopologyLayerSpec, TopologySpec


@dataclass(frozen=True)
class Layer:
    name: str
    parent: str
    label_keys: tuple[str, ...]


def build_tree(
    layers: Sequence[Layer], nodes: Iterable[tuple[str, Mapping[str, str]]]
) -> TopologyTree:
    """The engine's tree; `nodes` are (name, labels). Nodes outside the topology are left out."""
    spec = TopologySpec(
        tuple(TopologyLayerSpec(la.name, la.parent or None, la.label_keys) for la in layers)
    )
    infos = [NodeInfo(name=name, allocatable={}, labels=dict(labels)) for name, labels in nodes]
    return engine_topology_tree(spec if layers else None, infos)


def detail_status(tree: TopologyTree) -> list[dict[str, Any]]:
    """One entry per non-leaf domain, depth first, children by name: Koordinator's shape."""
    return engine_detail_status(tree)
