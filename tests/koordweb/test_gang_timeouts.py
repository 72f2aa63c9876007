"""A gang past its waiting time lets its nominated nodes go: the round clears the nominations in
the database, records the reason on the job in plain words, and the job stays in the queue."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from koordweb.manifests import import_manifests, load_documents
from koordweb.models import Cluster, Job, JobState, Pod
from tests.builders import simulated_round

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.mark.django_db
def test_an_expired_gang_gives_up_its_nominations_and_says_why() -> None:
    cluster = Cluster.objects.create(name="timeouts")
    docs = load_documents((SCENARIOS / "koord_gang_waiting_time_expired.yaml").read_bytes())
    import_manifests(cluster, docs)
    gang = Pod.objects.filter(cluster=cluster, name__startswith="gang-a")
    assert all(p.nominated_node_id and p.nominated_at for p in gang)
    simulated_round(cluster, timezone.now())
    assert not any(p.nominated_node_id or p.nominated_at for p in gang.all())
    job = Job.objects.get(cluster=cluster, pods__name="gang-a-1")
    assert job.state == JobState.PENDING
    assert job.state_reason.startswith("Gave up the nodes kept for it after waiting")


@pytest.mark.django_db
def test_a_fresh_nomination_is_kept_and_times_out_later() -> None:
    cluster = Cluster.objects.create(name="holds")
    docs = load_documents((SCENARIOS / "koord_gang_waiting_time_holds.yaml").read_bytes())
    import_manifests(cluster, docs)
    gang = Pod.objects.filter(cluster=cluster, name__startswith="gang-a")
    since = gang.first().nominated_at  # type: ignore[union-attr]
    simulated_round(cluster, since + timedelta(seconds=29))
    assert all(p.nominated_node_id for p in gang.all())
    simulated_round(cluster, since + timedelta(seconds=30))
    assert not any(p.nominated_node_id for p in gang.all())
