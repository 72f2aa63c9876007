"""The OpenAPI description: every operation also documents the error answers it can give.

drf-spectacular documents success responses only; a client (and Schemathesis) needs the error
shapes too: 400 is an object of field -> messages, the others carry a `detail` string.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import inline_serializer
from rest_framework import serializers

DETAIL_ERRORS = {
    "401": "No or invalid credentials.",
    "403": "Authenticated but not allowed.",
    "404": "Not found (or not yours: other tenants' objects are not found either).",
    "413": "Request body over the size limit.",
    "415": "Unsupported Content-Type.",
    "429": "Too many requests for this token; retry later.",
}
ErrorDetail = inline_serializer("ErrorDetail", fields={"detail": serializers.CharField()})


class ApiAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction: Any = "response") -> Any:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        if "400" not in responses:
            responses["400"] = self._get_response_for_code(OpenApiTypes.OBJECT, "400")
            responses["400"]["description"] = "Invalid input: field name -> list of messages."
        for code, description in DETAIL_ERRORS.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(ErrorDetail, code)
                responses[code]["description"] = description
        return responses
