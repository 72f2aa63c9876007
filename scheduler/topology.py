"""The network topology tree as arrays: which domain of each layer every node belongs to.

Built once per round from the `default` ClusterNetworkTopology and node labels (koordinator.md,
"Network topology"). Layers are ordered root to leaf; `ClusterTopologyLayer` (the root, one domain
named "") and `NodeTopologyLayer` (each node) are implicit ends. A node missing the label of the
layer just above the nodes gets a virtual domain named after itself; a node missing a higher
label is outside the tree, which we report (`outside`) rather than drop silently. A domain is its
path of names from the top (we differ from Koordinator's (layer, name) key only where a name is
reused under two parents, and then say so in the label). Domains of a layer are indexed in name
order, so an index is also the name tie-break rank. Offer slots are summed into domains with
numpy (`domain_sums`), on arrays, never by walking the tree. `topology_domains` lists the domains
with their keys, and `detail_status` writes them as ClusterNetworkTopology's
`status.detailStatus` (Koordinator's shape), for the engine API (`scheduler.api`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from scheduler.framework import BoolArray, IntArray
from scheduler.model import CLUSTER_LAYER, NODE_LAYER, NodeInfo, TopologySpec


class TopologyError(ValueError):
    """The ClusterNetworkTopology spec is malformed (not a single chain ending at the nodes)."""


def layer_chain(spec: TopologySpec | None) -> list[tuple[str, tuple[str, ...]]]:
    """Non-leaf layers from the top down to the one above the nodes, with their label keys."""
    if spec is None or not spec.layers:
        return []
    by_parent: dict[str, list[str]] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for layer in spec.layers:
        parent = layer.parent or CLUSTER_LAYER
        by_parent.setdefault(parent, []).append(layer.name)
        keys[layer.name] = layer.label_keys
    if NODE_LAYER not in keys:
        raise TopologyError(f"{NODE_LAYER} must be listed in the topology spec")
    chain: list[tuple[str, tuple[str, ...]]] = []
    current = CLUSTER_LAYER
    while current != NODE_LAYER:
        children = by_parent.get(current, [])
        if len(children) != 1:
            raise TopologyError(
                f"layer {current} must have exactly one child layer, has {sorted(children)}"
            )
        current = children[0]
        if current != NODE_LAYER:
            if not keys[current]:
                raise TopologyError(f"layer {current} has no label keys")
            chain.append((current, keys[current]))
        if len(chain) > len(spec.layers):
            raise TopologyError("topology layers form a cycle")
    return chain


@dataclass
class TopologyTree:
    """Domains per layer; `node_domain[l][n]` is node n's domain index in layer l, or -1."""

    layers: list[str]
    domain_names: list[list[str]]
    node_domain: list[IntArray]
    domain_parent: list[IntArray]  # per layer: index of the parent domain (layer above), -1 on top
    outside: BoolArray
    error: str = ""
    node_names: list[str] = field(default_factory=list)
    domain_paths: list[list[tuple[str, ...]]] = field(default_factory=list)
    _labels: dict[int, list[str]] = field(default_factory=dict)
    _levels: list[str] = field(default_factory=list)
    _groups: dict[int, tuple[IntArray, IntArray]] = field(default_factory=dict)
    _fixed: dict[str, IntArray] = field(default_factory=dict)  # see `_read_only`
    _has_outside: bool | None = None

    @property
    def levels(self) -> list[str]:
        """Every level searched by the placement walk, root first, nodes last."""
        if not self._levels:
            self._levels = [CLUSTER_LAYER, *self.layers, NODE_LAYER]
        return self._levels

    @staticmethod
    def build(spec: TopologySpec | None, nodes: Sequence[NodeInfo]) -> TopologyTree:
        """Index the tree; nodes must already be in name order."""
        n = len(nodes)
        error = ""
        try:
            chain = layer_chain(spec)
        except TopologyError as exc:
            chain, error = [], str(exc)
        outside = np.zeros(n, dtype=np.bool_)
        raw: list[list[str | None]] = []
        for depth, (_layer, keys) in enumerate(chain):
            names: list[str | None] = []
            lowest = depth == len(chain) - 1
            for i, node in enumerate(nodes):
                # An empty value is no value (Koordinator's getTreeNodesMeta).
                value = next((node.labels[k] for k in keys if node.labels.get(k)), None)
                if value is None and lowest:
                    value = node.name  # virtual domain named after the node
                if value is None:
                    outside[i] = True
                names.append(value)
            raw.append(names)
        domain_names: list[list[str]] = []
        domain_paths: list[list[tuple[str, ...]]] = []
        node_domain: list[IntArray] = []
        # A domain is its path from the top: a block named b0 under spine s0 and one under s1
        # are two domains (real fabrics reuse rack names under different switches).
        above: list[tuple[str, ...]] = [() for _ in nodes]
        for names in raw:
            paths: list[tuple[str, ...] | None] = [
                (*above[i], v) if v is not None and not outside[i] else None
                for i, v in enumerate(names)
            ]
            ordered = sorted({p for p in paths if p is not None}, key=lambda p: (p[-1], p))
            index = {path: j for j, path in enumerate(ordered)}
            arr = np.full(n, -1, dtype=np.int64)
            for i, path in enumerate(paths):
                if path is not None:
                    arr[i] = index[path]
            domain_names.append([path[-1] for path in ordered])
            domain_paths.append(ordered)
            node_domain.append(arr)
            above = [path if path is not None else () for path in paths]
        domain_parent: list[IntArray] = []
        for depth, arr in enumerate(node_domain):
            parents = np.full(len(domain_names[depth]), -1, dtype=np.int64)
            if depth > 0:
                upper = node_domain[depth - 1]
                # first node (in name order) of a domain decides its parent
                for i in range(n - 1, -1, -1):
                    if arr[i] >= 0:
                        parents[arr[i]] = upper[i]
            domain_parent.append(parents)
        return TopologyTree(
            layers=[name for name, _ in chain],
            domain_names=domain_names,
            node_domain=node_domain,
            domain_parent=domain_parent,
            outside=outside,
            error=error,
            node_names=[node.name for node in nodes],
            domain_paths=domain_paths,
        )

    def layer_position(self, layer: str) -> int | None:
        """Index in `levels` (0 = cluster root), or None for a layer the spec does not define."""
        levels = self.levels
        return levels.index(layer) if layer in levels else None

    def domain_sums(self, level: int, per_node: IntArray) -> IntArray:
        """Sum a per-node quantity into the domains of `levels[level]`."""
        if level == 0:
            return np.array([int(per_node.sum())], dtype=np.int64)
        if level == len(self.layers) + 1:
            return per_node
        order, starts = self._grouping(level - 1)
        if len(order) == 0:
            return np.zeros(0, dtype=np.int64)
        sums: IntArray = np.add.reduceat(per_node[order], starts)
        return sums

    def domain_sums_among(self, level: int, per_node: IntArray, among: IntArray) -> IntArray:
        """`domain_sums` when `per_node` is zero outside the nodes `among` (fewer to add)."""
        if level == 0:
            return np.array([int(per_node[among].sum())], dtype=np.int64)
        if level == len(self.layers) + 1:
            return per_node
        domains = self.node_domain[level - 1][among]
        inside = domains >= 0
        sums: IntArray = np.bincount(
            domains[inside],
            weights=per_node[among][inside],
            minlength=len(self.domain_names[level - 1]),
        ).astype(np.int64)  # float64 sums of slot counts are exact
        return sums

    def _grouping(self, layer: int) -> tuple[IntArray, IntArray]:
        """Nodes of a layer sorted by domain and where each domain starts (every domain has one)."""
        cached = self._groups.get(layer)
        if cached is None:
            arr = self.node_domain[layer]
            order = np.flatnonzero(arr >= 0)
            order = order[np.argsort(arr[order], kind="stable")]
            starts = np.searchsorted(arr[order], np.arange(len(self.domain_names[layer])))
            cached = (order.astype(np.int64), starts.astype(np.int64))
            cached[0].flags.writeable = False  # `nodes_in` hands out slices of it
            self._groups[layer] = cached
        return cached

    def domain_labels(self, level: int) -> list[str]:
        """Every domain label of one level, in index order (built once)."""
        cached = self._labels.get(level)
        if cached is None:
            levels = self.levels
            if level == 0:
                cached = [f"{CLUSTER_LAYER}/"]
            elif level == len(levels) - 1:
                cached = [f"{NODE_LAYER}/{name}" for name in self.node_names]
            else:
                names = self.domain_names[level - 1]
                repeated = {name for name, n in Counter(names).items() if n > 1}
                paths = self.domain_paths[level - 1] if self.domain_paths else []
                # A name used under two parents is told apart by its path: BlockLayer/s0/b0.
                cached = [
                    f"{levels[level]}/{'/'.join(paths[j]) if name in repeated else name}"
                    for j, name in enumerate(names)
                ]
            self._labels[level] = cached
        return cached

    def nodes_in(self, level: int, index: int) -> IntArray:
        """Node indices of one domain (the root holds every node inside the tree)."""
        if level == 0:
            return self._read_only("inside", lambda: np.flatnonzero(~self.outside))
        if level == len(self.layers) + 1:
            return np.array([index], dtype=np.int64)
        order, starts = self._grouping(level - 1)
        stop = starts[index + 1] if index + 1 < len(starts) else len(order)
        return order[starts[index] : stop]  # ascending: the grouping sort is stable

    def node_domain_at(self, level: int) -> IntArray:
        """Per node, its domain index at `levels[level]` (root: 0; nodes: itself)."""
        n = len(self.outside)
        if level == 0:
            return self._read_only("root", lambda: np.zeros(n))
        if level == len(self.layers) + 1:
            return self._read_only("nodes", lambda: np.arange(n))
        return self.node_domain[level - 1]

    @property
    def has_outside(self) -> bool:
        """Whether some node lies outside the tree (its label missing or inconsistent)."""
        if self._has_outside is None:  # asked by every placement: answered once
            self._has_outside = len(self.nodes_in(0, 0)) < len(self.outside)
        return self._has_outside

    def _read_only(self, name: str, build: Callable[[], npt.NDArray[Any]]) -> IntArray:
        """A per-node index array built once and handed out read-only (the tree is fixed)."""
        found = self._fixed.get(name)
        if found is None:
            found = self._fixed[name] = build().astype(np.int64)
            found.flags.writeable = False
        return found


@dataclass(frozen=True)
class TopologyDomain:
    """One domain of the tree: the root, a domain of a layer, or a node leaf."""

    key: str  # the engine's label: "ClusterTopologyLayer/", "BlockLayer/b1", "NodeTopologyLayer/n"
    layer: str
    name: str  # "" for the root
    parent: str  # the parent's key, "" for the root
    level: int  # 0 the root, then one per layer, the node leaves last (`TopologyTree.levels`)
    index: int  # within its level
    nodes: IntArray = field(repr=False)  # node indices (name order) under the domain


def topology_domains(tree: TopologyTree, *, leaves: bool = True) -> Iterator[TopologyDomain]:
    """Every domain, depth first from the root, children in name order (Koordinator's order);
    node leaves too unless `leaves` is False. Nodes outside the tree belong to no domain."""
    leaf = len(tree.layers) + 1

    def walk(level: int, index: int, parent: str) -> Iterator[TopologyDomain]:
        key = tree.domain_labels(level)[index]
        members = tree.nodes_in(level, index)
        name = "" if level == 0 else _name(tree, level, index)
        yield TopologyDomain(key, tree.levels[level], name, parent, level, index, members)
        if level == leaf or (level == leaf - 1 and not leaves):
            return
        for child in _children(tree, level, index, members):
            yield from walk(level + 1, child, key)

    yield from walk(0, 0, "")


def _name(tree: TopologyTree, level: int, index: int) -> str:
    if level == len(tree.layers) + 1:
        return tree.node_names[index]
    return tree.domain_names[level - 1][index]


def _children(tree: TopologyTree, level: int, index: int, members: IntArray) -> list[int]:
    """The child indices of one domain, in name order (indices are name-ordered already)."""
    below = tree.node_domain_at(level + 1)[members]
    return sorted({int(c) for c in below if c >= 0})


def detail_status(tree: TopologyTree) -> list[dict[str, Any]]:
    """ClusterNetworkTopology `status.detailStatus`: one entry per domain above the nodes, depth
    first, in Koordinator's shape (child names only when the children are not nodes; no parent on
    the root). A block name used under two spines is two entries, one under each spine."""
    if tree.error:
        return []
    entries: list[dict[str, Any]] = []
    names: dict[str, tuple[str, str]] = {}
    for domain in topology_domains(tree):
        names[domain.key] = (domain.layer, domain.name)
        if domain.layer == NODE_LAYER:
            continue
        child_level = domain.level + 1
        children = _children(tree, domain.level, domain.index, domain.nodes)
        entry: dict[str, Any] = {
            "topologyInfo": {"topologyLayer": domain.layer, "topologyName": domain.name}
        }
        if domain.parent:
            layer, name = names[domain.parent]
            entry["parentTopologyInfo"] = {"topologyLayer": layer, "topologyName": name}
        if children:
            entry["childTopologyLayer"] = tree.levels[child_level]
            if tree.levels[child_level] != NODE_LAYER:
                entry["childTopologyNames"] = [_name(tree, child_level, c) for c in children]
        entry["nodeNum"] = len(domain.nodes)
        entries.append(entry)
    return entries
