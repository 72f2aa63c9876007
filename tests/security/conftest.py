"""The security tests' world (`builders.tenants()`: two tenants and an admin on one cluster) and
a private cache."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches

from tests.builders import Tenants, tenants


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    """A private in-memory cache: API throttles and login counters never leak between runs."""
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "security-tests",
        }
    }
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    caches["default"].clear()


@pytest.fixture
def world(db: Any) -> Tenants:
    return tenants()
