"""Bad input answers 4xx with a message that names the problem, and writes nothing."""

from __future__ import annotations

import json

import pytest

from koordweb.models import Job, Pod
from tests.builders import submission

JOBS = "/api/v1/jobs/"


def _pod(**requests):
    return {"requests": requests}


# (id, body, field the message is under, a word the message contains)
CASES = [
    ("unknown-field", submission(colour="red"), "colour", "unknown field"),
    (
        "unknown-pod-field",
        submission(pod={"requests": {"cpu": "1"}, "image": "x"}),
        "pod",
        "unknown",
    ),
    ("replicas-type", submission(replicas="two"), "replicas", "integer"),
    ("replicas-negative", submission(replicas=-1), "replicas", "greater than or equal"),
    ("replicas-huge", submission(replicas=10**9), "replicas", "less than or equal"),
    ("quantity-negative", submission(pod=_pod(cpu="-1")), "pod", "negative"),
    ("quantity-garbage", submission(pod=_pod(cpu="lots")), "pod", "quantity"),
    ("quantity-exponent", submission(pod=_pod(memory="1e999")), "pod", "range"),
    ("quantity-type", submission(pod=_pod(cpu=[1])), "pod", "cpu"),
    ("resource-name", submission(pod=_pod(**{"bad name!": "1"})), "pod", "resource name"),
    ("empty-requests", submission(pod=_pod(cpu="0")), "pod", "at least one"),
    (
        "unknown-layer",
        submission(topology={"gather": [{"layer": "RackLayer", "strategy": "MustGather"}]}),
        "topology",
        "RackLayer",
    ),
    (
        "bad-strategy",
        submission(topology={"gather": [{"layer": "BlockLayer", "strategy": "Maybe"}]}),
        "topology",
        "valid choice",
    ),
    (
        "duplicate-layer",
        submission(topology={"gather": [{"layer": "BlockLayer", "strategy": "MustGather"}] * 2}),
        "topology",
        "once",
    ),
    ("unknown-quota", submission(quota="nope"), "quota", "unknown quota"),
    ("parent-quota", submission(quota="root"), "quota", "unknown quota"),
    ("no-quota", submission(quota=None), "quota", "required"),
    ("unknown-priority", submission(priority_class="koord-ultra"), "priority_class", "koord-prod"),
    ("unknown-cluster", submission(cluster="mars"), "cluster", "mars"),
    (
        "too-many-gpus",
        submission(pod=_pod(cpu="1", **{"nvidia.com/gpu": "9"})),
        "pod",
        "more than any node",
    ),
    ("too-much-cpu", submission(pod=_pod(cpu="500")), "pod", "largest offers"),
    (
        "unknown-resource",
        submission(pod=_pod(cpu="1", **{"example.com/widget": "1"})),
        "pod",
        "no node",
    ),
    (
        "device-combination",
        submission(pod=_pod(cpu="1", **{"koordinator.sh/gpu-core": "50"})),
        "pod",
        "invalid resource device requests: [koordinator.sh/gpu-core]",  # Koordinator's reason
    ),
    ("min-over-replicas", submission(replicas=2, min_available=3), "min_available", "at most"),
    ("bad-mode", submission(mode="Loose"), "mode", "valid choice"),
    ("bad-name", submission(name="Train_1"), "name", "lower-case letters, digits, '-' or '.'"),
    ("bad-namespace", submission(namespace="team.a"), "namespace", "lower-case letters, digits or"),
    (
        "tolerations-type",
        submission(pod={"requests": {"cpu": "1"}, "tolerations": "all"}),
        "pod",
        "list",
    ),
    (
        "selector-type",
        submission(pod={"requests": {"cpu": "1"}, "node_selector": ["a"]}),
        "pod",
        "dictionary",
    ),
    ("waiting-negative", submission(waiting_time_seconds=-5), "waiting_time_seconds", "greater"),
]


def _nothing_written(before):
    assert (Job.objects.count(), Pod.objects.count()) == before


@pytest.mark.parametrize(
    ("body", "field", "word"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_submission(alice_api, world, body, field, word):
    before = (Job.objects.count(), Pod.objects.count())
    response = alice_api.post(JOBS, body, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert word.lower() in json.dumps(errors[field]).lower(), errors
    _nothing_written(before)


@pytest.mark.parametrize(
    ("raw", "word"),
    [
        (b'{"name": "x", ', "JSON parse error"),
        (b"[1, 2, 3]", "expected a dictionary"),
        (b'{"name": "x", "replicas": NaN}', "NaN"),
        (b"\xff\xfe", "UTF-8"),
        (b'"just a string"', "expected a dictionary"),
    ],
)
def test_malformed_bodies(alice_api, world, raw, word):
    before = (Job.objects.count(), Pod.objects.count())
    response = alice_api.generic("POST", JOBS, raw, content_type="application/json")
    assert response.status_code == 400
    assert word.lower() in response.content.decode().lower()
    _nothing_written(before)


def test_ten_megabyte_body_is_413(alice_api, world):
    before = (Job.objects.count(), Pod.objects.count())
    body = json.dumps(submission(labels={"pad": "x" * (10 * 1024 * 1024)})).encode()
    response = alice_api.generic("POST", JOBS, body, content_type="application/json")
    assert response.status_code == 413
    assert "too large" in response.json()["detail"]
    _nothing_written(before)


def test_unsupported_media_type(alice_api, world):
    response = alice_api.generic("POST", JOBS, b"name=x", content_type="text/plain")
    assert response.status_code == 415
    assert "text/plain" in response.json()["detail"]


def test_idempotency_key_too_long(alice_api, world):
    before = (Job.objects.count(), Pod.objects.count())
    response = alice_api.post(JOBS, submission(), format="json", HTTP_IDEMPOTENCY_KEY="k" * 200)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()
    _nothing_written(before)


def test_duplicate_name_is_400_and_keeps_the_first(alice_api, world):
    assert alice_api.post(JOBS, submission(), format="json").status_code == 201
    before = (Job.objects.count(), Pod.objects.count())
    again = alice_api.post(JOBS, submission(), format="json")
    assert again.status_code == 400 and "is taken" in again.json()["name"][0]
    _nothing_written(before)


def test_bad_filters_are_400(alice_api, world):
    response = alice_api.get(JOBS + "?state=Sleeping")
    assert response.status_code == 400 and "Sleeping" in response.content.decode()
    assert alice_api.get(JOBS + "?submitted_after=yesterday").status_code == 400
    assert alice_api.get(JOBS + "?limit=abc").status_code == 200  # DRF ignores a bad limit
    assert alice_api.get(JOBS + "nope/").status_code == 404


def test_unknown_paths_answer_json_404(alice_api, world):
    response = alice_api.get("/api/v1/jobs")
    assert response.status_code == 404
    assert "end with a slash: /api/v1/jobs/" in response.json()["detail"]
    assert alice_api.post("/api/v1/nothing/here/", {}).json() == {"detail": "No such API endpoint."}


def test_format_suffix_paths_are_json_404(alice_api, world):
    for path in ["/api/v1/jobs.json/", "/api/v1/quotas/tree.json/"]:
        response = alice_api.get(path)
        assert response.status_code == 404 and response.json()["detail"]
