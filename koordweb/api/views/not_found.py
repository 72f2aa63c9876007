"""A JSON 404 for any path under /api/ that no endpoint matches (Django's own is HTML)."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.urls import Resolver404, resolve
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt  # it changes nothing; CSRF's HTML 403 would hide the JSON 404
def api_not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    detail = "No such API endpoint."
    if not request.path.endswith("/"):
        try:
            match = resolve(request.path + "/")
        except Resolver404:
            pass
        else:
            if match.func is not api_not_found:
                detail += " API paths end with a slash: " + request.path + "/"
    return JsonResponse({"detail": detail}, status=404)
