"""Which cluster a catalog request is about: `?cluster=<name>`, else the default cluster."""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.request import Request

from koordweb.models import Cluster
from koordweb.selectors.catalog import cluster_by_name

CLUSTER_PARAM = OpenApiParameter(
    "cluster", OpenApiTypes.STR, description="Cluster name (default: the configured cluster)."
)


def cluster_or_404(request: Request) -> Cluster:
    cluster = cluster_by_name(request.query_params.get("cluster") or None)
    if cluster is None:
        raise Http404("No such cluster.")
    return cluster
