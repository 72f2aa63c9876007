"""Device pod annotations: rendering Koordinator's and the vendors', and reading them back.

`scheduling.koordinator.sh/device-allocated` is JSON `{type: [{minor, resources, extension}]}` with
quantities as strings, as Koordinator writes it (each card's requested resources plus its memory in
bytes and percent); every GPU pod gets `scheduling.koordinator.sh/gpu-minors`, Ascend pods also
`huawei.com/npu-core` and Cambricon pods `CAMBRICON_DSMLU_PROFILE` / `CAMBRICON_DSMLU_ASSIGHED`
(Koordinator's device_plugin_adapter.go). The bind-time stamps Koordinator adds there
(`scheduling.koordinator.sh/bind-timestamp`, `predicate-time`) need a clock, which the engine has
not: see docs/koordinator-compat.md. Reading the annotation of
running pods back gives the usage that keeps their cards from being handed out twice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from scheduler.devices import names as n
from scheduler.devices.model import (
    AllocatedDevice,
    DeviceUsage,
    NodeDevices,
    VirtualFunction,
)
from scheduler.devices.quantity import to_int


def render_annotations(node: NodeDevices, devices: Iterable[AllocatedDevice]) -> dict[str, str]:
    """Every annotation the pod holding `devices` on `node` must carry."""
    held = tuple(devices)
    annotations = {n.ANNOTATION_DEVICE_ALLOCATED: render_device_allocated(held)}
    gpus = [d for d in held if d.type == "gpu"]
    if gpus:
        annotations[n.ANNOTATION_GPU_MINORS] = ",".join(str(d.minor) for d in gpus)
    if gpus and node.vendor == n.VENDOR_HUAWEI:
        annotations[n.ANNOTATION_HUAWEI_NPU_CORE] = (
            f"{gpus[0].minor}-{gpus[0].template}"
            if gpus[0].template
            else ",".join(str(d.minor) for d in gpus)
        )
    if gpus and node.vendor == n.VENDOR_CAMBRICON:
        card = gpus[0]
        blocks = math.ceil(card.memory / n.MLU_MEMORY_BLOCK)
        annotations[n.ANNOTATION_CAMBRICON_PROFILE] = f"{card.minor}_{card.core}_{blocks}"
        annotations[n.ANNOTATION_CAMBRICON_ASSIGNED] = "false"
    return annotations


def render_device_allocated(devices: Iterable[AllocatedDevice]) -> str:
    """The `device-allocated` JSON for `devices` (keys sorted, compact, deterministic)."""
    return json.dumps(device_allocated_data(devices), sort_keys=True, separators=(",", ":"))


def device_allocated_data(devices: Iterable[AllocatedDevice]) -> dict[str, list[dict[str, Any]]]:
    """The `device-allocated` document as plain data: {type: [{minor, resources, extension}]}."""
    by_type: dict[str, list[dict[str, Any]]] = {}
    for held in sorted(devices, key=lambda d: (d.type, d.minor)):
        entry: dict[str, Any] = {"minor": held.minor, "resources": _resources(held)}
        extension: dict[str, Any] = {}
        if held.vfs:
            extension["vfs"] = [{"minor": vf.minor, "busID": vf.bus_id} for vf in held.vfs]
        if held.template:
            extension["gpuSharedResourceTemplate"] = held.template
        if extension:
            entry["extension"] = extension
        by_type.setdefault(held.type, []).append(entry)
    return by_type


def _resources(held: AllocatedDevice) -> dict[str, str]:
    if held.type == "rdma":
        return {n.RDMA: str(held.rdma)}
    resources = {n.GPU_MEMORY: str(held.memory), n.GPU_MEMORY_RATIO: str(held.memory_ratio)}
    for name, amount in (
        (n.GPU_CORE, held.core),
        (n.NPU_CORE, held.npu_core),
        (n.NPU_CPU, held.npu_cpu),
        (n.NPU_DVPP, held.dvpp),
    ):
        if amount:
            resources[name] = str(amount)
    return resources


def parse_device_allocated(raw: str) -> tuple[AllocatedDevice, ...]:
    """The devices a `device-allocated` annotation names; ValueError when it is malformed."""
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"device-allocated is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError("device-allocated must be an object of device type -> allocations")
    held: list[AllocatedDevice] = []
    for device_type, entries in data.items():
        if device_type not in n.DEVICE_TYPES or not isinstance(entries, list):
            raise ValueError(f"device-allocated has an unknown device type {device_type!r}")
        held.extend(_parse_entry(device_type, entry) for entry in entries)
    return tuple(held)


def _parse_entry(device_type: n.DeviceType, entry: object) -> AllocatedDevice:
    if not isinstance(entry, dict) or not isinstance(entry.get("minor"), int):
        raise ValueError(f"device-allocated {device_type} entries need an integer minor")
    resources = entry.get("resources") or {}
    extension = entry.get("extension") or {}
    if not isinstance(resources, dict) or not isinstance(extension, dict):
        raise ValueError("device-allocated resources and extension must be objects")

    def amount(name: str) -> int:
        return to_int(resources.get(name, 0))

    vfs = tuple(
        VirtualFunction(minor=int(vf.get("minor", 0)), bus_id=str(vf.get("busID", "")))
        for vf in extension.get("vfs") or ()
    )
    return AllocatedDevice(
        type=device_type,
        minor=entry["minor"],
        core=amount(n.GPU_CORE),
        memory=amount(n.GPU_MEMORY),
        memory_ratio=amount(n.GPU_MEMORY_RATIO),
        npu_core=amount(n.NPU_CORE),
        npu_cpu=amount(n.NPU_CPU),
        dvpp=amount(n.NPU_DVPP),
        rdma=amount(n.RDMA),
        vfs=vfs,
        template=str(extension.get("gpuSharedResourceTemplate", "")),
    )


def usage_from_pods(
    node: NodeDevices, pod_annotations: Iterable[Mapping[str, str]]
) -> tuple[DeviceUsage, list[str]]:
    """The node's usage from its running pods' annotations, and a message per unreadable one.

    A malformed annotation is reported, not fatal: one bad pod must not stop a round.
    """
    usage = DeviceUsage(node)
    problems: list[str] = []
    for pod in pod_annotations:
        raw = pod.get(n.ANNOTATION_DEVICE_ALLOCATED)
        if not raw:
            continue
        try:
            usage.apply(parse_device_allocated(raw))
        except ValueError as error:
            problems.append(str(error))
    return usage, problems
