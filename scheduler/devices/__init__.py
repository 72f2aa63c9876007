"""Heterogeneous devices: GPUs, Ascend NPUs, Cambricon MLUs and RDMA NICs, and their allocation.

A pure library used by the devices engine plugin, the API (request validation) and the snapshot
adapter (building `NodeDevices` and usage from running pods' annotations).
"""

from scheduler.devices.allocator import (
    DeviceAllocation,
    allocate,
    count_fits,
    explain,
    node_score,
    score_request,
)
from scheduler.devices.annotations import (
    parse_device_allocated,
    render_annotations,
    render_device_allocated,
    usage_from_pods,
)
from scheduler.devices.inventory import TemplateConfig, build_node_devices, device_allocatable
from scheduler.devices.model import (
    AllocatedDevice,
    AscendProfile,
    Device,
    DeviceTopology,
    DeviceUsage,
    GPUPartition,
    NodeDevices,
    VirtualFunction,
    VnpuTemplate,
)
from scheduler.devices.request import (
    DeviceRequest,
    DeviceRequestError,
    parse_device_request,
    validate_device_request,
)

__all__ = [
    "AllocatedDevice",
    "AscendProfile",
    "Device",
    "DeviceAllocation",
    "DeviceRequest",
    "DeviceRequestError",
    "DeviceTopology",
    "DeviceUsage",
    "GPUPartition",
    "NodeDevices",
    "TemplateConfig",
    "VirtualFunction",
    "VnpuTemplate",
    "allocate",
    "build_node_devices",
    "count_fits",
    "device_allocatable",
    "explain",
    "node_score",
    "parse_device_allocated",
    "parse_device_request",
    "render_annotations",
    "render_device_allocated",
    "score_request",
    "usage_from_pods",
    "validate_device_request",
]
