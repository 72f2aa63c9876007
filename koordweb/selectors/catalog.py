"""Reads of the cluster catalog for the API: nodes, devices, quotas, priority classes, rounds,
preemptions. Each list is a queryset with its relations joined, so a page costs a fixed number of
queries; per-resource sums are done in Python over `values_list` rows (no JSON arithmetic in SQL).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db.models import Count, Prefetch, QuerySet

from koordweb.models import (
    Cluster,
    Device,
    ElasticQuota,
    Node,
    Pod,
    Preemption,
    PreemptionVictim,
    PriorityClass,
    Round,
    TopologyLayer,
)
from koordweb.selectors.overview import QuotaUse, latest_runtime_quota, quota_usage
from koordweb.selectors.tenancy import (
    jobs_visible,
    preemptions_visible,
    quota_ids_visible,
    user_is_admin,
)
from koordweb.selectors.topology import OCCUPYING_PHASES


def cluster_default() -> Cluster | None:
    """The cluster meant when none is named, for the pages and the API alike: the configured one
    (KOORDWEB_CLUSTER), else the only one there is; None when several and none configured."""
    default = Cluster.objects.filter(name=settings.KOORDWEB_CLUSTER).first()
    if default is not None:
        return default
    only = list(Cluster.objects.all()[:2])
    return only[0] if len(only) == 1 else None


def cluster_by_name(name: str | None) -> Cluster | None:
    """The named cluster (None when unknown), else the default one."""
    if name:
        return Cluster.objects.filter(name=name).first()
    return cluster_default()


def cluster_names() -> list[str]:
    return list(Cluster.objects.order_by("name").values_list("name", flat=True))


def node_list() -> QuerySet[Node]:
    return Node.objects.select_related("cluster").annotate(device_count=Count("devices"))


def node_allocated(node_ids: Iterable[int]) -> dict[int, dict[str, int]]:
    """Requests of the pods occupying each node, summed per resource (one query)."""
    allocated: dict[int, dict[str, int]] = {}
    rows = Pod.objects.filter(node_id__in=list(node_ids), phase__in=OCCUPYING_PHASES).values_list(
        "node_id", "requests"
    )
    for node_id, requests in rows:
        into = allocated.setdefault(node_id, {})
        for name, amount in (requests or {}).items():
            into[name] = into.get(name, 0) + int(amount)
    return allocated


def device_list() -> QuerySet[Device]:
    return Device.objects.select_related("node", "node__cluster")


def topology_layer_list() -> QuerySet[TopologyLayer]:
    return TopologyLayer.objects.select_related("cluster")


def quota_list(*, user: Any) -> QuerySet[ElasticQuota]:
    quotas = ElasticQuota.objects.select_related("cluster", "parent")
    if user_is_admin(user):
        return quotas
    return quotas.filter(id__in=quota_ids_visible(user=user))


def quota_tree(*, user: Any, cluster: Cluster) -> list[QuotaUse]:
    """The quota tree (depth-first) with min, max, runtime (from the last round) and used.

    A tenant sees the quotas they are a member of and their ancestors, nothing else.
    """
    rows = quota_usage(cluster, latest_runtime_quota(cluster))
    if user_is_admin(user):
        return rows
    visible = set(
        ElasticQuota.objects.filter(id__in=quota_ids_visible(user=user)).values_list(
            "name", flat=True
        )
    )
    return [row for row in rows if row.name in visible]


def priority_class_list() -> QuerySet[PriorityClass]:
    return PriorityClass.objects.select_related("cluster")


def round_list() -> QuerySet[Round]:
    return Round.objects.select_related("cluster")


def preemption_list(*, user: Any) -> QuerySet[Preemption]:
    """Preemptions touching the user's jobs; victims the user may not see are left out."""
    victims = PreemptionVictim.objects.select_related("job").order_by("job__name")
    if not user_is_admin(user):
        victims = victims.filter(job__in=jobs_visible(user=user))
    return (
        preemptions_visible(user=user)
        .select_related("cluster", "preemptor")
        .prefetch_related(Prefetch("victims", queryset=victims))
    )
