"""`check_round`: every rule of the oracle over one round, or the subset a caller names."""

from __future__ import annotations

from collections.abc import Callable, Collection

from scheduler.model import ClusterSnapshot
from scheduler.oracle import devices, gangs, node_rules, preemption, quotas, resources
from scheduler.oracle.view import RoundView
from scheduler.oracle.violation import (
    DEVICE_CARDS,
    GANG,
    GPU_PARTITION,
    MUST_GATHER,
    NODE_AFFINITY,
    NODE_UNSCHEDULABLE,
    NOMINATED_PODS,
    PLACEMENT,
    QUOTA,
    RESOURCE_FIT,
    TAINT_TOLERATION,
    VICTIMS,
    Violation,
)
from scheduler.result import RoundResult

RULES: dict[str, Callable[[RoundView], list[Violation]]] = {
    PLACEMENT: resources.check_placements,
    TAINT_TOLERATION: node_rules.check_taints,
    NODE_UNSCHEDULABLE: node_rules.check_unschedulable,
    NODE_AFFINITY: node_rules.check_affinity,
    RESOURCE_FIT: resources.check_fit,
    NOMINATED_PODS: resources.check_nominations,
    DEVICE_CARDS: devices.check_cards,
    GPU_PARTITION: devices.check_partitions,
    GANG: gangs.check_gangs,
    MUST_GATHER: gangs.check_must_gather,
    VICTIMS: preemption.check_victims,
    QUOTA: quotas.check_quotas,
}


def check_round(
    snapshot: ClusterSnapshot,
    result: RoundResult,
    profile_rules: Collection[str] | None = None,
) -> list[Violation]:
    """The violations of `result` as the answer to `snapshot` (empty: a valid round), checking
    the rules named in `profile_rules` (rule codes; None: all of them)."""
    unknown = set(profile_rules or ()) - set(RULES)
    if unknown:
        raise ValueError(f"unknown oracle rules: {', '.join(sorted(unknown))}")
    view = RoundView(snapshot, result)
    found: list[Violation] = []
    for rule, check in RULES.items():
        if profile_rules is None or rule in profile_rules:
            found += check(view)
    return found
