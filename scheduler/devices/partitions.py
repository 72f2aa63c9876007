"""NVLink/HCCS partition tables: the built-in Hopper table, the Device CR annotation, the choice.

Under NVIDIA's shared NVSwitch mode only some card sets may be handed to one pod together (pairs,
quads, all eight on an H100/H800/H20 board). A multi-card pod takes the free partition of its size
that leaves the most large partitions free, so later big pods still find room.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping

from scheduler.devices.model import GPUPartition, PartitionTable
from scheduler.devices.names import VENDOR_NVIDIA

HOPPER_MODELS = frozenset({"H100", "H800", "H20"})


def _hopper_table() -> PartitionTable:
    sizes: dict[int, list[tuple[int, ...]]] = {
        1: [(m,) for m in range(8)],
        2: [(0, 1), (2, 3), (4, 5), (6, 7)],
        4: [(0, 1, 2, 3), (4, 5, 6, 7)],
        8: [tuple(range(8))],
    }
    return {size: tuple(GPUPartition(minors=m) for m in sets) for size, sets in sizes.items()}


HOPPER_TABLE: PartitionTable = _hopper_table()


def builtin_table(vendor: str, model: str) -> PartitionTable | None:
    """The table Koordinator builds in for a GPU model (None when it has none)."""
    if vendor in ("", VENDOR_NVIDIA) and model in HOPPER_MODELS:
        return HOPPER_TABLE
    return None


def parse_partition_table(raw: str) -> PartitionTable:
    """The `scheduling.koordinator.sh/gpu-partitions` annotation; ValueError when malformed."""
    try:
        data = json.loads(raw)
    except ValueError as error:
        raise ValueError(f"gpu-partitions is not valid JSON: {error}") from None
    if not isinstance(data, dict) or not data:
        raise ValueError("gpu-partitions must be a non-empty object of size -> partitions")
    table: dict[int, tuple[GPUPartition, ...]] = {}
    for key, items in data.items():
        try:
            size = int(key)
        except ValueError:
            raise ValueError(f"gpu-partitions key {key!r} is not a number of cards") from None
        if not isinstance(items, list):
            raise ValueError(f"gpu-partitions[{key}] must be a list")
        table[size] = tuple(_parse_partition(size, item) for item in items)
    return table


def _parse_partition(size: int, item: object) -> GPUPartition:
    if not isinstance(item, dict) or not isinstance(item.get("minors"), list):
        raise ValueError(f"gpu-partitions[{size}] entries need a minors list")
    minors = tuple(sorted(int(m) for m in item["minors"]))
    if len(minors) != size or len(set(minors)) != size:
        raise ValueError(f"gpu-partitions[{size}] partition {list(minors)} has not {size} cards")
    return GPUPartition(
        minors=minors,
        link_type=str(item.get("gpuLinkType", "NVLink")),
        allocation_score=int(item.get("allocationScore", 1)),
    )


def render_partition_table(table: PartitionTable) -> str:
    """The annotation text for `table` (the inverse of parse_partition_table)."""
    data = {
        str(size): [
            {
                "minors": list(p.minors),
                "gpuLinkType": p.link_type,
                "allocationScore": p.allocation_score,
            }
            for p in parts
        ]
        for size, parts in sorted(table.items())
    }
    return json.dumps(data, separators=(",", ":"))


def choose_partition(
    table: PartitionTable, size: int, free_minors: Collection[int], restricted: bool = False
) -> tuple[int, ...] | None:
    """The free partition of `size` cards that keeps the most large partitions free, or None.

    Free-partition counts after taking a candidate are compared from the largest size down; then
    the higher allocation score wins, then the lower minors (so the same input always gives the
    same cards). `restricted` (a pod's `Restricted` partition spec) considers only the partitions
    of the best allocation score, as Koordinator's allocateByPartition does.
    """
    free = frozenset(free_minors)
    best: tuple[tuple[int, ...], int, tuple[int, ...]] | None = None
    chosen: tuple[int, ...] | None = None
    candidates = table.get(size, ())
    if restricted and candidates:
        top = max(p.allocation_score for p in candidates)
        candidates = tuple(p for p in candidates if p.allocation_score == top)
    for partition in candidates:
        if not free.issuperset(partition.minors):
            continue
        left = free.difference(partition.minors)
        profile = _free_profile(table, left)
        key = (profile, partition.allocation_score, tuple(-m for m in partition.minors))
        if best is None or key > best:
            best, chosen = key, partition.minors
    return chosen


def _free_profile(
    table: Mapping[int, tuple[GPUPartition, ...]], free: frozenset[int]
) -> tuple[int, ...]:
    return tuple(
        sum(1 for p in table[size] if free.issuperset(p.minors))
        for size in sorted(table, reverse=True)
    )
