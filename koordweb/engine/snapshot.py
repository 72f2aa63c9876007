"""The one adapter between database rows and the engine: rows -> `scheduler.ClusterSnapshot`.

It also keeps the reverse maps a round needs to write the engine's answer back (pod key -> Pod id,
engine job id -> Job rows).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import datetime
from functools import cached_property
from operator import attrgetter, is_, itemgetter
from types import MappingProxyType
from typing import Any, NamedTuple, get_args

from django.db.models import JSONField, Max, Q, Subquery

from koordweb.models import (
    Cluster,
    Device,
    ElasticQuota,
    Job,
    JobState,
    Node,
    NodeMetric,
    Pod,
    PodPhase,
)
from koordweb.rows.read import rows_read
from scheduler.api import device_allocatable
from scheduler.model import (
    ClusterSnapshot,
    GangInfo,
    GangMatchPolicy,
    GatherStrategy,
    JobInfo,
    LayerGather,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PDBInfo,
    PodInfo,
    QuotaInfo,
    Taint,
    Toleration,
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


def parse_taints(raw: Iterable[Mapping[str, Any]]) -> tuple[Taint, ...]:
    return tuple(
        Taint(
            key=t.get("key", ""),
            value=t.get("value", "") or "",
            effect=t.get("effect", "NoSchedule"),
        )
        for t in raw
    )


def parse_tolerations(raw: Iterable[Mapping[str, Any]]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            key=t.get("key", "") or "",
            operator=t.get("operator", "Equal") or "Equal",
            value=t.get("value", "") or "",
            effect=t.get("effect", "") or "",
        )
        for t in raw
    )


# What a pod whose stored affinity cannot be read requires: a term no node matches (`In` with
# no values), so it waits with the node-affinity reason instead of failing everyone's round.
UNREADABLE_AFFINITY = (
    NodeSelectorTerm(
        match_expressions=(NodeSelectorRequirement(key="", operator="In", values=()),)
    ),
)


def parse_required_affinity(affinity: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    """The pod's required node affinity terms, their matchExpressions and matchFields. The doors
    refuse an affinity the API server would (`kubenames.affinity_errors`); a row written before
    they did, or by hand, matches no node."""
    try:
        required = (affinity.get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        ) or {}
        terms = []
        for term in required.get("nodeSelectorTerms") or []:
            expressions = _requirements(term.get("matchExpressions") or [])
            fields = _requirements(term.get("matchFields") or [])
            if expressions is None or fields is None:
                return UNREADABLE_AFFINITY
            terms.append(NodeSelectorTerm(match_expressions=expressions, match_fields=fields))
        return tuple(terms)
    except (AttributeError, KeyError, TypeError):
        return UNREADABLE_AFFINITY


def _requirements(raw: Iterable[Mapping[str, Any]]) -> tuple[NodeSelectorRequirement, ...] | None:
    """matchExpressions or matchFields entries; None when a key or value is not a string."""
    found = []
    for e in raw:
        values = tuple(e.get("values") or ())
        if not isinstance(e["key"], str) or not all(isinstance(v, str) for v in values):
            return None
        found.append(NodeSelectorRequirement(key=e["key"], operator=e["operator"], values=values))
    return tuple(found)


def parse_topology_rule(spec: Mapping[str, Any]) -> TopologyRule | None:
    """Koordinator's `{"gatherStrategy": [{"layer", "strategy"}]}` (plus our podCountMultiple).

    Never raises on a stored value: a document the doors should have refused (a row written
    before they did, or by hand) becomes a rule no domain satisfies, so that job alone waits,
    with the reason in its decision, and the round and every other job go on."""
    if not isinstance(spec, Mapping):
        return _unreadable_rule("it is not a JSON object")
    rules = spec.get("gatherStrategy") or []
    if not isinstance(rules, list) or not all(
        isinstance(g, Mapping)
        and isinstance(g.get("layer"), str)
        and g.get("strategy") in _GATHER_STRATEGIES
        for g in rules
    ):
        return _unreadable_rule("gatherStrategy must be a list of {layer, strategy}")
    gather = tuple(LayerGather(layer=g["layer"], strategy=g["strategy"]) for g in rules)
    multiple = pod_count_multiple(spec.get("podCountMultiple", 1))
    if multiple is None:
        shown = repr(spec.get("podCountMultiple"))[:40]
        return _unreadable_rule(f"podCountMultiple must be a positive integer, got {shown}")
    if not gather and multiple == 1:
        return None
    return TopologyRule(gather=gather, pod_count_multiple=multiple)


_GATHER_STRATEGIES = get_args(GatherStrategy)


def pod_count_multiple(value: Any) -> int | None:
    """The manifest reader's rule for podCountMultiple (a positive whole number, not a boolean;
    koordweb/manifests/parse_workload.py): the value, or None when it breaks the rule."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def _unreadable_rule(why: str) -> TopologyRule:
    """A MustGather on a layer no cluster defines: the topology plugin refuses the job with its
    own words ("unknown topology layer(s) ...") naming what is wrong with the stored document."""
    layer = f"(unreadable network-topology-spec: {why})"
    return TopologyRule(gather=(LayerGather(layer=layer, strategy="MustGather"),))


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
NODE_FIELDS = (
    "id",
    "name",
    "labels",
    "annotations",
    "taints",
    "allocatable",
    "unschedulable",
    "ready",
    "device_labels",
    "device_annotations",
)
POD_FIELDS = (
    "id",
    "job_id",
    "namespace",
    "name",
    "uid",
    "requests",
    "limits",
    "node_selector",
    "affinity",
    "tolerations",
    "labels",
    "annotations",
    "priority",
    "preemption_policy",
    "node_id",
    "nominated_node_id",
    "phase",
    "terminating",
    "topology_index",
    "bound_at",
    "started_at",
    "nominated_at",
    "owner_kind",
)
JOB_FIELDS = (
    "id",
    "kind",
    "namespace",
    "name",
    "gang_group",
    "quota_id",
    "priority",
    "submitted_at",
    "min_available",
    "total_number",
    "mode",
    "waiting_time_seconds",
    "topology_spec",
    "preemption_policy",
    "state",
    "annotations",
)
METRIC_FIELDS = (
    "id",
    "node_id",
    "reported_at",
    "report_interval_seconds",
    "usage",
    "pod_usages",
    "aggregated_usages",
)
DEVICE_FIELDS = (
    "id",
    "node_id",
    "device_type",
    "vendor",
    "model",
    "minor",
    "uuid",
    "health",
    "resources",
    "socket_id",
    "numa_node",
    "pcie_id",
    "bus_id",
    "vfs",
)


class NodeRow(NamedTuple):
    id: int
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[dict[str, Any]]
    allocatable: dict[str, int]
    unschedulable: bool
    ready: bool
    device_labels: dict[str, str]
    device_annotations: dict[str, str]


class PodRow(NamedTuple):
    id: int
    job_id: int
    namespace: str
    name: str
    uid: str
    requests: dict[str, int]
    limits: dict[str, int]
    node_selector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: list[dict[str, Any]]
    labels: dict[str, str]
    annotations: dict[str, str]
    priority: int
    preemption_policy: str
    node_id: int | None
    nominated_node_id: int | None
    phase: str
    terminating: bool
    topology_index: int | None
    bound_at: datetime | None
    started_at: datetime | None
    nominated_at: datetime | None
    owner_kind: str = ""


class JobRow(NamedTuple):
    id: int
    kind: str
    namespace: str
    name: str
    gang_group: str
    quota_id: int | None
    priority: int
    submitted_at: datetime
    min_available: int
    total_number: int
    mode: str
    waiting_time_seconds: int
    topology_spec: dict[str, Any]
    preemption_policy: str
    state: str
    annotations: dict[str, str] | None = None  # a gang's match policy is kept here

    @property
    def gang_id(self) -> str:
        return f"{self.namespace}/{self.name}"


def job_row_of(job: Job) -> JobRow:
    """The row of a Job object (saved or not, e.g. a what-if's), as `read_rows` reads it."""
    return JobRow(*(getattr(job, name) for name in JOB_FIELDS))


class MetricRow(NamedTuple):
    id: int
    node_id: int
    reported_at: datetime
    report_interval_seconds: int
    usage: dict[str, int]
    pod_usages: dict[str, Any]
    aggregated_usages: dict[str, Any]


class DeviceRow(NamedTuple):
    id: int
    node_id: int
    device_type: str
    vendor: str
    model: str
    minor: int
    uuid: str
    health: bool
    resources: dict[str, int]
    socket_id: int | None
    numa_node: int | None
    pcie_id: str
    bus_id: str
    vfs: list[Any]


# What `pod_info` reads of a pod row besides its own name and topology index (its id, uid and
# job row it does not read): the JSON documents, the row's JSON columns (compared by identity:
# `rows_read` gives equal documents of one read one object, and nobody writes them) and the
# plain values (by value).
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


FINISHED_PHASES = (PodPhase.SUCCEEDED, PodPhase.FAILED)


@dataclass
class ClusterRows:
    """Every row a snapshot is assembled from, by id: all nodes, every pod not finished, the jobs
    those pods belong to and the jobs still holding (`JobState.HOLDING`), each node's latest
    metric and its devices; the small tables (quotas, budgets, layers) are read whole each time."""

    nodes: dict[int, NodeRow] = field(default_factory=dict)
    pods: dict[int, PodRow] = field(default_factory=dict)
    jobs: dict[int, JobRow] = field(default_factory=dict)
    metrics: dict[int, MetricRow] = field(default_factory=dict)  # node id -> latest
    devices: dict[int, tuple[DeviceRow, ...]] = field(default_factory=dict)  # node id -> rows
    quota_names: dict[int, str] = field(default_factory=dict)


def needed_job(job: JobRow, referenced: bool) -> bool:
    return referenced or job.state in JobState.HOLDING


def read_rows(
    cluster_id: int,
    *,
    devices: bool,
    without_jobs: Collection[int] = (),
    nodes_only: bool = False,
) -> ClusterRows:
    """Every row of the cluster a snapshot needs (a fixed number of queries); `without_jobs`:
    job ids whose rows and pods are not read (a what-if leaves out the jobs the round holds);
    `nodes_only`: no pod or job row at all (a question about the cluster with every node empty
    reads nothing of what the tenants submitted)."""
    rows = ClusterRows()
    pods = Pod.objects.filter(cluster_id=cluster_id).exclude(phase__in=FINISHED_PHASES)
    jobs = Job.objects.filter(cluster_id=cluster_id)
    if without_jobs:
        pods = pods.exclude(job__id__any=list(without_jobs))
        jobs = jobs.exclude(id__any=list(without_jobs))
    rows.nodes = {
        r[0]: NodeRow(*r)
        for r in rows_read(
            Node.objects.filter(cluster_id=cluster_id).order_by().values_list(*NODE_FIELDS)
        )
    }
    if not nodes_only:
        rows.pods = {r[0]: PodRow(*r) for r in rows_read(pods.order_by().values_list(*POD_FIELDS))}
        referenced = {pod.job_id for pod in rows.pods.values()}
        rows.jobs = {
            r[0]: JobRow(*r)
            for r in rows_read(
                jobs.filter(Q(state__in=JobState.HOLDING) | Q(id__any=list(referenced)))
                .order_by()
                .values_list(*JOB_FIELDS)
            )
        }
    latest_ids = (
        NodeMetric.objects.filter(node__cluster_id=cluster_id)
        .values("node_id")
        .annotate(latest=Max("id"))
        .values("latest")
    )
    rows.metrics = {
        r[1]: MetricRow(*r)
        for r in NodeMetric.objects.filter(id__in=Subquery(latest_ids)).values_list(*METRIC_FIELDS)
    }
    if devices:
        rows.devices = devices_of(node__cluster_id=cluster_id)
    rows.quota_names = quota_names(cluster_id, rows.jobs.values())
    return rows


def quota_names(cluster_id: int, jobs: Iterable[JobRow]) -> dict[int, str]:
    """Quota id -> name: the cluster's quotas and any other a job names."""
    wanted = {j.quota_id for j in jobs if j.quota_id is not None}
    return dict(
        ElasticQuota.objects.filter(Q(cluster_id=cluster_id) | Q(id__in=list(wanted))).values_list(
            "id", "name"
        )
    )


def devices_of(**where: Any) -> dict[int, tuple[DeviceRow, ...]]:
    """Device rows by node, in (type, minor) order."""
    found: dict[int, list[DeviceRow]] = defaultdict(list)
    for r in Device.objects.filter(**where).values_list(*DEVICE_FIELDS):
        found[r[1]].append(DeviceRow(*r))
    return {
        node_id: tuple(sorted(rows, key=lambda d: (d.device_type, d.minor, d.id)))
        for node_id, rows in found.items()
    }


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
