"""GPU usage in the API: tenants see only their teams' usage, jobs carry `idle_since`, and bad
query parameters answer 400 with field messages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from koordweb.models.gpu_usage import epoch, from_epoch
from koordweb.services.gpu_usage import gpu_samples_ingest
from tests import builders as f

V1 = "/api/v1"


@pytest.fixture
def usage(world: Any) -> dict[str, Any]:
    """team-a's job busy and team-b's job idle on one shared card, sampled for 90 minutes."""
    node = world.nodes[0]
    jobs = {}
    for quota, name in ((world.team_a, "a-train"), (world.team_b, "b-notebook")):
        job = f.card_holder(quota, node, {0: 50}, name)
        jobs[name] = job
    now = timezone.now()
    first = epoch(now) // 60 * 60 - 90 * 60
    for minute in range(90):
        start = first + 60 * minute
        moment = from_epoch(start + 30)
        f.card_report(
            node,
            moment,
            {m: 45 if m == 0 else 0 for m in range(8)},
            {"team-a/a-train-0": {0: 45}, "team-b/b-notebook-0": {0: 0}},
        )
        gpu_samples_ingest(
            cluster=world.cluster, now=moment + timedelta(seconds=31), period_start=start
        )
    return jobs


@pytest.mark.django_db
def test_tenants_see_only_their_teams_efficiency(
    usage: dict[str, Any], alice_api: Any, bob_api: Any, admin_api: Any
) -> None:
    def ranking(client: Any) -> tuple[set[str], set[str], dict[str, float]]:
        body = client.get(f"{V1}/gpu/efficiency/?window=24h").json()
        teams = {t["name"] for t in body["teams"]}
        jobs = {j["name"]: j["totals"]["idle_gpu_hours"] for j in body["jobs"]}
        return teams, set(body["idle_gpu_hours_trend"]), jobs

    teams, trend, jobs = ranking(alice_api)
    assert teams == {"team-a"} and trend == {"team-a"}
    assert set(jobs) == {"team-a/a-train"} and jobs["team-a/a-train"] == 0
    teams, trend, jobs = ranking(bob_api)
    assert teams == {"team-b"} and trend == {"team-b"}
    # Half a card idle for 90 minutes: 0.75 GPU-hours.
    assert jobs == {"team-b/b-notebook": 0.75}
    teams, _, jobs = ranking(admin_api)
    assert teams == {"team-a", "team-b"} and next(iter(jobs)) == "team-b/b-notebook"


@pytest.mark.django_db
def test_card_history_names_only_the_tenants_own_jobs(
    usage: dict[str, Any], alice_api: Any, admin_api: Any
) -> None:
    rows = alice_api.get(f"{V1}/gpu/cards/?node=node-0&minor=0&limit=1000").json()["results"]
    assert {r["job"] for r in rows} == {"team-a/a-train", "another tenant's job"}
    assert {r["team"] for r in rows} == {"team-a", None}
    mine = [r for r in rows if r["job"] == "team-a/a-train"]
    assert len(mine) == 90 and mine[0]["allocated_percent"] == 50 and mine[0]["busy_percent"] == 45
    names = {
        r["job"] for r in admin_api.get(f"{V1}/gpu/cards/?node=node-0&minor=0").json()["results"]
    }
    assert names == {"team-a/a-train", "team-b/b-notebook"}


@pytest.mark.django_db
def test_job_usage_is_not_found_for_another_tenants_job(
    usage: dict[str, Any], alice_api: Any
) -> None:
    mine = alice_api.get(f"{V1}/jobs/{usage['a-train'].id}/usage/")
    assert mine.status_code == 200
    body = mine.json()
    assert (
        body["totals"]["allocated_gpu_hours"] == 0.75 and body["totals"]["efficiency_percent"] == 90
    )
    assert body["cards"][0]["card"] == "node-0 #0" and body["idle_since"] is None
    assert alice_api.get(f"{V1}/jobs/{usage['b-notebook'].id}/usage/").status_code == 404


@pytest.mark.django_db
def test_an_idle_job_carries_idle_since_and_is_flagged_past_its_teams_threshold(
    usage: dict[str, Any], world: Any, bob_api: Any
) -> None:
    body = bob_api.get(f"{V1}/jobs/{usage['b-notebook'].id}/").json()
    assert body["idle_since"] is not None and body["idle_gpu_hours"] == 0.75
    assert body["idle_flagged"] is True  # 90 minutes idle, threshold 60 by default
    world.team_b.gpu_idle_alert_minutes = 180
    world.team_b.save()
    listed = bob_api.get(f"{V1}/jobs/").json()["results"]
    notebook = next(j for j in listed if j["name"] == "b-notebook")
    assert notebook["idle_flagged"] is False and notebook["idle_since"] == body["idle_since"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("minor=0", "node"),
        ("node=node-0&minor=-1", "minor"),
        ("node=node-0&since=yesterday", "since"),
        ("node=node-0&since=2026-01-01T00:00:00Z&until=2025-01-01T00:00:00Z", "since"),
        ("node=node-0&since=2025-01-01T00:00:00Z&until=2026-01-01T00:00:00Z", "since"),
    ],
)
def test_bad_card_history_queries_answer_400_with_the_field(
    world: Any, alice_api: Any, query: str, field: str
) -> None:
    response = alice_api.get(f"{V1}/gpu/cards/?{query}")
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.django_db
def test_an_unknown_window_answers_400(world: Any, alice_api: Any) -> None:
    response = alice_api.get(f"{V1}/gpu/efficiency/?window=5y")
    assert response.status_code == 400 and "window" in response.json()
