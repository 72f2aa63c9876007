"""Every page, as admin and as tenant, on the demo and on a generated 1,000-node cluster, after
real rounds: no engine field names, no Python literals, no e-notation, no server error.

The text checked is what a person reads: the page without its scripts, plus every string the
charts show (text, hover text, tick labels).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from benchmarks.e2e_scale import build_cluster
from koordweb.models import Cluster, Decision, Job, Preemption, Round
from koordweb.tasks import run_round

pytestmark = pytest.mark.django_db

FORBIDDEN = [
    re.compile(r"desiredOfferSlot"),
    re.compile(r"exceedDimensions"),
    re.compile(r"None slots"),
    re.compile(r"\{'"),
    re.compile(r"\b\d+(\.\d+)?e[+-]?\d+\b", re.I),
    # A round's metrics by their keys (the round page says them in words).
    re.compile(r"snapshot_changed_rows|engine_reused|warm_mismatch|\bcpu_ms\b|_ms\b"),
    re.compile(r"\bNone\b|\bTrue\b|\bFalse\b"),
]
SCALE = "scale-1000"
PAGES = [
    "overview",
    "overview-live",
    "topology",
    "devices",
    "jobs",
    "job-submit",
    "preemptions",
    "quotas",
    "rounds",
    "tokens",
    "import",
]
SHOWN = ("text", "hovertext", "ticktext", "name", "title", "y", "x", "labels")
SCRIPT = re.compile(r"<script[^>]*>(.*?)</script>", re.S)
TAG = re.compile(r"<[^>]+>")


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in SHOWN or isinstance(item, (dict, list)):
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def readable_text(html: str) -> str:
    """What a person reads: the page's text and the strings its charts show."""
    shown = [TAG.sub(" ", SCRIPT.sub(" ", html))]
    for body in SCRIPT.findall(html):
        if body.strip().startswith("{"):
            shown.extend(_strings(json.loads(body)))
    return "\n".join(shown)


def assert_plain(url: str, html: str) -> None:
    text = readable_text(html)
    for pattern in FORBIDDEN:
        found = pattern.search(text)
        assert found is None, (
            url,
            pattern.pattern,
            text[max(0, found.start() - 120) : found.end() + 120],
        )


@pytest.fixture
def clusters(settings: Any, tmp_path: Path) -> tuple[Cluster, Cluster]:
    settings.VAR_DIR = tmp_path
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    call_command("seed_demo", stdout=io.StringIO())
    demo = Cluster.objects.get(name=settings.KOORDWEB_CLUSTER)
    scale = build_cluster(SCALE, 1000, pending_pods=200)
    for cluster in (demo, scale):
        run_round(cluster.id)
    run_round(demo.id)  # a second round: its metrics describe the warm snapshot
    return demo, scale


def walk(client: Client, cluster: Cluster) -> int:
    """Every page and every detail page of the cluster; returns how many were checked."""
    checked = 0
    client.get(reverse("overview"), {"cluster": cluster.name})
    urls = [reverse(name) for name in PAGES]
    urls += [f"{reverse('jobs')}?state={state}" for state in ("pending", "all")]
    urls += [f"{reverse('jobs')}?state=all&page=2"]
    jobs = Job.objects.filter(cluster=cluster)
    for state in jobs.values_list("state", flat=True).distinct():
        for pk in jobs.filter(state=state).values_list("pk", flat=True)[:2]:
            urls.append(reverse("job-detail", args=[pk]))
    decided = Decision.objects.filter(job__cluster=cluster).order_by("outcome", "-id")
    for pk in decided.values_list("job_id", flat=True).distinct()[:4]:
        urls.append(reverse("job-detail", args=[pk]))
    # The first round (cold) and the newest (warm: its snapshot kept from the one before).
    rounds = Round.objects.filter(cluster=cluster).order_by("pk").values_list("pk", flat=True)
    for pk in {*rounds[:1], *rounds.reverse()[:1]}:
        urls.append(reverse("round-detail", args=[pk]))
    for pk in Preemption.objects.filter(cluster=cluster).values_list("pk", flat=True)[:1]:
        urls.append(reverse("preemption-detail", args=[pk]))
    for url in dict.fromkeys(urls):
        response = client.get(url)
        assert response.status_code < 500, (url, response.status_code)
        if response.status_code == 200:
            assert_plain(url, response.content.decode())
            checked += 1
    return checked


def test_every_page_in_plain_words_as_admin_and_tenant(clusters: tuple[Cluster, Cluster]) -> None:
    demo, scale = clusters
    assert Decision.objects.filter(job__cluster=demo).exists()
    assert Decision.objects.filter(job__cluster=scale).exists()
    assert scale.nodes.count() == 1000
    users = get_user_model().objects
    admin, tenant = users.get(username="admin"), users.get(username="alice")
    for user in (admin, tenant):
        client = Client()
        client.force_login(user)
        for cluster in (demo, scale):
            assert walk(client, cluster) >= 10, (user, cluster)


def test_the_check_catches_engine_words_in_text_and_charts() -> None:
    chart = '<script type="application/json">{"data": [{"hovertext": ["4.29497e+10"]}]}</script>'
    with pytest.raises(AssertionError):
        assert_plain("/", "<p>placed in nominated nodes (None slots for None pods)</p>")
    with pytest.raises(AssertionError):
        assert_plain("/", f"<p>fine</p>{chart}")
    with pytest.raises(AssertionError):
        assert_plain("/", "<dd>{'pdb_violations': {}}</dd>")
    assert_plain("/", '<p>8 GiB</p><script src="/static/x.js"></script>')
