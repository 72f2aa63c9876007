"""The cluster catalog: nodes, devices, topology, quotas, priority classes, rounds, preemptions.

Tenants read (preemptions only where their jobs are involved; quotas only their own and the
ancestors); administrators also create, update and delete catalog rows.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api import filters
from koordweb.api.base import ApiMixin
from koordweb.api.permissions import IsAdminOrReadOnly
from koordweb.api.serializers.catalog import (
    DeviceSerializer,
    NodeSerializer,
    PriorityClassSerializer,
    QuotaSerializer,
    QuotaTreeRowSerializer,
    TopologyLayerSerializer,
)
from koordweb.api.serializers.records import PreemptionSerializer, RoundSerializer
from koordweb.api.views.clusters import CLUSTER_PARAM, cluster_or_404
from koordweb.models import ElasticQuota
from koordweb.selectors import catalog
from koordweb.selectors.tenancy import quotas_of_member
from koordweb.services.ownership import cluster_of, cluster_owned_refusal


class ClusterOwned(APIException):
    status_code = 409
    default_code = "owned_by_the_cluster"


class CatalogViewSet(ApiMixin, viewsets.ModelViewSet):  # type: ignore[type-arg]
    """Administrators write catalog rows, except those a Kubernetes cluster owns (409)."""

    permission_classes = [IsAdminOrReadOnly]
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def _refuse_cluster_owned(self, cluster: Any, fields: Any = None) -> None:
        model = self.get_serializer_class().Meta.model  # type: ignore[attr-defined]
        why = cluster_owned_refusal(cluster, model, fields)
        if why:
            raise ClusterOwned(why)

    def perform_create(self, serializer: Any) -> None:
        data = serializer.validated_data
        cluster = data.get("cluster") or (
            data["node"].cluster if data.get("node") is not None else None
        )
        self._refuse_cluster_owned(cluster)
        super().perform_create(serializer)

    def perform_update(self, serializer: Any) -> None:
        self._refuse_cluster_owned(cluster_of(serializer.instance), serializer.validated_data)
        super().perform_update(serializer)

    def perform_destroy(self, instance: Any) -> None:
        self._refuse_cluster_owned(cluster_of(instance))
        super().perform_destroy(instance)


class NodeViewSet(CatalogViewSet):
    serializer_class = NodeSerializer
    filterset_class = filters.NodeFilter
    ordering_fields = ["name", "id", "created_at"]
    ordering = ["cluster__name", "name"]

    def get_queryset(self) -> Any:
        return catalog.node_list()

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        context["allocated"] = getattr(self, "_allocated", {})
        return context

    def paginate_queryset(self, queryset: Any) -> Any:
        page = super().paginate_queryset(queryset)
        # Allocation for the page's nodes only, in one query.
        self._allocated = catalog.node_allocated(n.pk for n in (page or []))
        return page

    def get_object(self) -> Any:
        node = super().get_object()
        self._allocated = catalog.node_allocated([node.pk])
        return node


class DeviceViewSet(CatalogViewSet):
    serializer_class = DeviceSerializer
    filterset_class = filters.DeviceFilter
    ordering_fields = ["id", "minor", "device_type"]
    ordering = ["node__name", "device_type", "minor"]

    def get_queryset(self) -> Any:
        return catalog.device_list()


class TopologyLayerViewSet(CatalogViewSet):
    serializer_class = TopologyLayerSerializer
    ordering_fields = ["position", "name", "id"]
    ordering = ["cluster__name", "position"]

    def get_queryset(self) -> Any:
        return catalog.topology_layer_list()


class QuotaViewSet(CatalogViewSet):
    serializer_class = QuotaSerializer
    filterset_class = filters.QuotaFilter
    ordering_fields = ["name", "id"]
    ordering = ["cluster__name", "name"]

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no database reads
            return ElasticQuota.objects.none()
        return catalog.quota_list(user=self.request.user).prefetch_related("members")

    @extend_schema(
        parameters=[CLUSTER_PARAM],
        responses={200: QuotaTreeRowSerializer(many=True)},
        description="The quota tree, depth first, with min, max, runtime (as the last round "
        "computed it) and used (requests of the pods occupying nodes, summed upwards).",
    )
    @action(detail=False, methods=["get"], pagination_class=None, filterset_class=None)
    def tree(self, request: Request) -> Response:
        cluster = cluster_or_404(request)
        rows = catalog.quota_tree(user=request.user, cluster=cluster)
        return Response(QuotaTreeRowSerializer(rows, many=True).data)


class PriorityClassViewSet(CatalogViewSet):
    serializer_class = PriorityClassSerializer
    filterset_class = filters.PriorityClassFilter
    ordering_fields = ["value", "name", "id"]
    ordering = ["cluster__name", "-value", "name"]

    def get_queryset(self) -> Any:
        return catalog.priority_class_list()


class RoundViewSet(ApiMixin, viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    serializer_class = RoundSerializer
    filterset_class = filters.RoundFilter
    ordering_fields = ["started_at", "id", "duration_ms"]
    ordering = ["-started_at", "-id"]

    def get_queryset(self) -> Any:
        return catalog.round_list()


class PreemptionViewSet(ApiMixin, viewsets.ReadOnlyModelViewSet):  # type: ignore[type-arg]
    serializer_class = PreemptionSerializer
    filterset_class = filters.PreemptionFilter
    ordering_fields = ["created_at", "id"]
    ordering = ["-created_at", "-id"]

    def get_queryset(self) -> Any:
        return catalog.preemption_list(user=self.request.user)

    def get_serializer_context(self) -> dict[str, Any]:
        context = dict(super().get_serializer_context())
        context["member_quota_ids"] = set(
            quotas_of_member(user=self.request.user).values_list("id", flat=True)
        )
        return context
