"""Rounds and preemptions: the audit trail the scheduler writes, read-only through the API."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from koordweb.api.fields import RedactedJSONField, redactor_for
from koordweb.models import Job, Preemption, PreemptionVictim, Round
from koordweb.selectors.redaction import preemption_cost_unnamed
from koordweb.selectors.tenancy import user_is_admin


class RoundSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    cluster = serializers.CharField(source="cluster.name")
    metrics = RedactedJSONField()

    class Meta:
        model = Round
        fields = [
            "id",
            "cluster",
            "state",
            "trigger",
            "started_at",
            "finished_at",
            "duration_ms",
            "engine_ms",
            "jobs_considered",
            "jobs_placed",
            "pods_bound",
            "preemption_count",
            "error",
            "metrics",
        ]
        read_only_fields = fields


class VictimSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    """A victim job (`selectors.catalog.preemption_list` leaves out those the viewer may not
    see)."""

    job_name = serializers.CharField(source="job.gang_id")

    class Meta:
        model = PreemptionVictim
        fields = ["job", "job_name", "pods", "freed"]
        read_only_fields = fields


class PreemptorSerializer(serializers.Serializer):  # type: ignore[type-arg]
    """The preempting job; another team's job shows its priority only (id and name null)."""

    id = serializers.IntegerField(allow_null=True)
    name = serializers.CharField(source="gang_id", allow_null=True)
    priority = serializers.IntegerField()

    def to_representation(self, instance: Job) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        if redactor_for(self.context).job_name(instance.gang_id) is None:
            data["id"] = data["name"] = None
        return data


class PreemptionSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    cluster = serializers.CharField(source="cluster.name")
    preemptor = PreemptorSerializer()
    victims = VictimSerializer(many=True)
    nominations = serializers.SerializerMethodField()

    class Meta:
        model = Preemption
        fields = [
            "id",
            "cluster",
            "round",
            "preemptor",
            "state",
            "reason",
            "cost",
            "nominations",
            "victims",
            "created_at",
            "attempt",
            "outcome",
            "outcome_reason",
            "outcome_at",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Preemption) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        if redactor_for(self.context).job_name(instance.preemptor.gang_id) is None:
            # Why another team's job did not fit names its quota: only the rule is its business.
            data["reason"] = ""
            data["cost"] = preemption_cost_unnamed(data.get("cost"))
        return data

    @extend_schema_field({"type": "object", "additionalProperties": True})
    def get_nominations(self, preemption: Preemption) -> Any:
        # Where the preemptor's pods go is the preemptor's tenant's business.
        request = self.context.get("request")
        if request is not None and user_is_admin(request.user):
            return preemption.nominations
        own_quotas = self.context.get("member_quota_ids", set())
        if preemption.preemptor.quota_id in own_quotas:
            return preemption.nominations
        return {}
