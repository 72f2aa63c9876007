"""Suite-wide fixtures; in CI (KOORDWEB_REQUIRE_SERVICES=1) the real services are mandatory."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import pytest
from django.conf import settings


def pytest_report_header(config: pytest.Config) -> list[str]:
    db = settings.DATABASES["default"]
    return [
        f"koordweb database: {db['ENGINE']} {db.get('HOST') or db.get('NAME')}",
        f"koordweb broker: {settings.CELERY_BROKER_URL.split('@')[-1]}",
        f"koordweb cache: {settings.CACHES['default']['BACKEND']}",
    ]


def pytest_sessionstart(session: pytest.Session) -> None:
    if os.environ.get("KOORDWEB_REQUIRE_SERVICES") != "1":
        return
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine:
        raise pytest.UsageError(f"CI requires PostgreSQL, DATABASE_URL gives {engine}")
    if not settings.CELERY_BROKER_URL.startswith(("redis", "amqp")):
        raise pytest.UsageError(
            "CI requires a broker server (CELERY_BROKER_URL=redis://... or amqp://...)"
        )


@pytest.fixture
def celery_queue() -> Iterator[str]:
    """A queue of this test's own, so no other worker on a shared broker takes its tasks; it and
    the own queues of the workers the test started leave the broker when the test ends."""
    from koordweb.celery import app
    from koordweb.models import RoundWorker
    from koordweb.worker_queues import worker_queues_remove

    name = f"koordweb-test-{uuid.uuid4().hex[:10]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = name
    try:
        yield name
    finally:
        app.conf.task_default_queue = previous
        queues = [name]
        with contextlib.suppress(Exception):  # a test without the database started no worker
            queues += list(RoundWorker.objects.values_list("queue", flat=True))
        worker_queues_remove(queues)


@pytest.fixture(autouse=True)
def _warm_snapshots_forgotten() -> Iterator[None]:
    """Each test starts with no warm snapshot in this process (the database is rolled back
    between tests; a state would otherwise outlive its rows)."""
    from koordweb.services.warm import warm_forget

    warm_forget()
    yield
    warm_forget()
