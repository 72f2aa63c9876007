"""Cluster-affine workers, the Celery side: a worker's name and queue, its heartbeat, the router.

Every worker consumes the shared queue (KOORDWEB_QUEUE) and its own, `<KOORDWEB_QUEUE>.<name>`
(`AffinityStep`, a consumer bootstep). A heartbeat thread in the worker's main process renews the
worker's leases every third of KOORDWEB_LEASE_SECONDS and gives unowned or expired clusters to live
workers, sending each such cluster a cold-start round (services/leases.py). `route_task` sends a
cluster's round to its owner's queue, and to the shared queue when nobody owns it; the worker that
takes a round owned by another live worker forwards it there (tasks.run_round). A warm snapshot of
a cluster, kept in the worker process that runs its rounds, is therefore in one process: run round
workers with `--pool=solo` (or `threads`), one process each.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from typing import Any

from celery import bootsteps
from django.conf import settings
from django.db import close_old_connections, connection

logger = logging.getLogger("koordweb.affinity")

ROUND_TASK = "koordweb.run_round"
_QUEUE_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def enabled() -> bool:
    return bool(settings.KOORDWEB_AFFINITY)


def worker_name(hostname: str | None) -> str | None:
    """This worker's name in leases: KOORDWEB_WORKER_NAME, else its Celery node name; None when
    rounds run outside a worker (a direct call) or affinity is off."""
    if not enabled() or not hostname:
        return None
    return str(settings.KOORDWEB_WORKER_NAME or hostname)


def worker_queue(name: str) -> str:
    """`<KOORDWEB_QUEUE>.<name>`, in the characters every broker takes (`@` becomes `_`)."""
    return f"{settings.KOORDWEB_QUEUE}.{_QUEUE_UNSAFE.sub('_', name)}"


def lease_seconds() -> float:
    return float(settings.KOORDWEB_LEASE_SECONDS)


def route_task(
    name: str, args: Any, kwargs: Any, options: Any, task: Any = None, **extra: Any
) -> dict[str, str] | None:
    """Celery router: a round of a cluster with a live owner goes to the owner's queue."""
    if name != ROUND_TASK or not enabled() or not args:
        return None
    from koordweb.selectors.leases import owner_queue

    try:
        queue = owner_queue(int(args[0]))
    except Exception:  # no database now: the shared queue; whoever takes it resolves the owner
        logger.warning("round of cluster %s: owner not known, shared queue", args[0], exc_info=True)
        return None
    return {"queue": queue} if queue else None


def send_round(cluster_id: int, queue: str, trigger: str, expires: Any = None) -> None:
    from koordweb.tasks import run_round

    options: dict[str, Any] = {"queue": queue}
    if expires:
        options["expires"] = expires
    run_round.apply_async(args=[cluster_id], kwargs={"trigger": trigger}, **options)


class Heartbeat(threading.Thread):
    """The worker's lease heartbeat: a thread, so a long round never keeps it from renewing."""

    def __init__(self, name: str, queue: str) -> None:
        super().__init__(name=f"koordweb-heartbeat-{name}", daemon=True)
        self.worker = name
        self.queue = queue
        self.stopping = threading.Event()

    def beat(self) -> None:
        from koordweb.models import Round
        from koordweb.services.leases import worker_beat

        report = worker_beat(worker=self.worker, queue=self.queue, ttl=lease_seconds())
        for cluster_id, owner in report.assigned.items():
            # A cold start on the new owner: one round now, not at the next tick.
            send_round(cluster_id, owner.queue, Round.Trigger.TIMER)

    def run(self) -> None:
        period = lease_seconds() / 3
        try:
            while True:
                try:
                    close_old_connections()
                    self.beat()
                except Exception:
                    logger.exception("heartbeat of worker %s failed; retrying", self.worker)
                    with contextlib.suppress(Exception):
                        connection.close()
                if self.stopping.wait(period):
                    break
            from koordweb.services.leases import worker_leave

            released = worker_leave(worker=self.worker)
            logger.info("worker %s left: %s leases released", self.worker, released)
        except Exception:
            logger.exception("worker %s could not release its leases", self.worker)
        finally:
            with contextlib.suppress(Exception):
                connection.close()

    def stop(self, timeout: float = 10) -> None:
        self.stopping.set()
        self.join(timeout)


class AffinityStep(bootsteps.StartStopStep):
    """Consumer bootstep: consume the worker's own queue; run its heartbeat while it lives."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self.heartbeat: Heartbeat | None = None

    def start(self, parent: Any) -> None:
        name = worker_name(parent.hostname)
        if name is None:
            return
        queue = worker_queue(name)
        parent.add_task_queue(queue)
        if self.heartbeat is None or not self.heartbeat.is_alive():
            self.heartbeat = Heartbeat(name, queue)
            self.heartbeat.start()
            logger.info("worker %s: rounds of its clusters on queue %s", name, queue)

    def shutdown(self, parent: Any) -> None:
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None
