"""The Node -> NUMA -> PCIe tree of a node's cards and the choice of a scope for a multi-card pod.

Cards under one PCIe switch talk fastest, then cards on one NUMA node. A pod needing several
cards gets them from the deepest scope that has enough candidates; among scopes of that depth the
tightest one wins (fewest spare candidates, then the one already partly in use), so whole scopes
stay free for later pods.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scheduler.devices.model import Device

ScopeKey = tuple[int, str]
"""(NUMA node, PCIe switch id); -1 / "" when the Device CR does not say."""


def pcie_key(device: Device) -> ScopeKey:
    return (device.topology.numa_node, device.topology.pcie_id)


def pick_cards(
    gpus: Sequence[Device],
    candidates: Sequence[int],
    count: int,
    preference: Callable[[int], tuple[int, ...]],
    in_use: Callable[[int], bool],
) -> list[int] | None:
    """Positions of `count` cards among `candidates`, or None if there are not enough.

    `preference(i)` orders cards inside the chosen scope (the scoring strategy, then the minor);
    `in_use(i)` says whether card i is already partly held, which makes its scope preferred.
    """
    if len(candidates) < count:
        return None
    levels: tuple[Callable[[Device], object], ...] = (
        pcie_key,
        lambda d: d.topology.numa_node,
    )
    for level in levels:
        groups: dict[object, list[int]] = {}
        for i in candidates:
            groups.setdefault(level(gpus[i]), []).append(i)
        fitting = [members for members in groups.values() if len(members) >= count]
        if not fitting:
            continue
        scope = min(fitting, key=lambda members: _scope_rank(gpus, members, level, in_use))
        return sorted(scope, key=preference)[:count]
    return sorted(candidates, key=preference)[:count]


def _scope_rank(
    gpus: Sequence[Device],
    members: list[int],
    level: Callable[[Device], object],
    in_use: Callable[[int], bool],
) -> tuple[int, int, int]:
    scope = level(gpus[members[0]])
    chosen = set(members)
    busy = sum(
        1 for i, d in enumerate(gpus) if level(d) == scope and (in_use(i) or i not in chosen)
    )
    return (len(members), -busy, min(gpus[i].minor for i in members))
