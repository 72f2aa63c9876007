"""NUL and control characters refused at the edge, before any view, form or query sees them.

PostgreSQL refuses a NUL in a text parameter with an error, and no name, key or cluster
koordweb knows holds a control character, so a request carrying one in its path, its query
string or a form field (or a NUL in a header) is answered 400 here, naming the parameter: JSON
under `/api/`, a small page elsewhere. Form fields may hold tabs and line breaks (a pasted
manifest), nothing else below U+0020. JSON and YAML bodies are checked where they are parsed
(`StrictSerializer`, the manifests loader).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.utils.html import format_html

# C0 controls, DEL and C1 controls: never part of a path or a query parameter.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# In form fields, tab, line feed and carriage return are text.
FORM_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
MESSAGE = "NUL and control characters are not allowed"
FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def has_control(text: str) -> bool:
    return CONTROL.search(text) is not None


def _path_parameter(request: HttpRequest) -> str:
    """The URL parameter holding the control character (`token_key`), or `path`."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return "path"
    for name, value in match.kwargs.items():
        if isinstance(value, str) and has_control(value):
            return str(name)
    return "path"


def _first_bad(fields: Iterable[tuple[str, list[Any]]], pattern: re.Pattern[str]) -> str | None:
    """The first field whose name or any of whose values holds a character of `pattern`."""
    for key, values in fields:
        if pattern.search(key):
            return "parameter name"
        if any(pattern.search(str(value)) for value in values):
            return key
    return None


def offending_parameter(request: HttpRequest) -> str | None:
    """The name of the first parameter holding a control character, or None."""
    if has_control(request.path_info):
        return _path_parameter(request)
    for key, value in request.META.items():
        # Headers may hold tabs; a NUL in one (a token, an Idempotency-Key) never belongs there.
        if key.startswith("HTTP_") and isinstance(value, str) and "\x00" in value:
            return key[5:].replace("_", "-").title() + " header"
    bad = _first_bad(request.GET.lists(), CONTROL)
    if bad is not None:
        return bad
    if _is_form_post(request):
        try:
            return _first_bad(request.POST.lists(), FORM_CONTROL)
        except (RequestDataTooBig, TooManyFieldsSent):
            return None  # the view answers these as it always has
    return None


def _is_form_post(request: HttpRequest) -> bool:
    """A UI form whose fields fit in memory (bigger bodies are the view's to refuse)."""
    if request.method != "POST" or request.path_info.startswith("/api/"):
        return False
    if (request.content_type or "") not in FORM_TYPES:
        return False
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return False
    return length <= int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)


def refusal(request: HttpRequest, parameter: str) -> HttpResponse:
    if request.path_info.startswith("/api/"):
        return JsonResponse({parameter: [MESSAGE + "."]}, status=400)
    body = format_html(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        "<title>Bad request</title></head><body><main><h1>Bad request</h1>"
        "<p>{}: {}.</p></main></body></html>",
        parameter,
        MESSAGE,
    )
    return HttpResponse(body, status=400)


class ControlCharacterMiddleware:
    """Answers 400, naming the parameter, when the path, query or a form field holds one."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            parameter = offending_parameter(request)
        except TooManyFieldsSent:
            if not request.path_info.startswith("/api/"):
                raise  # the pages answer Django's own 400
            limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
            return JsonResponse({"detail": f"more than {limit:,} query parameters"}, status=400)
        if parameter is not None:
            return refusal(request, parameter)
        return self.get_response(request)
