"""Cluster leases: which worker's queue a cluster's rounds go to (cluster-affine workers).

A worker's heartbeat (`worker_beat`, every third of the lease) marks the worker alive, renews the
leases it owns, gives every unowned or expired cluster to the least-loaded live worker and evens
out the load between live workers; `lease_resolve` answers, for one round, who runs it. Every
change of owner is a compare-and-set on the lease's `generation` (one conditional UPDATE): two
workers deciding at once, one wins and the other reads the winner. Times are the database's clock
(PostgreSQL's on several machines), so workers' clocks may disagree.

The round lock (services/locks.py) stays the safety net: a round that started under an old owner
and one under the new owner during a hand-over never overlap.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from koordweb.models import Cluster, ClusterLease, RoundWorker

logger = logging.getLogger("koordweb.affinity")

# A dead worker's row (owning nothing) is deleted this long after its heartbeat stopped.
RETIRE_AFTER = timedelta(hours=1)


@dataclass(frozen=True)
class Owner:
    """The worker that runs a cluster's rounds, and the queue that reaches it."""

    name: str
    queue: str


@dataclass
class BeatReport:
    """What one heartbeat changed: cluster ids renewed, given to a worker, handed over."""

    renewed: int = 0
    assigned: dict[int, Owner] = field(default_factory=dict)
    # Of those, the clusters another worker owned until it died or left: rounds sent to its
    # queue may be lost, so the new owner should run one now.
    taken_over: set[int] = field(default_factory=set)
    handed_over: dict[int, Owner] = field(default_factory=dict)
    # The own queues of the dead workers this beat retired, for the broker to drop
    # (koordweb.worker_queues).
    retired_queues: list[str] = field(default_factory=list)


def db_now() -> datetime:
    """The database's clock (PostgreSQL), or this machine's (SQLite is one machine anyway)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement_timestamp()")
            row = cursor.fetchone()
        if row and row[0] is not None:
            value: datetime = row[0]
            return value
    return timezone.now()


def worker_register(*, name: str, queue: str, now: datetime, ttl: float) -> None:
    """Mark the worker alive until now + ttl (created on its first heartbeat)."""
    expires = now + timedelta(seconds=ttl)
    updated = RoundWorker.objects.filter(name=name).update(
        queue=queue, seen_at=now, expires_at=expires, pid=os.getpid()
    )
    if updated:
        return
    try:
        with transaction.atomic():
            RoundWorker.objects.create(
                name=name,
                queue=queue,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=now,
                seen_at=now,
                expires_at=expires,
            )
    except IntegrityError:  # created meanwhile by another process of the same name
        RoundWorker.objects.filter(name=name).update(queue=queue, seen_at=now, expires_at=expires)


def live_workers(now: datetime) -> dict[str, Owner]:
    rows = RoundWorker.objects.filter(expires_at__gt=now).values_list("name", "queue")
    return {name: Owner(name, queue) for name, queue in rows}


def _loads(now: datetime, live: dict[str, Owner]) -> dict[str, int]:
    loads = dict.fromkeys(live, 0)
    owned = ClusterLease.objects.filter(owner__in=list(live), expires_at__gt=now)
    for owner in owned.values_list("owner_id", flat=True):
        loads[owner] += 1
    return loads


def _least_loaded(loads: dict[str, int], prefer: str | None = None) -> str | None:
    if not loads:
        return None
    return min(loads, key=lambda name: (loads[name], name != prefer, name))


def _lease_row(cluster_id: int) -> ClusterLease | None:
    lease = ClusterLease.objects.filter(cluster_id=cluster_id).first()
    if lease is not None:
        return lease
    if not Cluster.objects.filter(id=cluster_id).exists():
        return None
    try:
        with transaction.atomic():
            return ClusterLease.objects.create(cluster_id=cluster_id)
    except IntegrityError:  # created meanwhile by another worker
        return ClusterLease.objects.filter(cluster_id=cluster_id).first()


def _swap(lease: ClusterLease, owner: str | None, now: datetime, ttl: float) -> bool:
    """Compare-and-set: give the lease to `owner` if nobody changed it since it was read."""
    updated = ClusterLease.objects.filter(
        cluster_id=lease.cluster_id, generation=lease.generation
    ).update(
        owner_id=owner,
        generation=F("generation") + 1,
        acquired_at=now if owner else None,
        expires_at=now + timedelta(seconds=ttl) if owner else now,
    )
    if updated:
        logger.info(
            "cluster %s: owner %s -> %s (lease generation %s)",
            lease.cluster_id,
            lease.owner_id or "none",
            owner or "none",
            lease.generation + 1,
        )
    return bool(updated)


def _held(lease: ClusterLease, now: datetime, live: dict[str, Owner]) -> bool:
    return bool(
        lease.owner_id
        and lease.owner_id in live
        and lease.expires_at is not None
        and lease.expires_at > now
    )


def lease_resolve(*, cluster_id: int, worker: str, queue: str, ttl: float) -> Owner | None:
    """Who runs this round of the cluster: `worker` itself (it owns the lease, renewed now, or it
    just gave the unowned cluster to itself) or the live worker that owns it (forward the round to
    its queue). None: the cluster does not exist."""
    for _ in range(3):
        now = db_now()
        lease = _lease_row(cluster_id)
        if lease is None:
            return None
        me = Owner(worker, queue)
        worker_register(name=worker, queue=queue, now=now, ttl=ttl)
        if lease.owner_id == worker:
            renewed = ClusterLease.objects.filter(cluster_id=cluster_id, owner_id=worker).update(
                expires_at=now + timedelta(seconds=ttl)
            )
            if renewed:
                return me
            continue
        live = live_workers(now)
        if _held(lease, now, live):
            return live[str(lease.owner_id)]
        # Unowned, or its owner stopped renewing: the least-loaded live worker takes it.
        target = _least_loaded(_loads(now, live), prefer=worker) or worker
        if _swap(lease, target, now, ttl):
            return live.get(target, me)
    # Contended three times over: run it here; the round lock keeps rounds from overlapping.
    return Owner(worker, queue)


def worker_beat(*, worker: str, queue: str, ttl: float) -> BeatReport:
    """One heartbeat: alive, renew what it owns, give out orphans, hand one lease to a worker
    that owns at least two fewer clusters."""
    report = BeatReport()
    now = db_now()
    worker_register(name=worker, queue=queue, now=now, ttl=ttl)
    report.renewed = ClusterLease.objects.filter(owner_id=worker).update(
        expires_at=now + timedelta(seconds=ttl)
    )
    live = live_workers(now)
    loads = _loads(now, live)
    # Clusters without a lease row get one (unowned); then orphans go to the least loaded.
    missing = Cluster.objects.filter(lease__isnull=True).values_list("id", flat=True)
    for cluster_id in list(missing):
        _lease_row(cluster_id)
    orphans = ClusterLease.objects.filter(
        Q(owner__isnull=True) | Q(expires_at__isnull=True) | Q(expires_at__lte=now)
    ).exclude(owner_id=worker)
    for lease in list(orphans.order_by("cluster_id")):
        target = _least_loaded(loads, prefer=worker)
        if target is None:
            break
        if _swap(lease, target, now, ttl):
            loads[target] += 1
            report.assigned[lease.cluster_id] = live[target]
            if lease.generation > 0:
                report.taken_over.add(lease.cluster_id)
    # Even out: one lease from this worker to a worker owning at least two fewer.
    others = {name: load for name, load in loads.items() if name != worker}
    target = _least_loaded(others)
    if target is not None and loads.get(worker, 0) - loads[target] >= 2:
        mine = ClusterLease.objects.filter(owner_id=worker, expires_at__gt=now)
        given = mine.order_by("-acquired_at", "-cluster_id").first()
        if given is not None and _swap(given, target, now, ttl):
            report.handed_over[given.cluster_id] = live[target]
    report.retired_queues = workers_retire(now)
    return report


def workers_retire(now: datetime) -> list[str]:
    """Delete the rows of workers dead for RETIRE_AFTER that own nothing; returns their queues
    that no remaining worker uses. Each row goes by a conditional DELETE of its own, so a worker
    that beat again meanwhile stays, and of two heartbeats retiring at once only the one whose
    DELETE took the row reports its queue."""
    cutoff = now - RETIRE_AFTER
    dead = RoundWorker.objects.filter(expires_at__lt=cutoff, leases__isnull=True)
    retired: list[str] = []
    for name, queue in list(dead.values_list("name", "queue")):
        deleted, _ = dead.filter(name=name).delete()
        if deleted:
            retired.append(queue)
    in_use = set(RoundWorker.objects.filter(queue__in=retired).values_list("queue", flat=True))
    return [queue for queue in retired if queue not in in_use]


def worker_leave(*, worker: str) -> int:
    """A worker shutting down: its leases are free at once (the next heartbeat of another worker
    takes them) and it no longer counts as alive. Returns how many leases it let go."""
    now = db_now()
    released = 0
    for lease in list(ClusterLease.objects.filter(owner_id=worker)):
        released += _swap(lease, None, now, 0)
    RoundWorker.objects.filter(name=worker).update(expires_at=now)
    return released
