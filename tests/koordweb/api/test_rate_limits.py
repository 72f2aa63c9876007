"""Issue #36 items 4 and 9: rate limits per user and per team with an atomic counter, a cap on a
user's live tokens, and the answers that show a new token kept out of every cache."""

from __future__ import annotations

import threading
import time

from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from koordweb.api.throttles import window_count
from koordweb.services.tokens import DEFAULT_MAX_TOKENS_PER_USER, token_create
from tests.builders import UserFactory, token_client
from tests.koordweb.api.test_manifest_submission import pod, yaml_post

NODES = "/api/v1/nodes/"


def test_a_team_shares_one_budget(world, settings):
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"user": "100/min", "team": "3/min", "anon": "3/min"},
    }
    carol = UserFactory(username="carol")
    world.team_a.members.add(carol)
    alice, second = token_client(world.alice), token_client(carol)
    assert [alice.get(NODES).status_code for _ in range(2)] == [200, 200]
    assert second.get(NODES).status_code == 200
    refused = second.get(NODES)
    assert refused.status_code == 429
    assert "per team" in refused.json()["detail"] and refused.has_header("Retry-After")
    assert token_client(world.bob).get(NODES).status_code == 200  # team-b's own budget


def test_the_counter_loses_no_update_under_concurrency():
    """DRF's history was read, appended and written back: concurrent requests lost counts."""
    now = time.time()
    barrier = threading.Barrier(16)

    def hit() -> None:
        barrier.wait()
        for _ in range(25):
            window_count("test:concurrent", 3600, now)

    threads = [threading.Thread(target=hit) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert window_count("test:concurrent", 3600, now)[0] == 16 * 25 + 1


def test_live_tokens_per_user_are_capped(world, settings):
    settings.ROOT_URLCONF = "koordweb.urls"  # the tokens page too
    settings.KOORDWEB_MAX_TOKENS_PER_USER = 3
    for _ in range(3):
        token_create(user=world.bob)
    session = APIClient()
    session.force_login(world.bob)
    refused = session.post("/api/v1/tokens/", {}, format="json")
    assert refused.status_code == 400
    assert "at most 3 live tokens" in refused.json()["tokens"][0]
    page = Client()
    page.force_login(world.bob)
    answer = page.post(reverse("tokens"), {"expiry_days": 7})
    assert answer.status_code == 400 and "data-new-token" not in answer.content.decode()


def test_the_default_cap_is_ten():
    assert DEFAULT_MAX_TOKENS_PER_USER == 10


def test_a_new_token_is_never_cached(world, settings):
    settings.ROOT_URLCONF = "koordweb.urls"  # the tokens page too
    session = APIClient()
    session.force_login(world.bob)
    created = session.post("/api/v1/tokens/", {"expiry_days": 1}, format="json")
    assert created.status_code == 201
    assert "no-store" in created["Cache-Control"]
    page = Client()
    page.force_login(world.bob)
    shown = page.post(reverse("tokens"), {"expiry_days": 1})
    assert "data-new-token" in shown.content.decode()
    assert "no-store" in shown["Cache-Control"]


def test_pod_anti_affinity_is_refused_not_ignored(alice_api, world):
    affinity = (
        "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:"
        "\n      - {labelSelector: {matchLabels: {app: x}}, topologyKey: kubernetes.io/hostname}\n"
    )
    response = yaml_post(alice_api, pod("spread", group="", gpus=1, spec_extra=affinity))
    assert response.status_code == 400, response.content
    assert "does not place by inter-pod anti-affinity" in response.content.decode()
