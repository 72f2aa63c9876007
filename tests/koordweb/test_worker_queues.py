"""A departed worker's queue leaves the broker (`koordweb.worker_queues`), on the broker the suite
runs with: the embedded one locally, Redis in CI, and RabbitMQ in CI's second run of this file.

The queue is made as in production: a round sent to a worker's queue by `affinity.send_round`
(Celery declares the queue and its exchange as it publishes), never consumed."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from kombu import Connection, Consumer

from koordweb.affinity import send_round
from koordweb.celery import app
from koordweb.worker_queues import worker_queues_remove

# The router looks each round's cluster up (none here: the queue given is used).
pytestmark = pytest.mark.django_db


def _transport() -> str:
    with app.connection_for_write() as conn:
        return str(conn.transport.driver_type)


def _waiting(name: str) -> int | None:
    """Messages in the queue, or None when the broker has no such queue (RabbitMQ, Redis)."""
    with app.connection_for_write() as conn:
        channel = conn.channel()
        try:
            return int(channel.queue_declare(queue=name, passive=True).message_count)
        except Exception as error:  # the broker's NOT_FOUND, whatever its transport
            if "NOT_FOUND" in str(error) or "404" in str(error):
                return None
            raise
        finally:
            with contextlib.suppress(Exception):  # closed by the broker's refusal
                channel.close()


def _bound(name: str) -> bool:
    """Whether the queue's own exchange still routes to it (the virtual transports' table)."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        if not hasattr(channel, "get_table"):
            return False  # AMQP: a deleted queue has no binding
        try:
            return any(queue == name for _key, _pattern, queue in channel.get_table(name))
        except Exception:  # no table at all
            return False


def _table_file_left(name: str) -> bool:
    """The embedded broker: whether the queue's exchange still has a table file."""
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        return hasattr(channel, "_exchange_file") and channel._exchange_file(name).exists()


@pytest.fixture
def worker_queue() -> Iterator[str]:
    name = f"koordweb-test-{uuid.uuid4().hex[:10]}.departed"
    yield name
    worker_queues_remove([name])


def test_a_departed_workers_queue_and_its_rounds_leave_the_broker(worker_queue: str):
    send_round(12345, worker_queue, "timer")
    send_round(12346, worker_queue, "timer")
    assert _waiting(worker_queue) == 2
    assert worker_queues_remove([worker_queue]) == [worker_queue]
    assert _waiting(worker_queue) in (None, 0)  # the embedded broker has no "no such queue"
    assert not _bound(worker_queue)
    assert not _table_file_left(worker_queue)
    # Removing again (a second heartbeat retiring the same worker) is harmless.
    assert worker_queues_remove([worker_queue, ""]) == [worker_queue]


def test_rabbitmq_keeps_a_queue_that_someone_consumes(worker_queue: str):
    if _transport() != "amqp":
        pytest.skip("only RabbitMQ knows a queue's consumers")
    send_round(12345, worker_queue, "timer")
    queue = app.amqp.queues.new_missing(worker_queue)
    with Connection(app.conf.broker_url) as conn:
        consumer = Consumer(
            conn.channel(), queues=[queue], accept=["json"], callbacks=[lambda body, msg: None]
        )
        consumer.consume()
        assert worker_queues_remove([worker_queue]) == []
        consumer.cancel()
    assert _waiting(worker_queue) is not None
    assert worker_queues_remove([worker_queue]) == [worker_queue]


def test_no_broker_means_the_queues_are_kept_and_the_caller_goes_on(
    caplog: Any, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("CELERY_BROKER_URL", raising=False)  # Celery prefers it to `broker`
    unreachable = Celery("unreachable", broker="redis://127.0.0.1:9/0", set_as_current=False)
    unreachable.conf.broker_connection_timeout = 1
    assert worker_queues_remove(["celery.gone"], app=unreachable) == []
    assert "celery.gone" in caplog.text


def test_the_heartbeat_that_retires_a_dead_worker_drops_its_queue(worker_queue: str):
    from datetime import timedelta

    from koordweb.affinity import Heartbeat
    from koordweb.models import RoundWorker
    from koordweb.services.leases import RETIRE_AFTER, db_now

    send_round(12345, worker_queue, "timer")
    long_ago = db_now() - RETIRE_AFTER - timedelta(minutes=1)
    RoundWorker.objects.create(
        name="departed", queue=worker_queue, started_at=long_ago, seen_at=long_ago,
        expires_at=long_ago,
    )  # fmt: skip
    Heartbeat("live", f"{worker_queue}-live").beat()
    assert not RoundWorker.objects.filter(name="departed").exists()
    assert RoundWorker.objects.filter(name="live").exists()
    assert _waiting(worker_queue) in (None, 0)
    assert not _bound(worker_queue)
