"""topology/: the domain tree with allocation and free slots per domain (for a pod shape)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api.base import ApiView
from koordweb.api.fields import parse_resource_quantity
from koordweb.api.views.clusters import CLUSTER_PARAM, cluster_or_404
from koordweb.selectors.topology import DomainTotals, topology_tree

SHAPE_PARAM = OpenApiParameter(
    "shape",
    OpenApiTypes.STR,
    description="Count free slots for this pod shape, e.g. `cpu=8,memory=64Gi,nvidia.com/gpu=4`.",
)
NODES_PARAM = OpenApiParameter(
    "nodes", OpenApiTypes.BOOL, description="Include node leaves (default true)."
)


def parse_shape(raw: str) -> dict[str, int]:
    """`cpu=8,nvidia.com/gpu=4` -> {"cpu": 8000, "nvidia.com/gpu": 4}; 400 with a message."""
    shape: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise serializers.ValidationError({"shape": [f"{item!r}: expected name=quantity"]})
        try:
            shape[name.strip()] = parse_resource_quantity(name.strip(), value.strip())
        except ValueError as exc:
            raise serializers.ValidationError({"shape": [f"{name.strip()}: {exc}"]}) from exc
    if len(shape) > 32:
        raise serializers.ValidationError({"shape": ["at most 32 resources"]})
    return shape


class DomainSerializer(serializers.Serializer):  # type: ignore[type-arg]
    key = serializers.CharField()
    layer = serializers.CharField()
    name = serializers.CharField()
    parent = serializers.CharField(allow_blank=True)  # type: ignore[assignment]
    node_count = serializers.IntegerField()
    capacity = serializers.DictField(child=serializers.IntegerField())
    allocated = serializers.DictField(child=serializers.IntegerField())
    free_slots = serializers.IntegerField(allow_null=True, source="slots")


class TopologySerializer(serializers.Serializer):  # type: ignore[type-arg]
    cluster = serializers.CharField()
    layers = serializers.ListField(child=serializers.CharField())
    shape = serializers.DictField(child=serializers.IntegerField())
    domains = DomainSerializer(many=True)
    outside = serializers.ListField(child=serializers.CharField())


class TopologyView(ApiView):
    @extend_schema(
        parameters=[CLUSTER_PARAM, SHAPE_PARAM, NODES_PARAM],
        responses={200: TopologySerializer},
        operation_id="topology_retrieve",
        description="Domains from the root down (parents before children), each with capacity, "
        "allocation and free slots for `shape`; `outside` lists nodes missing a layer label.",
    )
    def get(self, request: Request) -> Response:
        cluster = cluster_or_404(request)
        shape = parse_shape(request.query_params.get("shape", ""))
        include_nodes = request.query_params.get("nodes", "true").lower() not in {"0", "false"}
        tree = topology_tree(cluster, shape=shape or None, include_nodes=include_nodes)
        domains: list[DomainTotals] = list(tree.domains.values())
        data: dict[str, Any] = {
            "cluster": cluster.name,
            "layers": tree.layers,
            "shape": shape,
            "domains": [
                {**vars(domain), "slots": domain.slots if shape else None} for domain in domains
            ],
            "outside": tree.outside,
        }
        return Response(TopologySerializer(data).data)
