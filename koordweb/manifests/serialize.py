"""Rows -> Kubernetes/Koordinator documents: one function per kind, the inverse of the parsers.

Fields koordweb models on its own rows (gang settings, quota tree labels, the pod-group label)
are written back from those rows, so an exported document says what the database says.
"""

from __future__ import annotations

import json
from typing import Any

from koordweb.manifests.fields import format_timestamp
from koordweb.models import (
    Device,
    DeviceTemplateConfig,
    ElasticQuota,
    Job,
    Node,
    NodeMetric,
    Pod,
    PodDisruptionBudget,
    PriorityClass,
    TopologyLayer,
)
from koordweb.quantity import format_resource_list
from scheduler.vocabulary import (
    DEFAULT_POD_GROUP_API,
    DURATION_ANNOTATION,
    GANG_GROUPS,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_NAME,
    GANG_TOPOLOGY_INDEX,
    GANG_TOPOLOGY_SPEC,
    GANG_TOTAL_NUMBER,
    GANG_WAITING_TIME,
    K8S_SCHEDULING_API,
    KOORD_SCHEDULING_API,
    KOORD_SLO_API,
    POD_GROUP_APIS,
    POD_GROUP_LABELS,
    QUOTA_ALLOW_LENT,
    QUOTA_IS_PARENT,
    QUOTA_NAME,
    QUOTA_PARENT,
    QUOTA_SHARED_WEIGHT,
)

# Exported pods have one container carrying the pod's effective requests and limits.
CONTAINER_NAME = "main"
CONTAINER_IMAGE = "registry.k8s.io/pause:3.10"


def _meta(name: str, namespace: str = "", **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta.update({key: value for key, value in extra.items() if value})
    return meta


def _compact(mapping: dict[str, Any], keep: tuple[str, ...] = ()) -> dict[str, Any]:
    """Drop empty values, as Kubernetes omits empty optional fields; `keep` are required ones."""
    return {
        key: value
        for key, value in mapping.items()
        if key in keep or value not in (None, "", [], {}, False)
    }


def priority_class_doc(pc: PriorityClass) -> dict[str, Any]:
    return _compact(
        {
            "apiVersion": K8S_SCHEDULING_API,
            "kind": "PriorityClass",
            "metadata": _meta(pc.name),
            "value": pc.value,
            "preemptionPolicy": pc.preemption_policy,
            "globalDefault": pc.global_default,
            "description": pc.description,
        },
        keep=("value",),
    )


def topology_doc(
    layers: list[TopologyLayer], detail_status: list[dict[str, Any]]
) -> dict[str, Any]:
    spec = [
        _compact(
            {
                "topologyLayer": layer.name,
                "parentTopologyLayer": layer.parent_name,
                "labelKey": list(layer.label_keys),
            }
        )
        for layer in layers
    ]
    return {
        "apiVersion": KOORD_SCHEDULING_API,
        "kind": "ClusterNetworkTopology",
        "metadata": _meta("default"),
        "spec": {"networkTopologySpec": spec},
        "status": {"detailStatus": detail_status},
    }


def config_map_doc(config: DeviceTemplateConfig) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(config.name, config.namespace, labels=config.labels),
        "data": dict(config.data),
    }


def node_doc(node: Node) -> dict[str, Any]:
    conditions = [dict(c) for c in node.conditions if isinstance(c, dict)]
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    status_word = "True" if node.ready else "False"
    if ready is None and not node.ready:
        conditions.append({"type": "Ready", "status": status_word})
    elif ready is not None:
        ready["status"] = status_word
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(node.name, labels=node.labels, annotations=node.annotations),
        "spec": _compact({"taints": node.taints, "unschedulable": node.unschedulable}),
        "status": _compact(
            {
                "capacity": format_resource_list(node.capacity),
                "allocatable": format_resource_list(node.allocatable),
                "conditions": conditions,
            }
        ),
    }


def _device_entry(device: Device) -> dict[str, Any]:
    topology = {
        "socketID": device.socket_id,
        "nodeID": device.numa_node,
        "pcieID": device.pcie_id or None,
        "busID": device.bus_id or None,
    }
    entry = {
        "type": device.device_type,
        "id": device.uuid,
        "minor": device.minor,
        "health": device.health,
        "labels": device.labels,
        "resources": format_resource_list(device.resources),
        "topology": {key: value for key, value in topology.items() if value is not None},
        "vfGroups": device.vfs,
    }
    return _compact(entry, keep=("minor", "health"))


def device_doc(node: Node, devices: list[Device]) -> dict[str, Any]:
    return {
        "apiVersion": KOORD_SCHEDULING_API,
        "kind": "Device",
        "metadata": _meta(
            node.name, labels=node.device_labels, annotations=node.device_annotations
        ),
        "spec": {"devices": [_device_entry(device) for device in devices]},
    }


def node_metric_doc(metric: NodeMetric, node_name: str) -> dict[str, Any]:
    devices = [
        {"type": "gpu", "minor": int(minor), "resources": format_resource_list(usage)}
        for minor, usage in sorted(metric.gpu_usage.items(), key=lambda item: int(item[0]))
    ]
    usage: dict[str, Any] = {"resources": format_resource_list(metric.usage)}
    if devices:
        usage["devices"] = devices
    node_metric: dict[str, Any] = {"nodeUsage": usage}
    by_duration: dict[int, dict[str, Any]] = {}
    for kind, durations in sorted(metric.aggregated_usages.items()):
        for seconds, resources in durations.items():
            by_duration.setdefault(int(seconds), {})[kind] = {
                "resources": format_resource_list(resources)
            }
    if by_duration:
        node_metric["aggregatedNodeUsages"] = [
            {"usage": usage_by_kind, "duration": f"{seconds}s"}
            for seconds, usage_by_kind in sorted(by_duration.items())
        ]
    status: dict[str, Any] = {
        "updateTime": format_timestamp(metric.reported_at),
        "nodeMetric": node_metric,
    }
    # One podsMetric entry per pod: its resources (load-aware) and its cards (GPU monitoring).
    keys_seen = sorted(set(metric.pod_usages or {}) | set(metric.pod_gpu_usage or {}))
    if keys_seen:
        status["podsMetric"] = [
            _pod_metric(
                key, (metric.pod_usages or {}).get(key), (metric.pod_gpu_usage or {}).get(key)
            )
            for key in keys_seen
        ]
    return {
        "apiVersion": KOORD_SLO_API,
        "kind": "NodeMetric",
        "metadata": _meta(node_name),
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": metric.report_interval_seconds}},
        "status": status,
    }


def _pod_metric(
    key: str, resources: dict[str, int] | None, cards: dict[str, dict[str, int]] | None
) -> dict[str, Any]:
    namespace, _, name = key.partition("/")
    usage: dict[str, Any] = {}
    if resources is not None:
        usage["resources"] = format_resource_list(resources)
    if cards:
        usage["devices"] = [
            {"type": "gpu", "minor": int(minor), "resources": format_resource_list(card)}
            for minor, card in sorted(cards.items(), key=lambda item: int(item[0]))
        ]
    return {"namespace": namespace, "name": name, "podUsage": usage}


def quota_doc(quota: ElasticQuota) -> dict[str, Any]:
    labels = dict(quota.labels)
    labels[QUOTA_IS_PARENT] = "true" if quota.is_parent else "false"
    labels[QUOTA_ALLOW_LENT] = "true" if quota.allow_lent else "false"
    if quota.parent is not None:
        labels[QUOTA_PARENT] = quota.parent.name
    annotations = dict(quota.annotations)
    if quota.shared_weight is not None:
        annotations[QUOTA_SHARED_WEIGHT] = json.dumps(
            format_resource_list(quota.shared_weight), sort_keys=True
        )
    return {
        "apiVersion": DEFAULT_POD_GROUP_API,
        "kind": "ElasticQuota",
        "metadata": _meta(
            quota.name,
            quota.namespace,
            labels=dict(sorted(labels.items())),
            annotations=annotations,
        ),
        "spec": {"min": format_resource_list(quota.min), "max": format_resource_list(quota.max)},
    }


def _gang_annotations(job: Job) -> dict[str, str]:
    """The annotations a pod or PodGroup carries for the job's own fields."""
    annotations: dict[str, str] = {}
    if job.kind == Job.Kind.GANG:
        annotations.update(
            {
                GANG_NAME: job.name,
                GANG_MIN_AVAILABLE: str(job.min_available),
                GANG_TOTAL_NUMBER: str(job.total_number),
                GANG_MODE: job.mode,
                GANG_WAITING_TIME: f"{job.waiting_time_seconds}s",
            }
        )
    elif job.kind == Job.Kind.POD_GROUP:
        # A PodGroup carries the settings spec has no field for as annotations, as Koordinator
        # reads them (the defaults are left out).
        if job.mode != "Strict":
            annotations[GANG_MODE] = job.mode
        if job.total_number != job.min_available:
            annotations[GANG_TOTAL_NUMBER] = str(job.total_number)
    if job.gang_groups and job.kind != Job.Kind.POD:
        annotations[GANG_GROUPS] = json.dumps(sorted(job.gang_groups))
    if job.topology_spec and job.kind != Job.Kind.POD:
        annotations[GANG_TOPOLOGY_SPEC] = json.dumps(job.topology_spec, sort_keys=True)
    if job.duration_seconds is not None:
        annotations[DURATION_ANNOTATION] = str(job.duration_seconds)
    return annotations


def pod_group_doc(job: Job) -> dict[str, Any]:
    annotations = {**job.annotations, **_gang_annotations(job)}
    return {
        "apiVersion": job.pod_group_api or DEFAULT_POD_GROUP_API,
        "kind": "PodGroup",
        "metadata": _meta(
            job.name,
            job.namespace,
            labels=job.labels,
            annotations=annotations,
            creationTimestamp=format_timestamp(job.submitted_at),
        ),
        "spec": {
            "minMember": job.min_available,
            "scheduleTimeoutSeconds": job.waiting_time_seconds,
        },
    }


def pod_doc(pod: Pod, job: Job, node_names: dict[int, str]) -> dict[str, Any]:
    labels = dict(pod.labels)
    if job.kind == Job.Kind.POD_GROUP:
        api = job.pod_group_api or DEFAULT_POD_GROUP_API
        labels[POD_GROUP_APIS.get(api, POD_GROUP_LABELS[0])] = job.name
    if job.quota is not None:
        labels[QUOTA_NAME] = job.quota.name
    annotations = dict(pod.annotations)
    if job.kind != Job.Kind.POD_GROUP:
        annotations.update(_gang_annotations(job))
    if pod.topology_index is not None:
        annotations[GANG_TOPOLOGY_INDEX] = str(pod.topology_index)
    resources = _compact(
        {"requests": format_resource_list(pod.requests), "limits": format_resource_list(pod.limits)}
    )
    node_name = node_names.get(pod.node_id) if pod.node_id else None
    spec = _compact(
        {
            "schedulerName": pod.scheduler_name,
            "nodeName": node_name,
            "priorityClassName": pod.priority_class_name,
            "priority": pod.priority,
            "preemptionPolicy": pod.preemption_policy,
            "nodeSelector": pod.node_selector,
            "affinity": pod.affinity,
            "tolerations": pod.tolerations,
            "containers": [
                _compact({"name": CONTAINER_NAME, "image": CONTAINER_IMAGE, "resources": resources})
            ],
        },
        keep=("priority",),
    )
    conditions = []
    if node_name and pod.bound_at is not None:
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "True",
                "lastTransitionTime": format_timestamp(pod.bound_at),
            }
        )
    elif pod.nominated_node_id and pod.nominated_at is not None:
        # kube-scheduler marks the pod Unschedulable when its preemption nominates it.
        conditions.append(
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": format_timestamp(pod.nominated_at),
            }
        )
    status = _compact(
        {
            "phase": pod.phase,
            "nominatedNodeName": node_names.get(pod.nominated_node_id)
            if pod.nominated_node_id
            else None,
            "startTime": format_timestamp(pod.started_at),
            "containerStatuses": [
                {
                    "name": CONTAINER_NAME,
                    "state": {"terminated": {"finishedAt": format_timestamp(pod.finished_at)}},
                }
            ]
            if pod.finished_at
            else None,
            "conditions": conditions,
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": _meta(
            pod.name,
            pod.namespace,
            uid=pod.uid,
            labels=dict(sorted(labels.items())),
            annotations=dict(sorted(annotations.items())),
            creationTimestamp=format_timestamp(pod.created_at),
            # koordweb keeps no deletion time; the creation time marks the pod as terminating.
            deletionTimestamp=format_timestamp(pod.created_at) if pod.terminating else None,
        ),
        "spec": spec,
        "status": status,
    }


def pdb_doc(pdb: PodDisruptionBudget) -> dict[str, Any]:
    def int_or_percent(value: str) -> int | str:
        return int(value) if value.isdigit() else value

    spec: dict[str, Any] = {"selector": pdb.selector}
    if pdb.min_available:
        spec["minAvailable"] = int_or_percent(pdb.min_available)
    if pdb.max_unavailable:
        spec["maxUnavailable"] = int_or_percent(pdb.max_unavailable)
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(pdb.name, pdb.namespace),
        "spec": spec,
    }
