"""Koordinator's `device-allocated` pod annotation, read leniently for what the web shows and
the usage samples count: the cards a pod holds and the share of each it holds.

Pure (no ORM), so selectors, services and backends read it alike. The engine's strict reader is
`scheduler.devices.annotations.parse_device_allocated`; this one skips what it cannot read.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from scheduler.vocabulary import GPU_CORE


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


def card_core_percent(resources: Mapping[str, Any]) -> int:
    if GPU_CORE in resources:
        return int(resources[GPU_CORE])
    # A whole-card request may only name the vendor resource: a whole card is 100 percent.
    return 100 if any(k.endswith(("/gpu", "/npu", "/mlu")) for k in resources) else 0
