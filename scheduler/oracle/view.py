"""One round seen from its inputs and its answer, indexed once for every rule.

`RoundView` holds the snapshot's nodes, pods and jobs by name, the pods this round places (by
node), the victims it evicts, and what holds each node: every bound pod that has not finished,
terminating ones and this round's victims included, since a pod being deleted keeps its node's
room until the kubelet reports it gone (kube-scheduler's cache drops it only then).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from scheduler.model import ClusterSnapshot, JobInfo, NodeInfo, PodInfo
from scheduler.result import RoundResult


@dataclass
class RoundView:
    snapshot: ClusterSnapshot
    result: RoundResult
    nodes: dict[str, NodeInfo] = field(init=False)
    pods: dict[str, PodInfo] = field(init=False)
    jobs: dict[str, JobInfo] = field(init=False)
    victims: set[str] = field(init=False)
    holders: dict[str, list[PodInfo]] = field(init=False)
    placed: dict[str, list[PodInfo]] = field(init=False)

    def __post_init__(self) -> None:
        self.nodes = {n.name: n for n in self.snapshot.nodes}
        self.pods = {p.key: p for p in self.snapshot.pods}
        self.jobs = {j.id: j for j in self.snapshot.jobs}
        self.victims = {k for record in self.result.preemptions for k in record.victim_pods}
        self.holders = defaultdict(list)
        for pod in self.snapshot.pods:
            if holds_node(pod):
                assert pod.node is not None
                self.holders[pod.node].append(pod)
        self.placed = defaultdict(list)
        for key, placement in self.result.placements.items():
            placed = self.pods.get(key)
            if placed is not None:
                self.placed[placement.node].append(placed)


def holds_node(pod: PodInfo) -> bool:
    """Bound and not finished (Succeeded/Failed pods give their room back)."""
    return pod.node is not None and pod.phase not in ("Succeeded", "Failed")
