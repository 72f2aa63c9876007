"""Koordinator's `device-allocated` pod annotation, read leniently for what the web shows and
the usage samples count: the cards a pod holds and the share of each it holds.

Pure (no ORM), so selectors, services and backends read it alike. The engine's strict reader is
`scheduler.devices.annotations.parse_device_allocated`; this one skips what it cannot read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scheduler.vocabulary import GPU_CORE, GPU_MEMORY_RATIO, NPU_CORE


def parse_device_allocation(raw: str | None) -> list[tuple[str, int, dict[str, int]]]:
    """(device type, minor, resources) entries of a device-allocated annotation; [] if invalid."""
    if not raw:
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    entries: list[tuple[str, int, dict[str, int]]] = []
    if not isinstance(data, dict):
        return entries
    for device_type, items in data.items():
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("minor"), int):
                resources = item.get("resources") or {}
                entries.append((device_type, item["minor"], dict(resources)))
    return entries


def card_share_percent(resources: Mapping[str, Any]) -> int:
    """The share of the card one allocation holds, 0-100: its GPU core percent; where it has
    none (an Ascend card held in AI cores, a Cambricon slice held by memory), its memory share;
    a whole-card request that names only the vendor resource, the whole card."""
    for key in (GPU_CORE, GPU_MEMORY_RATIO):
        if key in resources:
            return _int(resources[key])
    return 100 if any(k.endswith(("/gpu", "/npu", "/mlu")) for k in resources) else 0


def card_ai_cores(resources: Mapping[str, Any]) -> int:
    """The Ascend AI cores one allocation holds (`huawei.com/npu-core`), 0 for other cards."""
    return _int(resources.get(NPU_CORE, 0))


def _int(value: Any) -> int:
    """An amount as the annotation writes it (a number, or a number in a string); 0 if not."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
