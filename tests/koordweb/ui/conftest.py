"""Fixtures for the UI tests: the pages' cluster (`builders.pages_world`) and logged-in clients
for each role."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.builders import Pages, pages_world


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    # PBKDF2 at full strength costs a third of a second per user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def ui(db: None) -> Pages:
    return pages_world()


def _client_for(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.fixture
def as_admin(ui: Pages) -> Client:
    return _client_for(ui.admin)


@pytest.fixture
def as_alice(ui: Pages) -> Client:
    return _client_for(ui.alice)


@pytest.fixture
def as_bob(ui: Pages) -> Client:
    return _client_for(ui.bob)
