"""Cluster leases (services/leases.py): compare-and-set ownership, heartbeats, hand-overs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from koordweb.affinity import route_task
from koordweb.models import Cluster, ClusterLease, RoundWorker
from koordweb.selectors.leases import cluster_owners, owner_queue
from koordweb.services.leases import (
    RETIRE_AFTER,
    _swap,
    db_now,
    lease_resolve,
    worker_beat,
    worker_leave,
)

pytestmark = pytest.mark.django_db
TTL = 30.0


def owners() -> dict[str, str | None]:
    return {o.cluster: o.owner for o in cluster_owners(timezone.now())}


def expire(worker: str) -> None:
    """The worker stopped renewing (it died): its row and leases are past their expiry."""
    past = db_now() - timedelta(seconds=1)
    RoundWorker.objects.filter(name=worker).update(expires_at=past)
    ClusterLease.objects.filter(owner_id=worker).update(expires_at=past)


def test_heartbeats_share_clusters_and_route_rounds_to_the_owner():
    clusters = [Cluster.objects.create(name=f"c{i}") for i in range(3)]
    report = worker_beat(worker="w1", queue="q.w1", ttl=TTL)  # alone: w1 takes all three
    assert len(report.assigned) == 3 and not report.taken_over  # new clusters: no lost rounds
    assert set(owners().values()) == {"w1"}
    report = worker_beat(worker="w2", queue="q.w2", ttl=TTL)  # w2 alive, owns nothing yet
    assert not report.assigned
    handed = worker_beat(worker="w1", queue="q.w1", ttl=TTL).handed_over
    assert [o.name for o in handed.values()] == ["w2"]  # 3 - 0 >= 2: one moves
    assert worker_beat(worker="w1", queue="q.w1", ttl=TTL).handed_over == {}  # 2 - 1: stays
    assert sorted(owners().values()) == ["w1", "w1", "w2"]
    for cluster in clusters:
        lease = ClusterLease.objects.get(cluster=cluster)
        assert owner_queue(cluster.id) == f"q.{lease.owner_id}"
        assert route_task("koordweb.run_round", [cluster.id], {}, {}) == {
            "queue": f"q.{lease.owner_id}"
        }
    assert route_task("koordweb.tick", [], {}, {}) is None


def test_a_dead_owners_clusters_go_to_a_live_worker_with_a_new_generation():
    clusters = [Cluster.objects.create(name=f"c{i}") for i in range(3)]
    worker_beat(worker="w1", queue="q.w1", ttl=TTL)
    worker_beat(worker="w2", queue="q.w2", ttl=TTL)
    worker_beat(worker="w1", queue="q.w1", ttl=TTL)
    moved = [c for c in clusters if ClusterLease.objects.get(cluster=c).owner_id == "w1"]
    before = {c.id: ClusterLease.objects.get(cluster=c).generation for c in moved}
    expire("w1")
    for cluster in moved:
        assert owner_queue(cluster.id) is None  # routed to the shared queue meanwhile
    report = worker_beat(worker="w2", queue="q.w2", ttl=TTL)
    assert set(report.assigned) == set(report.taken_over) == {c.id for c in moved}
    assert set(owners().values()) == {"w2"}
    for cluster in moved:
        assert ClusterLease.objects.get(cluster=cluster).generation == before[cluster.id] + 1
    # w1 comes back: it renews nothing it lost, and gets one back by the balancing.
    assert worker_beat(worker="w1", queue="q.w1", ttl=TTL).renewed == 0
    worker_beat(worker="w2", queue="q.w2", ttl=TTL)
    assert sorted(owners().values()) == ["w1", "w2", "w2"]


def test_ownership_is_compare_and_set():
    cluster = Cluster.objects.create(name="c")
    worker_beat(worker="w1", queue="q.w1", ttl=TTL)
    worker_beat(worker="w2", queue="q.w2", ttl=TTL)
    stale = ClusterLease.objects.get(cluster=cluster)
    assert _swap(stale, "w2", db_now(), TTL)
    # Another worker that read the lease before that change loses: one owner at a time.
    assert not _swap(stale, "w1", db_now(), TTL)
    assert ClusterLease.objects.get(cluster=cluster).owner_id == "w2"


def test_a_round_resolves_to_its_owner_or_claims_an_unowned_cluster():
    cluster = Cluster.objects.create(name="c")
    owner = lease_resolve(cluster_id=cluster.id, worker="w1", queue="q.w1", ttl=TTL)
    assert owner is not None and owner.name == "w1"  # unowned: the only live worker takes it
    worker_beat(worker="w2", queue="q.w2", ttl=TTL)
    owner = lease_resolve(cluster_id=cluster.id, worker="w2", queue="q.w2", ttl=TTL)
    assert owner is not None and (owner.name, owner.queue) == ("w1", "q.w1")  # forward
    expire("w1")
    owner = lease_resolve(cluster_id=cluster.id, worker="w2", queue="q.w2", ttl=TTL)
    assert owner is not None and owner.name == "w2"
    assert lease_resolve(cluster_id=cluster.id + 99, worker="w2", queue="q.w2", ttl=TTL) is None


def test_a_worker_leaving_frees_its_leases_at_once():
    clusters = [Cluster.objects.create(name=f"c{i}") for i in range(2)]
    worker_beat(worker="w1", queue="q.w1", ttl=TTL)
    assert worker_leave(worker="w1") == 2
    assert all(owner_queue(c.id) is None for c in clusters)
    report = worker_beat(worker="w2", queue="q.w2", ttl=TTL)
    assert set(report.assigned) == {c.id for c in clusters}


def test_a_worker_dead_long_and_owning_nothing_is_retired_with_its_queue():
    cluster = Cluster.objects.create(name="c0")
    for name in ("gone", "holding", "recent", "twin"):
        worker_beat(worker=name, queue=f"q.{name}", ttl=TTL)
    long_ago = db_now() - RETIRE_AFTER - timedelta(minutes=1)
    RoundWorker.objects.exclude(name="recent").update(expires_at=long_ago)
    RoundWorker.objects.filter(name="recent").update(expires_at=db_now() - timedelta(minutes=5))
    # "holding" still owns the cluster (an expired lease): not retired until it is taken.
    ClusterLease.objects.filter(cluster=cluster).update(owner_id="holding", expires_at=long_ago)
    # "twin" shares its queue with a worker that stays: the queue is not reported.
    RoundWorker.objects.filter(name="twin").update(queue="q.shared")
    RoundWorker.objects.create(
        name="other", queue="q.shared", started_at=long_ago, seen_at=long_ago,
        expires_at=db_now() + timedelta(minutes=5),
    )  # fmt: skip
    ClusterLease.objects.filter(cluster=cluster).update(expires_at=db_now() + timedelta(hours=1))
    report = worker_beat(worker="live", queue="q.live", ttl=TTL)
    assert report.retired_queues == ["q.gone"]
    left = set(RoundWorker.objects.values_list("name", flat=True))
    assert left == {"holding", "recent", "other", "live"}
    # Retired once: the next beat finds nothing more to drop.
    assert worker_beat(worker="live", queue="q.live", ttl=TTL).retired_queues == []


def test_a_worker_beating_again_is_not_retired():
    worker_beat(worker="back", queue="q.back", ttl=TTL)
    long_ago = db_now() - RETIRE_AFTER - timedelta(minutes=1)
    RoundWorker.objects.filter(name="back").update(expires_at=long_ago)
    worker_beat(worker="back", queue="q.back", ttl=TTL)  # it came back before anyone retired it
    assert worker_beat(worker="live", queue="q.live", ttl=TTL).retired_queues == []
    assert RoundWorker.objects.filter(name="back").exists()


def test_operators_see_who_owns_which_cluster(admin_client):
    from io import StringIO

    from django.core.management import call_command

    Cluster.objects.create(name="alpha")
    Cluster.objects.create(name="beta")
    worker_beat(worker="w1", queue="q.w1", ttl=TTL)
    out = StringIO()
    call_command("round_owners", stdout=out)
    text = out.getvalue()
    assert "w1  alive  queue q.w1" in text and "clusters: alpha, beta" in text
    assert "  alpha  w1  generation 1" in text
    expire("w1")
    out = StringIO()
    call_command("round_owners", stdout=out)
    assert "w1  dead" in out.getvalue() and "alpha  w1 (expired" in out.getvalue()
    page = admin_client.get("/admin/koordweb/cluster/")
    assert page.status_code == 200 and b"w1 (lease expired)" in page.content


def test_only_a_worker_resolves_owners_and_its_queue_is_broker_safe(settings):
    from koordweb.affinity import current_worker, worker_queue
    from koordweb.models import Round
    from koordweb.tasks import run_round

    assert current_worker(None) is None  # a direct call
    assert current_worker("vm") is None  # a machine's host name is no worker's node name
    assert current_worker("w1@host-a") == "w1@host-a"
    assert worker_queue("w1@host-a") == "celery.w1_host-a"
    settings.KOORDWEB_WORKER_NAME = "named"
    assert current_worker("w1@host-a") == "named"
    settings.KOORDWEB_AFFINITY = False
    assert current_worker("w1@host-a") is None
    # A round called directly (tests, commands) runs as before: no lease, no worker recorded.
    settings.KOORDWEB_AFFINITY = True
    cluster = Cluster.objects.create(name="direct")
    assert "round" in run_round(cluster.id)
    assert not ClusterLease.objects.exists()
    assert list(Round.objects.values_list("worker", flat=True)) == [""]
