"""Builders for device tests: nodes that read like Koordinator's public examples."""

from __future__ import annotations

from dataclasses import replace

from scheduler.devices import (
    Device,
    DeviceRequest,
    DeviceTopology,
    DeviceUsage,
    NodeDevices,
    VirtualFunction,
    build_node_devices,
    parse_device_request,
)
from scheduler.devices.names import ANNOTATION_JOINT_ALLOCATE
from scheduler.model import NodeInfo
from tests.scheduler.builders import node

GiB = 1024**3
JOINT = {ANNOTATION_JOINT_ALLOCATE: '{"deviceTypes":["gpu","rdma"],"requiredScope":"SamePCIe"}'}


def gpu(
    minor: int, numa: int = -1, pcie: str = "", memory: int = 80 * GiB, health: bool = True
) -> Device:
    topology = DeviceTopology(socket_id=max(numa, 0), numa_node=numa, pcie_id=pcie)
    return Device(type="gpu", minor=minor, memory=memory, topology=topology, health=health)


def rdma(minor: int, numa: int, pcie: str, vfs: int = 2) -> Device:
    functions = tuple(
        VirtualFunction(minor=v, bus_id=f"0000:{minor:02x}:00.{v + 1}") for v in range(vfs)
    )
    topology = DeviceTopology(numa_node=numa, pcie_id=pcie, bus_id=f"0000:{minor:02x}:00.0")
    return Device(type="rdma", minor=minor, topology=topology, vfs=functions)


def eight_gpu_node(name: str = "node-1", labels: dict[str, str] | None = None) -> NodeDevices:
    """koordinator.md's example: NUMA0 = PCIe0 {GPU0, GPU1, RDMA1}, PCIe1 {GPU2, GPU3, RDMA2};
    NUMA1 = PCIe2 {GPU4, GPU5, RDMA3}, PCIe3 {GPU6, GPU7, RDMA4}."""
    devices = [gpu(m, numa=m // 4, pcie=str(m // 2)) for m in range(8)]
    devices += [rdma(p + 1, numa=p // 2, pcie=str(p)) for p in range(4)]
    return build_node_devices(name, devices, labels=labels or {})


def plain_gpu_node(minors: range | list[int], memory: int = 8 * GiB, **labels: str) -> NodeDevices:
    return build_node_devices("node-1", [gpu(m, memory=memory) for m in minors], labels=labels)


def request(annotations: dict[str, str] | None = None, **resources: int) -> DeviceRequest:
    """A parsed request from short names: gpu, kgpu, core, memory, ratio, shared, rdma, npu_*."""
    names = {
        "gpu": "nvidia.com/gpu",
        "kgpu": "koordinator.sh/gpu",
        "core": "koordinator.sh/gpu-core",
        "memory": "koordinator.sh/gpu-memory",
        "ratio": "koordinator.sh/gpu-memory-ratio",
        "shared": "koordinator.sh/gpu.shared",
        "rdma": "koordinator.sh/rdma",
        "npu_core": "huawei.com/npu-core",
        "npu_cpu": "huawei.com/npu-cpu",
        "npu_dvpp": "huawei.com/npu-dvpp",
    }
    parsed = parse_device_request({names[k]: v for k, v in resources.items()}, annotations)
    assert parsed is not None
    return parsed


def empty_usage(node: NodeDevices) -> DeviceUsage:
    return DeviceUsage(node)


def gpu_node(name: str, labels: dict[str, str] | None = None) -> NodeInfo:
    """A node of 64 CPUs, 8 GPUs and 4 RDMA NICs, as Koordinator's device examples show it."""
    built = node(name).cpu(64).memory(512).gpus(8)
    built.resource("koordinator.sh/gpu-core", 800).resource("koordinator.sh/gpu-memory-ratio", 800)
    built.resource("koordinator.sh/rdma", 400)
    for key, value in (labels or {}).items():
        built.label(key, value)
    info = built.build()
    return replace(info, devices=eight_gpu_node(name, labels=dict(info.labels)))
