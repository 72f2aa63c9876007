"""The job submission body (jobs/ and whatif/ share it) and its conversion to a JobSpec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework import serializers

from koordweb.api.fields import ResourceListField
from koordweb.api.serializers.strict import StrictSerializer
from koordweb.kubenames import (
    LABEL_CHARACTERS,
    NAME_CHARACTERS,
    labels_errors,
    toleration_errors,
)
from koordweb.limits import (
    DURATION,
    GANG_MODES,
    GATHER_STRATEGIES,
    JOB_NAME_MAX,
    MIN_AVAILABLE,
    POD_COUNT,
)
from koordweb.services.jobs import GatherRule, JobSpec, PodShape
from koordweb.submission import NAMESPACE_MAX, TEXT_RULES, request_errors, submission_errors

MAX_SELECTOR = 32  # node selector entries a pod may carry


class TolerationSerializer(StrictSerializer):
    key = serializers.CharField(max_length=317, required=False, allow_blank=True, default="")
    operator = serializers.ChoiceField(["Equal", "Exists"], required=False, default="Equal")
    value = serializers.CharField(max_length=63, required=False, allow_blank=True, default="")
    effect = serializers.ChoiceField(
        ["", "NoSchedule", "PreferNoSchedule", "NoExecute"], required=False, default=""
    )
    toleration_seconds = serializers.IntegerField(required=False, min_value=0, allow_null=True)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """What the API server would refuse when the pods are created, refused now."""
        refused = toleration_errors(_toleration(attrs))
        if refused:
            raise serializers.ValidationError(
                {_SNAKE.get(name, name): [reason] for name, reason in refused.items()}
            )
        return attrs


_SNAKE = {"tolerationSeconds": "toleration_seconds"}


def _valid(value: str, errors: Callable[[str], list[str]]) -> str:
    refused = errors(value)
    if refused:
        raise serializers.ValidationError(refused)
    return value


def _labels(value: dict[str, str], at_most: int | None = None) -> dict[str, str]:
    """Labels or a node selector as Kubernetes accepts them (keys and values)."""
    if at_most is not None and len(value) > at_most:
        raise serializers.ValidationError(f"at most {at_most} entries")
    refused = labels_errors(value)
    if refused:
        raise serializers.ValidationError(refused)
    return value


class PodShapeSerializer(StrictSerializer):
    requests = ResourceListField(
        help_text='Per pod, Kubernetes quantities: {"cpu": "4", "memory": "16Gi", '
        '"nvidia.com/gpu": "8"}.'
    )
    node_selector = serializers.DictField(
        child=serializers.CharField(max_length=63, allow_blank=True), required=False, default=dict
    )
    tolerations = TolerationSerializer(many=True, required=False, default=list)

    def validate_requests(self, value: dict[str, int]) -> dict[str, int]:
        refused = request_errors(value)
        if refused:
            raise serializers.ValidationError(refused)
        return value

    def validate_node_selector(self, value: dict[str, str]) -> dict[str, str]:
        return _labels(value, at_most=MAX_SELECTOR)


class GatherRuleSerializer(StrictSerializer):
    layer = serializers.CharField(max_length=63, help_text="A TopologyLayer name, e.g. BlockLayer.")
    strategy = serializers.ChoiceField(GATHER_STRATEGIES)


class TopologyRuleSerializer(StrictSerializer):
    gather = GatherRuleSerializer(many=True, max_length=8)  # type: ignore[call-arg]


class JobSubmissionSerializer(StrictSerializer):
    """What a user submits; validated shapes only (the service checks it against the cluster)."""

    name = serializers.CharField(
        max_length=JOB_NAME_MAX, help_text=f"A Kubernetes name: {NAME_CHARACTERS}."
    )
    namespace = serializers.CharField(
        max_length=NAMESPACE_MAX,
        required=False,
        default="default",
        help_text=f"A Kubernetes namespace: {LABEL_CHARACTERS}.",
    )
    cluster = serializers.SlugField(max_length=63, required=False, allow_null=True, default=None)
    quota = serializers.CharField(max_length=253, required=False, allow_null=True, default=None)
    priority_class = serializers.CharField(
        max_length=253, required=False, allow_null=True, default=None
    )
    replicas = serializers.IntegerField(
        min_value=POD_COUNT.minimum, max_value=POD_COUNT.maximum, default=1
    )
    min_available = serializers.IntegerField(
        min_value=MIN_AVAILABLE.minimum,
        max_value=MIN_AVAILABLE.maximum,
        required=False,
        allow_null=True,
        default=None,
    )
    mode = serializers.ChoiceField(GANG_MODES, default=GANG_MODES[0])
    waiting_time_seconds = serializers.IntegerField(min_value=0, max_value=7 * 86400, default=600)
    pod = PodShapeSerializer()
    topology = TopologyRuleSerializer(required=False, allow_null=True, default=None)
    duration_seconds = serializers.IntegerField(
        min_value=DURATION.minimum,
        max_value=DURATION.maximum,
        required=False,
        allow_null=True,
        default=None,
    )
    labels = serializers.DictField(
        child=serializers.CharField(max_length=63, allow_blank=True), required=False, default=dict
    )

    # Checked after max_length: no pattern ever runs over megabytes of text.
    def validate_name(self, value: str) -> str:
        return _valid(value, TEXT_RULES["name"])

    def validate_namespace(self, value: str) -> str:
        return _valid(value, TEXT_RULES["namespace"])

    def validate_labels(self, value: dict[str, str]) -> dict[str, str]:
        return _labels(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The rules across fields the form has too (koordweb.submission).
        refused = submission_errors(
            replicas=attrs["replicas"], min_available=attrs.get("min_available")
        )
        if refused:
            raise serializers.ValidationError(refused)
        topology = attrs.get("topology") or {}
        layers = [rule["layer"] for rule in topology.get("gather", [])]
        if len(layers) != len(set(layers)):
            raise serializers.ValidationError({"topology": ["each layer may appear only once"]})
        return attrs

    def to_spec(self) -> JobSpec:
        data = self.validated_data
        pod = data["pod"]
        topology = data.get("topology") or {}
        return JobSpec(
            name=data["name"],
            namespace=data["namespace"],
            cluster=data.get("cluster"),
            quota=data.get("quota"),
            priority_class=data.get("priority_class"),
            replicas=data["replicas"],
            min_available=data.get("min_available"),
            mode=data["mode"],
            waiting_time_seconds=data["waiting_time_seconds"],
            pod=PodShape(
                requests=pod["requests"],
                node_selector=pod.get("node_selector", {}),
                tolerations=[_toleration(t) for t in pod.get("tolerations", [])],
            ),
            gather=tuple(GatherRule(r["layer"], r["strategy"]) for r in topology.get("gather", [])),
            duration_seconds=data.get("duration_seconds"),
            labels=data.get("labels", {}),
        )


def _toleration(data: dict[str, Any]) -> dict[str, Any]:
    """Kubernetes' own spelling, as stored on Pod rows and exported in manifests."""
    out: dict[str, Any] = {"key": data.get("key", ""), "operator": data.get("operator", "Equal")}
    if data.get("value"):
        out["value"] = data["value"]
    if data.get("effect"):
        out["effect"] = data["effect"]
    if data.get("toleration_seconds") is not None:
        out["tolerationSeconds"] = data["toleration_seconds"]
    return out
