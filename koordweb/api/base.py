"""What every API view shares: parsers with a size limit, a renderer that cannot fail on text,
throttles per user and per team, the error shape.

Settings do not name these (settings.py belongs to the lead), so views inherit them from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.views import APIView

from koordweb.api.exceptions import api_exception_handler
from koordweb.api.pagination import BoundedLimitOffsetPagination
from koordweb.api.parsers import JSON_PARSERS
from koordweb.api.renderers import API_RENDERERS
from koordweb.api.schema import ApiAutoSchema
from koordweb.api.throttles import API_THROTTLES


class ApiMixin:
    parser_classes: Any = JSON_PARSERS
    renderer_classes: Any = API_RENDERERS
    throttle_classes: Any = API_THROTTLES
    pagination_class: Any = BoundedLimitOffsetPagination
    schema: Any = ApiAutoSchema()

    def get_exception_handler(self) -> Callable[..., Any]:
        return api_exception_handler


class ApiView(ApiMixin, APIView):
    """A plain API view with the shared behaviour."""
