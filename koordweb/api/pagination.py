"""Limit/offset pagination with bounds, so an absurd offset is an empty page, not an overflow."""

from __future__ import annotations

from typing import Any

from rest_framework.pagination import LimitOffsetPagination

MAX_OFFSET = 10**12


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = 1000

    def get_offset(self, request: Any) -> int:
        return min(super().get_offset(request), MAX_OFFSET)
