"""manifests/: administrators import Kubernetes/Koordinator YAML into a cluster and export it."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from koordweb.api.base import ApiView
from koordweb.api.parsers import JSON_AND_YAML_PARSERS, YAMLText
from koordweb.api.permissions import IsAdmin
from koordweb.api.views.clusters import CLUSTER_PARAM, cluster_or_404
from koordweb.manifests.apply import apply_manifests
from koordweb.manifests.errors import ManifestError
from koordweb.manifests.export import dump_manifests, export_manifests
from koordweb.manifests.parse import parse_manifests


class ImportSummarySerializer(serializers.Serializer):  # type: ignore[type-arg]
    counts = serializers.DictField(
        child=serializers.IntegerField(), help_text="Objects created per kind."
    )


class ManifestsView(ApiView):
    permission_classes = [IsAdmin]
    parser_classes = JSON_AND_YAML_PARSERS

    @extend_schema(
        parameters=[CLUSTER_PARAM],
        responses={(200, "application/yaml"): OpenApiResponse(OpenApiTypes.STR)},
        operation_id="manifests_export",
        description="The whole cluster as multi-document YAML (Nodes, Devices, topology, quotas, "
        "priority classes, PodGroups, Pods, budgets).",
    )
    def get(self, request: Request) -> HttpResponse:
        cluster = cluster_or_404(request)
        text = dump_manifests(export_manifests(cluster))
        response = HttpResponse(text, content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{cluster.name}.yaml"'
        return response

    @extend_schema(
        parameters=[CLUSTER_PARAM],
        request={"application/yaml": OpenApiTypes.STR},
        responses={201: ImportSummarySerializer},
        operation_id="manifests_import",
        description="Import multi-document YAML; all or nothing. Aliases and anchors are refused.",
    )
    def post(self, request: Request) -> Response:
        cluster = cluster_or_404(request)
        if not isinstance(request.data, YAMLText):
            raise serializers.ValidationError(
                {"manifest": ["send the manifests as YAML (Content-Type: application/yaml)"]}
            )
        try:
            counts = apply_manifests(cluster, parse_manifests(str(request.data)))
        except ManifestError as exc:
            raise serializers.ValidationError({"manifest": [str(exc)]}) from exc
        return Response({"counts": counts}, status=status.HTTP_201_CREATED)
