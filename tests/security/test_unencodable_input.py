"""Issue #36 item 6: a lone surrogate (`"\\ud800"`) in a body is a 400 at every door, and no
answer can fail to be written: the 400 once echoed the text and the renderer could not encode it
(a 500 on jobs, what-if, scheduler, priority classes and nodes)."""

from __future__ import annotations

import json

import pytest

from koordweb.api.renderers import SafeJSONRenderer
from koordweb.models import Job, Node, PriorityClass
from tests.builders import token_client

SURROGATE = "\\ud800"  # as the JSON text carries it: json.loads makes it a lone surrogate
BODIES = {
    "name": '{"name": "x%s", "pod": {"requests": {"cpu": "1"}}}',
    "key": '{"name": "x", "%s": 1, "pod": {"requests": {"cpu": "1"}}}',
    "nested": '{"name": "x", "labels": {"a": "%s"}, "pod": {"requests": {"cpu": "1"}}}',
}
DOORS = [
    ("post", "/api/v1/jobs/", "tenant"),
    ("post", "/api/v1/whatif/", "tenant"),
    ("put", "/api/v1/scheduler/", "admin"),
    ("post", "/api/v1/priority-classes/", "admin"),
    ("post", "/api/v1/nodes/", "admin"),
]


@pytest.fixture(autouse=True)
def _api_urls(settings):
    settings.ROOT_URLCONF = "tests.koordweb.api.urls"


@pytest.mark.parametrize(("method", "url", "who"), DOORS)
@pytest.mark.parametrize("body", sorted(BODIES))
def test_a_lone_surrogate_is_a_400_everywhere(world, method, url, who, body):
    client = token_client(world.admin if who == "admin" else world.a.user)
    rows = (Job.objects.count(), Node.objects.count(), PriorityClass.objects.count())
    text = BODIES[body] % SURROGATE
    response = getattr(client, method)(url, text.encode(), content_type="application/json")
    assert response.status_code == 400, response.content
    detail = json.loads(response.content)["detail"]
    assert "surrogate" in detail
    assert "\ud800" not in detail
    assert (Job.objects.count(), Node.objects.count(), PriorityClass.objects.count()) == rows


def test_a_yaml_surrogate_escape_is_a_400(world):
    client = token_client(world.a.user)
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  namespace: default\n"
        '  annotations: {note: "\\ud800"}\nspec:\n  containers: [{name: m}]\n'
    )
    response = client.generic(
        "POST", "/api/v1/jobs/", text.encode(), content_type="application/yaml"
    )
    assert response.status_code == 400, response.content  # libyaml refuses the escape itself
    assert not Job.objects.filter(name="p").exists()


def test_the_renderer_writes_any_text():
    """A surrogate that reached an answer anyway (a row written before the doors refused it) is
    written as a JSON escape, not a 500."""
    rendered = SafeJSONRenderer().render({"name": "x\ud800", "fine": "é"})
    assert json.loads(rendered) == {"name": "x\ud800", "fine": "é"}
    assert SafeJSONRenderer().render({"fine": "é"}) == '{"fine":"é"}'.encode()
