"""A round's queue, published for the pages: the waiting jobs' places in the order the engine took
them (issue #39 made that order the engine's own: a larger job may go up to `sizeWindow` ahead),
so the jobs table shows the engine's place, never a re-derived one. A hint in the shared cache,
written after the round's commit; a round never fails for it."""

from __future__ import annotations

import contextlib
from datetime import datetime

from django.core.cache import caches

from koordweb.engine.backoff import HELD_CACHE_SECONDS, HoldReport
from koordweb.engine.snapshot import SnapshotIndex
from koordweb.models import Cluster, Round
from scheduler.api import RoundResult

QUEUE_PUBLISHED = 5000  # places published per cluster: the head of the queue, where they matter


def round_queue_key(cluster_id: int) -> str:
    """The shared cache's key for a cluster's published queue."""
    return f"round:queue:{cluster_id}"


def round_queue_publish(
    *,
    cluster: Cluster,
    rnd: Round,
    result: RoundResult,
    index: SnapshotIndex,
    held: HoldReport,
    now: datetime,
) -> None:
    """Publish the waiting jobs' places (job row -> place, 1 = next; the first
    `QUEUE_PUBLISHED`) in the order the engine took them this round, the jobs it placed left
    out; the rows of one gang group share a place. The jobs the back-off held out follow as
    "held" (the engine did not sort them this round). The round's number, clock and the
    cluster's creation time let a reader tell this cluster's queue from a stale one."""
    places: dict[int, int] = {}
    place = 0
    for job_id in result.queue:
        if job_id in result.decisions:
            continue  # placed this round: no longer waiting
        place += 1
        if place > QUEUE_PUBLISHED:
            break
        for row in index.jobs_by_engine_id.get(job_id, ()):
            places[row.id] = place
    held_rows = [row.id for job_id in held.held for row in index.jobs_by_engine_id.get(job_id, ())]
    value = {
        "round": rnd.number,
        "as_of": now.isoformat(),
        "cluster_created": cluster.created_at.isoformat(),
        "places": places,
        "more": place > QUEUE_PUBLISHED,
        "held": sorted(held_rows)[:QUEUE_PUBLISHED],
    }
    # A hint for pages: a round never fails for it.
    with contextlib.suppress(Exception):
        caches["default"].set(round_queue_key(cluster.id), value, HELD_CACHE_SECONDS)
