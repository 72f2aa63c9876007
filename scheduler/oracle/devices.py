"""Cards on a node, by Koordinator's DeviceShare: none given past what it has, partitions honoured.

What a pod holds is read from Koordinator's `device-allocated` form, `{type: [{minor,
resources, extension: {vfs: [{minor}]}}]}`: a new pod's from its `Placement.devices`, a bound
pod's from its `scheduling.koordinator.sh/device-allocated` annotation (the cluster's own record,
so the bound allocation is known; a bound pod without it holds no card as far as the oracle can
tell, as for Koordinator).

- Cards: on a node with a device inventory, for every card a new pod is given, what all holders
  (bound and unfinished pods, terminating ones and this round's victims included, plus the new
  pods) hold of it stays within the card: GPU core and memory ratio within the card's percents,
  memory within its bytes (when known), Ascend AI cores and AI CPUs within the model's, an RDMA
  NIC's share within its own, and no virtual function held twice. A new pod is given only cards
  the inventory lists, healthy ones.
- Partitions: when the inventory carries a partition table and the policy is Honor (Restricted),
  a pod given whole GPUs gets exactly the cards of one partition of that size.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from typing import Any

from scheduler.devices.model import Device, NodeDevices
from scheduler.devices.names import (
    ANNOTATION_DEVICE_ALLOCATED,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    NPU_CORE,
    NPU_CPU,
    RDMA,
)
from scheduler.model import PodInfo
from scheduler.oracle.view import RoundView
from scheduler.oracle.violation import DEVICE_CARDS, GPU_PARTITION, Violation

_QUANTITY = re.compile(r"([+-]?[0-9]+)([KMGTPE]i?|k|m)?\Z")
_FACTORS = {
    "": 1, "k": 10**3, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip
HONOURED_POLICIES = ("Honor", "Restricted")

Held = tuple[str, int, dict[str, int], tuple[int, ...]]
"""One card a pod holds: device type, minor, resource -> amount, virtual function minors."""


def quantity(value: Any) -> int:
    """A resource amount as written in the allocation (an int or a Kubernetes quantity)."""
    if isinstance(value, int):
        return value
    text = str(value).strip()
    found = _QUANTITY.match(text)
    if found is None:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = int(found.group(1)), found.group(2) or ""
    if suffix == "m":
        return -(-number // 1000)
    return number * _FACTORS[suffix]


def held_cards(allocation: Mapping[str, Any] | str | None) -> Iterator[Held]:
    if not allocation:
        return
    if isinstance(allocation, str):
        allocation = json.loads(allocation)
        assert isinstance(allocation, Mapping)
    for kind, entries in allocation.items():
        for entry in entries or ():
            resources = {r: quantity(v) for r, v in (entry.get("resources") or {}).items()}
            extension = entry.get("extension") or {}
            vfs = tuple(int(vf["minor"]) for vf in extension.get("vfs") or ())
            yield str(kind), int(entry["minor"]), resources, vfs


def _bound_cards(pod: PodInfo) -> Iterator[Held]:
    return held_cards(pod.annotations.get(ANNOTATION_DEVICE_ALLOCATED))


def _limits(inventory: NodeDevices, kind: str, device: Device) -> dict[str, int]:
    if kind == "rdma":
        return {RDMA: device.rdma}
    limits = {GPU_CORE: device.core, GPU_MEMORY_RATIO: device.memory_ratio}
    if device.memory > 0:
        limits[GPU_MEMORY] = device.memory
    if inventory.ascend is not None:
        limits[NPU_CORE] = inventory.ascend.aicore
        limits[NPU_CPU] = inventory.ascend.aicpu
    return limits


def _device(inventory: NodeDevices, kind: str, minor: int) -> Device | None:
    listed = {"gpu": inventory.gpus, "rdma": inventory.rdmas, "fpga": inventory.fpgas}
    return next((d for d in listed.get(kind, ()) if d.minor == minor), None)


def check_cards(view: RoundView) -> list[Violation]:
    found: list[Violation] = []
    for name, new in view.placed.items():
        node = view.nodes.get(name)
        inventory = node.devices if node is not None else None
        if not isinstance(inventory, NodeDevices):
            continue
        touched: set[tuple[str, int]] = set()
        for pod in new:
            for kind, minor, _, _ in held_cards(view.result.placements[pod.key].devices):
                device = _device(inventory, kind, minor)
                problem = (
                    "is not in the node's inventory"
                    if device is None
                    else "is unhealthy"
                    if not device.health
                    else ""
                )
                if problem:
                    message = f"{pod.key} is given {kind} {minor} on {name}, which {problem}"
                    found.append(Violation(DEVICE_CARDS, pod.job_id, pod.key, name, message))
                touched.add((kind, minor))
        used: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
        vfs: dict[tuple[str, int], list[int]] = defaultdict(list)
        holdings = [_bound_cards(p) for p in view.holders.get(name, ())]
        holdings += [held_cards(view.result.placements[p.key].devices) for p in new]
        for cards in holdings:
            for kind, minor, resources, functions in cards:
                for r, v in resources.items():
                    used[kind, minor][r] += v
                vfs[kind, minor].extend(functions)
        for kind, minor in sorted(touched):
            device = _device(inventory, kind, minor)
            if device is None:
                continue
            limits = _limits(inventory, kind, device)
            over = [
                f"{r} {used[kind, minor][r]} > {limit}"
                for r, limit in sorted(limits.items())
                if used[kind, minor].get(r, 0) > limit
            ]
            twice = sorted({f for f in vfs[kind, minor] if vfs[kind, minor].count(f) > 1})
            over += [f"virtual function {f} held twice" for f in twice]
            if over:
                message = f"{kind} {minor} on {name} over-allocated: " + "; ".join(over)
                found.append(Violation(DEVICE_CARDS, "", "", name, message))
    return found


def check_partitions(view: RoundView) -> list[Violation]:
    found = []
    for name, new in view.placed.items():
        node = view.nodes.get(name)
        inventory = node.devices if node is not None else None
        if (
            not isinstance(inventory, NodeDevices)
            or not inventory.partitions
            or inventory.partition_policy not in HONOURED_POLICIES
        ):
            continue
        for pod in new:
            cards = [
                (minor, resources)
                for kind, minor, resources, _ in held_cards(view.result.placements[pod.key].devices)
                if kind == "gpu"
            ]
            whole = [
                minor
                for minor, resources in cards
                if (device := _device(inventory, "gpu", minor)) is not None
                and resources.get(GPU_CORE, 0) >= device.core
            ]
            if not cards or len(whole) != len(cards):
                continue  # shared cards are not partitioned
            allowed = [set(p.minors) for p in inventory.partitions.get(len(whole), ())]
            if set(whole) not in allowed:
                message = (
                    f"{pod.key} is given GPUs {sorted(whole)} on {name}, not one of its "
                    f"{inventory.partition_policy} partitions of {len(whole)}: "
                    f"{[sorted(p) for p in allowed]}"
                )
                found.append(Violation(GPU_PARTITION, pod.job_id, pod.key, name, message))
    return found
