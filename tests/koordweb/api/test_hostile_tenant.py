"""What one careless or hostile tenant can do to the others, found by probing the API: each case
was a 201 or a 500 before it was fixed, and one of them stopped every round of the cluster."""

from __future__ import annotations

import pytest

from koordweb.models import Job, Pod, Round
from koordweb.tasks import run_round

JOBS = "/api/v1/jobs/"


def yaml_pod(name: str, spec_extra: str = "", quota: str = "team-a") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: default
  labels: {{quota.scheduling.koordinator.sh/name: {quota}}}
spec:
  priorityClassName: koord-prod
{spec_extra}  containers:
  - name: main
    resources:
      requests: {{cpu: "4", nvidia.com/gpu: "1"}}
"""


def yaml_post(client, text):
    return client.generic("POST", JOBS, text.encode(), content_type="application/yaml")


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
