"""One error shape for the whole API: JSON, never HTML, never a 500 for bad input.

DRF's handler answers its own exceptions; this adds Django's validation and size errors, which
services raise, so a service error turns into a 400 (or 413) with a message per field, and a
team's limit reached (`TenantLimitExceeded`) into a 429 naming the limit and what is left.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import ProtectedError, RestrictedError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from koordweb.outage import is_outage, outage_api_response
from koordweb.services.tenant_checks import TenantLimitExceeded

logger = logging.getLogger("koordweb.api")


def django_validation_detail(exc: DjangoValidationError) -> Any:
    if hasattr(exc, "error_dict"):
        return {field: [str(m) for m in errors] for field, errors in exc.message_dict.items()}
    return {"non_field_errors": list(exc.messages)}


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if is_outage(exc):
        # A lost database, cache or broker is not a bug: 503 with Retry-After, never a 500.
        set_rollback()
        return outage_api_response(context.get("request"), exc)
    if isinstance(exc, TenantLimitExceeded):
        # A team's waiting work at its limit: try again once some of it has been placed.
        body = {**django_validation_detail(exc), "limit": exc.limit, "limit_value": exc.value}
        return Response({**body, "remaining": exc.remaining}, status=429)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(django_validation_detail(exc))
    elif isinstance(exc, RequestDataTooBig):
        return Response(
            {"detail": f"Request body too large: {exc}"},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    elif isinstance(exc, ProtectedError | RestrictedError):
        return Response(
            {
                "detail": f"Cannot delete: still referenced by {len(exc.args[1])} "
                f"{'object' if len(exc.args[1]) == 1 else 'objects'}."
            },
            status=status.HTTP_409_CONFLICT,
        )
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)
    if response is None:
        # A bug of ours: keep the traceback in the log, give the client JSON it can parse.
        logger.error("API request failed", exc_info=exc)
        set_rollback()
        return Response(
            {"detail": "Internal error; it has been logged."},
            status=status.HTTP_500_INTERNAL_SERVER_ERROR,
        )
    return response
