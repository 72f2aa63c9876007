"""The cluster backend protocol: `sync` reads the cluster into the database, `enact` applies a plan.

A round builds an `EnactPlan` from the engine's result; every backend applies it idempotently
and answers with an `EnactReport` saying what happened to each pod.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from koordweb.models import Cluster


@dataclass(frozen=True)
class Binding:
    pod_id: int
    namespace: str
    name: str
    uid: str
    node: str
    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Eviction:
    pod_id: int
    namespace: str
    name: str
    preemptor: str
    preemption_id: int | None = None


@dataclass(frozen=True)
class Nomination:
    pod_id: int
    namespace: str
    name: str
    node: str


@dataclass(frozen=True)
class EnactPlan:
    bindings: tuple[Binding, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    nominations: tuple[Nomination, ...] = ()


@dataclass
class EnactReport:
    bound: list[int] = field(default_factory=list)
    dropped: dict[int, str] = field(default_factory=dict)
    evicted: list[int] = field(default_factory=list)
    blocked: dict[int, str] = field(default_factory=dict)
    nominated: list[int] = field(default_factory=list)


class ClusterBackend(Protocol):
    """What a round needs from a cluster."""

    def sync(self, cluster: Cluster, *, now: datetime) -> None:
        """Bring the database up to date with the cluster (nodes, pods, devices, metrics)."""

    def enact(self, cluster: Cluster, plan: EnactPlan, *, now: datetime) -> EnactReport:
        """Bind, evict and nominate as planned; idempotent; the database follows what succeeded."""
