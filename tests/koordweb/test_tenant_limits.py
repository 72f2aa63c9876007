"""Issue #36 item 1: a per-team limit on what waits (ResourceQuota's count/pods idea). Five jobs
of 4,096 pods that could never fit were all accepted and slowed every round and every other
team's what-if; now a quota's `max_pending_jobs` and `max_pending_pods` refuse the job past them
with a 429 that names the limit and what is left, at the JSON and the YAML door alike."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches

from koordweb.models import ElasticQuota, Job, JobState
from tests.builders import Teams, submission, teams, token_client
from tests.koordweb.api.test_manifest_submission import pod, yaml_post

NOWHERE = {"requests": {"cpu": "1"}, "node_selector": {"nowhere": "x"}}


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "lim"}
    }
    caches["default"].clear()
    caches["default"].add("round-requested:1", "test", timeout=300)


@pytest.fixture
def world(db: Any) -> Teams:
    return teams()


def _submit(client, name: str, replicas: int = 1):
    body = submission(name=name, replicas=replicas, pod=NOWHERE, topology=None)
    return client.post("/api/v1/jobs/", body, format="json")


def test_defaults_are_set_on_every_quota(world):
    quota = ElasticQuota.objects.get(pk=world.team_a.pk)
    assert (quota.max_pending_jobs, quota.max_pending_pods) == (500, 8192)


def test_waiting_jobs_past_the_limit_are_a_429(world):
    ElasticQuota.objects.filter(pk=world.team_a.pk).update(max_pending_jobs=2)
    alice = token_client(world.alice)
    assert [_submit(alice, f"wait-{i}").status_code for i in range(2)] == [201, 201]
    refused = _submit(alice, "wait-2")
    assert refused.status_code == 429, refused.content
    body = refused.json()
    assert (body["limit"], body["limit_value"], body["remaining"]) == ("max_pending_jobs", 2, 0)
    assert "max_pending_jobs" in body["quota"][0]
    # Another team is not held to team-a's limit.
    bob = token_client(world.bob)
    assert (
        bob.post(
            "/api/v1/jobs/",
            submission(name="b", quota="team-b", pod=NOWHERE, topology=None),
            format="json",
        ).status_code
        == 201
    )
    # Once a waiting job leaves the queue there is room again.
    Job.objects.filter(name="wait-0").update(state=JobState.CANCELLED)
    assert _submit(alice, "wait-3").status_code == 201


def test_waiting_pods_past_the_limit_are_a_429_saying_what_is_left(world):
    ElasticQuota.objects.filter(pk=world.team_a.pk).update(max_pending_pods=5)
    alice = token_client(world.alice)
    assert _submit(alice, "four", replicas=4).status_code == 201
    refused = _submit(alice, "two", replicas=2)
    assert refused.status_code == 429
    assert (refused.json()["limit"], refused.json()["remaining"]) == ("max_pending_pods", 1)
    assert _submit(alice, "one", replicas=1).status_code == 201


def test_the_yaml_door_is_held_to_the_same_limit(world):
    ElasticQuota.objects.filter(pk=world.team_a.pk).update(max_pending_pods=1)
    alice = token_client(world.alice)
    assert _submit(alice, "first").status_code == 201
    response = yaml_post(alice, pod("lone", group=""))
    assert response.status_code == 429, response.content
    assert response.json()["limit"] == "max_pending_pods"
    assert not Job.objects.filter(name="lone").exists()
