"""UI routes (pages for admins and tenants)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from koordweb import views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(template_name="login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.overview, name="overview"),
]
