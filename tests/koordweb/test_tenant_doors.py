"""Issue #36, "one door per field": every limit and rule of `koordweb.limits` refuses the same
values at every door a tenant's job or token comes through: the API's JSON and YAML, the UI's
forms and the manifest reader (admin imports). The cases are generated from the definitions, so a
new bound or a changed one is tested at every door without a line here.

Items it covers: 2 (the YAML door skipped the pod limit), 3 (the gang annotation named the job
unchecked), 5 (the UI minted 365-day tokens), 7 (the UI form had no bound on duration_seconds:
a 500).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.cache import caches
from django.test import Client
from django.urls import reverse
from knox.models import AuthToken
from rest_framework.test import APIClient

from koordweb.limits import (
    BOUNDS,
    CHOICES,
    DURATION,
    JOB_NAME_MAX,
    MIN_AVAILABLE,
    POD_COUNT,
    TOKEN_DAYS,
    Bound,
)
from koordweb.manifests.errors import ManifestError
from koordweb.manifests.parse import parse_manifests
from koordweb.models import Job
from scheduler.vocabulary import (
    DURATION_ANNOTATION,
    GANG_MIN_AVAILABLE,
    GANG_MODE,
    GANG_NAME,
    GANG_TOPOLOGY_SPEC,
    QUOTA_NAME,
)
from tests.builders import Teams, submission, teams, token_client

HOSTILE_NAMES = [
    '<a href="https://evil.example/">x</a>',  # markup plotly would draw as a live link
    "job\u202etxt",  # right-to-left override
    "job\x85x",  # a C1 control
    "Upper-Case",
    "a" * (JOB_NAME_MAX + 1),
]


@pytest.fixture(autouse=True)
def _private_cache(settings: Any) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "doors"}
    }
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    caches["default"].clear()
    # No Celery in these tests: a round request is taken as already made.
    caches["default"].add("round-requested:1", "test", timeout=300)


@pytest.fixture
def world(db: Any) -> Teams:
    return teams()


# The doors: each takes the fields of one job (JSON names) and says whether it was refused -----


def _gang_yaml(fields: dict[str, Any]) -> str | None:
    """The job as an annotation gang of `replicas` Pod documents; None: YAML cannot say it."""
    replicas = fields.get("replicas", 1)
    if not isinstance(replicas, int) or replicas > POD_COUNT.maximum + 1:
        return None
    annotations = {
        GANG_NAME: fields.get("name", "yaml-job"),
        GANG_MIN_AVAILABLE: str(fields.get("min_available", max(replicas, 1))),
    }
    if "mode" in fields:
        annotations[GANG_MODE] = fields["mode"]
    if "duration_seconds" in fields:
        annotations[DURATION_ANNOTATION] = str(fields["duration_seconds"])
    if "strategy" in fields:
        rule = {"layer": "BlockLayer", "strategy": fields["strategy"]}
        annotations[GANG_TOPOLOGY_SPEC] = json.dumps({"gatherStrategy": [rule]})
    meta = json.dumps({"annotations": annotations, "labels": {QUOTA_NAME: "team-a"}})
    pods = [
        "apiVersion: v1\nkind: Pod\nmetadata: "
        + meta[:-1]
        + f', "name": "yaml-pod-{i}", "namespace": "default"}}\n'
        + "spec:\n  priorityClassName: koord-prod\n  containers:\n  - name: main\n"
        + '    resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}\n'
        for i in range(replicas)
    ]
    return "---\n".join(pods) or "apiVersion: v1\nkind: PodGroup\n"


def _json_door(world: Teams, fields: dict[str, Any]) -> bool | None:
    body = submission(**{k: v for k, v in fields.items() if k != "strategy"})
    if "strategy" in fields:
        body["topology"] = {"gather": [{"layer": "BlockLayer", "strategy": fields["strategy"]}]}
    response = token_client(world.alice).post("/api/v1/jobs/", body, format="json")
    assert response.status_code < 500, response.content
    return response.status_code == 400


def _yaml_door(world: Teams, fields: dict[str, Any]) -> bool | None:
    text = _gang_yaml(fields)
    if text is None:
        return None
    response = token_client(world.alice).generic(
        "POST", "/api/v1/jobs/", text.encode(), content_type="application/yaml"
    )
    assert response.status_code < 500, response.content
    return response.status_code == 400


def _form_door(world: Teams, fields: dict[str, Any]) -> bool | None:
    if "mode" in fields:
        return None  # the form has no mode: every job it makes is Strict
    form = {
        "name": "form-job",
        "namespace": "default",
        "quota": "team-a",
        "priority_class": "koord-prod",
        "replicas": 1,
        "gpus": 1,
        "cpu": 1,
        "memory": 1,
    }
    form.update({k: v for k, v in fields.items() if k != "strategy"})
    if "strategy" in fields:
        form.update(gather_layer="BlockLayer", gather_strategy=fields["strategy"])
    client = Client()
    client.force_login(world.alice)
    response = client.post(reverse("job-submit"), form)
    assert response.status_code < 500, response.content[:2000]
    return response.status_code != 302


def _import_door(world: Teams, fields: dict[str, Any]) -> bool | None:
    """The manifest reader every import and YAML submission goes through: the fields it reads
    itself (the gang's name, the duration annotation)."""
    if set(fields) - {"name", "duration_seconds"}:
        return None
    text = _gang_yaml(fields)
    assert text is not None
    try:
        parse_manifests(text)
    except ManifestError:
        return True
    return False


JOB_DOORS: dict[str, Callable[[Teams, dict[str, Any]], bool | None]] = {
    "json": _json_door,
    "yaml": _yaml_door,
    "form": _form_door,
    "import": _import_door,
}


def _refused_values(bound: Bound) -> list[int]:
    return [bound.minimum - 1, bound.maximum + 1, 10**20 - 1]


JOB_BOUNDS = [b for b in BOUNDS if b in (POD_COUNT, MIN_AVAILABLE, DURATION)]
JOB_CASES = [
    *[({b.field: v}, f"{b.field}={v}") for b in JOB_BOUNDS for v in _refused_values(b)],
    *[({"name": name}, f"name={name[:12]!r}") for name in HOSTILE_NAMES],
    *[({field: "Sometimes"}, f"{field}=Sometimes") for field in CHOICES],
]


@pytest.mark.parametrize("door", sorted(JOB_DOORS))
@pytest.mark.parametrize(("fields", "case"), JOB_CASES, ids=[c for _, c in JOB_CASES])
def test_every_door_refuses_the_same_job_values(world, door, fields, case):
    if fields.get("min_available") is not None and fields["min_available"] > 1:
        fields = {**fields, "replicas": 1}  # refused for its own bound, not for the pod count
    before = Job.objects.count()
    refused = JOB_DOORS[door](world, fields)
    if refused is None:
        pytest.skip(f"the {door} door cannot express {case}")
    assert refused, f"the {door} door accepted {case}"
    assert Job.objects.count() == before


@pytest.mark.parametrize("door", ["json", "yaml", "form"])
def test_every_door_takes_the_largest_duration(world, door):
    assert JOB_DOORS[door](world, {"duration_seconds": DURATION.maximum}) is False
    assert Job.objects.get().duration_seconds == DURATION.maximum


def test_the_yaml_door_counts_pods_before_parsing(world):
    """Item 2: 4,097 Pod documents are refused by their count, as JSON `replicas: 4097` is."""
    assert _yaml_door(world, {"replicas": POD_COUNT.maximum + 1}) is True
    text = _gang_yaml({"replicas": POD_COUNT.maximum + 1})
    response = token_client(world.alice).generic(
        "POST", "/api/v1/jobs/", text.encode(), content_type="application/yaml"
    )
    assert "4,097 Pod documents" in response.json()["replicas"][0]


# Token lifetime: the API and the tokens page ---------------------------------------------------


def _token_api(world: Teams, days: int) -> bool:
    client = APIClient()
    client.force_login(world.alice)
    response = client.post("/api/v1/tokens/", {"expiry_days": days}, format="json")
    assert response.status_code < 500
    return response.status_code == 400


def _token_page(world: Teams, days: int) -> bool:
    client = Client()
    client.force_login(world.alice)
    response = client.post(reverse("tokens"), {"expiry_days": days})
    assert response.status_code < 500
    return "data-new-token" not in response.content.decode()


TOKEN_DOORS = {"api": _token_api, "page": _token_page}


@pytest.mark.parametrize("door", sorted(TOKEN_DOORS))
@pytest.mark.parametrize("days", [*_refused_values(TOKEN_DAYS), 365])
def test_every_door_refuses_the_same_token_lifetimes(world, door, days):
    assert TOKEN_DOORS[door](world, days)
    assert not AuthToken.objects.filter(user=world.alice).exists()


@pytest.mark.parametrize("door", sorted(TOKEN_DOORS))
def test_every_door_mints_the_longest_lifetime(world, door):
    assert not TOKEN_DOORS[door](world, TOKEN_DAYS.maximum)
    token = AuthToken.objects.get(user=world.alice)
    lifetime = (token.expiry - token.created).total_seconds() / 86400
    assert round(lifetime) == TOKEN_DAYS.maximum
