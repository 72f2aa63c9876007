"""Issues #34 and #37: the jobs table's place in the queue is the engine's order, not one of its
own. The round publishes the order the engine took the waiting jobs in (`RoundResult.queue`);
the table reads it, and says its numbers are estimated before any round has run."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from koordweb.engine.backoff import backoff_forget
from koordweb.engine.round_queue import round_queue_key
from koordweb.models import Cluster, Job, JobState, PodPhase
from koordweb.selectors.job_table import HELD_WORDS, job_queue_positions
from tests.builders import ClusterFactory, JobFactory, NodeFactory, PodFactory, simulated_round
from tests.builders.teams import UserFactory

NODE = {"cpu": 4000, "memory": 8 * 2**30, "pods": 110}


@pytest.fixture(autouse=True)
def _fresh() -> Any:
    backoff_forget()
    yield
    backoff_forget()


def _job(cluster: Cluster, name: str, *, cpu: int, submitted: datetime, node: Any = None) -> Job:
    job = JobFactory(
        cluster=cluster,
        name=name,
        quota=None,
        total_number=1,
        min_available=1,
        priority=0,
        submitted_at=submitted,
        state=JobState.RUNNING if node else JobState.PENDING,
    )
    PodFactory(
        job=job,
        name=f"{name}-0",
        requests={"cpu": cpu},
        priority=0,
        node=node,
        phase=PodPhase.RUNNING if node else PodPhase.PENDING,
        bound_at=submitted if node else None,
    )
    return job


@pytest.fixture
def queue(db: Any) -> tuple[Cluster, Job, Job, Job, datetime]:
    """One 4-CPU node, 3.5 CPUs of it taken; two waiting jobs of one priority: `small` (1.5
    CPUs) submitted 3 minutes ago, `large` (3 CPUs) 1 minute ago, within the 5-minute window
    that moves a larger job ahead, so the engine takes `large` first."""
    now = timezone.now()
    cluster = ClusterFactory(name="queue-order")
    caches["default"].delete(round_queue_key(cluster.id))  # the file cache outlives test runs
    node = NodeFactory(cluster=cluster, name="n0", allocatable=NODE)
    running = _job(cluster, "running", cpu=3500, submitted=now - timedelta(hours=1), node=node)
    small = _job(cluster, "small", cpu=1500, submitted=now - timedelta(minutes=3))
    large = _job(cluster, "large", cpu=3000, submitted=now - timedelta(minutes=1))
    return cluster, running, small, large, now


def _admin() -> Client:
    client = Client()
    client.force_login(UserFactory(username="queue-admin", is_staff=True, is_superuser=True))
    return client


def _page_places(client: Client, cluster: Cluster) -> dict[str, str]:
    html = client.get(reverse("jobs"), {"cluster": cluster.name, "state": "pending"})
    text = html.content.decode()
    return dict(re.findall(r'<tr data-job="([^"]+)">\s*<td class="position">(.*?)</td>', text))


def test_after_a_round_the_table_shows_the_engines_order(queue: Any) -> None:
    cluster, _, small, large, now = queue
    outcome = simulated_round(cluster, now=now)
    assert [j.split("/")[-1] for j in outcome.result.queue] == ["large", "small"]
    assert "queue" not in outcome.result.to_dict()  # not part of what the round decided

    places = job_queue_positions(Job.objects.filter(cluster=cluster))
    assert (places[large.pk].number, places[small.pk].number) == (1, 2)
    assert not places[large.pk].estimated

    admin = _admin()
    assert _page_places(admin, cluster) == {"large": "1", "small": "2"}
    html = admin.get(reverse("jobs"), {"cluster": cluster.name, "state": "pending"})
    assert "estimated" not in html.content.decode()


def test_before_any_round_the_place_is_estimated_and_says_so(queue: Any) -> None:
    cluster, _, small, large, _ = queue
    places = job_queue_positions(Job.objects.filter(cluster=cluster))
    # priority, then submission time: the earlier `small` first
    assert (places[small.pk].number, places[large.pk].number) == (1, 2)
    assert places[small.pk].estimated and places[large.pk].estimated
    html = _admin().get(reverse("jobs"), {"cluster": cluster.name, "state": "pending"})
    text = html.content.decode()
    assert text.count('title="estimated: no round yet"') == 1
    assert "no round has ordered the queue yet" in text


def test_a_placed_job_leaves_the_list(queue: Any) -> None:
    cluster, running, small, large, now = queue
    simulated_round(cluster, now=now)
    # The running job ends: 4 CPUs free; the engine places `large` (3 CPUs), not `small` after it.
    running.pods.update(phase=PodPhase.SUCCEEDED)
    Job.objects.filter(pk=running.pk).update(state=JobState.SUCCEEDED)
    outcome = simulated_round(cluster, now=now + timedelta(seconds=10))
    assert [j.split("/")[-1] for j in outcome.result.decisions] == ["large"]
    large.refresh_from_db()
    assert large.state not in JobState.WAITING
    places = job_queue_positions(Job.objects.filter(cluster=cluster))
    assert large.pk not in places
    assert places[small.pk].number == 1
    assert _page_places(_admin(), cluster) == {"small": "1"}


def test_a_job_the_back_off_holds_is_waiting_for_a_change(queue: Any) -> None:
    cluster, _, small, large, now = queue
    simulated_round(cluster, now=now)  # neither fits: both backed off for a second
    outcome = simulated_round(cluster, now=now + timedelta(milliseconds=200))
    assert outcome.result.queue == ()
    places = job_queue_positions(Job.objects.filter(cluster=cluster))
    assert str(places[small.pk]) == str(places[large.pk]) == HELD_WORDS
    assert places[small.pk].number is None
    page = _page_places(_admin(), cluster)
    assert HELD_WORDS in page["small"] and HELD_WORDS in page["large"]


def test_a_job_submitted_since_the_round_waits_for_the_next_one(queue: Any) -> None:
    cluster, _, _, large, now = queue
    simulated_round(cluster, now=now)
    later = _job(cluster, "later", cpu=100, submitted=now + timedelta(seconds=5))
    places = job_queue_positions(Job.objects.filter(cluster=cluster))
    assert places[large.pk].number == 1
    assert str(places[later.pk]) == "next round"
