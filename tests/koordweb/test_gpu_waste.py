"""Issue 37 item 1: GPU waste in full. Unused GPU-hours (allocated - used) split into idle and
underused, stacked bars that add up to the allocation, jobs flagged by their team's efficiency
threshold, and a job's first, partly held sample period never counted as idle."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from koordweb.models import CARD_HOUR, CardSample, ElasticQuota, JobGpuState, JobUsageHour, Pod
from koordweb.selectors.gpu_usage import GpuHours
from koordweb.services.gpu_usage import gpu_samples_ingest
from tests import builders as f

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)


def figure(html: str, name: str) -> dict[str, Any]:
    start = html.index(f'<script id="{name}" type="application/json">') + len(name) + 38
    return json.loads(html[start : html.index("</script>", start)])


def hours_of(job: Any, *, allocated: float, used: float, idle: float) -> None:
    """One hour of usage for `job` in GPU-hours (the sums the efficiency page reads)."""
    hour = int(timezone.now().timestamp()) // 3600 * 3600 - 3600
    JobUsageHour.objects.create(
        job=job,
        quota=job.quota,
        hour=hour,
        allocated=round(allocated * CARD_HOUR),
        used=round(used * CARD_HOUR),
        idle_allocated=round(idle * CARD_HOUR),
    )


@pytest.fixture
def nlp() -> Any:
    """team-nlp of the issue: 74.4 GPU-hours allocated, 34.5 used, 2.15 idle; a 70B pretrain
    at 40% efficiency and a steady job at 90%."""
    node = f.NodeFactory(name="gpu-1")
    team = f.QuotaFactory(cluster=node.cluster, name="team-nlp")
    pretrain = f.card_holder(team, node, {0: 100}, "pretrain-70b")
    steady = f.card_holder(team, node, {1: 100}, "steady")
    hours_of(pretrain, allocated=64.4, used=25.5, idle=2.15)
    hours_of(steady, allocated=10.0, used=9.0, idle=0)
    admin = f.UserFactory(username="admin", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)
    return client, team, pretrain, steady


def test_the_team_bar_adds_up_to_its_allocation_not_to_used_plus_idle(nlp: Any) -> None:
    client, *_ = nlp
    html = client.get("/efficiency/?window=24h").content.decode()
    bars = figure(html, "fig-teams")["data"]
    assert {bar["name"] for bar in bars} == {
        "used",
        "allocated but idle",
        "allocated, busy but underused",
    }
    total = sum(bar["x"][bar["y"].index("team-nlp")] for bar in bars)
    assert total == pytest.approx(74.4, abs=0.02)  # not 34.5 + 2.15
    team_row = html[html.index('data-team="team-nlp"') :].split("</tr>")[0]
    assert "74.4 GPU-hours" in team_row and "39.9 GPU-hours" in team_row  # unused


def test_a_job_under_its_teams_efficiency_threshold_is_flagged_underused(nlp: Any) -> None:
    client, team, *_ = nlp
    html = client.get("/efficiency/?window=24h&rank=unused").content.decode()
    pretrain = html[html.index('data-job="team-nlp/pretrain-70b"') :].split("</tr>")[0]
    steady = html[html.index('data-job="team-nlp/steady"') :].split("</tr>")[0]
    assert "underused-flag" in pretrain and "underused-flag" not in steady
    ElasticQuota.objects.filter(id=team.id).update(gpu_efficiency_threshold_percent=30)
    html = client.get("/efficiency/?window=24h").content.decode()
    assert "underused-flag" not in html


def test_ranking_by_unused_puts_the_underused_job_first(nlp: Any) -> None:
    client, *_ = nlp
    html = client.get("/efficiency/?window=24h&rank=unused").content.decode()
    assert html.index('data-job="team-nlp/pretrain-70b"') < html.index('data-job="team-nlp/steady"')


def test_the_parts_of_waste_add_up_to_the_allocation() -> None:
    hours = GpuHours.of(100 * CARD_HOUR, 36 * CARD_HOUR, 10 * CARD_HOUR)
    assert (hours.wasted, hours.idle, hours.underused) == (64.0, 10.0, 54.0)
    assert hours.used + hours.idle + hours.underused == pytest.approx(hours.allocated)


def test_the_quota_threshold_defaults_to_half() -> None:
    team = f.QuotaFactory(name="team-x")
    assert team.gpu_efficiency_threshold_percent == 50


def test_a_jobs_first_partial_minute_is_not_counted_idle() -> None:
    node = f.NodeFactory(name="gpu-1")
    f.DeviceFactory(node=node, minor=0)
    team = f.QuotaFactory(cluster=node.cluster, name="team-nlp")
    job = f.card_holder(team, node, {0: 100}, "fresh")
    # It started 40 s into the first period: koordlet's report for it predates the pod.
    Pod.objects.filter(job=job).update(started_at=T0 + timedelta(seconds=40))
    f.card_report(node, T0 + timedelta(seconds=50), {0: 0}, {})
    gpu_samples_ingest(
        cluster=node.cluster, now=T0 + timedelta(minutes=1), period_start=int(T0.timestamp())
    )

    assert not CardSample.objects.filter(job=job).exists()
    assert not JobGpuState.objects.filter(job=job, idle_since__isnull=False).exists()

    # The next, complete period idle is charged and starts the streak.
    f.card_report(node, T0 + timedelta(seconds=110), {0: 0}, {})
    gpu_samples_ingest(
        cluster=node.cluster,
        now=T0 + timedelta(minutes=2),
        period_start=int(T0.timestamp()) + 60,
    )
    assert CardSample.objects.get(job=job).idle_allocated == 100 * 60
    assert JobGpuState.objects.get(job=job).idle_since == T0 + timedelta(minutes=1)
