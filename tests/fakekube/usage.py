"""What pods ask of a node: resource quantities, pod requests, card claims, node usage.

Quantities follow the API's rules (`500m`, `64Gi`, `1e3`); a CPU amount is counted in millicores
and everything else in whole units, rounded up, as the scheduler's and kubelet's NodeInfo count
them. A pod's request of a resource is the larger of its containers' sum and its largest init
container, plus its overhead; a container without a request takes its limit (API defaulting).

Card claims come from Koordinator's `scheduling.koordinator.sh/device-allocated` annotation and
are checked against the node's `Device` object (named after the node, `spec.devices[]`).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from tests.fakekube.store import Obj, meta

CPU, MEMORY, PODS, EPHEMERAL = "cpu", "memory", "pods", "ephemeral-storage"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
TERMINAL = frozenset({"Succeeded", "Failed"})
DEFAULT_POD_CAPACITY = 110  # the kubelet's default --max-pods, for nodes seeded without `pods`

_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(value: Any) -> Decimal:
    """A resource quantity as a number; ValueError when it is not one."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    match = _QUANTITY.match(str(value).strip())
    if match is None:
        raise ValueError(f"not a quantity: {value!r}")
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation as exc:
        raise ValueError(f"not a quantity: {value!r}") from exc


def amount(resource: str, value: Any) -> int:
    """Millicores for cpu, whole units (rounded up) for everything else."""
    number = parse_quantity(value)
    return math.ceil(number * 1000) if resource == CPU else math.ceil(number)


def _container_requests(container: dict[str, Any]) -> dict[str, int]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: amount(name, value) for name, value in merged.items()}


def pod_requests(pod: Obj) -> dict[str, int]:
    """What one pod requests, per resource (pods itself not included)."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = defaultdict(int)
    for container in spec.get("containers") or []:
        for name, value in _container_requests(container).items():
            total[name] += value
    for container in spec.get("initContainers") or []:
        for name, value in _container_requests(container).items():
            total[name] = max(total[name], value)
    for name, value in (spec.get("overhead") or {}).items():
        total[name] += amount(name, value)
    return {name: value for name, value in total.items() if value}


def is_terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in TERMINAL


def allocatable(node: Obj) -> dict[str, int]:
    """A node's allocatable resources; `pods` defaults to the kubelet's 110 when unset."""
    raw = (node.get("status") or {}).get("allocatable") or {}
    result = {name: amount(name, value) for name, value in raw.items()}
    result.setdefault(PODS, DEFAULT_POD_CAPACITY)
    return result


@dataclass(frozen=True)
class CardClaim:
    """One pod's share of one card: (device type, minor) and the amounts it takes."""

    device_type: str
    minor: int
    resources: dict[str, int]


def card_claims(pod: Obj) -> list[CardClaim]:
    """The cards a pod's device-allocated annotation claims; [] when absent or unreadable."""
    raw = (meta(pod).get("annotations") or {}).get(DEVICE_ALLOCATED)
    if not raw:
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    claims = []
    for device_type, entries in data.items() if isinstance(data, dict) else []:
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("minor"), int):
                continue
            resources = {}
            for name, value in (entry.get("resources") or {}).items():
                try:
                    resources[name] = amount(name, value)
                except ValueError:
                    continue
            # A whole-card claim may name only the vendor resource: that is all of the card.
            whole = any(name.endswith(("/gpu", "/npu", "/mlu")) for name in resources)
            if device_type == "gpu" and GPU_CORE not in resources and whole:
                resources.setdefault(GPU_CORE, 100)
                resources.setdefault(GPU_MEMORY_RATIO, 100)
            claims.append(CardClaim(device_type, entry["minor"], resources))
    return claims


def card_capacity(device: Obj) -> dict[tuple[str, int], dict[str, int]]:
    """(type, minor) -> what each card of a Device object offers (gpu: 100 core/ratio default)."""
    cards: dict[tuple[str, int], dict[str, int]] = {}
    for entry in (device.get("spec") or {}).get("devices") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("minor"), int):
            continue
        offered = {}
        for name, value in (entry.get("resources") or {}).items():
            try:
                offered[name] = amount(name, value)
            except ValueError:
                continue
        device_type = entry.get("type") or "gpu"
        if device_type == "gpu":
            offered.setdefault(GPU_CORE, 100)
            offered.setdefault(GPU_MEMORY_RATIO, 100)
        cards[(device_type, entry["minor"])] = offered
    return cards


def card_usage(pods: list[Obj]) -> dict[tuple[str, int], dict[str, int]]:
    """(type, minor) -> the sum of what the given pods claim of each card."""
    used: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for pod in pods:
        for claim in card_claims(pod):
            for name, value in claim.resources.items():
                used[(claim.device_type, claim.minor)][name] += value
    return used


def node_usage(pods: list[Obj]) -> dict[str, int]:
    """The summed requests of the given pods, with `pods` their count."""
    used: dict[str, int] = defaultdict(int)
    for pod in pods:
        for name, value in pod_requests(pod).items():
            used[name] += value
    used[PODS] = len(pods)
    return dict(used)


def holds_resources(pod: Obj, node_name: str) -> bool:
    """Bound to the node and not terminal: terminating pods still hold what they asked for."""
    return (pod.get("spec") or {}).get("nodeName") == node_name and not is_terminal(pod)
