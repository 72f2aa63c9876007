"""The demo's GPU monitoring story through the pages and /metrics: busy and idle cards on the
devices heatmap, a non-empty efficiency ranking, one flagged idle job, tenants scoped."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from koordweb.backends.simulated_usage import node_metrics_report
from koordweb.models import Cluster, Job
from koordweb.services.demo import demo_seed
from koordweb.services.gpu_usage import gpu_samples_ingest


@pytest.fixture
def demo(db: Any, settings: Any, tmp_path: Any) -> Cluster:
    """The seeded demo after five minutes of the simulated koordlet and ingest."""
    settings.VAR_DIR = tmp_path
    settings.KOORDWEB_CLUSTER = "default"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    demo_seed()
    cluster = Cluster.objects.get(name="default")
    now = timezone.now()
    for minute in range(1, 6):
        moment = now + timedelta(minutes=minute)
        node_metrics_report(cluster, now=moment)
        gpu_samples_ingest(cluster=cluster, now=moment)
    cluster.refresh_from_db()
    return cluster


def client_for(username: str) -> Client:
    client = Client()
    client.force_login(get_user_model().objects.get(username=username))
    return client


def figure(response: Any, name: str) -> dict[str, Any]:
    html = response.content.decode()
    start = html.index(f'<script id="{name}" type="application/json">') + len(name) + 38
    return json.loads(html[start : html.index("</script>", start)])


def test_devices_utilisation_shows_busy_and_idle_cards(demo: Cluster) -> None:
    response = client_for("admin").get("/devices/?view=utilisation&vendor=nvidia")
    assert response.status_code == 200
    z = [v for row in figure(response, "fig-heatmap")["data"][0]["z"] for v in row]
    assert any(v is not None and v >= 80 for v in z), "no busy card"
    assert any(v == 0 for v in z), "no idle card"


def test_devices_idle_view_marks_the_notebook_red(demo: Cluster) -> None:
    response = client_for("admin").get("/devices/?view=idle&vendor=huawei")
    data = figure(response, "fig-heatmap")["data"][0]
    red = [
        hover
        for zrow, hrow in zip(data["z"], data["hovertext"], strict=True)
        for z, hover in zip(zrow, hrow, strict=True)
        if z == 100
    ]
    assert len(red) == 1 and "jupyter-notebook" in red[0] and "over its team" in red[0]


def test_efficiency_ranks_the_idle_notebook_first_and_tenants_see_their_teams(
    demo: Cluster,
) -> None:
    page = client_for("admin").get("/efficiency/?window=24h").content.decode()
    assert "team-vision/jupyter-notebook" in page and "team-speech/speech-sweep" in page
    bars = figure(client_for("admin").get("/efficiency/?window=24h"), "fig-jobs")["data"]
    idle = dict(zip(bars[0]["y"], bars[0]["x"], strict=True))
    assert list(idle.values()) == sorted(idle.values(), reverse=True)
    # The crashed sweep held 4 cards idle for almost 3 hours; the notebook 1 card for 5.
    assert list(idle)[:2] == ["team-speech/speech-sweep", "team-vision/jupyter-notebook"]
    assert idle["team-vision/jupyter-notebook"] == pytest.approx(5, abs=0.1)
    bob = client_for("bob").get("/efficiency/?window=24h").content.decode()
    assert "team-nlp/nightly-eval" in bob and "jupyter-notebook" not in bob
    assert "team-vision" not in bob


def test_one_idle_job_is_flagged_on_the_jobs_list_and_the_overview(demo: Cluster) -> None:
    jobs = client_for("admin").get("/jobs/").content.decode()
    assert jobs.count("idle-flag") == 1 and "NPUs idle for 5 h" in jobs
    overview = client_for("admin").get("/").content.decode()
    assert 'data-count="idle-jobs">1<' in overview
    assert 'data-count="unhealthy-cards">0<' in overview
    notebook = Job.objects.get(name="jupyter-notebook")
    page = client_for("alice").get(f"/jobs/{notebook.pk}/").content.decode()
    assert "Idle NPUs: its cards have been idle for 5 h" in page
    assert "fig-gpu-usage" in page
    assert client_for("bob").get(f"/jobs/{notebook.pk}/").status_code == 404


def test_unhealthy_cards_are_counted_and_listed_on_the_overview(demo: Cluster) -> None:
    from koordweb.models import Device

    card = Device.objects.filter(device_type="gpu").order_by("node__name", "minor").first()
    assert card is not None
    card.health = False
    card.save()
    overview = client_for("admin").get("/").content.decode()
    assert 'data-count="unhealthy-cards">1<' in overview
    assert f"{card.node.name} #{card.minor}" in overview


def test_metrics_expose_each_card_with_job_and_team_labels(demo: Cluster, client: Client) -> None:
    text = client.get("/metrics", REMOTE_ADDR="127.0.0.1").content.decode()
    busy = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "koordweb_gpu_busy_percent"
    }
    notebook = [labels for labels in busy if ("job", "jupyter-notebook") in labels]
    assert len(notebook) == 1
    labels = dict(notebook[0])
    assert labels["team"] == "team-vision" and labels["model"] == "Ascend-910B3"
    assert busy[notebook[0]] <= 1
    # One series per card holder: every gpu card once, shared cards once per extra holder.
    assert len(busy) >= 72 * 8
    idle = [
        s
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "koordweb_gpu_idle_jobs"
    ]
    assert [(s.labels["team"], s.value) for s in idle] == [("team-vision", 1)]
