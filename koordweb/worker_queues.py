"""A departed worker's own queue, removed from the broker when its worker row is retired.

Every round worker consumes a queue of its own (`affinity.worker_queue`), declared durable by the
worker and by whoever sends it a round. A worker that never comes back (a Kubernetes pod of a
Deployment gets a new name each time it starts) would leave that queue, its exchange and the
rounds sent to it before its clusters moved in the broker for good: one more each restart. The
heartbeat that retires the dead worker's row (`services.leases.worker_beat`, an hour after its last
beat, when it owns no cluster) removes them: its clusters went to live workers long before, each
with a round of its own, so what waits in the queue is stale.

A queue is declared as Celery declares a missing one (the same arguments, so RabbitMQ accepts the
declaration) before it is deleted: the virtual transports (Redis, the embedded broker) delete only
bindings their channel knows. RabbitMQ keeps a queue someone consumes (`if_unused`): a worker of the
same name that is alive again keeps its queue. Failures are logged, never raised: the heartbeat
that calls this must go on renewing leases.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

logger = logging.getLogger("koordweb.affinity")


def worker_queues_remove(names: Iterable[str], app: Any = None) -> list[str]:
    """Delete each named queue (its messages and its binding) and its exchange from the broker of
    `app` (koordweb's Celery app by default).

    Returns the names removed; a queue the broker refused to delete (in use on RabbitMQ) or could
    not be reached for is logged and left."""
    names = [name for name in dict.fromkeys(names) if name]
    if not names:
        return []
    if app is None:
        from koordweb.celery import app
    removed: list[str] = []
    try:
        with app.connection_for_write() as conn:
            for name in names:
                # A channel per queue: a refusal closes the channel it came on (AMQP).
                channel = conn.channel()
                try:
                    queue = app.amqp.queues.new_missing(name)(channel)
                    queue.declare()
                    queue.delete(if_unused=True)
                    if queue.exchange is not None and queue.exchange.name:
                        queue.exchange.delete(if_unused=True)
                    removed.append(name)
                except Exception as error:  # the broker's refusal, whatever its transport
                    logger.warning("queue %s of a departed worker kept: %s", name, error)
                finally:
                    _close(channel)
    except Exception as error:  # no broker now: the next retirement does not see these again
        logger.warning("queues %s of departed workers kept: broker: %s", ", ".join(names), error)
    if removed:
        logger.info("removed the queues of departed workers: %s", ", ".join(removed))
    return removed


def _close(channel: object) -> None:
    try:
        channel.close()  # type: ignore[attr-defined]
    except Exception:  # already closed by the broker's refusal
        logger.debug("channel already closed", exc_info=True)
