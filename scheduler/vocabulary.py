"""Every Kubernetes and Koordinator name koordweb reads or writes, spelled as their projects do.

Resource names, labels, annotations, API versions and the vendors' device strings live here and only
here: the engine, the web layer, the manifests and the backends import them. Sources: Koordinator
v1.7's `apis/extension` (device_share.go, elastic_quota.go, coscheduling.go, load_aware.go),
scheduler-plugins' PodGroup API and the vendor device plugins. `scheduler.devices.names` re-exports
the device part for the allocator. The pod phases that count as finished and the natural order
of names (`natural_key`: n2 before n10) are here too, so the engine and the pages share them.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

# --- API groups and versions -----------------------------------------------------------------
SCHEDULING_GROUP: Final = "scheduling.koordinator.sh"
SLO_GROUP: Final = "slo.koordinator.sh"
KOORD_SCHEDULING_API: Final = SCHEDULING_GROUP + "/v1alpha1"  # Device, ClusterNetworkTopology
KOORD_SLO_API: Final = SLO_GROUP + "/v1alpha1"  # NodeMetric
K8S_SCHEDULING_API: Final = "scheduling.k8s.io/v1"  # PriorityClass
# scheduler-plugins PodGroup API groups and the pod label that joins a pod to its PodGroup.
POD_GROUP_APIS: Final = {
    "scheduling.sigs.k8s.io/v1alpha1": "pod-group.scheduling.sigs.k8s.io",
    "scheduling.x-k8s.io/v1alpha1": "scheduling.x-k8s.io/pod-group",
}
DEFAULT_POD_GROUP_API: Final = "scheduling.sigs.k8s.io/v1alpha1"
POD_GROUP_LABELS: Final = tuple(POD_GROUP_APIS.values())
# Deprecated lightweight coscheduling: a gang named by a pod label, with no PodGroup object
# (apis/extension/coscheduling.go LabelLightweightCoschedulingPodGroupName, ...MinAvailable).
LIGHTWEIGHT_GANG_NAME: Final = "pod-group.scheduling.sigs.k8s.io/name"
LIGHTWEIGHT_GANG_MIN_AVAILABLE: Final = "pod-group.scheduling.sigs.k8s.io/min-available"
# Domains whose label and annotation keys Kubernetes, Koordinator and koordweb reserve.
RESERVED_DOMAINS: Final = ("kubernetes.io", "k8s.io", "x-k8s.io", "koordinator.sh", "koordweb.io")
# Kubernetes' recommended application labels (app.kubernetes.io/name, ...).
APP_LABEL_PREFIX: Final = "app.kubernetes.io/"

# The taint a cordoned node stands for (`spec.unschedulable`): a pod tolerating it, with effect
# NoSchedule, may be scheduled there (kube-scheduler's NodeUnschedulable Filter).
TAINT_NODE_UNSCHEDULABLE: Final = "node.kubernetes.io/unschedulable"

# Every kind of Kubernetes' core API group (`v1`): a dump holds any of them, and an unknown one
# there is a typo, not a kind of someone else's API.
CORE_V1_KINDS: Final = frozenset(
    {
        "Binding",
        "ComponentStatus",
        "ConfigMap",
        "Endpoints",
        "Event",
        "LimitRange",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Pod",
        "PodTemplate",
        "ReplicationController",
        "ResourceQuota",
        "Secret",
        "Service",
        "ServiceAccount",
    }
)

# A dump's wrapper: `kind: List` (and `PodList`, `NodeList`, ...), its objects under `items`.
LIST_KIND: Final = "List"
# The owner kind of a DaemonSet's pods (`metadata.ownerReferences[].kind`), and the node field a
# DaemonSet pod's required node affinity selects its node by (`matchFields`), the only field
# key the API server accepts there.
DAEMONSET_KIND: Final = "DaemonSet"
NODE_NAME_FIELD: Final = "metadata.name"
# Kubernetes' built-in priority classes: every cluster has them, whether or not a dump lists the
# objects (`pkg/apis/scheduling` SystemPriorityClasses).
SYSTEM_PRIORITY_CLASSES: Final = {
    "system-cluster-critical": 2_000_000_000,
    "system-node-critical": 2_000_001_000,
}

# ClusterNetworkTopology's implicit layers: the root (the whole cluster) and the leaf (a node).
CLUSTER_LAYER: Final = "ClusterTopologyLayer"
NODE_LAYER: Final = "NodeTopologyLayer"

# --- Pod phases and the order of names ---------------------------------------------------------
# A pod's `status.phase` (core/v1 PodPhase). A pod in a finished phase has stopped for good: it
# holds no node's resources, no quota and no disruption budget counts it, and nothing is enacted
# on it; a job whose pods all finished has left the cluster. This is the one list of them: the
# engine, the rows, the snapshot, the backends and the pages read it here.
POD_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed")
FINISHED_POD_PHASES: Final = ("Succeeded", "Failed")

_DIGITS: Final = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[Any, ...]:
    """The one order of names, for the engine (pods placed in name order) and every page:
    digit runs compare as numbers, so "n2" comes before "n10" and "pod-2" before "pod-10"."""
    head, sep, tail = name.rpartition("-")
    if sep and tail.isdecimal() and _DIGITS.search(head) is None:
        return (head + sep, int(tail), "")  # the split below, faster for "<prefix>-<n>"
    parts: list[Any] = _DIGITS.split(name)  # text, digits, text, ...: the digit runs are odd
    parts[1::2] = [int(p) for p in parts[1::2]]
    return tuple(parts)


# --- Node labels ---------------------------------------------------------------------------------
LABEL_HOSTNAME: Final = "kubernetes.io/hostname"
LABEL_PARTITION_POLICY: Final = "node.koordinator.sh/gpu-partition-policy"
LABEL_GPU_VENDOR: Final = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL: Final = "node.koordinator.sh/gpu-model"
# NVIDIA's network topology labels (the demo's spine and block layers).
LABEL_NETWORK_SPINE: Final = "network.topology.nvidia.com/spine"
LABEL_NETWORK_BLOCK: Final = "network.topology.nvidia.com/block"

# --- Pod resources (Koordinator's `DeviceResourceNames`, apis/extension/device_share.go) --------
NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
HYGON_DCU: Final = "dcu.com/gpu"
HUAWEI_NPU: Final = "huawei.com/npu"
CAMBRICON_MLU: Final = "cambricon.com/mlu"
CAMBRICON_MLU_VCORE: Final = "cambricon.com/mlu.smlu.vcore"
# Koordinator's own percentage of cards: cores and memory ratio at once (200 = two whole cards).
KOORD_GPU: Final = "koordinator.sh/gpu"
GPU_CORE: Final = "koordinator.sh/gpu-core"
GPU_MEMORY: Final = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO: Final = "koordinator.sh/gpu-memory-ratio"
GPU_SHARED: Final = "koordinator.sh/gpu.shared"
NPU_CORE: Final = "huawei.com/npu-core"
NPU_CPU: Final = "huawei.com/npu-cpu"
NPU_DVPP: Final = "huawei.com/npu-dvpp"
RDMA: Final = "koordinator.sh/rdma"
FPGA: Final = "koordinator.sh/fpga"
# The domains of device resources (a request in them is judged by the device rules).
DEVICE_RESOURCE_DOMAINS: Final = frozenset(
    {"koordinator.sh", "huawei.com", "cambricon.com", "nvidia.com"}
)

# Whole cards of another vendor's device plugin, counted as 100 percent each.
WHOLE_CARD_RESOURCES: Final = (NVIDIA_GPU, AMD_GPU, HYGON_DCU)
NPU_RESOURCES: Final = frozenset({NPU_CORE, NPU_CPU, NPU_DVPP})
# Everything that is a request for the Device CR's "gpu" entries (GPUs, NPUs and MLUs alike).
GPU_RESOURCES: Final = frozenset(
    {*WHOLE_CARD_RESOURCES, KOORD_GPU, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED}
    | NPU_RESOURCES
)
DEVICE_RESOURCES: Final = GPU_RESOURCES | {RDMA, FPGA}

# --- Device CR types and vendors -----------------------------------------------------------------
DeviceType = Literal["gpu", "rdma", "fpga"]
DEVICE_TYPES: Final = ("gpu", "rdma", "fpga")
VENDOR_NVIDIA: Final = "nvidia"
VENDOR_HUAWEI: Final = "huawei"
VENDOR_CAMBRICON: Final = "cambricon"
PartitionPolicy = Literal["Honor", "Prefer"]
Scoring = Literal["LeastAllocated", "MostAllocated"]
JOINT_SCOPE_SAME_PCIE: Final = "SamePCIe"

# --- Pod annotations the scheduler reads or writes ---------------------------------------------
# Every annotation in this domain is part of a pod's scheduling template (device-joint-allocate...).
SCHEDULING_ANNOTATION_PREFIX: Final = SCHEDULING_GROUP + "/"
ANNOTATION_DEVICE_ALLOCATED: Final = SCHEDULING_ANNOTATION_PREFIX + "device-allocated"
ANNOTATION_JOINT_ALLOCATE: Final = SCHEDULING_ANNOTATION_PREFIX + "device-joint-allocate"
ANNOTATION_DEVICE_ALLOCATE_HINT: Final = SCHEDULING_ANNOTATION_PREFIX + "device-allocate-hint"
ANNOTATION_GPU_PARTITIONS: Final = SCHEDULING_ANNOTATION_PREFIX + "gpu-partitions"
# Written for every pod given a GPU: the chosen minors, comma-separated (device_plugin_adapter.go).
ANNOTATION_GPU_MINORS: Final = SCHEDULING_ANNOTATION_PREFIX + "gpu-minors"
# A pod's request for partitioned cards (honour the partition table even on a Prefer node).
ANNOTATION_GPU_PARTITION_SPEC: Final = SCHEDULING_ANNOTATION_PREFIX + "gpu-partition-spec"
# Its `allocatePolicy` values (GPUPartitionAllocatePolicy): only the best-scored partitions, or
# the best that is free (the default).
PARTITION_RESTRICTED: Final = "Restricted"
PARTITION_BEST_EFFORT: Final = "BestEffort"
# A shared-GPU pod's isolation provider (a pod label), matched against the node's same label
# (apis/extension/device_share.go LabelGPUIsolationProvider; HAMi-core the one value v1.7 knows).
LABEL_GPU_ISOLATION_PROVIDER: Final = "koordinator.sh/gpu-isolation-provider"
GPU_ISOLATION_HAMI_CORE: Final = "HAMi-core"
ANNOTATION_USAGE_THRESHOLDS: Final = SCHEDULING_ANNOTATION_PREFIX + "usage-thresholds"
# Cambricon's dynamic sMLU device plugin reads these; "ASSIGHED" is the vendor's own spelling.
ANNOTATION_CAMBRICON_PROFILE: Final = "CAMBRICON_DSMLU_PROFILE"
ANNOTATION_CAMBRICON_ASSIGNED: Final = "CAMBRICON_DSMLU_ASSIGHED"
# Huawei's device plugin reads the chosen cards (or "<minor>-<template>") from this annotation.
ANNOTATION_HUAWEI_NPU_CORE: Final = NPU_CORE

# --- Priority, QoS and preemption labels ---------------------------------------------------------
LABEL_PRIORITY_CLASS: Final = "koordinator.sh/priority-class"
LABEL_QOS_CLASS: Final = "koordinator.sh/qosClass"
LABEL_DISABLE_PREEMPTIBLE: Final = SCHEDULING_ANNOTATION_PREFIX + "disable-preemptible"

# --- Gangs (coscheduling.go) ---------------------------------------------------------------------
GANG_PREFIX: Final = "gang.scheduling.koordinator.sh/"
GANG_NAME: Final = GANG_PREFIX + "name"
GANG_MIN_AVAILABLE: Final = GANG_PREFIX + "min-available"
GANG_TOTAL_NUMBER: Final = GANG_PREFIX + "total-number"
GANG_MODE: Final = GANG_PREFIX + "mode"
GANG_WAITING_TIME: Final = GANG_PREFIX + "waiting-time"
GANG_GROUPS: Final = GANG_PREFIX + "groups"
GANG_TOPOLOGY_SPEC: Final = GANG_PREFIX + "network-topology-spec"
GANG_TOPOLOGY_INDEX: Final = GANG_PREFIX + "network-topology-index"
# Which members count towards min-available in Permit (apis/extension/coscheduling.go), and
# the same under the lightweight coscheduling prefix; its three values.
GANG_MATCH_POLICY: Final = GANG_PREFIX + "match-policy"
LIGHTWEIGHT_GANG_MATCH_POLICY: Final = "pod-group.scheduling.sigs.k8s.io/match-policy"
MATCH_ONLY_WAITING: Final = "only-waiting"
MATCH_WAITING_AND_RUNNING: Final = "waiting-and-running"
MATCH_ONCE_SATISFIED: Final = "once-satisfied"
MATCH_POLICIES: Final = (MATCH_ONCE_SATISFIED, MATCH_ONLY_WAITING, MATCH_WAITING_AND_RUNNING)
GANG_ANNOTATIONS: Final = (
    GANG_NAME,
    GANG_MIN_AVAILABLE,
    GANG_TOTAL_NUMBER,
    GANG_MODE,
    GANG_WAITING_TIME,
    GANG_GROUPS,
    GANG_TOPOLOGY_SPEC,
    GANG_TOPOLOGY_INDEX,
)
DEFAULT_WAITING_SECONDS: Final = 600

# --- Elastic quotas (elastic_quota.go) -----------------------------------------------------------
QUOTA_PREFIX: Final = "quota.scheduling.koordinator.sh/"
QUOTA_NAME: Final = QUOTA_PREFIX + "name"
QUOTA_PARENT: Final = QUOTA_PREFIX + "parent"
QUOTA_IS_PARENT: Final = QUOTA_PREFIX + "is-parent"
QUOTA_ALLOW_LENT: Final = QUOTA_PREFIX + "allow-lent-resource"
QUOTA_SHARED_WEIGHT: Final = QUOTA_PREFIX + "shared-weight"
QUOTA_PREEMPTIBLE: Final = QUOTA_PREFIX + "preemptible"
# The namespaces, as a JSON array, whose pods may use the quota besides its own namespace.
QUOTA_NAMESPACES: Final = QUOTA_PREFIX + "namespaces"
# Koordinator's implicit root of the quota tree: a parent label naming it means "no parent".
ROOT_QUOTA: Final = "koordinator-root-quota"
# Where Koordinator counts a pod whose quota label names no quota, or that has none and no
# quota of its namespace (apis/extension/elastic_quota.go DefaultQuotaName).
DEFAULT_QUOTA: Final = "koordinator-default-quota"
# Koordinator's quota of kube-system's pods (apis/extension/elastic_quota.go SystemQuotaName): like
# the default quota it stands beside the tree, its use taken out of what the tree shares.
SYSTEM_QUOTA: Final = "koordinator-system-quota"

# --- koord-scheduler's configuration (a ConfigMap holding a KubeSchedulerConfiguration) --------
SCHEDULER_CONFIG_NAME: Final = "koord-scheduler-config"
SCHEDULER_CONFIG_NAMESPACE: Final = "koordinator-system"
SCHEDULER_CONFIG_KEY: Final = "koord-scheduler-config"
SCHEDULER_CONFIG_API: Final = "kubescheduler.config.k8s.io/v1"
# koordweb's own key in that ConfigMap: the plugin arguments Koordinator has no field for (JSON).
KOORDWEB_ARGS_KEY: Final = "koordweb-scheduler-args"

# --- koordweb's own ------------------------------------------------------------------------------
# How long a job runs once started, for simulation and replay.
DURATION_ANNOTATION: Final = "koordweb.io/duration-seconds"
# The simulated koordlet's GPU utilisation profile of a job.
GPU_PROFILE_ANNOTATION: Final = "sim.koordweb.io/gpu-profile"
