"""The one adapter between database rows and the engine: rows -> `scheduler.ClusterSnapshot`.

It also keeps the reverse maps a round needs to write the engine's answer back (pod key -> Pod id,
engine job id -> Job rows).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Max, Q, Subquery

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
from scheduler.devices.inventory import device_allocatable
from scheduler.model import (
    ClusterSnapshot,
    GangInfo,
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
from scheduler.vocabulary import QUOTA_NAME

QUOTA_LABEL = QUOTA_NAME


@dataclass
class SnapshotIndex:
    """Reverse maps from the engine's keys to rows."""

    pod_ids: dict[str, int] = field(default_factory=dict)
    pod_uids: dict[str, str] = field(default_factory=dict)
    job_by_pod_key: dict[str, str] = field(default_factory=dict)
    jobs_by_engine_id: dict[str, list[Job]] = field(default_factory=dict)
    engine_id_by_job: dict[int, str] = field(default_factory=dict)


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


def parse_required_affinity(affinity: Mapping[str, Any]) -> tuple[NodeSelectorTerm, ...]:
    required = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        terms.append(
            NodeSelectorTerm(
                match_expressions=tuple(
                    NodeSelectorRequirement(
                        key=e["key"], operator=e["operator"], values=tuple(e.get("values") or ())
                    )
                    for e in term.get("matchExpressions") or []
                )
            )
        )
    return tuple(terms)


def parse_topology_rule(spec: Mapping[str, Any]) -> TopologyRule | None:
    """Koordinator's `{"gatherStrategy": [{"layer", "strategy"}]}` (plus our podCountMultiple)."""
    gather = tuple(
        LayerGather(layer=g["layer"], strategy=g["strategy"])
        for g in spec.get("gatherStrategy") or []
    )
    multiple = int(spec.get("podCountMultiple") or 1)
    if not gather and multiple == 1:
        return None
    return TopologyRule(gather=gather, pod_count_multiple=multiple)


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
        quota=quota or pod.labels.get(QUOTA_LABEL) or None,
        limits=dict(pod.limits),
        scheduled_at=pod.bound_at.timestamp() if pod.bound_at else None,
        initialized_at=pod.started_at.timestamp() if pod.started_at else None,
        nominated_at=pod.nominated_at.timestamp() if pod.nominated_at else None,
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


def build(
    cluster: Cluster, *, now: datetime, devices_for: Any = None
) -> tuple[ClusterSnapshot, SnapshotIndex]:
    """Read one cluster's rows into an immutable snapshot (a fixed number of queries).

    `devices_for(node, device_rows, annotations)` builds a node's opaque device state for the
    devices plugin; without it nodes carry no devices.
    """
    index = SnapshotIndex()
    nodes = list(cluster.nodes.order_by("name").defer("capacity", "conditions", "created_at"))
    node_names = {node.id: node.name for node in nodes}
    latest_ids = (
        NodeMetric.objects.filter(node__cluster=cluster)
        .values("node_id")
        .annotate(latest=Max("id"))
        .values("latest")
    )
    metrics = {m.node_id: m for m in NodeMetric.objects.filter(id__in=Subquery(latest_ids))}
    devices: dict[int, list[Device]] = defaultdict(list)
    if devices_for:
        for device in Device.objects.filter(node__cluster=cluster).order_by(
            "node_id", "device_type", "minor"
        ):
            devices[device.node_id].append(device)
    node_infos = [
        node_info(
            node,
            metrics.get(node.id),
            devices_for(node, devices.get(node.id, [])) if devices_for else None,
        )
        for node in nodes
    ]

    # Jobs being preempted or requeued keep their pods in the snapshot until the cluster says
    # they are gone: a terminating pod holds its node (only bound ones, never placed again).
    # A cancelled job's terminating pods too.
    pods_by_job: dict[int, list[Pod]] = defaultdict(list)
    pods = (
        Pod.objects.filter(cluster=cluster)
        .filter(
            Q(job__state__in=JobState.ACTIVE)
            | Q(node__isnull=False, job__state__in=JobState.HOLDING)
            | Q(node__isnull=False, terminating=True)
        )
        .exclude(phase__in=[PodPhase.SUCCEEDED, PodPhase.FAILED])
        .defer("created_at", "finished_at")
        .order_by("namespace", "name")
    )
    for pod in pods:
        pods_by_job[pod.job_id].append(pod)
    jobs = list(
        cluster.jobs.filter(Q(state__in=JobState.HOLDING) | Q(id__in=list(pods_by_job)))
        .select_related("quota")
        .order_by("id")
    )

    groups: dict[str, list[Job]] = defaultdict(list)
    for job in jobs:
        own_pods = pods_by_job.get(job.id, [])
        job_id = engine_job_id(job, own_pods[0].name if own_pods else None)
        groups[job_id].append(job)
        index.engine_id_by_job[job.id] = job_id
    index.jobs_by_engine_id = dict(groups)

    pod_infos: list[PodInfo] = []
    job_infos: list[JobInfo] = []
    for job_id, members in sorted(groups.items()):
        keys: list[str] = []
        for job in members:
            quota = job.quota.name if job.quota else None
            for pod in pods_by_job.get(job.id, []):
                gang = job.gang_id if job.kind != Job.Kind.POD else None
                info = pod_info(pod, job_id, quota, gang, node_names)
                pod_infos.append(info)
                keys.append(info.key)
                index.pod_ids[info.key] = pod.id
                index.pod_uids[info.key] = pod.uid
                index.job_by_pod_key[info.key] = job_id
        lead = min(members, key=lambda j: (-j.priority, j.submitted_at, j.id))
        job_infos.append(
            JobInfo(
                id=job_id,
                pod_keys=tuple(keys),
                gangs=tuple(
                    GangInfo(
                        id=j.gang_id,
                        min_available=j.min_available,
                        total=j.total_number,
                        mode=j.mode,  # type: ignore[arg-type]
                        waiting_seconds=j.waiting_time_seconds,
                    )
                    for j in members
                    if j.kind != Job.Kind.POD
                ),
                priority=max(j.priority for j in members),
                quota=lead.quota.name if lead.quota else None,
                topology=parse_topology_rule(lead.topology_spec or {}),
                submission_order=min(j.submitted_at for j in members).timestamp(),
                preemption_policy=lead.preemption_policy,  # type: ignore[arg-type]
            )
        )

    quotas = list(cluster.quotas.order_by("name"))
    parents = {q.id: q.name for q in quotas}
    layers = list(cluster.topology_layers.order_by("position"))
    snapshot = ClusterSnapshot(
        nodes=tuple(node_infos),
        pods=tuple(pod_infos),
        jobs=tuple(job_infos),
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
    return snapshot, index


def topology_spec_json(rule: Mapping[str, Any]) -> str:
    return json.dumps(rule, separators=(",", ":"), sort_keys=True)


def build_for_round(cluster: Cluster, *, now: datetime) -> tuple[ClusterSnapshot, SnapshotIndex]:
    """The snapshot a round (and a what-if) reads: rows plus each node's device state."""
    from koordweb.services.engine import node_devices_builder

    return build(cluster, now=now, devices_for=node_devices_builder(cluster))
