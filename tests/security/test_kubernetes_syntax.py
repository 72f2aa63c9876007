"""A tenant's labels, node selector and tolerations are checked as the Kubernetes API server
checks them, at the door: a submission the cluster would refuse when its pods are created is
refused now with a 400 naming the field, JSON or YAML, and nothing is written. Before, such a job
was accepted and failed later, and only on a real cluster (the fake API server did not check)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from django.test import Client

from koordweb.models import Job, Pod
from tests.builders import Tenants
from tests.security.hostile import valid_documents

JOBS = "/api/v1/jobs/"


def _client(user: Any) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _written() -> tuple[int, int]:
    return Job.objects.count(), Pod.objects.count()


JSON_CASES = [
    ("labels", {"bad key!": "x"}, "labels"),
    ("labels", {"app": "has space"}, "labels"),
    ("labels", {"a/b/c": "x"}, "labels"),
    ("labels", {"UPPER.example.com/x": "x"}, "labels"),
    ("node_selector", {"zone": "a/b"}, "node_selector"),
    ("node_selector", {"a b": "c"}, "node_selector"),
    ("tolerations", [{"key": "bad key", "operator": "Exists"}], "key"),
    ("tolerations", [{"key": "gpu", "value": "a b"}], "value"),
    ("tolerations", [{"key": "gpu", "operator": "Exists", "toleration_seconds": 5}], "effect"),
    ("tolerations", [{"value": "x"}], "operator"),
    (
        "tolerations",
        [{"key": "k", "operator": "Exists", "effect": "NoExecute", "toleration_seconds": 10**30}],
        "toleration_seconds",
    ),
]


@pytest.mark.parametrize(("where", "value", "field"), JSON_CASES)
def test_json_submission_refuses_what_the_api_server_would(
    world: Tenants, where: str, value: Any, field: str
) -> None:
    body: dict[str, Any] = {
        "name": "probe",
        "quota": world.a.quota.name,
        "pod": {"requests": {"cpu": "1"}},
    }
    if where == "labels":
        body["labels"] = value
    else:
        body["pod"][where] = value
    before = _written()
    response = _client(world.a.user).post(JOBS, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert field in json.dumps(response.json()), response.json()
    assert _written() == before


def test_json_submission_takes_kubernetes_style_keys(world: Tenants) -> None:
    body = {
        "name": "styled",
        "quota": world.a.quota.name,
        "labels": {"app.kubernetes.io/name": "trainer", "Team_Name": "", "v": "1.2-rc_3"},
        "pod": {
            "requests": {"cpu": "1"},
            "node_selector": {"example.com/Rack": "R-12"},
            "tolerations": [
                {"operator": "Exists"},
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "toleration_seconds": 300,
                },
            ],
        },
    }
    response = _client(world.a.user).post(JOBS, json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content[:300]


YAML_CASES = [
    ("labels", {"bad key!": "x"}, "metadata.labels"),
    ("annotations", {"a/b/c": "x"}, "metadata.annotations"),
    ("nodeSelector", {"zone": "a/b"}, "spec.nodeSelector"),
    (
        "tolerations",
        [{"key": "gpu", "operator": "Exists", "value": "x"}],
        "spec.tolerations[0].value",
    ),
    ("tolerations", [{"key": "gpu", "operator": "Sometimes"}], "spec.tolerations[0].operator"),
    (
        "tolerations",
        [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10**30}],
        "spec.tolerations[0].tolerationSeconds",
    ),
]


@pytest.mark.parametrize(("where", "value", "field"), YAML_CASES)
def test_yaml_submission_refuses_what_the_api_server_would(
    world: Tenants, where: str, value: Any, field: str
) -> None:
    documents = valid_documents(world.a.quota.name, "default", "probe")
    pod = documents["Pod"]
    if where in ("labels", "annotations"):
        pod["metadata"][where].update(value)
    else:
        pod["spec"][where] = value
    before = _written()
    text = yaml.safe_dump_all([documents["PodGroup"], pod]).encode()
    response = _client(world.a.user).generic("POST", JOBS, text, content_type="application/yaml")
    assert response.status_code == 400, response.content[:300]
    assert field in response.content.decode(), response.content[:300]
    assert _written() == before


def test_a_quota_name_longer_than_a_label_value_is_refused(world: Tenants) -> None:
    """Pods carry their quota's name as a label value: at most 63 characters."""
    admin = _client(world.admin)
    body = {"cluster": world.cluster.name, "name": "q" * 64, "max": {"cpu": 8000}}
    response = admin.post("/api/v1/quotas/", json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert "name" in response.json()
    body["name"] = "q" * 63
    response = admin.post("/api/v1/quotas/", json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content[:300]


@pytest.mark.parametrize(
    ("field", "value"), [("name", "My_Job"), ("name", "job_1"), ("namespace", "Team_A")]
)
def test_the_submit_page_takes_only_names_kubernetes_accepts(
    world: Tenants, field: str, value: str
) -> None:
    """The page's form took any slug (upper case, '_'): a job whose pods the cluster refuses."""
    form = {
        "name": "probe",
        "namespace": "default",
        "quota": world.a.quota.name,
        "replicas": 1,
        "gpus": 0,
        "cpu": 1,
        "memory": 1,
        field: value,
    }
    before = _written()
    response = _client(world.a.user).post("/jobs/submit/", form)
    assert response.status_code == 200  # the page again, with the field's error
    assert "lower-case letters, digits" in response.content.decode()
    assert _written() == before
