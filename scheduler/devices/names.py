"""Koordinator's device vocabulary for the allocator: the device part of `scheduler.vocabulary`
(resource names, annotations, labels, vendors: declared there, re-exported here) and the units.
"""

from __future__ import annotations

from typing import Final

from scheduler.vocabulary import (
    AMD_GPU,
    ANNOTATION_CAMBRICON_ASSIGNED,
    ANNOTATION_CAMBRICON_PROFILE,
    ANNOTATION_DEVICE_ALLOCATED,
    ANNOTATION_GPU_MINORS,
    ANNOTATION_GPU_PARTITION_SPEC,
    ANNOTATION_GPU_PARTITIONS,
    ANNOTATION_HUAWEI_NPU_CORE,
    ANNOTATION_JOINT_ALLOCATE,
    DEVICE_RESOURCES,
    DEVICE_TYPES,
    FPGA,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_RESOURCES,
    GPU_SHARED,
    HYGON_DCU,
    JOINT_SCOPE_SAME_PCIE,
    KOORD_GPU,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
    LABEL_PARTITION_POLICY,
    NPU_CORE,
    NPU_CPU,
    NPU_DVPP,
    NPU_RESOURCES,
    NVIDIA_GPU,
    RDMA,
    VENDOR_CAMBRICON,
    VENDOR_HUAWEI,
    VENDOR_NVIDIA,
    WHOLE_CARD_RESOURCES,
    DeviceType,
    PartitionPolicy,
    Scoring,
)

__all__ = [
    "AMD_GPU",
    "ANNOTATION_CAMBRICON_ASSIGNED",
    "ANNOTATION_CAMBRICON_PROFILE",
    "ANNOTATION_DEVICE_ALLOCATED",
    "ANNOTATION_GPU_MINORS",
    "ANNOTATION_GPU_PARTITIONS",
    "ANNOTATION_GPU_PARTITION_SPEC",
    "ANNOTATION_HUAWEI_NPU_CORE",
    "ANNOTATION_JOINT_ALLOCATE",
    "DEVICE_RESOURCES",
    "DEVICE_TYPES",
    "FPGA",
    "FULL",
    "GPU_CORE",
    "GPU_MEMORY",
    "GPU_MEMORY_RATIO",
    "GPU_RESOURCES",
    "GPU_SHARED",
    "HYGON_DCU",
    "JOINT_SCOPE_SAME_PCIE",
    "KOORD_GPU",
    "LABEL_GPU_MODEL",
    "LABEL_GPU_VENDOR",
    "LABEL_PARTITION_POLICY",
    "MLU_MEMORY_BLOCK",
    "NPU_CORE",
    "NPU_CPU",
    "NPU_DVPP",
    "NPU_RESOURCES",
    "NVIDIA_GPU",
    "RDMA",
    "VENDOR_CAMBRICON",
    "VENDOR_HUAWEI",
    "VENDOR_NVIDIA",
    "WHOLE_CARD_RESOURCES",
    "DeviceType",
    "PartitionPolicy",
    "Scoring",
]

# A whole card is 100 percent of its cores and of its memory.
FULL: Final = 100
# Cambricon slices memory in blocks of 256 MiB.
MLU_MEMORY_BLOCK: Final = 256 * 1024 * 1024
