"""Building a node's `NodeDevices` from its Device CR entries, node labels and annotations.

The vendor and model come from the node labels `node.koordinator.sh/gpu-vendor` / `gpu-model`
(falling back to the cards' own fields); the partition table from the Device CR annotation
`scheduling.koordinator.sh/gpu-partitions` or the built-in Hopper table; the partition policy from
the label `node.koordinator.sh/gpu-partition-policy` (Honor, else Prefer); Ascend templates from the
built-in profiles overridden by the template ConfigMap.
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
) -> NodeDevices:
    """The node's devices as the allocator needs them; ValueError for a bad partition table."""
    labels = labels or {}
    by_type: dict[str, list[Device]] = {t: [] for t in n.DEVICE_TYPES}
    for device in devices:
        by_type[device.type].append(device)
    gpus = tuple(sorted(by_type["gpu"], key=lambda d: d.minor))
    vendor = labels.get(n.LABEL_GPU_VENDOR) or next((d.vendor for d in gpus if d.vendor), "")
    model = labels.get(n.LABEL_GPU_MODEL) or next((d.model for d in gpus if d.model), "")
    raw_table = (device_annotations or {}).get(n.ANNOTATION_GPU_PARTITIONS)
    partitions: PartitionTable | None = (
        parse_partition_table(raw_table) if raw_table else builtin_table(vendor, model)
    )
    policy: n.PartitionPolicy = (
        "Honor" if labels.get(n.LABEL_PARTITION_POLICY) == "Honor" else "Prefer"
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
    )
