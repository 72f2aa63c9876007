"""The over-commit check for tests: from the fake's own state, which nodes or cards hold more than
they have. A test asserts `kube.overcommitted() == []` after every round.

A node is over-committed when the pods bound to it and not terminal (terminating and not yet
admitted ones included: the scheduler placed them there) request more of a resource than the
Node's `status.allocatable` offers, `pods` counting one per pod; a card is over-committed when the
pods' device-allocated claims on one (type, minor) exceed what the node's Device object says it
has, or name a card it does not list. Resources the node does not list at all are not checked
(extended resources unknown to a node are ignored by the kubelet too).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from tests.fakekube import usage
from tests.fakekube.resources import served
from tests.fakekube.store import Obj, ObjectStore, meta

PODS = served("v1", "Pod")
NODES = served("v1", "Node")
DEVICES = served("scheduling.koordinator.sh/v1alpha1", "Device")


@dataclass(frozen=True)
class Overcommit:
    """One over-committed node resource or card resource, and the pods holding it."""

    node: str
    resource: str  # `cpu`, `nvidia.com/gpu`, ... or `gpu[0]/koordinator.sh/gpu-core` for a card
    requested: int  # the summed requests (millicores for cpu)
    capacity: int
    pods: list[str] = field(default_factory=list)  # `namespace/name` of the holders

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"{self.node}: {self.resource} requested {self.requested} > capacity {self.capacity} "
            f"by {', '.join(self.pods)}"
        )


def overcommitted(store: ObjectStore) -> list[Overcommit]:
    with store.cond:  # one consistent snapshot
        nodes, _ = store.select(NODES, None)
        pods, _ = store.select(PODS, None, lambda p: not usage.is_terminal(p))
        devices = {meta(d)["name"]: d for d in store.select(DEVICES, None)[0]}
    by_node: dict[str, list[Obj]] = defaultdict(list)
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if node_name:
            by_node[node_name].append(pod)
    found: list[Overcommit] = []
    for node in nodes:
        name = meta(node)["name"]
        holders = by_node.get(name, [])
        names = [f"{meta(p)['namespace']}/{meta(p)['name']}" for p in holders]
        capacity = usage.allocatable(node)
        for resource, requested in sorted(usage.node_usage(holders).items()):
            if resource in capacity and requested > capacity[resource]:
                found.append(Overcommit(name, resource, requested, capacity[resource], names))
        if name in devices:
            found.extend(_cards(name, holders, devices[name]))
    return found


def _cards(node: str, holders: list[Obj], device: Obj) -> list[Overcommit]:
    cards = usage.card_capacity(device)
    found = []
    for (device_type, minor), used in sorted(usage.card_usage(holders).items()):
        claimants = [
            f"{meta(p)['namespace']}/{meta(p)['name']}"
            for p in holders
            if any((c.device_type, c.minor) == (device_type, minor) for c in usage.card_claims(p))
        ]
        offered = cards.get((device_type, minor))
        for resource, requested in sorted(used.items()):
            capacity = 0 if offered is None else offered.get(resource)
            if capacity is not None and requested > capacity:
                label = f"{device_type}[{minor}]/{resource}"
                found.append(Overcommit(node, label, requested, capacity, claimants))
    return found
