"""The engine's public API: what koordweb may ask the engine, besides `model` and `vocabulary`.

Every concept the web shows and the engine decides on has its home here, so a page, the API, the
manifests and a round give one answer:

- the topology tree (`topology_tree`), its domains with their keys (`topology_domains`: the key
  the engine prints in its decisions, `BlockLayer/b1`, or `BlockLayer/s0/b0` when a block name is
  used under two spines: two domains), the nodes a gather rule groups together (`gather_domains`)
  and the ClusterNetworkTopology `status.detailStatus` (`detail_status`);
- offer slots, how many pods of one template the engine's Filters let onto each node, on the live
  state or on the same nodes empty (`EngineState`);
- what a node offers (`node_offers`: the resources it reports plus what its cards offer, the
  engine's card-counting rule) and its whole cards per kind (`whole_cards`: GPU, NPU, MLU);
- whether a pod's device requests combine (`validate_device_request`: shared GPU fractions,
  vNPU templates, ...);
- the status and cause vocabulary of the engine's answers (`Code`, `Cause`, and `causes`: the
  codes a verdict, a preemption answer and a node refusal carry, which the web words from
  without reading the engine's text).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from scheduler import causes
from scheduler.collector import collector_paused
from scheduler.cycle import Framework
from scheduler.devices import Device, build_node_devices
from scheduler.devices.inventory import TemplateConfig, device_allocatable
from scheduler.devices.model import DeviceTopology, NodeDevices, VirtualFunction
from scheduler.devices.request import validate_device_request
from scheduler.durations import go_duration_seconds
from scheduler.fgd import POLICY_NAMES, REPORTED_LOADS, TraceError, parse_nodes, parse_pods, replay
from scheduler.framework import Code, IntArray
from scheduler.model import (
    PODS,
    ClusterSnapshot,
    JobInfo,
    NodeInfo,
    PodInfo,
    Toleration,
    TopologySpec,
)
from scheduler.oracle import check_round, rules_for_plugins
from scheduler.plugin_args import PluginArgs
from scheduler.plugins.loadaware import LoadAware
from scheduler.plugins.preemption import (
    RULE_IN_QUOTA,
    RULE_LOWER_PRIORITY,
    RULE_QUOTA_RECLAIM,
)
from scheduler.profile import (
    DEFAULT_PLUGINS,
    ENABLED,
    Profile,
    ProfileError,
    check_args,
    configurable_arguments,
    duration_seconds,
    plugin_registry,
    problem_lines,
)
from scheduler.quota_tree import UNBOUNDED, QuotaTree
from scheduler.result import Cause, PreemptionRecord, RoundResult
from scheduler.round import plan_round
from scheduler.state import CycleState
from scheduler.topology import (
    TopologyDomain,
    TopologyError,
    TopologyTree,
    detail_status,
    topology_domains,
)
from scheduler.vocabulary import CAMBRICON_MLU, HUAWEI_NPU, NVIDIA_GPU

__all__ = [
    "CARD_RESOURCES",
    "DEFAULT_PLUGINS",
    "ENABLED",
    "POLICY_NAMES",
    "REPORTED_LOADS",
    "RULE_IN_QUOTA",
    "RULE_LOWER_PRIORITY",
    "RULE_QUOTA_RECLAIM",
    "UNBOUNDED",
    "Cause",
    "Code",
    "Device",
    "DeviceTopology",
    "EngineState",
    "IntArray",
    "LoadAware",
    "NodeDevices",
    "PluginArgs",
    "PodTemplate",
    "PreemptionRecord",
    "Profile",
    "ProfileError",
    "QuotaTree",
    "RoundResult",
    "TemplateConfig",
    "TopologyDomain",
    "TopologyError",
    "TopologyTree",
    "TraceError",
    "VirtualFunction",
    "build_node_devices",
    "causes",
    "check_args",
    "check_round",
    "collector_paused",
    "configurable_arguments",
    "detail_status",
    "device_allocatable",
    "duration_seconds",
    "gather_domains",
    "go_duration_seconds",
    "node_offers",
    "parse_nodes",
    "parse_pods",
    "plan_round",
    "plugin_registry",
    "problem_lines",
    "replay",
    "rules_for_plugins",
    "topology_domains",
    "topology_tree",
    "validate_device_request",
    "whole_cards",
]

# Whole accelerator cards by the resource a pod asks them with, and the kind pages name them by.
CARD_RESOURCES: Mapping[str, str] = {NVIDIA_GPU: "GPU", HUAWEI_NPU: "NPU", CAMBRICON_MLU: "MLU"}
# Template pods asked about at once, at most: past a node's room the count is capped anyway.
MOST_TEMPLATE_PODS = 4096


# --- what a node offers ---------------------------------------------------------------------
def node_offers(reported: Mapping[str, int], devices: NodeDevices | None) -> dict[str, int]:
    """The resources a node offers the engine: what the cluster reported for it, and what its
    healthy cards offer where the report does not say (`device_allocatable`: GPUs counted by
    card on NVIDIA and unlabelled nodes only, never on an Ascend or Cambricon node)."""
    offered = dict(reported)
    if devices is not None:
        for resource, amount in device_allocatable(devices).items():
            offered.setdefault(resource, amount)
    return offered


def whole_cards(offered: Mapping[str, int]) -> dict[str, int]:
    """Whole cards per card resource (nvidia.com/gpu, huawei.com/npu, cambricon.com/mlu) in what
    a node offers (`node_offers`): the counts a pod asking for whole cards is fitted against."""
    return {r: int(offered[r]) for r in CARD_RESOURCES if offered.get(r)}


# --- the topology tree ------------------------------------------------------------------------
def topology_tree(spec: TopologySpec | None, nodes: Sequence[NodeInfo]) -> TopologyTree:
    """The engine's tree of these nodes (any order: indexed in name order, as a round does)."""
    return TopologyTree.build(spec, sorted(nodes, key=lambda node: node.name))


def gather_domains(tree: TopologyTree, layer: str) -> tuple[list[str], IntArray] | None:
    """The domains a MustGather rule on `layer` lets a job's pods share, and per node the index
    of its domain there (-1: a node outside the tree, which serves no topology rule). `layer` ""
    (no rule) is one domain of every node; an unknown layer is None."""
    level = tree.layer_position(layer) if layer else 0
    if level is None:
        return None
    if level == 0 and not layer:
        return [tree.domain_labels(0)[0]], np.zeros(len(tree.outside), dtype=np.int64)
    of_node = tree.node_domain_at(level).astype(np.int64)
    if tree.has_outside:
        of_node = np.where(tree.outside, -1, of_node)
    return list(tree.domain_labels(level)), of_node


# --- offer slots on a live or an empty state --------------------------------------------------
@dataclass(frozen=True)
class PodTemplate:
    """A pod the web asks about (a shape on the topology page, a submission's pod)."""

    requests: Mapping[str, int]
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    priority: int = 0


_asked = itertools.count()  # template pods' names: unique per question, as a round's pod keys


class EngineState:
    """A cluster's snapshot read once by the engine's own Framework and CycleState, then asked
    how many pods of a template fit on each node, as many times as needed. `empty` asks about
    the same nodes with nothing bound, nominated or reported on them.

    Asking changes nothing the answers depend on (the framework only remembers per-template
    work), so one state may serve many requests while its snapshot is current; its caller
    keeps two threads from asking at once (`koordweb.engine.reads`)."""

    def __init__(
        self, snapshot: ClusterSnapshot, profile: Profile | None = None, *, empty: bool = False
    ) -> None:
        if empty:
            snapshot = _emptied(snapshot)
        self.framework = Framework(profile or Profile.default())
        self.state = CycleState(snapshot)
        self.framework.start(self.state)
        self._held: list[dict[str, int]] | None = None

    @property
    def tree(self) -> TopologyTree:
        return self.state.topology

    @property
    def nodes(self) -> list[NodeInfo]:
        """The nodes in name order: index i of every per-node array is `nodes[i]`."""
        return self.state.nodes

    def offer_slots(self, template: PodTemplate) -> IntArray:
        """Per node, how many pods of `template` every Filter of the profile lets there now (the
        round's own count: resources, cards, load, taints, selectors, cordons)."""
        state = self.state
        requests = {r: int(a) for r, a in template.requests.items() if a}
        if any(r not in state.resource_index for r in requests):
            return np.zeros(len(state.nodes), dtype=np.int64)  # no node offers it
        count = self._most(requests)
        if count == 0:
            return np.zeros(len(state.nodes), dtype=np.int64)
        asked = next(_asked)
        job_id = f"koordweb-template/{asked}"
        pods = [
            PodInfo(
                namespace="koordweb-template",
                name=f"{asked}-{i}",
                job_id=job_id,
                requests=requests,
                node_selector=dict(template.node_selector),
                tolerations=template.tolerations,
                priority=template.priority,
            )
            for i in range(count)
        ]
        job = JobInfo(id=job_id, pod_keys=tuple(p.key for p in pods), priority=template.priority)
        slots: IntArray = self.framework.offer_slots(state, job, pods).astype(np.int64)
        return slots

    def _most(self, requests: Mapping[str, int]) -> int:
        """An upper bound of any node's count: its allocatable over the request, per resource."""
        state = self.state
        room = state.allocatable[:, state.resource_index[PODS]].copy()
        for resource, amount in requests.items():
            room = np.minimum(room, state.allocatable[:, state.resource_index[resource]] // amount)
        return int(min(MOST_TEMPLATE_PODS, max(0, int(room.max(initial=0)))))

    def held(self) -> list[dict[str, int]]:
        """Per node, what its bound pods request (nominated pods' holds left out); the same
        list on every call (read it, do not change it)."""
        if self._held is None:
            state = self.state
            held = state.used.copy()
            for reserved in state.reservations.values():
                for idx, vec in reserved:
                    held[idx] -= vec
            self._held = [_amounts(state.resources, row) for row in held]
        return self._held


def _amounts(resources: Sequence[str], row: IntArray) -> dict[str, int]:
    return {r: int(v) for r, v in zip(resources, row.tolist(), strict=True) if v and r != PODS}


def _emptied(snapshot: ClusterSnapshot) -> ClusterSnapshot:
    """The same nodes with no pods, jobs or reported usage: what an empty cluster offers."""
    nodes = tuple(
        replace(node, usage=None, usage_reported_at=None, pod_usages={}, aggregated_usage={})
        for node in snapshot.nodes
    )
    return replace(snapshot, nodes=nodes, pods=(), jobs=(), engine_cache=None)
