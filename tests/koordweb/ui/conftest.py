"""Fixtures for the UI tests: the small cluster and logged-in clients for each role."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from tests.koordweb.ui.cluster_builder import UiCluster, build_ui_cluster


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    # PBKDF2 at full strength costs a third of a second per user.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def ui(db: None) -> UiCluster:
    return build_ui_cluster()


def _client_for(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


@pytest.fixture
def as_admin(ui: UiCluster) -> Client:
    return _client_for(ui.admin)


@pytest.fixture
def as_alice(ui: UiCluster) -> Client:
    return _client_for(ui.alice)


@pytest.fixture
def as_bob(ui: UiCluster) -> Client:
    return _client_for(ui.bob)
