"""A cluster's rows as the engine's adapter reads them: plain values (named tuples, no model
instances), in a fixed number of queries (`read_rows`), or only the changed ones (`warm.py`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db.models import Max, Q, Subquery

from koordweb.models import (
    Device,
    ElasticQuota,
    Job,
    JobState,
    Node,
    NodeMetric,
    Pod,
)
from koordweb.rows.read import rows_read
from scheduler.vocabulary import FINISHED_POD_PHASES

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
    pods = Pod.objects.filter(cluster_id=cluster_id).exclude(phase__in=FINISHED_POD_PHASES)
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
