"""Celery tasks: orchestration only. Ids in; services, the snapshot, the engine and a backend work.

`run_round(cluster_id)`: sync the cluster, build a snapshot, run the engine, record the round and
its decisions, enact the plan: all in one transaction that first takes the cluster's round lock,
so a failure leaves the database as it was (the failed round is then recorded on its own).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from koordweb.backends import backend_for
from koordweb.models import Cluster, Round
from koordweb.observability import round_context
from koordweb.services.locks import round_lock_try
from koordweb.services.records import round_execute, round_record_failure
from koordweb.services.rounds import round_request_started

logger = logging.getLogger("koordweb.rounds")


@shared_task(name="koordweb.run_round", acks_late=True, reject_on_worker_lost=True)
def run_round(cluster_id: int, trigger: str = Round.Trigger.TIMER) -> dict[str, Any]:
    """One scheduling round of one cluster; skipped when another round of it is running."""
    # Requests arriving from now on may need this round's successor: let them enqueue one.
    round_request_started(cluster_id=cluster_id)
    cluster = Cluster.objects.filter(id=cluster_id).first()
    if cluster is None:
        return {"cluster": cluster_id, "skipped": "no such cluster"}
    started = timezone.now()
    with round_context(cluster=cluster.name):
        try:
            with transaction.atomic():
                if not round_lock_try(cluster_id=cluster_id):
                    logger.info("round skipped: another round of %s is running", cluster.name)
                    return {"cluster": cluster_id, "skipped": "another round is running"}
                started = timezone.now()  # after the lock: the round's own time only
                summary = round_execute(
                    cluster=cluster, backend=backend_for(cluster), trigger=trigger, now=started
                ).summary
        except Exception as exc:
            logger.exception("round of cluster %s failed", cluster.name)
            round_record_failure(cluster=cluster, trigger=trigger, started=started, error=exc)
            raise
        logger.info("round %s of cluster %s: %s", summary["round"], cluster.name, summary)
    return summary


@shared_task(name="koordweb.tick")
def tick() -> list[int]:
    """The beat entry: ask for a round of every cluster."""
    ids = list(Cluster.objects.values_list("id", flat=True))
    for cluster_id in ids:
        run_round.apply_async(args=[cluster_id], expires=settings.KOORDWEB_ROUND_INTERVAL)
    return ids


@shared_task(name="koordweb.demo_arrivals")
def demo_arrivals() -> str | None:
    """The demo's traffic (KOORDWEB_DEMO_ARRIVALS): one new job per call."""
    from koordweb.services.demo_arrivals import demo_arrival

    cluster = Cluster.objects.filter(name=settings.KOORDWEB_CLUSTER).first()
    job = demo_arrival(cluster=cluster) if cluster else None
    return str(job) if job else None
