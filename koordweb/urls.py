"""URL map: the UI at /, the REST API at /api/, Django admin at /admin/."""

from django.contrib import admin
from django.urls import include, path

from koordweb.prometheus.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("koordweb.api.urls")),
    path("metrics", metrics_view, name="metrics"),
    path("", include("koordweb.ui_urls")),
]
