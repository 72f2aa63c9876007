"""Cluster-affine workers: the round workers alive and which one owns each cluster's rounds.

A `RoundWorker` row is a Celery worker that runs rounds, renewed by its heartbeat; a
`ClusterLease` says which worker owns a cluster until when. Ownership changes only by a
compare-and-set on `generation` (services/leases.py), so a cluster has at most one owner.
"""

from __future__ import annotations

from django.db import models

from koordweb.models.cluster import Cluster


class RoundWorker(models.Model):
    """A worker that runs rounds: its name, its own queue, and until when it counts as alive."""

    name = models.CharField(max_length=200, primary_key=True)
    queue = models.CharField(max_length=255)
    host = models.CharField(max_length=255, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    started_at = models.DateTimeField()
    seen_at = models.DateTimeField()
    # Renewed by the worker's heartbeat; past it, the worker is dead (or gone) for routing.
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ClusterLease(models.Model):
    """The worker whose queue a cluster's rounds go to, and until when (its heartbeat renews it).

    `generation` counts changes of owner: every hand-over is a conditional UPDATE on it."""

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, primary_key=True, related_name="lease"
    )
    owner = models.ForeignKey(
        RoundWorker, null=True, blank=True, on_delete=models.SET_NULL, related_name="leases"
    )
    generation = models.BigIntegerField(default=0)
    acquired_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster"]

    def __str__(self) -> str:
        return f"rounds of cluster {self.cluster.name}: {self.owner_id or 'no worker'}"
