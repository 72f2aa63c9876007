"""Reads for cluster-affine workers: whose queue a round goes to, who owns which cluster."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models.functions import Now

from koordweb.models import ClusterLease, RoundWorker


def owner_queue(cluster_id: int) -> str | None:
    """The queue of the cluster's live owner (its lease and its heartbeat unexpired), else None."""
    return (
        ClusterLease.objects.filter(
            cluster_id=cluster_id,
            owner__isnull=False,
            expires_at__gt=Now(),
            owner__expires_at__gt=Now(),
        )
        .values_list("owner__queue", flat=True)
        .first()
    )


@dataclass(frozen=True)
class Ownership:
    """One cluster's owner as an operator sees it."""

    cluster: str
    owner: str | None
    alive: bool
    generation: int
    acquired_at: datetime | None
    expires_at: datetime | None


def cluster_owners(now: datetime) -> list[Ownership]:
    """Every cluster with a lease row, by name: its owner, whether it is alive now."""
    rows = ClusterLease.objects.select_related("cluster", "owner").order_by("cluster__name")
    return [
        Ownership(
            cluster=lease.cluster.name,
            owner=lease.owner_id,
            alive=bool(
                lease.owner is not None
                and lease.expires_at is not None
                and lease.expires_at > now
                and lease.owner.expires_at > now
            ),
            generation=lease.generation,
            acquired_at=lease.acquired_at,
            expires_at=lease.expires_at,
        )
        for lease in rows
    ]


def round_workers() -> list[RoundWorker]:
    return list(RoundWorker.objects.order_by("name"))


def lease_owner_text(lease: ClusterLease, now: datetime) -> str:
    """A lease in a few words: the owner, or why none holds it now (the same rule as
    `cluster_owners`: the lease and its owner's heartbeat both unexpired)."""
    if lease.owner_id is None:
        return "unowned"
    if lease.expires_at is None or lease.expires_at <= now:
        return f"{lease.owner_id} (lease expired)"
    owner = lease.owner
    if owner is not None and owner.expires_at <= now:
        return f"{lease.owner_id} (worker stopped heartbeating)"
    return str(lease.owner_id)


def ago_text(moment: datetime | None, now: datetime) -> str:
    """'12 s ago', '5 min ago', '3 h ago' ('never' when unset)."""
    if moment is None:
        return "never"
    seconds = max(0, int((now - moment).total_seconds()))
    if seconds < 120:
        return f"{seconds} s ago"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"
