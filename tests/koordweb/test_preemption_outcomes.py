"""What became of a preemption: the record says whether the preemptor started on its nominated
nodes and when, or why not (preempted again, gave up, left the queue), on the page and the API.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from koordweb.engine.preemption_outcomes import preemption_outcomes_record
from koordweb.engine.snapshot import SnapshotIndex
from koordweb.models import Cluster, JobState, Preemption
from koordweb.services.jobs import job_cancel
from scheduler.result import PreemptionRecord, RoundResult
from tests.builders import busy_cluster, simulated_round, urgent_spine_gang

GRACE = 60


@pytest.fixture
def busy(db, settings) -> Cluster:
    settings.KOORDWEB_CLUSTER = "default"
    settings.KOORDWEB_SIMULATED_GRACE_SECONDS = GRACE
    return busy_cluster().cluster


def test_a_preemptor_that_binds_on_its_nominated_nodes_is_recorded_as_started(busy, client):
    start = timezone.now()
    simulated_round(busy, start)
    urgent = urgent_spine_gang(busy)
    preempt_at = start + timedelta(seconds=20)
    simulated_round(busy, preempt_at)
    preemption = Preemption.objects.get(preemptor=urgent)
    assert (preemption.outcome, preemption.attempt) == (Preemption.Outcome.WAITING, 1)
    simulated_round(busy, preempt_at + timedelta(seconds=20))  # victims still terminating
    preemption.refresh_from_db()
    assert preemption.outcome == Preemption.Outcome.WAITING and preemption.outcome_at is None
    started_at = preempt_at + timedelta(seconds=GRACE + 1)
    simulated_round(busy, started_at)
    urgent.refresh_from_db()
    assert urgent.state == JobState.SCHEDULED
    preemption.refresh_from_db()
    assert preemption.outcome == Preemption.Outcome.STARTED
    assert preemption.outcome_at == started_at
    pods = urgent.pods.count()
    assert preemption.outcome_reason == f"All {pods} pods started on their nominated nodes."

    admin = urgent.owner
    client.force_login(admin)
    page = client.get(reverse("preemption-detail", args=[preemption.id])).content.decode()
    assert "started on its nominated nodes" in page
    assert f"All {pods} pods started on their nominated nodes." in page
    api = APIClient()
    api.force_authenticate(admin)
    data = api.get(f"/api/v1/preemptions/{preemption.id}/").json()
    assert data["outcome"] == "started" and data["attempt"] == 1
    assert data["outcome_at"] is not None


def test_a_preemptor_cancelled_before_it_starts_left_the_queue(busy):
    start = timezone.now()
    simulated_round(busy, start)
    urgent = urgent_spine_gang(busy)
    simulated_round(busy, start + timedelta(seconds=20))
    preemption = Preemption.objects.get(preemptor=urgent)
    job_cancel(job=urgent, user=urgent.owner)
    later = start + timedelta(seconds=40)
    simulated_round(busy, later)
    preemption.refresh_from_db()
    assert preemption.outcome == Preemption.Outcome.LEFT
    assert preemption.outcome_at == later


def _result(preemptor: str | None = None, timeouts: dict[str, str] | None = None) -> RoundResult:
    records = ()
    if preemptor:
        records = (PreemptionRecord(preemptor, ("v",), ("ns/v-0",), {"ns/p-0": "n1"}, "", {}),)
    return RoundResult({}, records, {}, {}, timeouts=timeouts or {})


def test_a_second_preemption_is_numbered_and_settles_the_first_with_its_reason(busy):
    start = timezone.now()
    simulated_round(busy, start)
    urgent = urgent_spine_gang(busy)
    index = SnapshotIndex(engine_id_by_job={urgent.id: "ml/urgent"})
    first = Preemption.objects.create(cluster=busy, preemptor=urgent, created_at=start)
    preemption_outcomes_record(cluster=busy, result=_result(), index=index, new=[first], now=start)
    first.refresh_from_db()
    assert (first.attempt, first.outcome) == (1, Preemption.Outcome.WAITING)

    # Its waiting time ran out and it preempted anew in the same round.
    again_at = start + timedelta(minutes=11)
    second = Preemption.objects.create(cluster=busy, preemptor=urgent, created_at=again_at)
    result = _result("ml/urgent", {"ml/urgent": "Gave up the nodes kept for it."})
    preemption_outcomes_record(cluster=busy, result=result, index=index, new=[second], now=again_at)
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.attempt == 2 and second.outcome == Preemption.Outcome.WAITING
    assert first.outcome == Preemption.Outcome.PREEMPTED_AGAIN
    assert first.outcome_reason.startswith("Its waiting time ran out")
    assert first.outcome_at == again_at

    # Then it gave its nominations up without preempting again.
    gave_up_at = again_at + timedelta(minutes=11)
    result = _result(None, {"ml/urgent": "Gave up the nodes kept for it."})
    preemption_outcomes_record(cluster=busy, result=result, index=index, new=[], now=gave_up_at)
    second.refresh_from_db()
    assert second.outcome == Preemption.Outcome.GAVE_UP
    assert second.outcome_reason == "Gave up the nodes kept for it."
