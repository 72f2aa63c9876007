"""The project's URLs with the rate-limited login in place of Django's (what the lead wires in)."""

from django.urls import include, path

from koordweb.security import RateLimitedLoginView

urlpatterns = [
    path("login/", RateLimitedLoginView.as_view(), name="login"),
    path("", include("koordweb.urls")),
]
