"""The one adapter between database rows and the engine: one engine object per row
(`node_info`, `pod_info`, `quota_info`, `engine_job_info`) and the snapshot of them
(`snapshot_of`); the rows come from `cluster_rows.py`, their documents are read by `specs.py`,
and `assembly.py` puts them together.

It also keeps the reverse maps a round needs to write the engine's answer back (pod key -> Pod id,
engine job id -> Job rows).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import cached_property
from operator import attrgetter, is_, itemgetter
from types import MappingProxyType
from typing import Any

from django.db.models import JSONField

from koordweb.engine.cluster_rows import POD_FIELDS, JobRow, PodRow
from koordweb.engine.specs import (
    parse_required_affinity,
    parse_taints,
    parse_tolerations,
    parse_topology_rule,
)
from koordweb.models import (
    Cluster,
    ElasticQuota,
    Job,
    Node,
    NodeMetric,
    Pod,
)
from scheduler.api import device_allocatable
from scheduler.model import (
    ClusterSnapshot,
    GangInfo,
    GangMatchPolicy,
    JobInfo,
    NodeInfo,
    PDBInfo,
    PodInfo,
    QuotaInfo,
    TopologyLayerSpec,
    TopologyRule,
    TopologySpec,
)
from scheduler.vocabulary import (
    DAEMONSET_KIND,
    GANG_MATCH_POLICY,
    MATCH_ONCE_SATISFIED,
    MATCH_POLICIES,
    QUOTA_NAME,
)


@dataclass
class SnapshotIndex:
    """Reverse maps from the engine's keys to rows."""

    pod_ids: dict[str, int] = field(default_factory=dict)
    pod_uids: dict[str, str] = field(default_factory=dict)
    job_by_pod_key: dict[str, str] = field(default_factory=dict)
    jobs_by_engine_id: dict[str, list[JobRow]] = field(default_factory=dict)
    engine_id_by_job: dict[int, str] = field(default_factory=dict)
    pod_rows: dict[int, PodRow] = field(default_factory=dict)  # pod id -> its row


def engine_job_id(job: Job, first_pod: str | None = None) -> str:
    """A gang's group id, or `ns/pod` for a pod outside any gang."""
    if job.kind == Job.Kind.POD:
        return f"{job.namespace}/{first_pod or job.name}"
    return job.gang_group or job.gang_id


def node_info(node: Node, metric: NodeMetric | None, devices: Any = None) -> NodeInfo:
    allocatable = dict(node.allocatable)
    if devices is not None:
        # What the cards offer, where the Node object does not say it itself.
        for resource, amount in device_allocatable(devices).items():
            allocatable.setdefault(resource, amount)
    return NodeInfo(
        name=node.name,
        allocatable=allocatable,
        labels=dict(node.labels),
        annotations=dict(node.annotations),
        taints=parse_taints(node.taints),
        unschedulable=node.unschedulable or not node.ready,
        devices=devices,
        usage=dict(metric.usage) if metric else None,
        usage_reported_at=metric.reported_at.timestamp() if metric else None,
        usage_report_interval=float(metric.report_interval_seconds) if metric else 60.0,
        pod_usages=dict(metric.pod_usages) if metric else {},
        aggregated_usage={
            kind: {int(seconds): usage for seconds, usage in durations.items()}
            for kind, durations in (metric.aggregated_usages if metric else {}).items()
        },
    )


def pod_info(
    pod: Pod,
    job_id: str,
    quota: str | None,
    gang_id: str | None = None,
    node_names: Mapping[int, str] | None = None,
) -> PodInfo:
    """One pod; `node_names` (node id -> name) spares loading a Node row per pod."""
    if node_names is not None:
        node = node_names.get(pod.node_id) if pod.node_id else None
        nominated = node_names.get(pod.nominated_node_id) if pod.nominated_node_id else None
    else:
        node = pod.node.name if pod.node_id and pod.node else None
        nominated = (
            pod.nominated_node.name if pod.nominated_node_id and pod.nominated_node else None
        )
    return PodInfo(
        namespace=pod.namespace,
        name=pod.name,
        job_id=job_id,
        gang_id=gang_id,
        requests=dict(pod.requests),
        node_selector=dict(pod.node_selector),
        required_affinity=parse_required_affinity(pod.affinity) if pod.affinity else (),
        tolerations=parse_tolerations(pod.tolerations) if pod.tolerations else (),
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        priority=pod.priority,
        preemption_policy=pod.preemption_policy,  # type: ignore[arg-type]
        node=node,
        nominated_node=nominated,
        phase=pod.phase,  # type: ignore[arg-type]
        terminating=pod.terminating,
        topology_index=pod.topology_index,
        quota=quota or pod.labels.get(QUOTA_NAME) or None,
        limits=dict(pod.limits),
        scheduled_at=pod.bound_at.timestamp() if pod.bound_at else None,
        initialized_at=pod.started_at.timestamp() if pod.started_at else None,
        nominated_at=pod.nominated_at.timestamp() if pod.nominated_at else None,
        daemonset=pod.owner_kind == DAEMONSET_KIND,
    )


def quota_info(quota: ElasticQuota, parents: Mapping[int, str]) -> QuotaInfo:
    return QuotaInfo(
        name=quota.name,
        min=dict(quota.min),
        max=dict(quota.max),
        parent=parents.get(quota.parent_id) if quota.parent_id else None,
        shared_weight=dict(quota.shared_weight) if quota.shared_weight is not None else None,
        allow_lent=quota.allow_lent,
    )


def _budget(value: str) -> int | str | None:
    if not value:
        return None
    return value if value.endswith("%") else int(value)


# The columns the snapshot reads, as plain values (no model instance per row): a cold build reads
# every row, the warm snapshot (koordweb.engine.warm) only the rows changed since its last read,
# and both go through `assemble`, so the engine sees the same input either way.
_POD_OWN = ("id", "job_id", "name", "uid", "topology_index")
_POD_DOCUMENTS = tuple(
    name for name in POD_FIELDS if isinstance(Pod._meta.get_field(name), JSONField)
)
_pod_documents = itemgetter(*(PodRow._fields.index(name) for name in _POD_DOCUMENTS))
_pod_values = itemgetter(
    *(i for i, name in enumerate(PodRow._fields) if name not in _POD_OWN + _POD_DOCUMENTS)
)
_POD_INFO_FIELD_COUNT = len(fields(PodInfo))
_POD_INFO_CACHED = tuple(
    name for name, value in vars(PodInfo).items() if isinstance(value, cached_property)
)
# A copy of an info's fields is that info again only while making one runs no code of its own.
_POD_INFO_COPIES = not hasattr(PodInfo, "__post_init__") and not hasattr(PodInfo, "__slots__")
# The key's own function: a copy's key is set with it, without the cached property's lock
# (Python 3.11 takes one on every first read: 1.5 us a pod).
_pod_key = vars(PodInfo)["key"].func


class PodCopier:
    """What `pod_info` read of a pod row but its name and topology index, the quota it was
    given and the fields of the info it made: a row of the same shape (the very same documents,
    equal other values) given the same quota makes a copy of those fields with its own name,
    topology index, job and gang (`info_of`), its dicts shared (the engine only reads them)."""

    __slots__ = ("documents", "fields", "quota", "values")

    def __init__(
        self,
        documents: tuple[Any, ...],
        values: tuple[Any, ...],
        quota: str | None,
        fields: dict[str, Any],
    ) -> None:
        self.documents = documents
        self.values = values
        self.quota = quota
        self.fields = fields

    def info_of(
        self, pod: PodRow, job_id: str, quota: str | None, gang_id: str | None
    ) -> PodInfo | None:
        """`pod_info(pod, job_id, quota, gang_id, ...)` if the row has this shape and the quota
        is this one (else None), set without running the frozen dataclass's `__init__` (most
        of `pod_info`'s cost), its key already computed."""
        if (
            quota != self.quota
            or _pod_values(pod) != self.values
            or not all(map(is_, _pod_documents(pod), self.documents))
        ):
            return None
        info = object.__new__(PodInfo)
        fields = self.fields.copy()
        fields["name"] = pod.name
        fields["topology_index"] = pod.topology_index
        fields["job_id"] = job_id
        fields["gang_id"] = gang_id
        object.__setattr__(info, "__dict__", fields)
        fields["key"] = _pod_key(info)
        return info


def pod_copier(pod: PodRow, quota: str | None, info: PodInfo) -> PodCopier | None:
    """The shape of `pod`, whose info `pod_info` made given `quota`; None when `PodInfo` is not
    a plain holder of its fields (a copy of them would not be what its `__init__` makes)."""
    fields = dict(vars(info))
    for name in _POD_INFO_CACHED:
        fields.pop(name, None)
    if not _POD_INFO_COPIES or len(fields) != _POD_INFO_FIELD_COUNT:
        return None
    return PodCopier(_pod_documents(pod), _pod_values(pod), quota, fields)


def snapshot_of(
    cluster: Cluster,
    nodes: tuple[NodeInfo, ...],
    pods: tuple[PodInfo, ...],
    jobs: tuple[JobInfo, ...],
    *,
    now: datetime,
) -> ClusterSnapshot:
    """The snapshot of assembled nodes, pods and jobs with the cluster's small tables (quotas,
    disruption budgets, topology layers: read whole every time)."""
    quotas = list(cluster.quotas.order_by("name"))
    parents = {q.id: q.name for q in quotas}
    layers = list(cluster.topology_layers.order_by("position"))
    return ClusterSnapshot(
        nodes=nodes,
        pods=pods,
        jobs=jobs,
        quotas=tuple(quota_info(q, parents) for q in quotas),
        pdbs=tuple(
            PDBInfo(
                namespace=p.namespace,
                name=p.name,
                match_labels=dict((p.selector or {}).get("matchLabels") or {}),
                min_available=_budget(p.min_available),
                max_unavailable=_budget(p.max_unavailable),
            )
            for p in cluster.pdbs.order_by("namespace", "name")
        ),
        topology=TopologySpec(
            layers=tuple(
                TopologyLayerSpec(
                    name=layer.name,
                    parent=layer.parent_name or None,
                    label_keys=tuple(layer.label_keys),
                )
                for layer in layers
            )
        )
        if layers
        else None,
        now=now.timestamp(),
    )


_NO_TOPOLOGY: Mapping[str, Any] = MappingProxyType({})  # a job without a topology document


def engine_job_info(
    job_id: str,
    members: list[JobRow],
    keys: tuple[str, ...],
    quota_names: Mapping[int, str],
    topology_of: Callable[[Mapping[str, Any]], TopologyRule | None] = parse_topology_rule,
) -> JobInfo:
    """An engine job of one or more job rows (a gang group) with its pods' keys; `topology_of`
    parses the lead job's topology document (`parse_topology_rule` or a memo of it)."""
    lead = members[0] if len(members) == 1 else min(members, key=_lead_order)
    return JobInfo(
        id=job_id,
        pod_keys=keys,
        gangs=tuple(
            GangInfo(
                id=j.gang_id,
                min_available=j.min_available,
                total=j.total_number,
                mode=j.mode,  # type: ignore[arg-type]
                waiting_seconds=j.waiting_time_seconds,
                match_policy=_match_policy(j.annotations),
            )
            for j in members
            if j.kind != Job.Kind.POD
        ),
        priority=max(map(attrgetter("priority"), members)),
        quota=quota_names.get(lead.quota_id) if lead.quota_id else None,
        topology=topology_of(lead.topology_spec or _NO_TOPOLOGY),
        submission_order=min(map(attrgetter("submitted_at"), members)).timestamp(),
        preemption_policy=lead.preemption_policy,  # type: ignore[arg-type]
    )


def _match_policy(annotations: Mapping[str, str] | None) -> GangMatchPolicy:
    """The gang's match policy, kept in its annotations (once-satisfied unless known)."""
    value = (annotations or {}).get(GANG_MATCH_POLICY, "")
    return value if value in MATCH_POLICIES else MATCH_ONCE_SATISFIED  # type: ignore[return-value]


def _lead_order(job: JobRow) -> tuple[int, datetime, int]:
    """The lead job of a group comes first: highest priority, then earliest, then lowest id."""
    return (-job.priority, job.submitted_at, job.id)
