"""Who may do what: admins (is_staff) everything, tenants read the catalog and act on their jobs.

Object visibility (a tenant never sees another tenant's job) is enforced by querysets from
`koordweb.selectors.tenancy`, so a foreign object answers 404 rather than 403.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request


def is_admin(user: Any) -> bool:
    return bool(user and user.is_authenticated and user.is_staff)


class IsAdminOrReadOnly(BasePermission):
    """Catalog endpoints: any authenticated user reads, only admins write."""

    message = "Only administrators may change this."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated):
            return False
        return request.method in SAFE_METHODS or is_admin(request.user)


class IsAdmin(BasePermission):
    message = "Only administrators may do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        return is_admin(request.user)
