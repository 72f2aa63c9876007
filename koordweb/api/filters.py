"""Query filters for list endpoints (one FilterSet per model, as NetBox does; the jobs' is
shared with the jobs page, `selectors.job_table`)."""

from __future__ import annotations

import django_filters

from koordweb.models import (
    Device,
    ElasticQuota,
    Node,
    Preemption,
    PriorityClass,
    Round,
)

# The job filter set is shared with the jobs page, so it lives below both doors.
from koordweb.selectors.job_table import MAX_ID, JobFilter, UtcDateTimeFilter

__all__ = [
    "MAX_ID",
    "DeviceFilter",
    "JobFilter",
    "NodeFilter",
    "PreemptionFilter",
    "PriorityClassFilter",
    "QuotaFilter",
    "RoundFilter",
    "UtcDateTimeFilter",
    "id_filter",
]


def id_filter(field_name: str) -> django_filters.NumberFilter:
    return django_filters.NumberFilter(field_name=field_name, min_value=1, max_value=MAX_ID)


class NodeFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Node
        fields = ["cluster", "ready", "unschedulable"]


class DeviceFilter(django_filters.FilterSet):
    node = django_filters.CharFilter(field_name="node__name")
    cluster = django_filters.CharFilter(field_name="node__cluster__name")

    class Meta:
        model = Device
        fields = ["node", "device_type", "vendor", "model", "health"]


class QuotaFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    parent = django_filters.CharFilter(field_name="parent__name")

    class Meta:
        model = ElasticQuota
        fields = ["cluster", "namespace", "parent", "is_parent"]


class PriorityClassFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")

    class Meta:
        model = PriorityClass
        fields = ["cluster", "preemption_policy", "global_default"]


class RoundFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    started_after = UtcDateTimeFilter(field_name="started_at", lookup_expr="gte")

    class Meta:
        model = Round
        fields = ["cluster", "state", "trigger"]


class PreemptionFilter(django_filters.FilterSet):
    cluster = django_filters.CharFilter(field_name="cluster__name")
    preemptor = id_filter("preemptor_id")
    created_after = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")

    class Meta:
        model = Preemption
        fields = ["cluster", "state", "preemptor"]
