"""`RoundResult`: what one round decided, as frozen plain data with a JSON-friendly `to_dict()`.

- `placements`: pod key -> `Placement(node, devices, annotations)` for every pod bound this round;
- `preemptions`: one `PreemptionRecord` per preempting job (victims, nominations, reason, cost, the
  `rule` that chose the victims: `LowerPriority`, `InQuota`, `QuotaReclaim`, and the `cause` of
  the failure it answers, as the verdict's);
- `unschedulable`: job id -> `JobVerdict(code, reason, details)` for every pending job not placed
  (details may hold `node_reasons`, `desired_offer_slots`, `domain_offer_slots`,
  `quota_shortfall`, `counterfactual`, `preemption` (the preemption plugin's answer: its status,
  words, `cause` code and `values`, e.g. the dry run's `Cause` when evicting every candidate
  would not help), and always `cause`: the reason as a `Cause`, a stable code with its numbers
  and plugin, and per-node reasons as `NodeReason` counts; the text stays in `reason`);
- `runtime_quota`: quota -> resource -> runtime quota at the start of the round (the quota
  plugin's own numbers);
- `decisions`: job id -> "why here" for placed jobs (chosen domain, its offer slots, the
  alternatives' offer slots);
- `outside_topology`: nodes left out of the topology tree (the tree's `detailStatus` is
  `scheduler.api.detail_status`, asked of the tree, not of a round);
- `timeouts`: job id -> why the gang gave up its nominated nodes (its waiting time passed);
- `queue`: the pending jobs' ids in the order the round took them (the QueueSort plugin's order,
  jobs with no pod to place left out): the one source of a job's place in the queue. It is not
  in `to_dict()`, which says what the round decided, not how it went about it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Placement:
    node: str
    devices: Mapping[str, Any] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "devices": dict(self.devices),
            "annotations": dict(self.annotations),
        }


@dataclass(frozen=True)
class NodeReason:
    """How many nodes one reason rules out (kube-scheduler's "3 Insufficient cpu"), as the Filter
    that gave it coded it (`scheduler.causes`): `Insufficient` (with its `resource`),
    `TooManyPods`, `NodeUnschedulable`, `NodeAffinityMismatch`, `TaintUntolerated`,
    `NodeMetricExpired`, `LoadOverThreshold` / `AggregatedLoadOverThreshold` (with its
    `resource`), or `NodeRejected` (any other reason; its words in `text`)."""

    code: str
    nodes: int
    plugin: str
    text: str
    resource: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "nodes": self.nodes,
            "plugin": self.plugin,
            "text": self.text,
            "resource": self.resource,
        }


@dataclass(frozen=True)
class Cause:
    """Why a job was not placed, for a reader that formats rather than parses: a stable `code`
    (see docs/plugins.md, "Reasons"), the `plugin` that said so, the numbers behind it
    (`values`: e.g. TopologyNoDomain -> job_pods, pods, layer, best_domain, best_offer_slots)
    and the per-node reasons."""

    code: str
    plugin: str
    values: Mapping[str, Any] = field(default_factory=dict)
    node_reasons: tuple[NodeReason, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "plugin": self.plugin,
            "values": _plain(self.values),
            "node_reasons": [r.to_dict() for r in self.node_reasons],
        }


@dataclass(frozen=True)
class PreemptionRecord:
    preemptor: str
    victim_jobs: tuple[str, ...]
    victim_pods: tuple[str, ...]
    nominations: Mapping[str, str]
    reason: str
    cost: Mapping[str, Any]
    rule: str = ""  # which victim-selection rule applied (LowerPriority, InQuota, QuotaReclaim)
    cause: Cause | None = None  # why the preemptor did not fit without it (`reason` as a code)

    def to_dict(self) -> dict[str, Any]:
        return {
            "preemptor": self.preemptor,
            "victim_jobs": list(self.victim_jobs),
            "victim_pods": list(self.victim_pods),
            "nominations": dict(self.nominations),
            "reason": self.reason,
            "cost": dict(self.cost),
            "rule": self.rule,
            "cause": self.cause.to_dict() if self.cause is not None else None,
        }


@dataclass(frozen=True)
class JobVerdict:
    code: str
    reason: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def cause(self) -> Cause | None:
        cause = self.details.get("cause")
        return cause if isinstance(cause, Cause) else None

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "details": _plain(self.details)}


@dataclass(frozen=True)
class RoundResult:
    placements: Mapping[str, Placement]
    preemptions: tuple[PreemptionRecord, ...]
    unschedulable: Mapping[str, JobVerdict]
    decisions: Mapping[str, Mapping[str, Any]]
    outside_topology: tuple[str, ...] = ()
    metrics: Mapping[str, int] = field(default_factory=dict)
    timeouts: Mapping[str, str] = field(default_factory=dict)
    runtime_quota: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    queue: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "placements": {k: v.to_dict() for k, v in sorted(self.placements.items())},
            "preemptions": [p.to_dict() for p in self.preemptions],
            "unschedulable": {k: v.to_dict() for k, v in sorted(self.unschedulable.items())},
            "decisions": {k: _plain(v) for k, v in sorted(self.decisions.items())},
            "outside_topology": list(self.outside_topology),
            "metrics": dict(self.metrics),
            "timeouts": dict(sorted(self.timeouts.items())),
            "runtime_quota": _plain(dict(sorted(self.runtime_quota.items()))),
        }


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """Mappings to dicts, tuples to lists, numpy scalars to Python numbers."""
    kind = type(value)
    if kind in _SCALARS:  # most of a round's values: spared the abstract-class checks below
        return value
    if kind is dict:
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (Cause, NodeReason)):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value
