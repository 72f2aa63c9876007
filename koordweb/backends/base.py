"""The cluster backend protocol: `sync` reads the cluster into the database, `enact` applies a plan.

A round turns the engine's result into intents (koordweb.models.Intent) and commits them; the
intents are then read back as an `EnactPlan`, which a backend applies to the cluster idempotently,
touching no database row, and answers with an `EnactReport` saying what happened to each pod.
Every action names the pod it was decided about by its UID: a pod re-created under the same name
is another pod, and the cluster refuses the action (409) rather than apply it to the wrong one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

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
    uid: str = ""


@dataclass(frozen=True)
class Creation:
    """Create in the cluster a pod submitted to koordweb (with its PodGroup, once per job)."""

    pod_id: int
    job_id: int
    namespace: str
    name: str


@dataclass(frozen=True)
class Deletion:
    """Delete a pod gracefully (a gang refused by a kubelet is taken off its nodes whole)."""

    pod_id: int
    namespace: str
    name: str
    uid: str = ""


@dataclass(frozen=True)
class Nomination:
    """Set a pending pod's nominated node; an empty node gives the nomination up."""

    pod_id: int
    namespace: str
    name: str
    node: str


@dataclass(frozen=True)
class EnactPlan:
    bindings: tuple[Binding, ...] = ()
    evictions: tuple[Eviction, ...] = ()
    nominations: tuple[Nomination, ...] = ()
    creations: tuple[Creation, ...] = ()
    deletions: tuple[Deletion, ...] = ()

    def __len__(self) -> int:
        return sum(
            len(part)
            for part in (
                self.creations,
                self.bindings,
                self.evictions,
                self.nominations,
                self.deletions,
            )
        )


@dataclass
class EnactReport:
    """Outcomes by pod id. `dropped` bindings, `blocked` evictions (a disruption budget) and
    `replaced` evictions (another pod now has the name) did not happen."""

    bound: list[int] = field(default_factory=list)
    dropped: dict[int, str] = field(default_factory=dict)
    evicted: list[int] = field(default_factory=list)
    blocked: dict[int, str] = field(default_factory=dict)
    replaced: dict[int, str] = field(default_factory=dict)
    nominated: list[int] = field(default_factory=list)
    created: dict[int, str] = field(default_factory=dict)  # pod id -> the new pod's uid
    refused_jobs: dict[int, str] = field(default_factory=dict)  # job id -> the cluster's words
    deleted: list[int] = field(default_factory=list)
    # (intent kind, pod id) -> the cluster's words: an action it refused (403, a webhook's 400,
    # ...), which fails only its own job; the outbox tries it again later or drops it.
    refused: dict[tuple[str, int], str] = field(default_factory=dict)
    # pod id -> the pod as the API server created it (kept to create it again exactly so).
    manifests: dict[int, dict[str, Any]] = field(default_factory=dict)


# What kubectl shows of a pod koordweb scheduled, as kube-scheduler writes it: the PodScheduled
# condition's reasons and the Events' reasons (pkg/scheduler/schedule_one.go, preemption.go).
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"
FAILED_SCHEDULING = "FailedScheduling"
SCHEDULED = "Scheduled"
PREEMPTED = "Preempted"


@dataclass(frozen=True)
class PodNote:
    """One thing to tell about a pod where kubectl looks: an Event (`reason`, `message`, Normal
    or Warning, the `action` taken) and, when `condition` is set, the pod's PodScheduled=False
    condition with that reason and the same message. `related`: the other pod involved (the
    preemptor of a victim), as (namespace, name, uid)."""

    namespace: str
    name: str
    uid: str
    reason: str
    message: str
    action: str
    warning: bool = False
    condition: str = ""
    related: tuple[str, str, str] | None = None


class NodeGone(LookupError):
    """The cluster has no node of that name (a node write found nothing to change)."""


class NodeRefused(Exception):
    """The cluster refused a node write; the message is the cluster's own words."""


class ClusterBackend(Protocol):
    """What a round needs from a cluster."""

    # How many intents one `enact` call is given; their outcomes are recorded after each call,
    # so a worker that dies while enacting redoes at most this many (each action idempotent).
    enact_chunk: int

    def prepare(self, cluster: Cluster) -> None:
        """Before the round's transaction: wait for what `sync` reads (the kubernetes backend's
        watch mirror lists every kind once), so that no wait happens inside it."""

    def sync(self, cluster: Cluster, *, now: datetime) -> dict[str, Any]:
        """Bring the database up to date with the cluster (nodes, pods, devices, metrics).

        Runs inside the round's transaction: database work only, no call to the cluster.
        Returns what the round's metrics count (`kubelet_rejections`, ...)."""

    def enact(self, cluster: Cluster, plan: EnactPlan, *, now: datetime) -> EnactReport:
        """Apply a plan to the cluster, idempotently; runs after the plan committed and writes
        no row (the outbox records the report)."""

    def refusal(self, error: Exception) -> str | None:
        """The cluster's words when `error`, raised by `enact` for one action, is the cluster
        refusing that action (it fails its own job); None when the cluster could not be reached
        (the round fails and its intents wait, as before)."""

    def explain(self, cluster: Cluster, notes: Sequence[PodNote], *, now: datetime) -> int:
        """Tell the pods' story where the cluster's users look (conditions, Events, PodGroup
        status), best effort and outside any transaction; returns how many writes it made."""

    def cordon(self, cluster: Cluster, node: str, *, unschedulable: bool) -> bool:
        """Mark a node unschedulable (True) or schedulable again, as `kubectl cordon` and
        `kubectl uncordon` do; returns whether the cluster now holds it cordoned. Called from
        the web process, outside any transaction; raises NodeGone when the cluster has no such
        node and NodeRefused (the cluster's words) when it refuses."""
