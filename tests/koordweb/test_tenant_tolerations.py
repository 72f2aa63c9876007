"""Issue #36 item 8: taints can reserve nodes for a team. An admin taints a node
`dedicated=team-a:NoSchedule`; another team that adds the toleration used to land there. Now each
quota holds Kubernetes' PodTolerationRestriction: tolerations merged into every pod it submits
(`default_tolerations`) and those its pods may carry at all (`allowed_tolerations`, null: any)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import caches
from django.core.exceptions import ValidationError

from koordweb.models import ElasticQuota, Pod
from koordweb.services.tenant_checks import toleration_covers
from tests.builders import Teams, submission, teams, token_client
from tests.koordweb.api.test_manifest_submission import pod, yaml_post

DEDICATED = {"key": "dedicated", "operator": "Equal", "value": "team-a", "effect": "NoSchedule"}
JSON_DEDICATED = {"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "tol"}
    }
    caches["default"].clear()
    caches["default"].add("round-requested:1", "test", timeout=300)


@pytest.fixture
def world(db: Any) -> Teams:
    world = teams()
    world.nodes[0].taints = [{"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}]
    world.nodes[0].save(update_fields=["taints"])
    ElasticQuota.objects.filter(pk=world.team_a.pk).update(
        default_tolerations=[DEDICATED], allowed_tolerations=[DEDICATED]
    )
    ElasticQuota.objects.filter(pk=world.team_b.pk).update(allowed_tolerations=[])
    return world


def _json(client, quota: str, tolerations: list[dict[str, Any]], name: str = "job"):
    body = submission(name=name, quota=quota, topology=None, replicas=1)
    body["pod"] = {**body["pod"], "tolerations": tolerations}
    return client.post("/api/v1/jobs/", body, format="json")


def test_another_team_may_not_tolerate_the_dedicated_taint(world):
    response = _json(token_client(world.bob), "team-b", [JSON_DEDICATED])
    assert response.status_code == 400, response.content
    assert "dedicated=team-a:NoSchedule is not allowed for quota team-b" in str(response.json())
    yaml = pod(
        "sneaky",
        group="",
        quota="team-b",
        gpus=1,
        spec_extra="  tolerations: [{key: dedicated, value: team-a, effect: NoSchedule}]\n",
    )
    refused = yaml_post(token_client(world.bob), yaml)
    assert refused.status_code == 400, refused.content
    assert "is not allowed for quota team-b" in str(refused.json())


def test_the_team_gets_its_default_toleration(world):
    response = _json(token_client(world.alice), "team-a", [])
    assert response.status_code == 201, response.content
    assert Pod.objects.get(job_id=response.json()["id"]).tolerations == [DEDICATED]
    created = yaml_post(token_client(world.alice), pod("own", group="", gpus=1))
    assert created.status_code == 201, created.content
    assert Pod.objects.get(name="own").tolerations == [DEDICATED]


def test_a_pod_toleration_conflicting_with_a_default_is_refused(world):
    other = {"key": "dedicated", "value": "team-z", "effect": "NoSchedule"}
    response = _json(token_client(world.alice), "team-a", [other])
    assert response.status_code == 400
    assert "conflicts with quota team-a's default" in str(response.json())


def test_null_allows_any_toleration(world):
    ElasticQuota.objects.filter(pk=world.team_b.pk).update(allowed_tolerations=None)
    assert _json(token_client(world.bob), "team-b", [JSON_DEDICATED]).status_code == 201


@pytest.mark.parametrize(
    ("allowed", "toleration", "covered"),
    [
        (DEDICATED, DEDICATED, True),
        ({"key": "dedicated", "operator": "Exists"}, DEDICATED, True),
        ({"operator": "Exists"}, DEDICATED, True),
        ({"key": "dedicated", "operator": "Equal", "value": "team-b"}, DEDICATED, False),
        ({**DEDICATED, "effect": "NoExecute"}, DEDICATED, False),
        ({"key": "gpu", "operator": "Exists"}, DEDICATED, False),
        (
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60},
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 600},
            False,
        ),
    ],
)
def test_covering_is_kubernetes_is_superset(allowed, toleration, covered):
    assert toleration_covers(allowed, toleration) is covered


def test_the_admin_cannot_store_a_toleration_the_api_server_refuses(world):
    quota = ElasticQuota.objects.get(pk=world.team_b.pk)
    quota.allowed_tolerations = [{"key": "a b", "operator": "Equal"}]
    with pytest.raises(ValidationError):
        quota.full_clean()
