"""Nodes, devices, topology layers, quotas and priority classes: read by all, written by admins.

Resource amounts are integers in koordweb's units (milli-cpu, bytes, counts), as stored.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib.auth import get_user_model
from rest_framework import serializers

from koordweb.api.serializers.strict import StrictModelSerializer
from koordweb.kubenames import is_dns_label, quota_name_errors
from koordweb.models import Cluster, Device, ElasticQuota, Node, PriorityClass, TopologyLayer
from koordweb.selectors.tenancy import quota_namespaces, user_is_admin
from scheduler.vocabulary import QUOTA_NAMESPACES

_RESOURCES = {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}}


def _cluster_field() -> serializers.SlugRelatedField:  # type: ignore[type-arg]
    return serializers.SlugRelatedField(slug_field="name", queryset=Cluster.objects.all())


class NodeSerializer(StrictModelSerializer):
    cluster = _cluster_field()
    device_count = serializers.IntegerField(read_only=True, default=0)
    allocated = serializers.SerializerMethodField()

    class Meta:
        model = Node
        fields = [
            "id",
            "cluster",
            "name",
            "labels",
            "annotations",
            "taints",
            "allocatable",
            "capacity",
            "unschedulable",
            "ready",
            "device_count",
            "allocated",
            "created_at",
        ]
        read_only_fields = ["id", "created_at"]

    def get_allocated(self, node: Node) -> dict[str, int]:
        return dict(self.context.get("allocated", {}).get(node.pk, {}))


class DeviceSerializer(StrictModelSerializer):
    node = serializers.PrimaryKeyRelatedField(queryset=Node.objects.all())
    node_name = serializers.CharField(source="node.name", read_only=True)

    class Meta:
        model = Device
        fields = [
            "id",
            "node",
            "node_name",
            "device_type",
            "vendor",
            "model",
            "minor",
            "uuid",
            "health",
            "labels",
            "resources",
            "socket_id",
            "numa_node",
            "pcie_id",
            "bus_id",
        ]
        read_only_fields = ["id"]


class TopologyLayerSerializer(StrictModelSerializer):
    cluster = _cluster_field()
    label_keys = serializers.ListField(
        child=serializers.CharField(max_length=317), max_length=8, required=False
    )

    class Meta:
        model = TopologyLayer
        fields = ["id", "cluster", "name", "parent_name", "label_keys", "position"]
        read_only_fields = ["id"]


class QuotaSerializer(StrictModelSerializer):
    cluster = _cluster_field()
    parent = serializers.PrimaryKeyRelatedField(  # type: ignore[assignment]
        queryset=ElasticQuota.objects.all(), allow_null=True, required=False
    )
    members = serializers.SlugRelatedField(
        slug_field="username",
        many=True,
        required=False,
        queryset=get_user_model().objects.all(),
        help_text="Usernames of the tenants of this quota (shown to administrators only).",
    )
    namespaces = serializers.SerializerMethodField(
        help_text="Where the quota's tenants may submit: its namespace and those of the "
        f"{QUOTA_NAMESPACES} annotation (a JSON array)."
    )

    class Meta:
        model = ElasticQuota
        fields = [
            "id",
            "cluster",
            "namespace",
            "name",
            "parent",
            "min",
            "max",
            "shared_weight",
            "allow_lent",
            "is_parent",
            "labels",
            "annotations",
            "members",
            "namespaces",
        ]
        read_only_fields = ["id", "namespaces"]

    def validate_name(self, value: str) -> str:
        """A pod names its quota in a label (quota.scheduling.koordinator.sh/name), so the name
        must also be a label value: at most 63 characters."""
        refused = quota_name_errors(value)
        if refused:
            raise serializers.ValidationError(refused)
        return value

    def get_namespaces(self, quota: ElasticQuota) -> list[str]:
        return sorted(quota_namespaces(quota))

    def validate_annotations(self, value: Any) -> Any:
        listed = value.get(QUOTA_NAMESPACES) if isinstance(value, dict) else None
        if listed is None:
            return value
        try:
            names = json.loads(listed) if isinstance(listed, str) else None
        except ValueError:
            names = None
        if not isinstance(names, list) or not all(
            isinstance(name, str) and is_dns_label(name) for name in names
        ):
            raise serializers.ValidationError(
                f"{QUOTA_NAMESPACES} must be a JSON array of namespace names"
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        parent = attrs.get("parent", self.instance.parent if self.instance else None)
        cluster = attrs.get("cluster", self.instance.cluster if self.instance else None)
        if parent is not None:
            if parent.cluster_id != getattr(cluster, "pk", None):
                raise serializers.ValidationError({"parent": ["must be in the same cluster"]})
            ancestor: ElasticQuota | None = parent
            while ancestor is not None:
                if self.instance is not None and ancestor.pk == self.instance.pk:
                    raise serializers.ValidationError({"parent": ["would make a cycle"]})
                ancestor = ancestor.parent
        return attrs

    def to_representation(self, instance: ElasticQuota) -> dict[str, Any]:
        data: dict[str, Any] = super().to_representation(instance)
        request = self.context.get("request")
        if request is None or not user_is_admin(request.user):
            data["members"] = []
        return data


class QuotaTreeRowSerializer(serializers.Serializer):  # type: ignore[type-arg]
    name = serializers.CharField()
    parent = serializers.CharField(allow_blank=True)  # type: ignore[assignment]
    depth = serializers.IntegerField()
    min = serializers.DictField(child=serializers.IntegerField())
    max = serializers.DictField(child=serializers.IntegerField())
    used = serializers.DictField(child=serializers.IntegerField())
    runtime = serializers.DictField(child=serializers.IntegerField(), allow_null=True)


class PriorityClassSerializer(StrictModelSerializer):
    cluster = _cluster_field()

    class Meta:
        model = PriorityClass
        fields = [
            "id",
            "cluster",
            "name",
            "value",
            "preemption_policy",
            "global_default",
            "description",
        ]
        read_only_fields = ["id"]
