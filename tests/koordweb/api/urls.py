"""Only the API, mounted where the project mounts it: these tests do not depend on the UI."""

from django.urls import include, path

urlpatterns = [path("api/", include("koordweb.api.urls"))]
