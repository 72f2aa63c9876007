"""Reads of the nodes: each node's reported usage (its latest NodeMetric) beside its allocation,
the load-aware thresholds the engine holds nodes to, and the nodes page's filtered, paged rows.

The thresholds are the engine's own: the LoadAware plugin built from the cluster's profile
arguments (`Profile.configured`, as a round builds it) says which ones it applies, defaults
included. Nothing here decides whether a node fits; "above the threshold" compares a node's
*reported* usage with the plugin's threshold, which is what the filter starts from (a round adds
its estimates of the pods it places).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.admin.models import LogEntry
from django.contrib.contenttypes.models import ContentType
from django.db.models import Max, QuerySet

from koordweb.models import Cluster, Device, Node, NodeMetric, Pod
from koordweb.selectors.topology import OCCUPYING_PHASES, is_accelerator
from scheduler.api import LoadAware, PluginArgs, Profile, ProfileError

USAGE_RESOURCES = ("cpu", "memory")
NODE_STATES = {
    "ready": "ready",
    "cordoned": "cordoned",
    "not-ready": "not ready",
    "busy": "above a load-aware threshold",
}
DEVICE_KINDS = {"gpu": "NVIDIA GPUs", "npu": "NPUs", "mlu": "MLUs", "none": "no accelerators"}


@dataclass(frozen=True)
class NodeRecord:
    """The last cordon or uncordon koordweb made of a node: who, when and what (the words
    `services.cordon` wrote in Django's admin log)."""

    username: str
    at: Any
    words: str


@dataclass(frozen=True)
class NodeUsage:
    """A node's latest report: used amounts and percents of allocatable per resource."""

    used: dict[str, int]
    percent: dict[str, int]
    reported_at: Any


@dataclass
class UsageSummary:
    """The cluster's (or a domain's) reported usage against the load-aware thresholds."""

    thresholds: dict[str, int]
    reported_nodes: int = 0
    nodes: int = 0
    used: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    above: dict[str, int] = field(default_factory=dict)  # nodes above each threshold

    def percent(self, resource: str) -> int:
        total = self.allocatable.get(resource, 0)
        return round(100 * self.used.get(resource, 0) / total) if total else 0


def load_thresholds(cluster: Cluster) -> dict[str, int]:
    """resource -> percent the engine's LoadAware filter holds a node's usage to; {} when the
    plugin is not in the cluster's profile (or the profile does not validate)."""
    try:
        profile = Profile.configured(
            cluster.scheduler_args or {}, settings.KOORDWEB_SCHEDULER_PLUGINS
        )
    except ProfileError:
        return {}
    spec = next((p for p in profile.plugins if p.name == LoadAware.name), None)
    if spec is None:
        return {}
    thresholds = PluginArgs(LoadAware.arguments, spec.args).amounts("usageThresholds")
    return {str(k): int(v) for k, v in thresholds.items() if int(v) > 0}


def node_usages(cluster: Cluster, node_ids: Iterable[int] | None = None) -> dict[int, NodeUsage]:
    """node id -> its latest NodeMetric's usage, as amounts and percents of allocatable."""
    nodes = Node.objects.filter(cluster=cluster)
    if node_ids is not None:
        nodes = nodes.filter(id__in=list(node_ids))
    allocatable = dict(nodes.values_list("id", "allocatable"))
    latest = (
        NodeMetric.objects.filter(node_id__in=list(allocatable))
        .values("node_id")
        .annotate(latest=Max("id"))
        .values("latest")
    )
    result = {}
    for node_id, usage, reported_at in NodeMetric.objects.filter(id__in=latest).values_list(
        "node_id", "usage", "reported_at"
    ):
        capacity = allocatable.get(node_id) or {}
        used = {r: int((usage or {}).get(r, 0)) for r in USAGE_RESOURCES if r in (usage or {})}
        percent = {
            r: round(100 * amount / capacity[r]) for r, amount in used.items() if capacity.get(r)
        }
        result[node_id] = NodeUsage(used, percent, reported_at)
    return result


def above_thresholds(usage: NodeUsage | None, thresholds: Mapping[str, int]) -> list[str]:
    """The resources whose reported percent is above the load-aware threshold."""
    if usage is None:
        return []
    return [r for r, limit in thresholds.items() if usage.percent.get(r, 0) > limit]


def usage_by_name(cluster: Cluster) -> dict[str, tuple[dict[str, int], bool]]:
    """node name -> (reported usage, above a load-aware threshold), for the topology tree."""
    thresholds = load_thresholds(cluster)
    names = dict(Node.objects.filter(cluster=cluster).values_list("id", "name"))
    return {
        names[node_id]: (usage.used, bool(above_thresholds(usage, thresholds)))
        for node_id, usage in node_usages(cluster).items()
        if node_id in names
    }


def usage_summary(cluster: Cluster) -> UsageSummary:
    """Reported CPU and memory use of the cluster and how many nodes are above each threshold."""
    summary = UsageSummary(load_thresholds(cluster))
    usages = node_usages(cluster)
    for node_id, allocatable in Node.objects.filter(cluster=cluster).values_list(
        "id", "allocatable"
    ):
        summary.nodes += 1
        usage = usages.get(node_id)
        if usage is None:
            continue
        summary.reported_nodes += 1
        for resource in USAGE_RESOURCES:
            if resource in usage.used:
                summary.used[resource] = summary.used.get(resource, 0) + usage.used[resource]
                summary.allocatable[resource] = summary.allocatable.get(resource, 0) + int(
                    (allocatable or {}).get(resource, 0)
                )
        for resource in above_thresholds(usage, summary.thresholds):
            summary.above[resource] = summary.above.get(resource, 0) + 1
    return summary


def node_device_kind(allocatable: Mapping[str, int]) -> str:
    """'gpu', 'npu', 'mlu' or 'none': the accelerator a node offers."""
    for resource in allocatable or {}:
        if is_accelerator(resource):
            tail = resource.split("/", 1)[1]
            return "npu" if "npu" in tail else "mlu" if "mlu" in tail else "gpu"
    return "none"


def node_rows(
    cluster: Cluster,
    *,
    domain: str = "",
    state: str = "",
    device: str = "",
    offset: int = 0,
    limit: int = 50,
) -> tuple[int, list[dict[str, Any]]]:
    """The nodes page: (how many match, the page's rows). Filtered in the database by domain
    (any label value, e.g. a block's name), state (ready, cordoned, not ready) and device kind;
    "busy" (above a load-aware threshold) is filtered on the reports, then paged. Each row
    carries the node's last cordon record (`node_records`)."""
    nodes: QuerySet[Node] = Node.objects.filter(cluster=cluster).order_by("name")
    if state == "cordoned":
        nodes = nodes.filter(unschedulable=True)
    elif state == "ready":
        nodes = nodes.filter(ready=True, unschedulable=False)
    elif state == "not-ready":
        nodes = nodes.filter(ready=False)
    if device == "none":
        nodes = nodes.exclude(devices__device_type=Device.Type.GPU)
    elif device in DEVICE_KINDS:
        vendor = {"gpu": "nvidia", "npu": "huawei", "mlu": "cambricon"}[device]
        nodes = nodes.filter(devices__vendor=vendor).distinct()
    if domain:
        nodes = nodes.filter(
            id__in=[
                node_id
                for node_id, labels in nodes.values_list("id", "labels")
                if domain in (labels or {}).values()
            ]
        )
    thresholds = load_thresholds(cluster)
    if state == "busy":
        usages = node_usages(cluster, nodes.values_list("id", flat=True))
        nodes = nodes.filter(
            id__in=[i for i, u in usages.items() if above_thresholds(u, thresholds)]
        )
    count = nodes.count()
    page = list(nodes[offset : offset + limit])
    ids = [n.id for n in page]
    usages = node_usages(cluster, ids)
    allocated: dict[int, dict[str, int]] = defaultdict(dict)
    pods: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for node_id, namespace, name, job_id, requests in Pod.objects.filter(
        node_id__in=ids, phase__in=OCCUPYING_PHASES
    ).values_list("node_id", "namespace", "name", "job_id", "requests"):
        pods[node_id].append((f"{namespace}/{name}", job_id))
        for resource, amount in (requests or {}).items():
            allocated[node_id][resource] = allocated[node_id].get(resource, 0) + int(amount)
    cards: dict[int, list[tuple[int, bool]]] = defaultdict(list)
    for node_id, minor, health in Device.objects.filter(node_id__in=ids).values_list(
        "node_id", "minor", "health"
    ):
        cards[node_id].append((minor, health))
    records = node_records(ids)
    rows = [
        {
            "node": node,
            "record": records.get(node.id),
            "usage": usages.get(node.id),
            "busy": above_thresholds(usages.get(node.id), thresholds),
            "allocated": allocated.get(node.id, {}),
            "pods": sorted(pods.get(node.id, [])),
            "cards": sorted(cards.get(node.id, [])),
            "device": node_device_kind(node.allocatable or {}),
        }
        for node in page
    ]
    return count, rows


def node_records(node_ids: Iterable[int]) -> dict[int, NodeRecord]:
    """node id -> the newest entry of the admin log for it: koordweb's cordon action, or an
    edit in the Django admin (its message in the admin's own words)."""
    ids = [str(i) for i in node_ids]
    if not ids:
        return {}
    entries = (
        LogEntry.objects.filter(
            content_type=ContentType.objects.get_for_model(Node), object_id__in=ids
        )
        .select_related("user")
        .order_by("-action_time", "-id")
    )
    records: dict[int, NodeRecord] = {}
    for entry in entries:
        node_id = int(str(entry.object_id))
        if node_id not in records:
            records[node_id] = NodeRecord(
                entry.user.get_username(), entry.action_time, entry.get_change_message()
            )
    return records
