"""Deleting a cluster while workers run: a worker's heartbeat that gives the cluster a lease
(or a round that writes a row of it) in the middle of the deletion waits for it and then finds
the cluster gone; the deletion holds. Django deletes a cluster's rows before the cluster row, and
without the lock the heartbeat's lease committed in between made the deletion fail at its commit
(seen when the e2e benchmark removed a cluster its worker had just given a lease).

PostgreSQL only: SQLite has one writer at a time, so the race cannot happen there."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection, connections
from django.db.models.signals import pre_delete

from koordweb.models import Cluster, ClusterLease, Node, deletion
from koordweb.services.leases import _lease_row
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite serializes writers: no race"
)


def _heartbeat(cluster_id: int, outcome: dict[str, Any]) -> None:
    """What a worker's heartbeat does for a cluster without a lease, on its own connection."""
    try:
        outcome["lease"] = _lease_row(cluster_id)
    except Exception as error:  # the test reports any failure
        outcome["error"] = error
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["by ids", "collector"])
@pytest.mark.parametrize("how", ["instance", "queryset"])
def test_a_lease_made_during_the_deletion_waits_and_the_deletion_holds(
    how: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = ClusterFactory()
    nodes = NodeFactory.create_batch(3, cluster=cluster)
    PodFactory.create_batch(2, job=JobFactory(cluster=cluster), node=nodes[0])
    outcome: dict[str, Any] = {}
    heartbeats: list[threading.Thread] = []

    def meanwhile(*args: Any, **kwargs: Any) -> None:
        """Once the deletion has begun: a heartbeat runs, given a second to finish."""
        if not heartbeats:
            beat = threading.Thread(target=_heartbeat, args=(cluster.id, outcome))
            heartbeats.append(beat)
            beat.start()
            beat.join(timeout=1.0)

    if path == "collector":  # a delete signal makes the deletion go through Django's collector
        pre_delete.connect(meanwhile, sender=Node)
    else:  # the heartbeat starts once the ids to delete are read
        let_go = deletion._references_let_go

        def let_go_meanwhile(*args: Any, **kwargs: Any) -> None:
            meanwhile()
            let_go(*args, **kwargs)

        monkeypatch.setattr(deletion, "_references_let_go", let_go_meanwhile)
    try:
        if how == "instance":
            cluster.delete()
        else:
            Cluster.objects.filter(id=cluster.id).delete()
    finally:
        pre_delete.disconnect(meanwhile, sender=Node)
    heartbeats[0].join(timeout=10)

    assert not Cluster.objects.filter(id=cluster.id).exists()
    assert not ClusterLease.objects.filter(cluster_id=cluster.id).exists()
    assert "error" not in outcome, outcome
    assert outcome["lease"] is None  # the heartbeat found the cluster gone
