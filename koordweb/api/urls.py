"""API routes under /api/: the v1 endpoints, the OpenAPI schema and its local Swagger UI.

The Swagger UI page loads its init script from its own URL (`?script=`), drf-spectacular's split
view, so it runs under the site's CSP (`script-src 'self'`, no inline script).
"""

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from koordweb.api.views import catalog
from koordweb.api.views.gpu_usage import CardHistoryView, JobUsageView, TeamEfficiencyView
from koordweb.api.views.jobs import JobViewSet
from koordweb.api.views.manifests import ManifestsView
from koordweb.api.views.not_found import api_not_found
from koordweb.api.views.scheduler import SchedulerConfigView
from koordweb.api.views.tokens import TokenDetailView, TokenListView
from koordweb.api.views.topology import TopologyView
from koordweb.api.views.whatif import WhatIfView

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
# JSON only: format-suffix routes (`jobs.json/`) would reach actions that take no `format`.
router.include_format_suffixes = False
router.register("jobs", JobViewSet, basename="job")
router.register("nodes", catalog.NodeViewSet, basename="node")
router.register("devices", catalog.DeviceViewSet, basename="device")
router.register("topology/layers", catalog.TopologyLayerViewSet, basename="topology-layer")
router.register("quotas", catalog.QuotaViewSet, basename="quota")
router.register("priority-classes", catalog.PriorityClassViewSet, basename="priority-class")
router.register("rounds", catalog.RoundViewSet, basename="round")
router.register("preemptions", catalog.PreemptionViewSet, basename="preemption")

v1 = [
    *router.urls,
    path("topology/", TopologyView.as_view(), name="topology"),
    path("jobs/<int:pk>/usage/", JobUsageView.as_view(), name="job-usage"),
    path("gpu/cards/", CardHistoryView.as_view(), name="gpu-card-history"),
    path("gpu/efficiency/", TeamEfficiencyView.as_view(), name="gpu-efficiency"),
    path("whatif/", WhatIfView.as_view(), name="whatif"),
    path("manifests/", ManifestsView.as_view(), name="manifests"),
    path("scheduler/", SchedulerConfigView.as_view(), name="scheduler-config"),
    path("tokens/", TokenListView.as_view(), name="token-list"),
    path("tokens/<str:token_key>/", TokenDetailView.as_view(), name="token-detail"),
]

urlpatterns = [
    path("v1/", include((v1, "api"), namespace="v1")),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    re_path(r"^(?P<path>.*)$", api_not_found),
]
