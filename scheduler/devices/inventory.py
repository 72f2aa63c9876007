"""Building a node's `NodeDevices` from its Device CR entries, node labels and annotations.

The vendor and model come from the node labels `node.koordinator.sh/gpu-vendor` / `gpu-model`
(falling back to the Device CR's labels, then the cards' own fields). The partition table and policy
follow Koordinator's device cache (device_cache.go) and `GetDesignatedGPUPartitionIndexer`: when the
Device CR has a `scheduling.koordinator.sh/gpu-partitions` annotation, its table and the Device's
`node.koordinator.sh/gpu-partition-policy` label count; otherwise the Node is the fallback, with
the built-in Hopper table for its model and the Node's policy label (Honor, else Prefer). Ascend
templates come from the built-in profiles overridden by the template ConfigMap.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduler.devices import names as n
from scheduler.devices.ascend import profile_with_overrides
from scheduler.devices.model import Device, NodeDevices, PartitionTable
from scheduler.devices.partitions import builtin_table, parse_partition_table

TemplateConfig = Mapping[str, Mapping[str, Mapping[str, object]]]
"""Parsed template ConfigMap data: "<vendor>-<model>" -> template name -> resources."""


def build_node_devices(
    node: str,
    devices: Iterable[Device],
    labels: Mapping[str, str] | None = None,
    device_annotations: Mapping[str, str] | None = None,
    template_config: TemplateConfig | None = None,
    device_labels: Mapping[str, str] | None = None,
) -> NodeDevices:
    """The node's devices as the allocator needs them; ValueError for a bad partition table.

    `labels` are the Node's, `device_labels` and `device_annotations` the Device CR's.
    """
    labels = labels or {}
    device_labels = device_labels or {}
    by_type: dict[str, list[Device]] = {t: [] for t in n.DEVICE_TYPES}
    for device in devices:
        by_type[device.type].append(device)
    gpus = tuple(sorted(by_type["gpu"], key=lambda d: d.minor))
    vendor = (
        labels.get(n.LABEL_GPU_VENDOR)
        or device_labels.get(n.LABEL_GPU_VENDOR)
        or next((d.vendor for d in gpus if d.vendor), "")
    )
    model = (
        labels.get(n.LABEL_GPU_MODEL)
        or device_labels.get(n.LABEL_GPU_MODEL)
        or next((d.model for d in gpus if d.model), "")
    )
    raw_table = (device_annotations or {}).get(n.ANNOTATION_GPU_PARTITIONS)
    partitions: PartitionTable | None
    if raw_table:
        partitions, policy_labels = parse_partition_table(raw_table), device_labels
    else:
        partitions, policy_labels = builtin_table(vendor, model), labels
    policy: n.PartitionPolicy = (
        "Honor" if policy_labels.get(n.LABEL_PARTITION_POLICY) == "Honor" else "Prefer"
    )
    ascend = profile_with_overrides(model, template_config) if vendor == n.VENDOR_HUAWEI else None
    return NodeDevices(
        node=node,
        gpus=gpus,
        rdmas=tuple(sorted(by_type["rdma"], key=lambda d: d.minor)),
        fpgas=tuple(sorted(by_type["fpga"], key=lambda d: d.minor)),
        vendor=vendor,
        model=model,
        partitions=partitions if gpus else None,
        partition_policy=policy,
        ascend=ascend,
        isolation_provider=labels.get(n.LABEL_GPU_ISOLATION_PROVIDER, ""),
    )


def device_allocatable(node: NodeDevices) -> dict[str, int]:
    """The extended resources a node with these devices advertises, as koordlet reports them.

    The snapshot adapter merges these into `NodeInfo.allocatable` (keeping any value the cluster
    reported), so the resource-fit filter's totals agree with the card-level allocator: healthy
    cards only, whole cards as 100 percent each.
    """
    healthy = [d for d in node.gpus if d.health]
    nics = [d for d in node.rdmas if d.health]
    resources: dict[str, int] = {}
    if healthy:
        resources[n.GPU_CORE] = sum(d.core for d in healthy)
        resources[n.GPU_MEMORY] = sum(d.memory for d in healthy)
        resources[n.GPU_MEMORY_RATIO] = sum(d.memory_ratio for d in healthy)
        # Every vendor's cards can be shared (GPU shares, vNPUs, dynamic sMLUs).
        resources[n.GPU_SHARED] = n.FULL * len(healthy)
        if node.vendor not in (n.VENDOR_HUAWEI, n.VENDOR_CAMBRICON):
            # Whole cards by count are NVIDIA's (or an unlabelled GPU's); an Ascend node offers
            # its cards through huawei.com/npu-* below, so a pod asking for nvidia.com/gpu never
            # lands on an NPU or an MLU.
            resources[n.NVIDIA_GPU] = len(healthy)
            resources[n.KOORD_GPU] = n.FULL * len(healthy)
        if node.ascend is not None:
            resources[n.NPU_CORE] = node.ascend.aicore * len(healthy)
            resources[n.NPU_CPU] = node.ascend.aicpu * len(healthy)
            resources[n.NPU_DVPP] = n.FULL * len(healthy)
    if nics:
        resources[n.RDMA] = sum(d.rdma for d in nics)
    return resources
