"""The API tests' world (`builders.teams()`: a small cluster, two tenants and an admin) and API
clients authenticated by tokens."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.builders import Teams, teams, token_client


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    settings.ROOT_URLCONF = "tests.koordweb.api.urls"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Throttle counters must not leak between tests or into other test runs on the machine.
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "api"}
    }
    from django.core.cache import caches

    caches["default"].clear()


@pytest.fixture
def world(db: Any) -> Teams:
    return teams()


@pytest.fixture
def admin_api(world: Teams) -> APIClient:
    return token_client(world.admin)


@pytest.fixture
def alice_api(world: Teams) -> APIClient:
    return token_client(world.alice)


@pytest.fixture
def bob_api(world: Teams) -> APIClient:
    return token_client(world.bob)


@pytest.fixture
def anon_api() -> APIClient:
    return APIClient()
