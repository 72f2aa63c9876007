"""What one careless or hostile tenant can do to the others, found by probing the API: each case
was a 201 or a 500 before it was fixed, and one of them stopped every round of the cluster."""

from __future__ import annotations

import pytest

from koordweb.models import Job, Pod, Round
from koordweb.tasks import run_round
from tests.koordweb.api.test_manifest_submission import pod, yaml_post

JOBS = "/api/v1/jobs/"


def yaml_pod(name: str, spec_extra: str = "", quota: str = "team-a") -> str:
    """A pod of no PodGroup asking for one GPU."""
    return pod(name, group="", quota=quota, gpus=1, spec_extra=spec_extra)


@pytest.mark.parametrize(
    ("affinity", "field"),
    [
        ("x", "spec.affinity"),
        ("{nodeAffinity: x}", "spec.affinity.nodeAffinity"),
        ("[1, 2]", "spec.affinity"),
        (
            "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: x}}",
            "requiredDuringSchedulingIgnoredDuringExecution",
        ),
        (
            "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
            "{nodeSelectorTerms: []}}}",
            "nodeSelectorTerms",
        ),
        (
            "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchExpressions: [{key: zone, operator: In, values: 5}]}]}}}",
            "matchExpressions[0].values",
        ),
        (
            "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchExpressions: [{key: zone, operator: Near, values: [a]}]}]}}}",
            "matchExpressions[0].operator",
        ),
        (
            "{nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: "
            "[{weight: 500, preference: {}}]}}",
            "weight",
        ),
        (  # a required term's In values are label values (300,000 characters got a 201)
            "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchExpressions: [{key: zone, operator: In, values: [" + "x" * 300 + "]}]}]}}}",
            "matchExpressions[0].values[0]",
        ),
        (  # the API server's rule: matchFields selects by metadata.name only
            "{nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: "
            "[{matchFields: [{key: metadata.labels, operator: In, values: [node-1]}]}]}}}",
            "matchFields",
        ),
    ],
)
def test_an_affinity_the_api_server_refuses_is_a_400(alice_api, world, affinity, field):
    jobs, pods = Job.objects.count(), Pod.objects.count()
    response = yaml_post(alice_api, yaml_pod("bad", f"  affinity: {affinity}\n"))
    assert response.status_code == 400, response.content
    assert field in response.content.decode()
    assert (Job.objects.count(), Pod.objects.count()) == (jobs, pods)


def test_a_stored_affinity_nobody_can_read_fails_no_round(alice_api, bob_api, world):
    good = yaml_post(bob_api, yaml_pod("fine", quota="team-b"))
    bad = yaml_post(alice_api, yaml_pod("odd"))
    assert good.status_code == bad.status_code == 201
    # Written before the doors checked it (or by hand): the round must still run for everyone.
    Pod.objects.filter(job_id=bad.json()["id"]).update(affinity={"nodeAffinity": "x"})
    run_round(world.cluster.id)
    last = Round.objects.filter(cluster=world.cluster).latest("id")
    assert last.state == Round.State.SUCCEEDED, last.error
    assert Pod.objects.get(name="fine").node_id is not None
    assert Pod.objects.get(name="odd").node_id is None


def test_a_submission_is_told_what_koordinator_would_not_use(alice_api, world):
    """An import of existing objects takes Koordinator's defaults with a warning; a submission
    is refused instead, naming the annotation, and nothing is written."""
    gang = (
        "  annotations:\n"
        "    gang.scheduling.koordinator.sh/name: g\n"
        "    gang.scheduling.koordinator.sh/min-available: '1'\n"
        "    gang.scheduling.koordinator.sh/mode: strict\n"
    )
    text = yaml_pod("g-0").replace("  labels:", gang + "  labels:")
    jobs = Job.objects.count()
    response = yaml_post(alice_api, text)
    assert response.status_code == 400, response.content
    assert "gang.scheduling.koordinator.sh/mode" in response.json()["manifest"][0]
    assert Job.objects.count() == jobs


def test_a_json_jobs_labels_cannot_join_another_teams_pod_group(alice_api, world):
    for key in ("pod-group.scheduling.sigs.k8s.io", "quota.scheduling.koordinator.sh/name"):
        body = {
            "name": "sneaky",
            "quota": "team-a",
            "labels": {key: "bravo"},
            "pod": {"requests": {"cpu": "1"}},
        }
        response = alice_api.post(JOBS, body, format="json")
        assert response.status_code == 400, response.content
        assert f"labels.{key}" in response.json()
    assert not Job.objects.filter(name="sneaky").exists()


def test_a_token_that_is_not_ascii_is_a_401(anon_api):
    for path in (JOBS, "/api/v1/nodes/"):
        response = anon_api.get(path, HTTP_AUTHORIZATION="Token \xe9\xe9")
        assert response.status_code == 401, response.content
        assert response["Content-Type"].startswith("application/json")


def test_a_replay_after_leaving_the_quota_is_a_404_not_a_500(alice_api, world):
    body = {"name": "replayed", "quota": "team-a", "pod": {"requests": {"cpu": "1"}}}
    first = alice_api.post(JOBS, body, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert first.status_code == 201, first.content
    world.team_a.members.remove(world.alice)
    again = alice_api.post(JOBS, body, format="json", HTTP_IDEMPOTENCY_KEY="k1")
    assert again.status_code == 404, again.content
    assert "no longer visible" in again.json()["detail"]
    assert Job.objects.filter(name="replayed").count() == 1


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("/api/v1/gpu/efficiency/?until=0001-01-01T00:00:00Z", "until"),
        ("/api/v1/gpu/efficiency/?window=30d&until=0001-01-20T00:00:00Z", "until"),
        ("/api/v1/jobs/?submitted_after=9999-12-31T23:59:59-23:59", "submitted_after"),
        ("/api/v1/rounds/?started_after=0001-01-01T00:00:00%2B01:00", "started_after"),
    ],
)
def test_dates_at_the_edge_of_time_are_a_400_naming_the_parameter(alice_api, path, field):
    response = alice_api.get(path)
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()


def test_more_than_a_thousand_query_parameters_answer_in_json(alice_api):
    response = alice_api.get(JOBS + "?" + "&".join(["state=Pending"] * 1001))
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert "query parameters" in response.json()["detail"]


def test_a_tenant_cannot_use_a_system_priority_class(alice_api, admin_api, world):
    from koordweb.models import PriorityClass

    PriorityClass.objects.create(
        cluster=world.cluster, name="system-cluster-critical", value=2_000_000_000
    )
    PriorityClass.objects.create(cluster=world.cluster, name="ops-critical", value=1_500_000_000)
    for name in ("system-cluster-critical", "ops-critical"):
        body = {"name": f"vip-{name[:3]}", "quota": "team-a", "priority_class": name}
        body["pod"] = {"requests": {"cpu": "1"}}
        response = alice_api.post(JOBS, body, format="json")
        assert response.status_code == 400, response.content
        assert "system priority class" in response.json()["priority_class"][0]
    text = yaml_pod("vip-yaml").replace("koord-prod", "system-cluster-critical")
    assert yaml_post(alice_api, text).status_code == 400
    assert not Job.objects.filter(name__startswith="vip").exists()
    # The cluster's own components (an admin) still may.
    body = {"name": "vip-ops", "quota": "team-a", "priority_class": "system-cluster-critical"}
    body["pod"] = {"requests": {"cpu": "1"}}
    assert admin_api.post(JOBS, body, format="json").status_code == 201


def test_a_container_cannot_ask_for_pods(alice_api, world):
    body = {"name": "greedy", "quota": "team-a", "replicas": 4}
    body["pod"] = {"requests": {"cpu": "1", "pods": "9223372036854775807"}}
    response = alice_api.post(JOBS, body, format="json")
    assert response.status_code == 400, response.content
    assert "'pods' is not a resource a container can ask for" in str(response.json())
    text = yaml_pod("greedy-yaml").replace('nvidia.com/gpu: "1"', 'pods: "100"')
    response = yaml_post(alice_api, text)
    assert response.status_code == 400 and "pods" in response.content.decode()
    assert not Job.objects.filter(name__startswith="greedy").exists()
