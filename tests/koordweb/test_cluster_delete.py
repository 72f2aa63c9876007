"""Deleting a cluster goes by id lists (koordweb.models.deletion), not Django's collector, and takes
exactly what the collector would: every row of the cluster, through every cascading relation, and
nothing of another cluster. Rows that stay and refer to it are nulled (SET_NULL) or stop the
deletion whole (RESTRICT), as with the collector."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db.models import RestrictedError
from django.utils import timezone

from koordweb.models import (
    CardSample,
    Cluster,
    ClusterLease,
    ElasticQuota,
    Job,
    JobGpuState,
    Node,
    Pod,
    RoundWorker,
    deletion,
)
from tests.builders import (
    JobFactory,
    PodFactory,
    PreemptionFactory,
    VictimFactory,
    busy_cluster,
    simulated_round,
)
from tests.koordweb.deletion_helpers import collected

pytestmark = pytest.mark.django_db


def _everything() -> dict[Any, set[Any]]:
    """Model -> the primary keys of all its rows (koordweb's models and the quota members)."""
    found = {}
    for model in apps.get_app_config("koordweb").get_models(include_auto_created=True):
        found[model] = set(model._base_manager.values_list("pk", flat=True))
    return found


def _two_clusters() -> tuple[Cluster, Cluster]:
    """Two busy clusters after a round each, with a preemption, a card sample, a lease and a
    job's GPU state in each."""
    doomed, kept = busy_cluster(), busy_cluster(name="other")
    now = timezone.now()
    worker = RoundWorker.objects.create(
        name="w1@host", queue="celery.w1_host", started_at=now, seen_at=now, expires_at=now
    )
    for busy in (doomed, kept):
        simulated_round(busy.cluster)
        job = Job.objects.filter(cluster=busy.cluster).first()
        victim = JobFactory(cluster=busy.cluster, quota=job.quota)
        VictimFactory(preemption=PreemptionFactory(preemptor=job), job=victim)
        node = Node.objects.filter(cluster=busy.cluster).first()
        CardSample.objects.create(period_start=0, node=node, minor=0, job=job, quota=job.quota)
        # Primary keys that are relations: the worker's lease, the job's GPU state.
        ClusterLease.objects.create(cluster=busy.cluster, owner=worker)
        JobGpuState.objects.create(job=job)
    return doomed.cluster, kept.cluster


@pytest.mark.parametrize("how", ["instance", "queryset"])
def test_a_cluster_goes_with_exactly_what_the_collector_would_take(how: str) -> None:
    doomed, kept = _two_clusters()
    expected = collected(doomed)
    before = _everything()

    total, by_label = (
        doomed.delete() if how == "instance" else Cluster.objects.filter(id=doomed.id).delete()
    )

    after = _everything()
    gone = {m: before[m] - after[m] for m in before if before[m] - after[m]}
    assert gone == expected
    assert by_label == {m._meta.label: len(pks) for m, pks in expected.items()}
    assert total == sum(len(pks) for pks in expected.values())
    assert Pod.objects.filter(cluster=kept).exists() and Cluster.objects.filter(id=kept.id).exists()


def test_a_row_of_another_cluster_pointing_at_it_is_let_go() -> None:
    doomed, kept = _two_clusters()
    node = Node.objects.filter(cluster=doomed).first()
    stray = PodFactory(job=JobFactory(cluster=kept), nominated_node=node)  # SET_NULL
    doomed_id = doomed.id
    doomed.delete()
    stray.refresh_from_db()
    assert (
        stray.nominated_node_id is None and not Node.objects.filter(cluster_id=doomed_id).exists()
    )


def test_a_quota_another_cluster_still_uses_stops_the_deletion_whole() -> None:
    doomed, kept = _two_clusters()
    JobFactory(cluster=kept, quota=ElasticQuota.objects.filter(cluster=doomed).first())
    before = _everything()
    with pytest.raises(RestrictedError, match="jobs outside it still refer to its"):
        doomed.delete()
    assert _everything() == before


def test_a_cascade_deeper_than_followed_falls_back_to_the_collector(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    doomed, _ = _two_clusters()
    expected = collected(doomed)
    monkeypatch.setattr(deletion, "MAX_DEPTH", 1)
    assert deletion.owned_rows_delete(Cluster, [doomed.pk], using="default") is None
    before = _everything()
    doomed.delete()
    after = _everything()
    assert {m: before[m] - after[m] for m in before if before[m] - after[m]} == expected
