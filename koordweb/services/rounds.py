"""Asking for scheduling rounds: collapsed, enqueued only after the asking transaction commits,
and deferred (never dropped) when a round of the cluster is running."""

from __future__ import annotations

import contextlib

from django.core.cache import cache
from django.db import transaction

from koordweb.celery import round_task
from koordweb.models import Cluster
from koordweb.outage import round_enqueue_guarded

# A burst of submissions within this many seconds causes one round.
COLLAPSE_SECONDS = 2


def _marker(cluster_id: int) -> str:
    return f"round-requested:{cluster_id}"


def round_request_started(*, cluster_id: int) -> None:
    """A round has started: the next request must enqueue a new one, not join this one."""
    # The cache being down must not stop a round; the marker expires anyway.
    with contextlib.suppress(Exception):
        cache.delete(_marker(cluster_id))


def round_request(*, cluster_id: int, trigger: str = "submit") -> None:
    """Enqueue `run_round(cluster_id)` once the current transaction commits.

    Requests are collapsed through the shared cache: while one is queued and not yet started
    (the task clears the marker when it starts), further requests for the cluster add nothing.
    """

    def enqueue() -> None:
        if cache.add(_marker(cluster_id), trigger, timeout=COLLAPSE_SECONDS):
            round_task().apply_async(args=[cluster_id], kwargs={"trigger": trigger})

    transaction.on_commit(round_enqueue_guarded(enqueue, cluster_id=cluster_id))


def round_defer(*, cluster_id: int) -> None:
    """A round was asked for while one of the cluster runs: that one starts a successor."""
    Cluster.objects.filter(id=cluster_id).update(round_pending=True)


def round_pending_clear(*, cluster_id: int) -> None:
    """A round is starting: it answers every request made before it."""
    Cluster.objects.filter(id=cluster_id, round_pending=True).update(round_pending=False)


def round_successor_claim(*, cluster_id: int) -> bool:
    """True for exactly one caller when a request was deferred during the round just ended."""
    return bool(
        Cluster.objects.filter(id=cluster_id, round_pending=True).update(round_pending=False)
    )
