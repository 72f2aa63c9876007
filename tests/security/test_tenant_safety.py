"""Issue #16, "Tenant safety": one test (or more) per finding, each failing on the code before.

The hostile-tenant column of the authorization matrix covers findings 1 and 4 field by field;
here are the scenarios as the issue tells them, and findings 2, 3, 5, 6, 7 and 10. Finding 8
(lockout per account) is in test_login_rate_limit.py, finding 9 (Swagger UI under the CSP) in
tests/e2e/test_api_docs_browser.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.test import Client
from django.utils import timezone

from koordweb.models import (
    Decision,
    ElasticQuota,
    Job,
    JobState,
    Pod,
    PodPhase,
    PriorityClass,
    Round,
)
from tests.builders import B_SECRET, Tenants
from tests.security.hostile import valid_documents
from tests.security.urlwalk import routes

JOBS = "/api/v1/jobs/"
DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
# Replaced by a 5,000-digit integer literal in the YAML text (Python refuses to make the int).
HUGE_INT = "HUGE_INT"


def client_for(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def post_yaml(client: Client, documents: list[dict[str, Any]], **headers: Any) -> Any:
    text = yaml.safe_dump_all(documents).replace(HUGE_INT, "9" * 5000)
    return client.generic("POST", JOBS, text.encode(), content_type="application/yaml", **headers)


def written() -> tuple[int, int]:
    return Job.objects.count(), Pod.objects.count()


def test_1_a_pod_cannot_bring_its_own_device_allocation(world: Tenants) -> None:
    """1 CPU asked, all eight cards claimed by annotation, pinned by a node selector: refused."""
    documents = valid_documents(world.a.quota.name, world.a.quota.namespace, "cards")
    pod = documents["Pod"]
    cards = [{"minor": minor, "resources": {"koordinator.sh/gpu-core": 100}} for minor in range(8)]
    pod["metadata"]["annotations"][DEVICE_ALLOCATED] = json.dumps({"gpu": cards})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": world.node.name}
    before = written()
    response = post_yaml(client_for(world.a.user), [documents["PodGroup"], pod])
    assert response.status_code == 400, response.content
    assert f"metadata.annotations.{DEVICE_ALLOCATED}" in response.json()
    assert written() == before


def test_1_an_admin_import_keeps_the_allocation(world: Tenants) -> None:
    """Admins are not held to the tenant policy: a cluster dump keeps full fidelity."""
    documents = valid_documents(world.a.quota.name, world.a.quota.namespace, "dumped")
    pod = documents["Pod"]
    pod["metadata"]["annotations"][DEVICE_ALLOCATED] = json.dumps({"gpu": [{"minor": 0}]})
    response = post_yaml(client_for(world.admin), [documents["PodGroup"], pod])
    assert response.status_code == 201, response.content
    stored = Pod.objects.get(name="dumped-0")
    assert DEVICE_ALLOCATED in stored.annotations


def test_2_a_quota_names_its_namespaces_koordinator_style(world: Tenants) -> None:
    """The quota's own namespace and `quota.scheduling.koordinator.sh/namespaces` are the team's;
    any other is refused, JSON or YAML."""
    quota = world.a.quota
    quota.namespace = "alpha"
    quota.annotations = {"quota.scheduling.koordinator.sh/namespaces": '["alpha-dev"]'}
    quota.save()
    client = client_for(world.a.user)
    for namespace, expected in (("alpha", 201), ("alpha-dev", 201), ("bravo", 400)):
        body = {
            "name": f"in-{namespace}",
            "namespace": namespace,
            "quota": quota.name,
            "pod": {"requests": {"cpu": "1"}},
        }
        response = client.post(JOBS, body, content_type="application/json")
        assert response.status_code == expected, (namespace, response.content)
    assert "namespace" in response.json()


def test_2_the_quota_api_shows_and_checks_the_namespaces(world: Tenants) -> None:
    admin = client_for(world.admin)
    path = f"/api/v1/quotas/{world.a.quota.pk}/"
    bad = {"annotations": {"quota.scheduling.koordinator.sh/namespaces": "alpha-dev"}}
    response = admin.patch(path, bad, content_type="application/json")
    assert response.status_code == 400 and "annotations" in response.json()
    good = {"annotations": {"quota.scheduling.koordinator.sh/namespaces": '["alpha-dev"]'}}
    assert admin.patch(path, good, content_type="application/json").status_code == 200
    seen = client_for(world.a.user).get(path).json()
    assert seen["namespaces"] == ["alpha-dev", "default"]


def test_2_a_name_collision_answers_the_same_for_anyones_job(world: Tenants) -> None:
    """Tenant A reusing B's job name learns what it would learn about its own: the name is taken."""
    client = client_for(world.a.user)

    def submit(name: str) -> Any:
        body = {"name": name, "quota": world.a.quota.name, "pod": {"requests": {"cpu": "1"}}}
        return client.post(JOBS, body, content_type="application/json")

    theirs, mine = submit(world.b.job.name), submit(world.a.job.name)
    assert theirs.status_code == mine.status_code == 400
    assert theirs.json()["name"][0].replace(world.b.job.name, "NAME") == mine.json()["name"][
        0
    ].replace(world.a.job.name, "NAME")
    # As YAML: the same answer, not the manifest layer's description of the stored job.
    documents = valid_documents(world.a.quota.name, "default", world.b.job.name)
    response = post_yaml(client, [documents["PodGroup"], documents["Pod"]])
    assert response.status_code == 400 and list(response.json()) == ["name"], response.content
    # What-if with B's job name answers under the name asked for, as for a free name.
    for name in (world.b.job.name, "free-name"):
        body = {"name": name, "quota": world.a.quota.name, "pod": {"requests": {"cpu": "1"}}}
        answer = client.post("/api/v1/whatif/", body, content_type="application/json").json()
        assert answer["job"] == f"default/{name}"
        assert all(key.startswith(f"default/{name}-") for key in answer["placement"])


def test_3_counterfactuals_in_job_details_count_other_teams_jobs(world: Tenants) -> None:
    Decision.objects.create(
        round=world.round,
        job=world.a.job,
        outcome=Decision.Outcome.UNSCHEDULABLE,
        reason="preemption not allowed (preemptionPolicy: Never)",
        details={
            "counterfactual": {
                "evict_jobs": [world.b.job.gang_id, world.a.victim.gang_id],
                "fits_in": "node-0",
            }
        },
        created_at=timezone.now(),
    )
    client = client_for(world.a.user)
    for path in (f"{JOBS}{world.a.job.pk}/", f"{JOBS}{world.a.job.pk}/explain/"):
        response = client.get(path)
        assert response.status_code == 200
        assert B_SECRET not in response.content.decode(), path
    details = client.get(f"{JOBS}{world.a.job.pk}/").json()["decisions"][0]["details"]
    assert details["counterfactual"]["evict_jobs"] == [world.a.victim.gang_id]
    assert details["counterfactual"]["other_tenants_jobs"] == 1
    # The admin sees both names.
    admin = client_for(world.admin).get(f"{JOBS}{world.a.job.pk}/").content.decode()
    assert B_SECRET in admin


def test_3_what_if_counts_other_teams_jobs(world: Tenants) -> None:
    """B's job fills the node; A asks what-if with a Never class: the counterfactual would evict
    B's job, and A's answer counts it without naming it."""
    never = PriorityClass.objects.create(
        cluster=world.cluster, name="koord-free", value=9000, preemption_policy="Never"
    )
    running = world.b.job
    running.state = JobState.RUNNING
    running.priority = 1
    running.save()
    Pod.objects.filter(job=running).update(
        node=world.node, phase=PodPhase.RUNNING, requests={"cpu": 32000}, priority=1
    )
    ElasticQuota.objects.filter(pk=world.a.quota.pk).update(min={"cpu": 64000})
    # the mins fit the 64-CPU node, so Koordinator does not scale them down (EnableMinQuotaScale)
    ElasticQuota.objects.filter(pk=world.b.quota.pk).update(min={})
    body = {
        "name": "probe",
        "quota": world.a.quota.name,
        "priority_class": never.name,
        "pod": {"requests": {"cpu": "64"}},
    }
    answer = client_for(world.a.user).post("/api/v1/whatif/", body, content_type="application/json")
    assert answer.status_code == 200, answer.content
    text = answer.content.decode()
    assert B_SECRET not in text
    counterfactual = answer.json()["verdict"]["details"]["counterfactual"]
    assert counterfactual["other_tenants_jobs"] >= 1, counterfactual
    admin = client_for(world.admin).post("/api/v1/whatif/", body, content_type="application/json")
    assert B_SECRET in admin.content.decode()


def _ui_and_api_paths() -> list[str]:
    """Every page and endpoint without path parameters (the ones `?cluster=` applies to)."""
    return sorted(
        "/" + route.template.replace("^", "").replace("$", "")
        for route in routes()
        if not route.params and not route.template.startswith("admin/")
    )


def test_5_nul_in_a_query_parameter_is_refused_at_the_edge(world: Tenants) -> None:
    client = client_for(world.admin)
    paths = _ui_and_api_paths()
    assert "/api/v1/topology/" in paths and "/topology/" in paths
    answers = {path: client.get(path, {"cluster": "\x00"}) for path in paths}
    assert {path: a.status_code for path, a in answers.items() if a.status_code != 400} == {}
    assert answers["/api/v1/topology/"].json() == {
        "cluster": ["NUL and control characters are not allowed."]
    }
    assert b"cluster" in answers["/topology/"].content
    assert client.get("/api/v1/quotas/tree/", {"cluster": "a\x1bb"}).status_code == 400


def test_5_nul_in_a_token_key_is_refused(world: Tenants) -> None:
    client = client_for(world.a.user)
    response = client.delete("/api/v1/tokens/ab%00cd/")
    assert response.status_code == 400 and "token_key" in response.json()
    assert client.post("/tokens/ab%00cd/revoke/").status_code in (400, 404)


def test_5_nul_in_a_header_is_refused(world: Tenants) -> None:
    client = Client(raise_request_exception=False)
    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=f"Token {world.a.token}\x00")
    assert response.status_code == 400 and "Authorization header" in response.json()


def test_5_control_characters_in_a_form_field_are_refused(world: Tenants) -> None:
    response = client_for(world.a.user).post(
        "/jobs/submit/", {"name": "x\x00y", "namespace": "default", "replicas": 1}
    )
    assert response.status_code == 400 and b"name" in response.content


@pytest.mark.parametrize(
    ("where", "value", "field"),
    [
        ("quantity", "9" * 5000, "requests.cpu"),
        ("quantity-integer", HUGE_INT, "requests.cpu"),
        ("waiting-time", "99999999999999999999h", "waiting-time"),
        ("waiting-time-digits", "9" * 5000 + "h", "waiting-time"),
        ("min-member", HUGE_INT, "minMember"),
    ],
)
def test_6_absurd_numbers_are_400_naming_the_field(
    world: Tenants, where: str, value: Any, field: str
) -> None:
    documents = valid_documents(world.a.quota.name, "default", "absurd")
    pod, group = documents["Pod"], documents["PodGroup"]
    if where.startswith("quantity"):
        pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = value
    elif where.startswith("waiting-time"):
        # An annotation gang (no PodGroup) reads its waiting time from the annotation.
        del pod["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"]
        pod["metadata"]["annotations"].update(
            {
                "gang.scheduling.koordinator.sh/name": "absurd",
                "gang.scheduling.koordinator.sh/min-available": "1",
                "gang.scheduling.koordinator.sh/waiting-time": value,
            }
        )
    else:
        group["spec"]["minMember"] = value
    docs = [pod] if where.startswith("waiting-time") else [group, pod]
    response = post_yaml(client_for(world.a.user), docs)
    assert response.status_code == 400, response.content[:300]
    assert field in response.content.decode()
    assert Job.objects.filter(name="absurd").count() == 0


def test_6_a_5000_digit_json_number_is_400_naming_the_field(world: Tenants) -> None:
    digits = "9" * 5000
    quota = world.a.quota.name
    body = f'{{"name": "absurd", "quota": "{quota}", "pod": {{"requests": {{"cpu": {digits}}}}}}}'
    response = client_for(world.a.user).post(JOBS, body, content_type="application/json")
    assert response.status_code == 400 and "pod" in response.json(), response.content[:300]
    replicas = f'{{"name": "absurd", "replicas": {digits}, "pod": {{"requests": {{"cpu": "1"}}}}}}'
    response = client_for(world.a.user).post(JOBS, replicas, content_type="application/json")
    assert response.status_code == 400 and "replicas" in response.json(), response.content[:300]


def test_7_round_metrics_show_only_the_tenants_quotas(world: Tenants) -> None:
    Round.objects.filter(pk=world.round.pk).update(
        metrics={
            "runtime_quota": {
                "root": {"cpu": 128000},
                world.a.quota.name: {"cpu": 64000},
                world.b.quota.name: {"cpu": 64000},
            },
            "dropped": {f"default/{world.b.job.name}-0": "node gone"},
        }
    )
    seen = client_for(world.a.user).get("/api/v1/rounds/").json()["results"]
    metrics = next(r["metrics"] for r in seen if r["id"] == world.round.pk)
    assert set(metrics["runtime_quota"]) == {"root", world.a.quota.name}
    assert metrics["dropped"] == {}
    everything = client_for(world.admin).get(f"/api/v1/rounds/{world.round.pk}/").json()
    assert world.b.quota.name in everything["metrics"]["runtime_quota"]


def test_10_an_idempotency_key_reused_with_another_body_is_422(world: Tenants) -> None:
    client = client_for(world.a.user)
    body = {"name": "once", "quota": world.a.quota.name, "pod": {"requests": {"cpu": "1"}}}
    first = client.post(JOBS, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = client.post(JOBS, body, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    other = {**body, "pod": {"requests": {"cpu": "2"}}}
    response = client.post(JOBS, other, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert response.status_code == 422, response.content
    assert "different request body" in response.json()["detail"]
    assert Job.objects.filter(name="once").count() == 1
    # The same for a YAML submission.
    documents = valid_documents(world.a.quota.name, "default", "yaml-once")
    docs = [documents["PodGroup"], documents["Pod"]]
    assert post_yaml(client, docs, HTTP_IDEMPOTENCY_KEY="k-2").status_code == 201
    assert post_yaml(client, docs, HTTP_IDEMPOTENCY_KEY="k-2").status_code == 200
    documents["Pod"]["spec"]["containers"][0]["image"] = "other"
    docs = [documents["PodGroup"], documents["Pod"]]
    assert post_yaml(client, docs, HTTP_IDEMPOTENCY_KEY="k-2").status_code == 422
