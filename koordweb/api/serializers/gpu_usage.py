"""GPU usage in the API: query parameters checked field by field, answers in GPU-hours and
percents (amounts in the database are card-seconds in hundredths of a card)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone
from rest_framework import serializers

from koordweb.models import CardSample
from koordweb.models.gpu_usage import from_epoch

WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
MAX_HISTORY = timedelta(days=31)


def window_start(until: datetime, span: timedelta) -> datetime:
    """`until - span`, or a 400 on `until` when that is before year 1 (an OverflowError)."""
    try:
        return until - span
    except OverflowError:
        raise serializers.ValidationError(
            {"until": ["is too early: the window would start before year 1"]}
        ) from None


class CardHistoryQuery(serializers.Serializer):  # type: ignore[type-arg]
    node = serializers.CharField(max_length=253)
    minor = serializers.IntegerField(min_value=0, max_value=1023, required=False)
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        until = attrs.get("until") or timezone.now()
        since = attrs.get("since") or window_start(until, timedelta(hours=24))
        if since >= until:
            raise serializers.ValidationError({"since": ["must be before until"]})
        if until - since > MAX_HISTORY:
            raise serializers.ValidationError({"since": ["at most 31 days before until"]})
        return {**attrs, "since": since, "until": until}


class WindowQuery(serializers.Serializer):  # type: ignore[type-arg]
    window = serializers.ChoiceField(choices=list(WINDOWS), default="24h")
    until = serializers.DateTimeField(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        until = attrs.get("until") or timezone.now()
        return {**attrs, "until": until, "since": window_start(until, WINDOWS[attrs["window"]])}


class CardSampleSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """One holder of one card over one period; job and team are null for another tenant's."""

    start = serializers.SerializerMethodField()
    seconds = serializers.IntegerField(source="period_seconds")
    node = serializers.CharField(source="node.name")
    minor = serializers.IntegerField()
    job = serializers.SerializerMethodField()
    team = serializers.SerializerMethodField()
    allocated_percent = serializers.SerializerMethodField()
    busy_percent = serializers.SerializerMethodField()
    memory_mib = serializers.IntegerField()

    def get_start(self, row: CardSample) -> str:
        return from_epoch(row.period_start).isoformat()

    def _visible(self, row: CardSample) -> bool:
        teams = self.context.get("teams")
        return teams is None or row.quota_id in teams

    def get_job(self, row: CardSample) -> str | None:
        if row.job is None:
            return None
        return (
            f"{row.job.namespace}/{row.job.name}" if self._visible(row) else "another tenant's job"
        )

    def get_team(self, row: CardSample) -> str | None:
        return row.quota.name if row.quota and self._visible(row) else None

    def get_allocated_percent(self, row: CardSample) -> float:
        return round(row.allocated / row.period_seconds, 1)

    def get_busy_percent(self, row: CardSample) -> float:
        return round(row.used / row.period_seconds, 1)


class GpuHoursSerializer(serializers.Serializer):  # type: ignore[type-arg]
    allocated_gpu_hours = serializers.FloatField(source="allocated")
    used_gpu_hours = serializers.FloatField(source="used")
    idle_gpu_hours = serializers.FloatField(source="idle_allocated")
    efficiency_percent = serializers.FloatField(source="efficiency_pct")


class CardSeriesSerializer(serializers.Serializer):  # type: ignore[type-arg]
    card = serializers.CharField()
    busy_percent = serializers.ListField(child=serializers.FloatField(allow_null=True))


class JobUsageSerializer(serializers.Serializer):  # type: ignore[type-arg]
    job = serializers.IntegerField()
    totals = GpuHoursSerializer()
    idle_since = serializers.DateTimeField(allow_null=True)
    idle_gpu_hours_so_far = serializers.FloatField(allow_null=True)
    idle_flagged = serializers.BooleanField()
    bucket_seconds = serializers.IntegerField()
    times = serializers.ListField(child=serializers.DateTimeField())
    cards = CardSeriesSerializer(many=True)


class RankedSerializer(serializers.Serializer):  # type: ignore[type-arg]
    id = serializers.IntegerField(source="key")
    name = serializers.CharField()
    team = serializers.CharField()
    totals = GpuHoursSerializer(source="hours")


class EfficiencySerializer(serializers.Serializer):  # type: ignore[type-arg]
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    teams = RankedSerializer(many=True)
    jobs = RankedSerializer(many=True)
    trend_seconds = serializers.IntegerField()
    trend_times = serializers.ListField(child=serializers.DateTimeField(), source="trend_starts")
    idle_gpu_hours_trend = serializers.DictField(
        child=serializers.ListField(child=serializers.FloatField()), source="trend"
    )
