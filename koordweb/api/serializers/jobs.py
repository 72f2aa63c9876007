"""How jobs, their pods and their decisions are answered."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from koordweb.api.fields import RedactedJSONField
from koordweb.models import Decision, Job, Pod
from koordweb.selectors.gpu_usage import IdleFlag, job_idle_flag


class PodOutputSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    node = serializers.CharField(source="node.name", default=None, allow_null=True)
    nominated_node = serializers.CharField(
        source="nominated_node.name", default=None, allow_null=True
    )

    class Meta:
        model = Pod
        fields = [
            "name",
            "namespace",
            "phase",
            "node",
            "nominated_node",
            "requests",
            "topology_index",
            "terminating",
            "bound_at",
            "finished_at",
        ]
        read_only_fields = fields


class DecisionOutputSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    round = serializers.IntegerField(source="round_id")
    details = RedactedJSONField()

    class Meta:
        model = Decision
        fields = ["id", "round", "outcome", "reason", "details", "created_at"]
        read_only_fields = fields


class JobOutputSerializer(serializers.ModelSerializer):  # type: ignore[type-arg]
    cluster = serializers.CharField(source="cluster.name")
    quota = serializers.CharField(source="quota.name", default=None, allow_null=True)
    priority_class = serializers.CharField(
        source="priority_class.name", default=None, allow_null=True
    )
    owner = serializers.CharField(source="owner.username", default=None, allow_null=True)
    replicas = serializers.IntegerField(source="total_number")
    idle_since = serializers.SerializerMethodField(
        help_text="Since when the job's GPUs have been idle (running jobs; null when busy)."
    )
    idle_gpu_hours = serializers.SerializerMethodField(
        help_text="GPU-hours allocated while idle since `idle_since` (lost so far)."
    )
    idle_flagged = serializers.SerializerMethodField(
        help_text="Idle longer than its team's threshold (the quota's gpu_idle_alert_minutes)."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "cluster",
            "namespace",
            "name",
            "kind",
            "quota",
            "priority_class",
            "priority",
            "state",
            "state_reason",
            "replicas",
            "min_available",
            "mode",
            "waiting_time_seconds",
            "topology_spec",
            "duration_seconds",
            "owner",
            "submitted_at",
            "scheduled_at",
            "started_at",
            "finished_at",
            "idle_since",
            "idle_gpu_hours",
            "idle_flagged",
        ]
        read_only_fields = fields

    def _idle(self, job: Job) -> IdleFlag | None:
        return job_idle_flag(job)

    def get_idle_since(self, job: Job) -> datetime | None:
        flag = self._idle(job)
        return flag.idle_since if flag else None

    def get_idle_gpu_hours(self, job: Job) -> float | None:
        flag = self._idle(job)
        return flag.gpu_hours_lost if flag else None

    def get_idle_flagged(self, job: Job) -> bool:
        flag = self._idle(job)
        return bool(flag and flag.flagged(timezone.now()))


class JobDetailSerializer(JobOutputSerializer):
    pods = PodOutputSerializer(many=True)
    placement = serializers.SerializerMethodField()
    decisions = DecisionOutputSerializer(many=True)

    class Meta(JobOutputSerializer.Meta):
        fields = [*JobOutputSerializer.Meta.fields, "pods", "placement", "decisions"]
        read_only_fields = fields

    @extend_schema_field(
        {
            "type": "object",
            "additionalProperties": {"type": "integer"},
            "description": "Node name -> number of this job's pods bound there.",
        }
    )
    def get_placement(self, job: Job) -> dict[str, Any]:
        placement: dict[str, int] = {}
        for pod in job.pods.all():
            if pod.node is not None:
                placement[pod.node.name] = placement.get(pod.node.name, 0) + 1
        return dict(sorted(placement.items()))
