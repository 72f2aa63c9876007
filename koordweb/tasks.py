"""Celery tasks: orchestration only. Ids in; services, the snapshot, the engine and a backend work.

`run_round(cluster_id)`: holding the cluster's round lock for the whole round, finish what an
earlier round left unenacted, plan and commit, then enact (koordweb.engine.pipeline). A request
that finds a round of the cluster running is deferred, not dropped: the running round starts
exactly one successor as soon as it ends. In a cluster-affine worker (koordweb.affinity) a round of
a cluster owned by another live worker is forwarded to that worker's queue first, and a round of
an unowned cluster gives it to the least-loaded live worker.
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from koordweb import affinity
from koordweb.backends import backend_for
from koordweb.celery import ROUND_TASK
from koordweb.engine.pipeline import round_execute
from koordweb.models import Cluster, Round
from koordweb.observability import round_context
from koordweb.services.leases import lease_resolve
from koordweb.services.locks import round_lock
from koordweb.services.rounds import (
    round_defer,
    round_pending_clear,
    round_request_started,
    round_successor_claim,
)

logger = logging.getLogger("koordweb.rounds")


@shared_task(name=ROUND_TASK, acks_late=True, reject_on_worker_lost=True)
def run_round(cluster_id: int, trigger: str = Round.Trigger.TIMER, hops: int = 0) -> dict[str, Any]:
    """One scheduling round of one cluster; deferred when another round of it is running.

    `hops`: how many times the round was forwarded to its owner's queue already."""
    worker = affinity.current_worker(run_round.request.hostname)
    if worker is not None and hops < affinity.MAX_HOPS:
        queue = affinity.worker_queue(worker)
        owner = lease_resolve(
            cluster_id=cluster_id, worker=worker, queue=queue, ttl=affinity.lease_seconds()
        )
        if owner is not None and owner.name != worker:
            # Still asked for (the collapsing marker stays): its owner answers it.
            affinity.send_round(
                cluster_id, owner.queue, trigger, run_round.request.expires, hops + 1
            )
            return {"cluster": cluster_id, "forwarded": owner.name}
    # Requests arriving from now on may need this round's successor: let them enqueue one.
    round_request_started(cluster_id=cluster_id)
    cluster = Cluster.objects.filter(id=cluster_id).first()
    if cluster is None:
        return {"cluster": cluster_id, "skipped": "no such cluster"}
    with round_context(cluster=cluster.name):
        with round_lock(cluster_id=cluster_id) as held:
            summary = _round_holding_lock(cluster, trigger, worker) if held else None
        if summary is None:
            # Ask the running round for a successor; if it ended meanwhile without seeing the
            # request, the request is ours to answer (claimed once, so never run twice).
            round_defer(cluster_id=cluster_id)
            with round_lock(cluster_id=cluster_id) as held:
                if held and round_successor_claim(cluster_id=cluster_id):
                    summary = _round_holding_lock(cluster, trigger, worker)
        if summary is None:
            logger.info("round deferred: another round of %s is running", cluster.name)
            return {"cluster": cluster_id, "skipped": "another round is running: deferred"}
        if round_successor_claim(cluster_id=cluster_id):
            run_round.apply_async(args=[cluster_id], kwargs={"trigger": Round.Trigger.DEFERRED})
        logger.info("round %s of cluster %s: %s", summary["round"], cluster.name, summary)
    return summary


def _round_holding_lock(cluster: Cluster, trigger: str, worker: str | None) -> dict[str, Any]:
    # This round reads the cluster after every request made so far: it answers them all.
    round_pending_clear(cluster_id=cluster.id)
    now = timezone.now()
    try:
        return round_execute(
            cluster=cluster, backend=backend_for(cluster), trigger=trigger, now=now, worker=worker
        ).summary
    except Exception:
        logger.exception("round of cluster %s failed", cluster.name)
        if round_successor_claim(cluster_id=cluster.id):
            run_round.apply_async(args=[cluster.id], kwargs={"trigger": Round.Trigger.DEFERRED})
        raise


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


@shared_task(name="koordweb.gpu_ingest")
def gpu_ingest() -> dict[str, int]:
    """The beat entry of GPU monitoring: sample every cluster's cards for the last period.

    A simulated cluster's koordlet reports first (koordweb.backends.simulated_usage)."""
    from koordweb.backends.simulated_usage import node_metrics_report
    from koordweb.services.gpu_usage import gpu_samples_ingest

    now = timezone.now()
    counts: dict[str, int] = {}
    for cluster in Cluster.objects.all():
        if cluster.backend == Cluster.Backend.SIMULATED:
            node_metrics_report(cluster, now=now, interval=settings.KOORDWEB_GPU_SAMPLE_SECONDS)
        counts[cluster.name] = gpu_samples_ingest(cluster=cluster, now=now)["samples"]
    return counts


@shared_task(name="koordweb.gpu_history_compact")
def gpu_history_compact() -> dict[str, int]:
    """The beat entry that downsamples and prunes GPU usage history."""
    from koordweb.services.gpu_history import gpu_history_compact as compact

    return compact(now=timezone.now())
