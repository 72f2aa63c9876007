"""jobs/: submission, listing, detail, cancellation, explanation."""

from __future__ import annotations

import json

import pytest

from koordweb.models import Job, JobState, Pod
from tests import builders as f
from tests.builders import submission

JOBS = "/api/v1/jobs/"


def test_submit_creates_the_job_and_its_pods(alice_api, world):
    response = alice_api.post(JOBS, submission(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert job.owner == world.alice
    assert job.quota == world.team_a
    assert job.priority == 9000
    assert job.total_number == 2 and job.min_available == 2
    assert job.topology_spec == {
        "gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]
    }
    pods = list(job.pods.order_by("name"))
    assert [p.name for p in pods] == ["train-0", "train-1"]
    assert pods[0].requests == {"cpu": 8000, "memory": 64 * 2**30, "nvidia.com/gpu": 4}
    assert pods[0].labels["quota.scheduling.koordinator.sh/name"] == "team-a"
    annotation = pods[0].annotations["gang.scheduling.koordinator.sh/network-topology-spec"]
    assert json.loads(annotation) == job.topology_spec
    assert [p["name"] for p in body["pods"]] == ["train-0", "train-1"]
    assert body["state"] == "Pending" and body["decisions"] == []


def test_default_priority_class_applies(alice_api, world):
    response = alice_api.post(JOBS, submission(priority_class=None), format="json")
    assert response.status_code == 201
    assert response.json()["priority_class"] == "koord-batch"
    assert response.json()["priority"] == 5000


def test_idempotency_key_returns_the_original(alice_api, world):
    first = alice_api.post(JOBS, submission(), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = alice_api.post(JOBS, submission(), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == 201 and again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert Job.objects.count() == 1 and Pod.objects.count() == 2


def test_same_key_for_another_user_is_another_job(alice_api, bob_api, world):
    a = alice_api.post(JOBS, submission(), format="json", HTTP_IDEMPOTENCY_KEY="k")
    b = bob_api.post(
        JOBS, submission(name="b", quota="team-b"), format="json", HTTP_IDEMPOTENCY_KEY="k"
    )
    assert a.status_code == b.status_code == 201
    assert a.json()["id"] != b.json()["id"]


def test_list_filters_and_orders(alice_api, world):
    f.JobFactory(cluster=world.cluster, name="old", quota=world.team_a, priority=1)
    f.JobFactory(
        cluster=world.cluster, name="run", quota=world.team_a, state=JobState.RUNNING, priority=7
    )
    f.JobFactory(cluster=world.cluster, name="theirs", quota=world.team_b)
    names = [j["name"] for j in alice_api.get(JOBS + "?ordering=priority").json()["results"]]
    assert names == ["old", "run"]
    running = alice_api.get(JOBS + "?state=Running").json()
    assert [j["name"] for j in running["results"]] == ["run"] and running["count"] == 1
    assert alice_api.get(JOBS + "?quota=team-b").json()["count"] == 0
    assert alice_api.get(JOBS + "?submitted_after=2999-01-01T00:00:00Z").json()["count"] == 0


def test_detail_has_pods_placement_and_decisions(alice_api, world):
    job = f.JobFactory(cluster=world.cluster, quota=world.team_a, state=JobState.RUNNING)
    f.PodFactory(job=job, name="p-0", node=world.nodes[1])
    f.PodFactory(job=job, name="p-1", node=world.nodes[1])
    f.DecisionFactory(job=job, outcome="placed", reason="fits b1")
    body = alice_api.get(f"{JOBS}{job.pk}/").json()
    assert body["placement"] == {"node-1": 2}
    assert [d["reason"] for d in body["decisions"]] == ["fits b1"]


def test_cancel_then_cancel_again_conflicts(alice_api, world):
    job_id = alice_api.post(JOBS, submission(), format="json").json()["id"]
    response = alice_api.post(f"{JOBS}{job_id}/cancel/")
    assert response.status_code == 200 and response.json()["state"] == "Cancelled"
    assert set(Pod.objects.filter(job_id=job_id).values_list("phase", flat=True)) == {"Failed"}
    again = alice_api.post(f"{JOBS}{job_id}/cancel/")
    assert again.status_code == 409 and "already cancelled" in again.json()["detail"]


def test_explain_pending_placed_and_preempted(alice_api, bob_api, world):
    job = f.JobFactory(cluster=world.cluster, quota=world.team_a)
    f.DecisionFactory(
        job=job,
        reason="needs 8 more GPUs of quota",
        details={"counterfactual": "fits b2 if job default/x is preempted"},
    )
    explained = alice_api.get(f"{JOBS}{job.pk}/explain/").json()
    assert explained["why_pending"]["counterfactual"] == "fits b2 if job default/x is preempted"
    assert explained["why_here"] is None

    placed = f.JobFactory(cluster=world.cluster, quota=world.team_a, state=JobState.PREEMPTED)
    f.PodFactory(job=placed, name="q-0", node=world.nodes[0])
    f.DecisionFactory(
        job=placed,
        outcome="placed",
        reason="binpack",
        details={
            "chosen_domain": "BlockLayer/b0",
            "chosen_offer_slots": 1,
            "desired_offer_slots": 1,
            "alternatives": {"BlockLayer/b0": 1, "BlockLayer/b1": 2},
        },
    )
    preemptor = f.JobFactory(cluster=world.cluster, quota=world.team_b, name="big", priority=9000)
    f.VictimFactory(preemption=f.PreemptionFactory(preemptor=preemptor), job=placed)
    explained = alice_api.get(f"{JOBS}{placed.pk}/explain/").json()
    assert explained["why_here"]["pods"] == {"q-0": "node-0"}
    assert explained["why_here"]["domain"] == "BlockLayer/b0"
    assert explained["why_here"]["alternatives"]["BlockLayer/b1"] == 2
    # The preemptor is team B's job: alice learns its priority, not its name (issue #16).
    assert explained["why_preempted"][0]["preemptor"] is None
    assert explained["why_preempted"][0]["preemptor_priority"] == 9000
    assert explained["why_preempted"][0]["cost"]["victim_jobs"] == 1
    assert bob_api.get(f"{JOBS}{placed.pk}/explain/").status_code == 404


def test_list_query_count_does_not_grow(alice_api, world, django_assert_max_num_queries):
    for i in range(30):
        f.JobFactory(cluster=world.cluster, quota=world.team_a, name=f"j{i}")
    with django_assert_max_num_queries(6):
        response = alice_api.get(JOBS)
    assert response.json()["count"] == 30


def test_detail_query_count_does_not_grow(alice_api, world, django_assert_max_num_queries):
    job = f.JobFactory(cluster=world.cluster, quota=world.team_a)
    for i in range(20):
        f.PodFactory(job=job, name=f"p{i}", node=world.nodes[i % 4])
        f.DecisionFactory(job=job)
    with django_assert_max_num_queries(7):
        response = alice_api.get(f"{JOBS}{job.pk}/")
    assert len(response.json()["pods"]) == 20


@pytest.mark.parametrize("user", ["alice", "admin"])
def test_admin_and_member_see_the_job(world, user, request):
    job = f.JobFactory(cluster=world.cluster, quota=world.team_a)
    client = request.getfixturevalue(f"{user}_api")
    assert client.get(f"{JOBS}{job.pk}/").status_code == 200
