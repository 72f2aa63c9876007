"""Parsers for the physical cluster: Node, Device, NodeMetric, ClusterNetworkTopology, ConfigMap
and PriorityClass documents -> validated `ParsedObject`s (no database access)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordweb.manifests.errors import ManifestError
from koordweb.manifests.fields import At, read_metadata
from koordweb.manifests.loader import load_documents
from koordweb.manifests.objects import (
    CONFIG_MAP,
    DEVICE,
    NODE,
    NODE_METRIC,
    PRIORITY_CLASS,
    TOPOLOGY,
    ParsedObject,
)
from koordweb.manifests.scheduler_config import (
    SchedulerConfigError,
    is_scheduler_config,
    read_scheduler_config,
    unsupported_warning,
)
from koordweb.models import Device
from koordweb.models.workload import PreemptionPolicy
from scheduler.api import duration_seconds
from scheduler.vocabulary import CLUSTER_LAYER, NODE_LAYER

TAINT_EFFECTS = {"NoSchedule", "PreferNoSchedule", "NoExecute"}
DEVICE_TYPES = set(Device.Type.values)
PREEMPTION_POLICIES = set(PreemptionPolicy.values)


def parse_node(doc: At) -> ParsedObject:
    meta = read_metadata(doc, namespaced=False)
    spec, status = doc.child("spec"), doc.child("status")
    taints = spec.child("taints")
    for taint in taints.items():
        taint.child("key").string(required=True, max_length=316)
        effect = taint.child("effect").string(required=True)
        if effect not in TAINT_EFFECTS:
            taint.fail(f"must be one of {sorted(TAINT_EFFECTS)}, got {effect!r}", "effect")
    capacity = status.child("capacity").resources()
    allocatable = status.child("allocatable")
    conditions = status.child("conditions")
    ready = True
    for condition in conditions.items():
        if condition.child("type").string(required=True) == "Ready":
            ready = condition.child("status").string(required=True) == "True"
    return ParsedObject(
        doc.index,
        NODE,
        "",
        meta.name,
        values={
            "labels": meta.labels,
            "annotations": meta.annotations,
            "taints": taints.json_value([]),
            "capacity": capacity,
            # Kubernetes defaults allocatable to capacity when the kubelet reports none.
            "allocatable": allocatable.resources() if allocatable.present() else dict(capacity),
            "conditions": conditions.json_value([]),
            "unschedulable": spec.child("unschedulable").boolean(),
            "ready": ready,
        },
    )


def _optional_id(at: At) -> str:
    """pcieID and busID: strings in the CR, but YAML turns a bare `0` into an integer."""
    if isinstance(at.value, int) and not isinstance(at.value, bool):
        return str(at.value)
    return at.string(max_length=32)


def parse_device(doc: At) -> ParsedObject:
    """A Device CR is named after its node; each `spec.devices[]` entry becomes a row.

    Its labels and annotations (the partition table and policy) are kept on the node."""
    meta = read_metadata(doc, namespaced=False)
    rows = []
    seen: dict[tuple[str, int], int] = {}
    for position, item in enumerate(doc.child("spec").child("devices").items()):
        device_type = item.child("type").string(required=True)
        if device_type not in DEVICE_TYPES:
            item.fail(f"must be one of {sorted(DEVICE_TYPES)}, got {device_type!r}", "type")
        minor = item.child("minor").integer(required=True, minimum=0)
        if (device_type, minor) in seen:
            earlier = seen[(device_type, minor)]
            item.fail(
                f"duplicate {device_type} minor {minor} (also devices[{earlier}])",
                "minor",
            )
        seen[(device_type, minor)] = position
        topology = item.child("topology")
        socket, numa = topology.child("socketID"), topology.child("nodeID")
        vf_groups = item.child("vfGroups")
        vf_groups.items()  # must be a list
        rows.append(
            {
                "device_type": device_type,
                "minor": minor,
                "uuid": item.child("id").string(max_length=128),
                "health": item.child("health").boolean(False),
                "labels": item.child("labels").string_map(),
                "resources": item.child("resources").resources(),
                "socket_id": socket.integer() if socket.present() else None,
                "numa_node": numa.integer() if numa.present() else None,
                "pcie_id": _optional_id(topology.child("pcieID")),
                "bus_id": _optional_id(topology.child("busID")),
                "vfs": vf_groups.json_value([]),
            }
        )
    values = {"device_labels": meta.labels, "device_annotations": meta.annotations}
    return ParsedObject(
        doc.index, DEVICE, "", meta.name, values=values, refs={"node": meta.name}, rows=rows
    )


def parse_node_metric(doc: At) -> ParsedObject:
    """slo.koordinator.sh NodeMetric: node usage, its time and interval, GPU usage per minor, and
    each pod's usage (`status.podsMetric[]`)."""
    meta = read_metadata(doc, namespaced=False)
    status = doc.child("status")
    usage = status.child("nodeMetric").child("nodeUsage")
    gpu_usage = _gpu_device_usage(usage.child("devices"))
    # koordlet's per-pod card usage (status.podsMetric[].podUsage.devices), keyed namespace/name.
    pod_gpu_usage: dict[str, dict[str, dict[str, int]]] = {}
    for pod in status.child("podsMetric").items():
        cards = _gpu_device_usage(pod.child("podUsage").child("devices"))
        if cards:
            name = pod.child("name").string(required=True)
            pod_gpu_usage[f"{pod.child('namespace').string('default')}/{name}"] = cards
    interval = doc.child("spec").child("metricCollectPolicy").child("reportIntervalSeconds")
    pod_usages: dict[str, dict[str, int]] = {}
    for pod in status.child("podsMetric").items():
        namespace = pod.child("namespace").string(required=True)
        name = pod.child("name").string(required=True)
        used = pod.child("podUsage").child("resources").resources()
        if used:  # an entry without resources is not a report: the pod is estimated (Koordinator)
            pod_usages[f"{namespace}/{name}"] = used
    aggregated: dict[str, dict[str, dict[str, int]]] = {}
    for item in status.child("nodeMetric").child("aggregatedNodeUsages").items():
        raw = item.child("duration").string(required=True)
        seconds = duration_seconds(raw)
        if seconds is None:
            item.fail(f"must be a duration such as 5m0s, got {raw!r}", "duration")
        usage_by_type = item.child("usage")
        kinds = usage_by_type.value if isinstance(usage_by_type.value, dict) else {}
        for kind in sorted(kinds):
            resources = usage_by_type.child(kind).child("resources").resources()
            aggregated.setdefault(kind, {})[str(seconds)] = resources
    return ParsedObject(
        doc.index,
        NODE_METRIC,
        "",
        meta.name,
        values={
            "reported_at": status.child("updateTime").timestamp(),
            "report_interval_seconds": interval.integer(60, minimum=1),
            "usage": usage.child("resources").resources(),
            "gpu_usage": gpu_usage,
            "pod_usages": pod_usages,
            "aggregated_usages": aggregated,
            "pod_gpu_usage": pod_gpu_usage,
        },
        refs={"node": meta.name},
    )


def _gpu_device_usage(devices: At) -> dict[str, dict[str, int]]:
    """NodeMetric `devices[]` (Koordinator's DeviceInfo) of type gpu: minor -> resources used
    (`koordinator.sh/gpu-core` busy percent, `koordinator.sh/gpu-memory` bytes, memory ratio)."""
    usage: dict[str, dict[str, int]] = {}
    for device in devices.items():
        if device.child("type").string("gpu") != "gpu":
            continue
        minor = device.child("minor").integer(required=True, minimum=0)
        usage[str(minor)] = device.child("resources").resources()
    return usage


def parse_topology(doc: At) -> ParsedObject:
    """ClusterNetworkTopology `default`: the layer tree, root implicit, NodeTopologyLayer leaf."""
    meta = read_metadata(doc, namespaced=False)
    if meta.name != "default":
        doc.fail(
            f"only the ClusterNetworkTopology named 'default' counts, got {meta.name!r}",
            "metadata.name",
        )
    layers = doc.child("spec").child("networkTopologySpec")
    rows: list[dict[str, object]] = []
    names: dict[str, int] = {}
    for position, item in enumerate(layers.items()):
        name = item.child("topologyLayer").string(required=True, max_length=63)
        if name in names or name == CLUSTER_LAYER:
            item.fail(f"duplicate layer {name!r}", "topologyLayer")
        names[name] = position
        keys = item.child("labelKey")
        label_keys = [key.string(required=True, max_length=316) for key in keys.items()]
        if name != NODE_LAYER and not label_keys:
            item.fail(f"layer {name!r} needs at least one node label key", "labelKey")
        rows.append(
            {
                "name": name,
                "parent_name": item.child("parentTopologyLayer").string(max_length=63),
                "label_keys": label_keys,
                "position": position,
            }
        )
    if NODE_LAYER not in names:
        layers.fail(f"{NODE_LAYER} must be listed")
    for position, row in enumerate(rows):
        where = At(doc.index, None, layers.where(position))
        parent = str(row["parent_name"])
        if parent == NODE_LAYER:
            where.fail(f"{NODE_LAYER} cannot be a parent", "parentTopologyLayer")
        if parent and parent != CLUSTER_LAYER and parent not in names:
            where.fail(f"unknown layer {parent!r}", "parentTopologyLayer")
        # Walk up: a chain longer than the layer count means a cycle.
        steps, current = 0, row
        while current["parent_name"] not in ("", CLUSTER_LAYER):
            current = rows[names[str(current["parent_name"])]]
            steps += 1
            if steps > len(rows):
                where.fail("layers form a cycle", "parentTopologyLayer")
    return ParsedObject(doc.index, TOPOLOGY, "", meta.name, rows=rows)


def _is_template_table(text: object) -> bool:
    """A data value that reads as device templates: a YAML mapping of names to mappings
    (`huawei-Ascend-910B3: {vir01: {...}}`, or one model's `vir01: {aicore: 1, ...}`)."""
    if not isinstance(text, str):
        return False
    try:
        documents = load_documents(text)
    except ManifestError:
        return False
    return any(
        isinstance(doc, dict) and doc and all(isinstance(value, dict) for value in doc.values())
        for doc in documents
    )


def is_config_map_read(document: Mapping[str, Any]) -> bool:
    """Whether koordweb reads this ConfigMap: the scheduler's `koord-scheduler-config`, or one
    holding device templates. Any other (`kube-root-ca.crt`, `coredns`, an application's own)
    is skipped."""
    meta = document.get("metadata")
    if isinstance(meta, Mapping) and is_scheduler_config(str(meta.get("name", ""))):
        return True
    data = document.get("data")
    return isinstance(data, Mapping) and any(_is_template_table(v) for v in data.values())


def parse_config_map(doc: At) -> ParsedObject:
    """A vendor template ConfigMap (Ascend vNPU templates), kept whole; or the scheduler's
    `koord-scheduler-config`, read into `extra["scheduler_args"]` (with `extra["warning"]`
    naming what koordweb does not support)."""
    meta = read_metadata(doc, namespaced=True)
    data = doc.child("data").string_map()
    extra: dict[str, object] = {}
    if is_scheduler_config(meta.name):
        try:
            args, unsupported = read_scheduler_config(data)
        except SchedulerConfigError as exc:
            doc.fail(str(exc), "data")
        extra = {"scheduler_args": args, "warning": unsupported_warning(unsupported)}
    return ParsedObject(
        doc.index,
        CONFIG_MAP,
        meta.namespace,
        meta.name,
        values={"labels": meta.labels, "data": data},
        extra=extra,
    )


def parse_priority_class(doc: At) -> ParsedObject:
    meta = read_metadata(doc, namespaced=False)
    # int32 like Kubernetes; system classes (2000000000) appear in real dumps, so allow them.
    value = doc.child("value").integer(required=True, minimum=-(2**31))
    if value > 2**31 - 1:
        doc.fail(f"must fit in 32 bits, got {value}", "value")
    policy = doc.child("preemptionPolicy").string("PreemptLowerPriority")
    if policy not in PREEMPTION_POLICIES:
        doc.fail(
            f"must be one of {sorted(PREEMPTION_POLICIES)}, got {policy!r}", "preemptionPolicy"
        )
    return ParsedObject(
        doc.index,
        PRIORITY_CLASS,
        "",
        meta.name,
        values={
            "value": value,
            "preemption_policy": policy,
            "global_default": doc.child("globalDefault").boolean(),
            "description": doc.child("description").string(max_length=500),
        },
    )
