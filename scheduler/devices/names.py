"""Koordinator's device vocabulary: resource names, annotations, labels, vendors.

One place for every string a pod, node or Device CR uses to talk about devices, spelled exactly as
Koordinator v1.7 and the vendor device plugins spell them.
"""

from __future__ import annotations

from typing import Final, Literal

DeviceType = Literal["gpu", "rdma", "fpga"]
DEVICE_TYPES: Final = ("gpu", "rdma", "fpga")

# Pod resources (Koordinator's `DeviceResourceNames`, apis/extension/device_share.go).
NVIDIA_GPU: Final = "nvidia.com/gpu"
AMD_GPU: Final = "amd.com/gpu"
HYGON_DCU: Final = "dcu.com/gpu"
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

# Whole cards of another vendor's device plugin, counted as 100 percent each.
WHOLE_CARD_RESOURCES: Final = (NVIDIA_GPU, AMD_GPU, HYGON_DCU)
NPU_RESOURCES: Final = frozenset({NPU_CORE, NPU_CPU, NPU_DVPP})
# Everything that is a request for the Device CR's "gpu" entries (GPUs, NPUs and MLUs alike).
GPU_RESOURCES: Final = frozenset(
    {*WHOLE_CARD_RESOURCES, KOORD_GPU, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED}
    | NPU_RESOURCES
)
DEVICE_RESOURCES: Final = GPU_RESOURCES | {RDMA, FPGA}

# Annotations and labels.
ANNOTATION_DEVICE_ALLOCATED: Final = "scheduling.koordinator.sh/device-allocated"
ANNOTATION_JOINT_ALLOCATE: Final = "scheduling.koordinator.sh/device-joint-allocate"
ANNOTATION_GPU_PARTITIONS: Final = "scheduling.koordinator.sh/gpu-partitions"
LABEL_PARTITION_POLICY: Final = "node.koordinator.sh/gpu-partition-policy"
LABEL_GPU_VENDOR: Final = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL: Final = "node.koordinator.sh/gpu-model"
# Written for every pod given a GPU: the chosen minors, comma-separated (device_plugin_adapter.go).
ANNOTATION_GPU_MINORS: Final = "scheduling.koordinator.sh/gpu-minors"
# A pod's request for partitioned cards (honour the partition table even on a Prefer node).
ANNOTATION_GPU_PARTITION_SPEC: Final = "scheduling.koordinator.sh/gpu-partition-spec"
# Cambricon's dynamic sMLU device plugin reads these; "ASSIGHED" is the vendor's own spelling.
ANNOTATION_CAMBRICON_PROFILE: Final = "CAMBRICON_DSMLU_PROFILE"
ANNOTATION_CAMBRICON_ASSIGNED: Final = "CAMBRICON_DSMLU_ASSIGHED"
# Huawei's device plugin reads the chosen cards (or "<minor>-<template>") from this annotation.
ANNOTATION_HUAWEI_NPU_CORE: Final = NPU_CORE

VENDOR_NVIDIA: Final = "nvidia"
VENDOR_HUAWEI: Final = "huawei"
VENDOR_CAMBRICON: Final = "cambricon"

PartitionPolicy = Literal["Honor", "Prefer"]
Scoring = Literal["LeastAllocated", "MostAllocated"]
JOINT_SCOPE_SAME_PCIE: Final = "SamePCIe"

# A whole card is 100 percent of its cores and of its memory.
FULL: Final = 100
# Cambricon slices memory in blocks of 256 MiB.
MLU_MEMORY_BLOCK: Final = 256 * 1024 * 1024
