"""The kubelet's admission decision for one pod on one node, worded as the kubelet words it.

The predicate admit handler's order, first failure only: pods count, cpu, memory,
ephemeral-storage, then extended resources by name (only those the node's allocatable lists;
others are dropped as cluster-level resources) -> `OutOf<resource>` with "Node didn't have enough
resource: <name>, requested: N, used: N, capacity: N"; node selector / required affinity ->
`NodeAffinity`; an untolerated NoExecute taint -> `TaintToleration`. Then the device allocation
admit handler: Koordinator card claims against the node's Device -> `UnexpectedAdmissionError`
with "Allocate failed due to <why>, which is unexpected" (<why> is this fake's own wording).
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.fakekube import nodematch, usage
from tests.fakekube.store import Obj, meta

NATIVE_ORDER = (usage.CPU, usage.MEMORY, usage.EPHEMERAL)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one admission: admitted, or the kubelet's reason and message."""

    admitted: bool
    reason: str = ""
    message: str = ""


def _out_of(name: str, requested: int, used: int, capacity: int) -> Verdict:
    return Verdict(
        False,
        f"OutOf{name}",
        f"Node didn't have enough resource: {name}, requested: {requested}, used: {used}, "
        f"capacity: {capacity}",
    )


def _is_extended(name: str) -> bool:
    domain = name.split("/", 1)[0] if "/" in name else ""
    return (
        bool(domain) and not domain.endswith("kubernetes.io") and not name.startswith("requests.")
    )


def judge(pod: Obj, node: Obj, others: list[Obj], device: Obj | None) -> Verdict:
    """Whether `pod` fits on `node` next to `others` (the pods already holding resources)."""
    capacity = usage.allocatable(node)
    used = usage.node_usage(others)
    if used[usage.PODS] + 1 > capacity[usage.PODS]:
        return _out_of(usage.PODS, 1, used[usage.PODS], capacity[usage.PODS])
    wanted = usage.pod_requests(pod)
    # Extended resources the node does not offer are dropped (cluster-level resources).
    wanted = {k: v for k, v in wanted.items() if not _is_extended(k) or k in capacity}
    scalars = sorted(k for k in wanted if k not in NATIVE_ORDER and k != usage.PODS)
    for name in [*NATIVE_ORDER, *scalars]:
        asked = wanted.get(name, 0)
        if asked and asked > capacity.get(name, 0) - used.get(name, 0):
            return _out_of(name, asked, used.get(name, 0), capacity.get(name, 0))
    if not nodematch.required_affinity_matches(pod, node):
        return Verdict(
            False,
            "NodeAffinity",
            "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector",
        )
    if nodematch.untolerated_no_execute(pod, node):
        return Verdict(
            False,
            "TaintToleration",
            "Predicate TaintToleration failed: node(s) had taints that the pod didn't tolerate",
        )
    problem = card_problem(pod, others, device, meta(node)["name"])
    if problem:
        return Verdict(
            False,
            "UnexpectedAdmissionError",
            f"Allocate failed due to {problem}, which is unexpected",
        )
    return Verdict(True)


def card_problem(pod: Obj, others: list[Obj], device: Obj | None, node_name: str) -> str:
    """Why the pod's card claims do not fit the node's Device object, or "" when they do."""
    claims = usage.card_claims(pod)
    if not claims or device is None:
        return ""
    cards = usage.card_capacity(device)
    taken = usage.card_usage(others)
    for claim in claims:
        card = (claim.device_type, claim.minor)
        if card not in cards:
            return f"{claim.device_type} minor {claim.minor} does not exist on node {node_name}"
        for name, asked in sorted(claim.resources.items()):
            if name not in cards[card]:
                continue
            held = taken.get(card, {}).get(name, 0)
            if asked + held > cards[card][name]:
                return (
                    f"{claim.device_type} minor {claim.minor} on node {node_name} has not enough "
                    f"{name}: requested: {asked}, used: {held}, capacity: {cards[card][name]}"
                )
    return ""
