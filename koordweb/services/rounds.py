"""Asking for scheduling rounds: collapsed, enqueued only after the asking transaction commits."""

from __future__ import annotations

from django.core.cache import cache
from django.db import transaction

# A burst of submissions within this many seconds causes one round.
COLLAPSE_SECONDS = 2


def round_request(*, cluster_id: int, trigger: str = "submit") -> None:
    """Enqueue `run_round(cluster_id)` once the current transaction commits.

    Requests are collapsed through the shared cache: while one is queued and not yet started,
    further requests for the same cluster add nothing.
    """

    def enqueue() -> None:
        from koordweb.tasks import run_round

        if cache.add(f"round-requested:{cluster_id}", trigger, timeout=COLLAPSE_SECONDS):
            run_round.apply_async(args=[cluster_id], kwargs={"trigger": trigger})

    transaction.on_commit(enqueue)
