"""scheduler/: an administrator reads and replaces a cluster's scheduler profile arguments; bad
entries are refused per argument and nothing is saved; tenants get no access."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from tests.builders import Teams

URL = "/api/v1/scheduler/"


def test_admin_reads_the_arguments_and_what_each_plugin_takes(admin_api: APIClient) -> None:
    body = admin_api.get(URL).json()
    assert body["cluster"] == "default" and body["scheduler_args"] == {}
    topology = body["arguments"]["NetworkTopology"]
    assert topology["bestFit"]["kind"] == "bool"
    assert body["arguments"]["JobPreemption"]["candidateLimit"]["minimum"] == 1
    sort = body["arguments"]["PrioritySort"]
    assert sort["largestFirst"]["kind"] == topology["bestFit"]["kind"] == "bool"
    assert sort["largestFirst"]["default"] is False and topology["bestFit"]["default"] is True
    assert sort["sizeWindow"]["kind"] == "duration"


def test_admin_replaces_them_and_the_next_read_shows_it(admin_api: APIClient, world: Teams) -> None:
    wanted = {"NetworkTopology": {"bestFit": True}, "PrioritySort": {"largestFirst": True}}
    response = admin_api.put(URL, {"scheduler_args": wanted}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["scheduler_args"] == wanted
    world.cluster.refresh_from_db()
    assert world.cluster.scheduler_args == wanted
    assert admin_api.get(URL).json()["scheduler_args"] == wanted


def test_bad_arguments_get_400_per_entry_and_nothing_changes(
    admin_api: APIClient, world: Teams
) -> None:
    before: dict[str, Any] = {"JobPreemption": {"candidateLimit": 3}}
    world.cluster.scheduler_args = before
    world.cluster.save()
    bad = {"JobPreemption": {"candidateLimit": 0}, "NetworkTopology": {"bestfit": True}}
    response = admin_api.put(URL, {"scheduler_args": bad}, format="json")
    assert response.status_code == 400
    messages = response.json()["scheduler_args"]
    assert messages[0] == "JobPreemption.candidateLimit: expected at least 1 and at most 64"
    assert messages[1].startswith("NetworkTopology.bestfit: unknown argument")
    assert admin_api.put(URL, {}, format="json").status_code == 400  # the field is required
    world.cluster.refresh_from_db()
    assert world.cluster.scheduler_args == before


def test_tenants_and_anonymous_callers_get_no_access(
    alice_api: APIClient, anon_api: APIClient, world: Teams
) -> None:
    assert alice_api.get(URL).status_code == 403
    put = alice_api.put(URL, {"scheduler_args": {"NetworkTopology": {}}}, format="json")
    assert put.status_code == 403
    assert anon_api.get(URL).status_code in (401, 403)
    world.cluster.refresh_from_db()
    assert world.cluster.scheduler_args == {}


def test_an_unknown_cluster_is_404(admin_api: APIClient) -> None:
    assert admin_api.get(URL, {"cluster": "nope"}).status_code == 404


EXAMPLE = "prefer_label_plugin.prefer_label:PreferLabel"


def test_an_unknown_or_invalid_plugin_is_refused_by_name_with_400(
    admin_api: APIClient, world: Teams, settings: Any, monkeypatch: Any
) -> None:
    from tests.plugin_example import EXAMPLE_DIR

    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    settings.KOORDWEB_SCHEDULER_PLUGINS = {
        "PreferLabel": EXAMPLE,
        "Broken": "no_such_module.anywhere:Plugin",
    }
    cases = {
        "enabledPlugins[0]": {"enabledPlugins": ["Nope"]},
        "enabledPlugins": {"enabledPlugins": "PreferLabel"},
        "PreferLabel.weight": {"enabledPlugins": ["PreferLabel"], "PreferLabel": {"weight": 0}},
        "PreferLabel": {"PreferLabel": {"weight": 5}},  # configured but not enabled
    }
    for where, bad in cases.items():
        response = admin_api.put(URL, {"scheduler_args": bad}, format="json")
        assert response.status_code == 400, (where, response.content)
        [message] = response.json()["scheduler_args"]
        assert message.startswith(f"{where}: "), message
    broken = admin_api.put(URL, {"scheduler_args": {"enabledPlugins": ["Broken"]}}, format="json")
    assert broken.status_code == 400
    assert "cannot load no_such_module.anywhere:Plugin" in broken.json()["scheduler_args"][0]
    world.cluster.refresh_from_db()
    assert world.cluster.scheduler_args == {}


def test_a_registered_plugin_is_enabled_with_its_args_and_listed(
    admin_api: APIClient, world: Teams, settings: Any, monkeypatch: Any
) -> None:
    from tests.plugin_example import EXAMPLE_DIR

    monkeypatch.syspath_prepend(str(EXAMPLE_DIR))
    settings.KOORDWEB_SCHEDULER_PLUGINS = {"PreferLabel": EXAMPLE}
    wanted = {"enabledPlugins": ["PreferLabel"], "PreferLabel": {"label": "disk", "weight": 5}}
    response = admin_api.put(URL, {"scheduler_args": wanted}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["arguments"]["PreferLabel"]["weight"]["maximum"] == 100
