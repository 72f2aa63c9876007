"""The authorization matrix: anonymous, tenant A, tenant B and admin against every endpoint.

A tenant must never read or change another tenant's job: foreign objects answer 404 (never 403
with details), and lists simply leave them out.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from rest_framework.test import APIClient

from koordweb.models import Job, JobState
from tests import builders as f
from tests.builders import submission, token_client

V1 = "/api/v1/"
READ_ENDPOINTS = [
    "jobs/",
    "nodes/",
    "devices/",
    "topology/",
    "topology/layers/",
    "quotas/",
    "quotas/tree/",
    "priority-classes/",
    "rounds/",
    "preemptions/",
    "tokens/",
]


@pytest.fixture
def scene(world):
    job_a = f.JobFactory(cluster=world.cluster, quota=world.team_a, name="a-job")
    job_b = f.JobFactory(cluster=world.cluster, quota=world.team_b, name="b-job")
    f.DecisionFactory(job=job_b, reason="secret reason of B")
    b_only = f.PreemptionFactory(preemptor=job_b)
    f.VictimFactory(preemption=b_only, job=f.JobFactory(cluster=world.cluster, quota=world.team_b))
    clients = {
        "anonymous": APIClient(),
        "alice": token_client(world.alice),
        "bob": token_client(world.bob),
        "admin": token_client(world.admin),
    }
    return SimpleNamespace(
        world=world, jobs={"a": job_a, "b": job_b}, b_only=b_only, clients=clients
    )


@pytest.mark.parametrize("endpoint", READ_ENDPOINTS)
def test_anonymous_is_refused_everywhere(scene, endpoint):
    clients = scene.clients
    response = clients["anonymous"].get(V1 + endpoint)
    assert response.status_code == 401
    assert "credentials" in response.json()["detail"].lower()


@pytest.mark.parametrize("endpoint", READ_ENDPOINTS)
@pytest.mark.parametrize("who", ["alice", "bob", "admin"])
def test_authenticated_reads_answer(scene, endpoint, who):
    clients = scene.clients
    assert clients[who].get(V1 + endpoint).status_code == 200


def _ids(response):
    return {item["id"] for item in response.json()["results"]}


@pytest.mark.parametrize(("who", "own", "foreign"), [("alice", "a", "b"), ("bob", "b", "a")])
def test_tenants_see_only_their_jobs(scene, who, own, foreign):
    clients = scene.clients
    jobs = scene.jobs
    client = clients[who]
    listed = _ids(client.get(V1 + "jobs/"))
    assert jobs[own].pk in listed and jobs[foreign].pk not in listed
    for suffix in ["", "explain/"]:
        response = client.get(f"{V1}jobs/{jobs[foreign].pk}/{suffix}")
        assert response.status_code == 404
        assert "secret" not in response.content.decode()
    assert client.get(f"{V1}jobs/{jobs[own].pk}/").status_code == 200


@pytest.mark.parametrize(("who", "foreign"), [("alice", "b"), ("bob", "a")])
def test_tenants_cannot_cancel_foreign_jobs(scene, who, foreign):
    clients = scene.clients
    target = scene.jobs[foreign]
    response = clients[who].post(f"{V1}jobs/{target.pk}/cancel/")
    assert response.status_code == 404
    target.refresh_from_db()
    assert target.state == JobState.PENDING


@pytest.mark.parametrize(("who", "foreign_quota"), [("alice", "team-b"), ("bob", "team-a")])
def test_tenants_cannot_submit_into_foreign_quotas(scene, who, foreign_quota):
    clients = scene.clients
    before = Job.objects.count()
    response = clients[who].post(
        V1 + "jobs/", submission(name="sneaky", quota=foreign_quota), format="json"
    )
    assert response.status_code == 400
    assert "not a member" in response.json()["quota"][0]
    assert Job.objects.count() == before


def test_preemptions_only_where_the_tenant_is_involved(scene):
    clients = scene.clients
    assert clients["alice"].get(V1 + "preemptions/").json()["count"] == 0
    assert clients["alice"].get(f"{V1}preemptions/{scene.b_only.pk}/").status_code == 404
    assert clients["bob"].get(V1 + "preemptions/").json()["count"] == 1
    assert clients["admin"].get(V1 + "preemptions/").json()["count"] == 1


def test_admin_sees_and_cancels_everything(scene):
    clients = scene.clients
    admin = clients["admin"]
    assert {scene.jobs["a"].pk, scene.jobs["b"].pk} <= _ids(admin.get(V1 + "jobs/"))
    assert admin.post(f"{V1}jobs/{scene.jobs['b'].pk}/cancel/").status_code == 200


def test_tokens_are_private(scene):
    clients = scene.clients
    alice_tokens = clients["alice"].get(V1 + "tokens/").json()
    bob_tokens = clients["bob"].get(V1 + "tokens/").json()
    assert len(alice_tokens) == 1 and len(bob_tokens) == 1
    alice_key = alice_tokens[0]["token_key"]
    assert clients["bob"].delete(f"{V1}tokens/{alice_key}/").status_code == 404
    assert clients["alice"].get(V1 + "tokens/").status_code == 200
