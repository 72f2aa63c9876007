"""Cluster-affine workers, the Celery side: a worker's name and queue, its heartbeat, the router.

Every worker consumes the shared queue (KOORDWEB_QUEUE) and its own, `<KOORDWEB_QUEUE>.<name>`
(`AffinityStep`, a consumer bootstep). A heartbeat thread in the worker's main process renews the
worker's leases every third of KOORDWEB_LEASE_SECONDS and gives unowned or expired clusters to live
workers, sending a cold-start round to each cluster a dead or departed worker owned
(services/leases.py). `route_task` sends a cluster's round to its owner's queue, and to the shared
queue when nobody owns it; the worker that takes a round owned by another live worker forwards it
there (tasks.run_round). The heartbeat that retires a worker dead for an hour also removes its
queue from the broker (koordweb.worker_queues). A warm snapshot of a cluster, kept in the worker
process that runs its rounds, is therefore in one process: run round workers with `--pool=solo`,
one process each.
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

from koordweb.celery import ROUND_TASK, round_task

logger = logging.getLogger("koordweb.affinity")

_QUEUE_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def enabled() -> bool:
    return bool(settings.KOORDWEB_AFFINITY)


# Forwarding a round to its owner more than this many times in a row: run it where it is (the
# round lock still serialises the cluster's rounds). Only an ownership change in every hop gets
# here.
MAX_HOPS = 3
# The name of the worker this process runs rounds for (set by AffinityStep; a prefork pool's
# children, forked before it, go by the task request's node name instead).
_current: str | None = None


def worker_name(hostname: str | None = None) -> str:
    """A worker's name in leases: KOORDWEB_WORKER_NAME, else its Celery node name."""
    return str(settings.KOORDWEB_WORKER_NAME or hostname or "")


def current_worker(request_hostname: str | None) -> str | None:
    """The worker running this round, None when rounds run outside a worker (a direct call) or
    affinity is off."""
    if not enabled():
        return None
    if _current is not None:
        return _current
    if not request_hostname or "@" not in request_hostname:
        return None  # not a worker's node name (a direct call, or a bare machine host name)
    return worker_name(request_hostname)


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


def send_round(
    cluster_id: int, queue: str, trigger: str, expires: Any = None, hops: int = 0
) -> None:
    options: dict[str, Any] = {"queue": queue}
    if expires:
        options["expires"] = expires
    kwargs: dict[str, Any] = {"trigger": trigger}
    if hops:
        kwargs["hops"] = hops
    round_task().apply_async(args=[cluster_id], kwargs=kwargs, **options)


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
        if report.retired_queues:
            from koordweb.worker_queues import worker_queues_remove

            worker_queues_remove(report.retired_queues)
        for cluster_id in sorted(report.taken_over):
            # A dead or departed owner's cluster: the requests sent to its queue may be lost, so
            # the new owner runs one round now (a cold start), not at the next tick.
            send_round(cluster_id, report.assigned[cluster_id].queue, Round.Trigger.TIMER)

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
        global _current
        if not enabled():
            return
        name = worker_name(parent.hostname)
        _current = name
        queue = worker_queue(name)
        parent.add_task_queue(queue)
        if self.heartbeat is None or not self.heartbeat.is_alive():
            self.heartbeat = Heartbeat(name, queue)
            self.heartbeat.start()
            logger.info("worker %s: rounds of its clusters on queue %s", name, queue)

    def shutdown(self, parent: Any) -> None:
        global _current
        _current = None
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None
