"""The engine's immutable input types: nodes, pods, jobs (gang groups), quotas, budgets, topology.

Everything here is a frozen dataclass in integer units (cpu in milli-cores, memory in bytes, counts
for `pods` and extended resources such as `nvidia.com/gpu`), with resource names spelled as in
Kubernetes. `koordweb/engine/` builds a `ClusterSnapshot` from database rows; tests build them
with `tests/scheduler/builders.py`. Mappings are plain dicts by convention and must not be mutated
after construction: the engine treats a snapshot as read-only and never writes to it.

Stable contract for other modules:
- `PodInfo.key` is "namespace/name"; `PodInfo.job_id` is the id of its job (gang group).
- A pod is *bound* when `node` is set; bound pods consume their node's resources unless their phase
  is Succeeded/Failed. A pod is *pending* when `node` is empty and its phase is Pending.
- `JobInfo.id` is the gang-group id (member gang ids "ns/name" sorted, joined by ","); a pod outside
  any gang is a job of its own with id "ns/pod".
- `NodeInfo.devices` is opaque to the core (the devices plugin reads it); `NodeInfo.usage` is the
  latest NodeMetric usage for the load-aware plugin.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

from scheduler.vocabulary import CLUSTER_LAYER as CLUSTER_LAYER
from scheduler.vocabulary import (
    FINISHED_POD_PHASES,
    LABEL_DISABLE_PREEMPTIBLE,
    NVIDIA_GPU,
    QUOTA_PREEMPTIBLE,
)
from scheduler.vocabulary import NODE_LAYER as NODE_LAYER

# A shared read-only empty mapping for defaults that are rarely filled.
_EMPTY: Mapping[str, Any] = MappingProxyType({})

ResourceList = Mapping[str, int]
"""Resource name -> integer amount (milli-cpu, bytes, counts)."""

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
GatherStrategy = Literal["MustGather", "PreferGather"]
GangMode = Literal["Strict", "NonStrict"]
GangMatchPolicy = Literal["once-satisfied", "only-waiting", "waiting-and-running"]
PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed"]

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
GPU = NVIDIA_GPU


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"


@dataclass(frozen=True)
class Toleration:
    """A pod toleration; an empty key with operator Exists tolerates everything."""

    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""  # empty: every effect


@dataclass(frozen=True)
class NodeSelectorRequirement:
    """One matchExpressions entry; operators In, NotIn, Exists, DoesNotExist, Gt, Lt."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeSelectorTerm:
    """Requirements that must all hold (terms of a required affinity are ORed): expressions on
    the node's labels and fields of the node itself (`matchFields`: key `metadata.name` only,
    operators In and NotIn, as the API server allows; every DaemonSet pod has one). A term with
    neither matches no node, as in Kubernetes."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True)
class NodeInfo:
    name: str
    allocatable: ResourceList
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    devices: Any = None  # opaque: read only by the devices plugin
    usage: ResourceList | None = None  # latest reported usage, for load-aware
    # When that NodeMetric was reported (snapshot clock, seconds; None: unknown), its reporting
    # interval, and each pod's reported usage ("ns/name" -> usage; status.podsMetric).
    usage_reported_at: float | None = None
    usage_report_interval: float = 60.0
    pod_usages: Mapping[str, ResourceList] = field(default_factory=lambda: _EMPTY)
    # status.nodeMetric.aggregatedNodeUsages: type ("p95", "avg", ...) -> seconds -> usage.
    aggregated_usage: Mapping[str, Mapping[int, ResourceList]] = field(
        default_factory=lambda: _EMPTY
    )


@dataclass(frozen=True)
class PodInfo:
    namespace: str
    name: str
    job_id: str
    requests: ResourceList = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: tuple[NodeSelectorTerm, ...] = ()  # ORed terms; empty = no constraint
    tolerations: tuple[Toleration, ...] = ()
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    priority: int = 0
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"
    node: str | None = None
    nominated_node: str | None = None
    phase: PodPhase = "Pending"
    terminating: bool = False
    topology_index: int | None = None
    quota: str | None = None  # elastic quota name, from label quota.scheduling.koordinator.sh/name
    gang_id: str | None = None  # the member gang ("ns/name") this pod belongs to, if any
    # Shared when empty: 20,000 pods need no 20,000 empty dicts for the collector to walk.
    limits: ResourceList = field(default_factory=lambda: _EMPTY)
    # When the pod was bound and when it started (snapshot clock, seconds), for load-aware's
    # estimatedSecondsAfterPodScheduled / ...AfterInitialized; None when unknown.
    scheduled_at: float | None = None
    initialized_at: float | None = None
    # When the pod was nominated to `nominated_node` (snapshot clock; None: unknown), for the
    # gang waiting time across rounds.
    nominated_at: float | None = None
    # Owned by a DaemonSet (`metadata.ownerReferences`): LoadAware's Filter lets it through.
    daemonset: bool = False

    @cached_property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def is_bound(self) -> bool:
        return self.node is not None

    @property
    def consumes_node(self) -> bool:
        """Bound and not finished: its requests are taken from its node."""
        return self.node is not None and self.phase not in FINISHED_POD_PHASES

    @property
    def is_pending(self) -> bool:
        return self.node is None and self.phase == "Pending"

    @cached_property
    def preemptible(self) -> bool:
        """False when a protection label forbids evicting this pod."""
        return (
            self.labels.get(LABEL_DISABLE_PREEMPTIBLE) != "true"
            and self.labels.get(QUOTA_PREEMPTIBLE) != "false"
        )


@dataclass(frozen=True)
class LayerGather:
    """One gatherStrategy entry of `gang.scheduling.koordinator.sh/network-topology-spec`."""

    layer: str
    strategy: GatherStrategy


@dataclass(frozen=True)
class TopologyRule:
    """A job's network-topology request; `pod_count_multiple` is our extension (default off)."""

    gather: tuple[LayerGather, ...] = ()
    pod_count_multiple: int = 1


@dataclass(frozen=True)
class GangInfo:
    """One member gang of a gang group (id "ns/name")."""

    id: str
    min_available: int
    total: int
    mode: GangMode = "Strict"
    waiting_seconds: int = 600
    # Which members count towards min-available in Permit (gang.scheduling.koordinator.sh/
    # match-policy): only-waiting (those placed now), waiting-and-running (and those bound), or
    # once-satisfied (those placed now; once any member of the group is bound, none is needed).
    match_policy: GangMatchPolicy = "once-satisfied"


@dataclass(frozen=True)
class JobInfo:
    """The unit placed whole and evicted whole: a gang group, or a single pod outside any gang.

    `pod_keys` lists every pod of the job (bound or pending); the engine places the pending ones.
    `submission_order` is a sortable number (e.g. submit time in seconds) for the queue.
    """

    id: str
    pod_keys: tuple[str, ...]
    gangs: tuple[GangInfo, ...] = ()
    priority: int = 0
    quota: str | None = None
    topology: TopologyRule | None = None
    submission_order: float = 0.0
    preemption_policy: PreemptionPolicy = "PreemptLowerPriority"


@dataclass(frozen=True)
class QuotaInfo:
    """An ElasticQuota tree node; `shared_weight` defaults to `max` when None."""

    name: str
    min: ResourceList = field(default_factory=dict)
    max: ResourceList = field(default_factory=dict)
    parent: str | None = None
    shared_weight: ResourceList | None = None
    allow_lent: bool = True


@dataclass(frozen=True)
class PDBInfo:
    """policy/v1 PodDisruptionBudget with a matchLabels selector; int or "N%" budgets."""

    namespace: str
    name: str
    match_labels: Mapping[str, str] = field(default_factory=dict)
    min_available: int | str | None = None
    max_unavailable: int | str | None = None


@dataclass(frozen=True)
class TopologyLayerSpec:
    """One `spec.networkTopologySpec` item of the ClusterNetworkTopology named `default`."""

    name: str
    parent: str | None = None
    label_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class TopologySpec:
    layers: tuple[TopologyLayerSpec, ...] = ()


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything one round reads. `now` is injected (seconds); the engine reads no clock."""

    nodes: tuple[NodeInfo, ...]
    pods: tuple[PodInfo, ...]
    jobs: tuple[JobInfo, ...]
    quotas: tuple[QuotaInfo, ...] = ()
    pdbs: tuple[PDBInfo, ...] = ()
    topology: TopologySpec | None = None
    now: float = 0.0
    # Plugins' memory across rounds, for a caller that keeps a warm snapshot between rounds
    # (None: every round starts cold). A plugin keeps here, under its name, only answers keyed
    # by the content they depend on, so a result never depends on what the cache holds.
    engine_cache: dict[str, Any] | None = field(default=None, compare=False, repr=False)


def gang_group_id(gang_ids: list[str] | tuple[str, ...]) -> str:
    """The job id of a gang group: member gang ids sorted and joined by ','."""
    return ",".join(sorted(set(gang_ids)))
