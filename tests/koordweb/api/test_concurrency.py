"""Concurrent submissions with one Idempotency-Key create exactly one job."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.cache import cache
from django.db import OperationalError, connection

from koordweb.models import Job, Pod
from tests.builders import submission, token_client

THREADS = 6


def post_with_busy_wait(client, *args, **kwargs):
    """Retry while SQLite reports a locked table.

    When the SQLite test database is in shared-cache memory, a second writer gets "table is
    locked" at once instead of waiting as on a database file (busy timeout) or on PostgreSQL (row
    locks); waiting here restores the production behaviour. On a file or PostgreSQL it never runs.
    """
    for _ in range(200):
        try:
            return client.post(*args, **kwargs)
        except OperationalError as exc:
            if "locked" not in str(exc):
                raise
            time.sleep(0.01)
    raise AssertionError("the database stayed locked")


@pytest.mark.django_db(transaction=True)
def test_one_key_many_threads_one_job(world):
    # Rounds are collapsed through this cache key: holding it keeps the test from enqueueing
    # real Celery tasks while still committing for real.
    cache.add(f"round-requested:{world.cluster.pk}", "test", timeout=300)
    clients = [token_client(world.alice) for _ in range(THREADS)]
    barrier = threading.Barrier(THREADS)
    results: list[tuple[int, int]] = []
    errors: list[BaseException] = []

    def submit(client):
        try:
            barrier.wait(timeout=10)
            response = post_with_busy_wait(
                client,
                "/api/v1/jobs/",
                submission(),
                format="json",
                HTTP_IDEMPOTENCY_KEY="same-key",
            )
            results.append((response.status_code, response.json().get("id")))
        except BaseException as exc:  # reported below, a thread cannot fail the test itself
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=submit, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert len(results) == THREADS
    assert sorted(code for code, _ in results) == [200] * (THREADS - 1) + [201]
    assert len({job_id for _, job_id in results}) == 1
    assert Job.objects.filter(idempotency_key="same-key").count() == 1
    assert Pod.objects.count() == 2


def test_submission_asks_for_a_round_on_commit(
    alice_api, world, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert alice_api.post("/api/v1/jobs/", submission(), format="json").status_code == 201
    assert len(callbacks) == 1


def test_cancellation_asks_for_a_round_on_commit(
    alice_api, world, django_capture_on_commit_callbacks
):
    job_id = alice_api.post("/api/v1/jobs/", submission(), format="json").json()["id"]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert alice_api.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200
    assert len(callbacks) == 1
