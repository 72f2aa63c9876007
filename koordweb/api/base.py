"""What every API view shares: parsers with a size limit, per-token throttles, the error shape.

Settings do not name these (settings.py belongs to the lead), so views inherit them from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.views import APIView

from koordweb.api.exceptions import api_exception_handler
from koordweb.api.pagination import BoundedLimitOffsetPagination
from koordweb.api.parsers import JSON_PARSERS
from koordweb.api.schema import ApiAutoSchema
from koordweb.api.throttles import AnonymousRateThrottle, TokenRateThrottle


class ApiMixin:
    parser_classes: Any = JSON_PARSERS
    throttle_classes: Any = [TokenRateThrottle, AnonymousRateThrottle]
    pagination_class: Any = BoundedLimitOffsetPagination
    schema: Any = ApiAutoSchema()

    def get_exception_handler(self) -> Callable[..., Any]:
        return api_exception_handler


class ApiView(ApiMixin, APIView):
    """A plain API view with the shared behaviour."""
