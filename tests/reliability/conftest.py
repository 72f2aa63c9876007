"""Worker subprocesses for the reliability tests, on the configured broker and the test database.

The workers are real `celery -A koordweb worker` processes. They reach the test database through
DATABASE_URL built from the test connection's settings: on PostgreSQL the `test_...` database; on
SQLite the test database file (settings name one per process; an in-memory one would live in this
process only, and the tests then skip).
Each test gets its own queue, so workers of other tests (or other checkouts sharing the broker)
never take its rounds. The fake API server runs in this process and is reached via a kubeconfig.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from tests.fakekube import FakeKube
from tests.reliability.cluster import cluster_seed, kubeconfig_write
from tests.reliability.stack import Workers, database_url


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    # Listen on every loopback connection the workers open; the in-thread server is shared.
    with FakeKube() as fake:
        cluster_seed(fake)
        yield fake


@pytest.fixture
def workers(kube: FakeKube, tmp_path: Path) -> Iterator[Workers]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "REDIS_URL": getattr(settings, "REDIS_URL", ""),
        "KOORDWEB_VAR_DIR": str(settings.VAR_DIR),
        "KOORDWEB_BACKEND": "kubernetes",
        "KUBECONFIG": str(kubeconfig_write(tmp_path / "kubeconfig", kube.url)),
        "DJANGO_SETTINGS_MODULE": "koordweb.settings.test",
        "SECRET_KEY": settings.SECRET_KEY,
        "PYTHONUNBUFFERED": "1",
    }
    pool = Workers(env=env, queue=f"reliability-{uuid.uuid4().hex[:10]}", logs=tmp_path)
    try:
        yield pool
    finally:
        pool.shutdown()
