"""Query filters for list endpoints (one FilterSet per model, as NetBox does)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import django_filters
from rest_framework.exceptions import ValidationError

from koordweb.models import (
    Device,
    ElasticQuota,
    Job,
    JobState,
    Node,
    Preemption,
    PriorityClass,
    Round,
)

# Ids and integers in filters stay within the database's 64-bit range (else the query overflows).
MAX_ID = 2**63 - 1


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 instant, compared in UTC: PostgreSQL refuses offsets past +/-15:59 that
    Python accepts (up to 24 h), so the offset is resolved before the query."""

    def filter(self, qs: Any, value: Any) -> Any:
        if isinstance(value, datetime) and value.tzinfo is not None:
            try:
                value = value.astimezone(UTC)
            except OverflowError:
                raise ValidationError({self.parameter(): ["date and time out of range"]}) from None
        return super().filter(qs, value)

    def parameter(self) -> str:
        """The query parameter this filter reads (its name in the filter set), as clients send
        it: `submitted_after`, not the field `submitted_at`."""
        parent = getattr(self, "parent", None)
        for name, candidate in getattr(parent, "filters", {}).items():
            if candidate is self:
                return str(name)
        return str(self.field_name)


def id_filter(field_name: str) -> django_filters.NumberFilter:
    return django_filters.NumberFilter(field_name=field_name, min_value=1, max_value=MAX_ID)


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices)
    quota = django_filters.CharFilter(field_name="quota__name")
    priority_class = django_filters.CharFilter(field_name="priority_class__name")
    namespace = django_filters.CharFilter()
    cluster = django_filters.CharFilter(field_name="cluster__name")
    submitted_after = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="lt")
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Job
        fields = ["state", "quota", "priority_class", "namespace", "cluster"]


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
