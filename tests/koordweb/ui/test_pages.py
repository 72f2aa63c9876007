"""Every page answers as admin and as tenant, needs a login, and keeps tenants to their jobs."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.builders import Pages
from tests.koordweb.ui.html import figures

PAGES = [
    "overview",
    "overview-live",
    "topology",
    "devices",
    "efficiency",
    "jobs",
    "job-submit",
    "preemptions",
    "quotas",
    "rounds",
    "tokens",
]


@pytest.mark.parametrize("name", PAGES)
def test_pages_answer_admin_and_tenant(name: str, as_admin: Client, as_alice: Client) -> None:
    for client in (as_admin, as_alice):
        response = client.get(reverse(name))
        assert response.status_code == 200, (name, response.status_code)
        assert "script-src 'self'" in response["Content-Security-Policy"]


@pytest.mark.parametrize("name", [*PAGES, "import"])
def test_pages_require_login(name: str, ui: Pages, client: Client) -> None:
    response = client.get(reverse(name))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_detail_pages_answer(ui: Pages, as_admin: Client) -> None:
    for url in (
        reverse("job-detail", args=[ui.running.pk]),
        reverse("job-detail", args=[ui.pending.pk]),
        reverse("preemption-detail", args=[ui.preemption.pk]),
        reverse("round-detail", args=[ui.good_round.pk]),
        reverse("round-detail", args=[ui.failed_round.pk]),
    ):
        assert as_admin.get(url).status_code == 200, url


def test_tenant_cannot_open_another_tenants_job(
    ui: Pages, as_alice: Client, as_bob: Client
) -> None:
    assert as_alice.get(reverse("job-detail", args=[ui.running.pk])).status_code == 200
    assert as_alice.get(reverse("job-detail", args=[ui.pending.pk])).status_code == 404
    assert as_bob.get(reverse("job-detail", args=[ui.running.pk])).status_code == 404
    cancel = as_alice.post(reverse("job-cancel", args=[ui.pending.pk]))
    assert cancel.status_code == 404
    ui.pending.refresh_from_db()
    assert ui.pending.state == "Pending"


def test_job_queue_is_scoped_and_ordered(ui: Pages, as_admin: Client, as_bob: Client) -> None:
    html = as_admin.get(reverse("jobs")).content.decode()
    # Scheduling order: prod (9000) before batch (5000).
    assert html.index("train-a") < html.index("big-b")
    bob_html = as_bob.get(reverse("jobs")).content.decode()
    assert "big-b" in bob_html and "train-a" not in bob_html
    # The engine's own count on the empty cluster: node-3 has 7 healthy cards, so only three
    # nodes ever hold a pod of 8 GPUs, and the page says the job can never run.
    assert "Can never run: with every node empty, the whole cluster has room for 3 pods" in bob_html
    assert "desiredOfferSlot" not in bob_html
    assert "4 x 8 GPUs, 8 cores" in bob_html


def test_job_detail_shows_decisions_and_counterfactual(ui: Pages, as_bob: Client) -> None:
    html = as_bob.get(reverse("job-detail", args=[ui.pending.pk])).content.decode()
    # It can never run (see above): what would change it is checked on the empty cluster, and
    # the round's decision is still listed in words.
    assert "It could run as at most 3 pods with this rule." in html
    assert "No topology domain has room for all 4 pods of the job together." in html
    assert f"#{ui.good_round.pk}" in html


def test_running_job_detail_highlights_its_placement(ui: Pages, as_alice: Client) -> None:
    html = as_alice.get(reverse("job-detail", args=[ui.running.pk])).content.decode()
    sunburst = figures(html)["fig-placement"]["data"][0]
    widths = dict(zip(sunburst["ids"], sunburst["marker"]["line"]["width"], strict=True))
    assert widths["NodeTopologyLayer/node-1"] == 3
    assert widths["BlockLayer/b1"] == 3
    assert widths["BlockLayer/b2"] == 1


def test_overview_counts_alerts_and_figures(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("overview")).content.decode()
    assert 'hx-get="/overview/live/"' in html
    assert "node-5" in html  # outside the topology
    assert "snapshot failed" in html  # the failed round
    assert "blocked by a disruption budget" in html
    bars = figures(html)["fig-resources"]["data"][1]
    gpu = dict(zip(bars["y"], bars["x"], strict=True))["GPUs"]
    assert gpu == pytest.approx(100 * 16 / 32, abs=0.1)  # 16 of 4 x 8 NVIDIA cards
    assert re.search(r'data-count="pending">1<', html)


def test_overview_hides_alerts_and_foreign_counts_from_tenants(ui: Pages, as_alice: Client) -> None:
    html = as_alice.get(reverse("overview-live")).content.decode()
    assert "snapshot failed" not in html
    assert re.search(r'data-count="pending">0<', html)  # big-b belongs to team-b


def test_topology_counts_slots_for_a_shape(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(
        reverse("topology"), {"resource": "nvidia.com/gpu", "count": 4, "cpu": 0, "memory": 0}
    ).content.decode()
    # The engine's count: node-3 has 7 healthy cards and card 0 half held by a shared pod, so
    # one pod of 4 whole cards; nodes 1 and 2 are full; node-5 is outside.
    assert re.search(r'data-slots="cluster">1<', html)
    sunburst = figures(html)["fig-sunburst"]["data"][0]
    assert "NodeTopologyLayer/node-5" not in sunburst["ids"]
    assert "BlockLayer/b1" in sunburst["ids"]
    graph = figures(html)["fig-graph"]["data"]
    assert len(graph[1]["x"]) == len(sunburst["ids"])
    assert "node-5" in html.split("Nodes outside the topology")[1]


def test_topology_highlights_a_visible_job_only(ui: Pages, as_bob: Client) -> None:
    response = as_bob.get(
        reverse("topology"),
        {"resource": "nvidia.com/gpu", "count": 8, "cpu": 0, "memory": 0, "job": ui.running.pk},
    )
    assert "no such job" in response.content.decode()
    shared = as_bob.get(
        reverse("topology"),
        {"resource": "nvidia.com/gpu", "count": 8, "cpu": 0, "memory": 0, "job": ui.shared.pk},
    )
    graph = figures(shared.content.decode())["fig-graph"]["data"]
    assert graph[-1]["name"] == "selected job"


def test_devices_heatmap_marks_shared_and_hides_foreign_jobs(
    ui: Pages, as_admin: Client, as_alice: Client
) -> None:
    html = as_admin.get(reverse("devices"), {"vendor": "nvidia"}).content.decode()
    heat = figures(html)["fig-heatmap"]["data"][0]
    rows = heat["y"]
    assert rows == ["b1 · node-1", "b1 · node-2", "b2 · node-3", "(outside) · node-5"]
    node3 = rows.index("b2 · node-3")
    assert heat["z"][node3][0] == 50 and heat["text"][node3][0] == "S"
    crosses = figures(html)["fig-heatmap"]["data"][1]  # unhealthy cards: a cross over the cell
    assert list(zip(crosses["y"], crosses["x"], strict=True)) == [("b2 · node-3", "#7")]
    assert re.search(r'data-count="unhealthy">1<', html)
    # Counts are of the cluster, whatever the filter shows.
    huawei = as_admin.get(reverse("devices"), {"vendor": "huawei"}).content.decode()
    assert (
        re.search(r'data-count="cards">(\d+)<', huawei)[1]
        == re.search(r'data-count="cards">(\d+)<', html)[1]
    )
    assert heat["z"][0] == [100] * 8
    assert "notebook-b" in heat["hovertext"][node3][0]
    kinds = {a["text"].split()[0] for a in figures(html)["fig-heatmap"]["layout"]["annotations"]}
    assert kinds == {"NUMA", "PCIe", "NVLink"}
    tenant = figures(as_alice.get(reverse("devices"), {"vendor": "nvidia"}).content.decode())
    hover = tenant["fig-heatmap"]["data"][0]["hovertext"]
    assert "another tenant's job" in hover[node3][0] and "notebook-b" not in hover[node3][0]
    assert "train-a" in hover[0][0]


def test_devices_filter_by_vendor_and_block(ui: Pages, as_admin: Client) -> None:
    ascend = figures(as_admin.get(reverse("devices"), {"vendor": "huawei"}).content.decode())
    assert ascend["fig-heatmap"]["data"][0]["y"] == ["b3 · node-4"]
    block = figures(as_admin.get(reverse("devices"), {"block": "b1"}).content.decode())
    assert block["fig-heatmap"]["data"][0]["y"] == ["b1 · node-1", "b1 · node-2"]


def test_preemptions_scoped_filtered_and_costed(
    ui: Pages, as_admin: Client, as_alice: Client
) -> None:
    html = as_admin.get(reverse("preemptions")).content.decode()
    assert "old-b" in html and "8.0 GPUs freed" not in html
    assert "<strong>8</strong> GPUs freed" in html
    # old-b ran 5 hours with 8 GPUs before it was preempted 30 minutes ago: 36 GPU-hours.
    assert "<strong>36</strong> GPU-hours" in html
    timeline = figures(html)["fig-timeline"]["data"]
    # One bar per preemption, on the preemptor's row; its victim is named in the hover.
    assert timeline[0]["y"] == ["default/train-a"]
    assert "default/old-b" in timeline[0]["hovertext"][0]
    only_a = as_admin.get(reverse("preemptions"), {"quota": "team-b"}).content.decode()
    assert "default/train-a" in only_a  # old-b (team-b) was the victim
    alice_detail = as_alice.get(reverse("preemption-detail", args=[ui.preemption.pk]))
    assert alice_detail.status_code == 200


def test_preemption_hidden_from_uninvolved_tenant(ui: Pages, django_user_model: object) -> None:
    from django.contrib.auth import get_user_model

    carol = get_user_model().objects.create_user("carol", password="x-very-long-pass")
    client = Client()
    client.force_login(carol)
    assert client.get(reverse("preemption-detail", args=[ui.preemption.pk])).status_code == 404
    assert "old-b" not in client.get(reverse("preemptions")).content.decode()


def test_quotas_tree_with_used(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("quotas")).content.decode()
    bars = figures(html)["fig-quotas"]["data"]
    used = dict(zip(bars[0]["x"], bars[0]["y"], strict=True))
    assert used["team-a"] == 16 and used["root"] == 16
    assert html.index("root") < html.index("— team-a")


def test_rounds_history_and_detail(ui: Pages, as_admin: Client, as_alice: Client) -> None:
    html = as_admin.get(reverse("rounds")).content.decode()
    assert "snapshot failed" in html
    latency = figures(html)["fig-rounds"]["data"][0]
    assert sorted(latency["y"]) == [5, 42]
    alice_round = as_alice.get(reverse("round-detail", args=[ui.good_round.pk])).content.decode()
    assert "train-a" in alice_round and "big-b" not in alice_round


def test_import_is_admin_only(ui: Pages, as_alice: Client) -> None:
    assert as_alice.get(reverse("import")).status_code == 403


def test_import_validates_and_writes(ui: Pages, as_admin: Client) -> None:
    yaml_text = (
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-9\n"
        "  labels: {network.topology.nvidia.com/spine: s2, network.topology.nvidia.com/block: b3}\n"
        "status:\n  allocatable: {cpu: '32', memory: 64Gi, pods: '110'}\n"
    )
    dry = as_admin.post(reverse("import"), {"text": yaml_text, "dry_run": "on"})
    assert "Valid (dry run" in dry.content.decode()
    assert not ui.cluster.nodes.filter(name="node-9").exists()
    done = as_admin.post(reverse("import"), {"text": yaml_text})
    assert "Imported" in done.content.decode()
    assert ui.cluster.nodes.filter(name="node-9").exists()
    bad = as_admin.post(reverse("import"), {"text": "kind: Node\nmetadata: {}\n"})
    assert 'role="alert"' in bad.content.decode()


def test_submit_and_cancel_through_the_services(ui: Pages, as_alice: Client) -> None:
    form = {
        "name": "ui-job",
        "namespace": "default",
        "quota": "team-a",
        "priority_class": "koord-batch",
        "replicas": 2,
        "gpus": 4,
        "cpu": 8,
        "memory": 32,
        "gather_layer": "BlockLayer",
        "gather_strategy": "MustGather",
    }
    response = as_alice.post(reverse("job-submit"), form)
    assert response.status_code == 302, response.content.decode()[:2000]
    job = ui.cluster.jobs.get(name="ui-job")
    assert job.quota.name == "team-a" and job.pods.count() == 2 and job.owner == ui.alice
    assert job.topology_spec == {
        "gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather"}]
    }
    assert as_alice.post(reverse("job-cancel", args=[job.pk])).status_code == 302
    job.refresh_from_db()
    assert job.state == "Cancelled"


def test_submit_shows_service_errors(ui: Pages, as_alice: Client) -> None:
    form = {
        "name": "too-big",
        "namespace": "default",
        "quota": "team-a",
        "replicas": 1,
        "gpus": 64,
        "cpu": 1,
        "memory": 1,
    }
    response = as_alice.post(reverse("job-submit"), form)
    assert response.status_code == 200
    assert "more than any node has" in response.content.decode()


def test_tokens_create_show_once_and_revoke(ui: Pages, as_alice: Client) -> None:
    created = as_alice.post(reverse("tokens"), {"expiry_days": 7}).content.decode()
    token = re.search(r"<pre data-new-token>(\S+)</pre>", created)
    assert token is not None
    listed = as_alice.get(reverse("tokens")).content.decode()
    assert token.group(1) not in listed
    revoke = re.search(r'action="/tokens/(\w+)/revoke/"', listed)
    assert revoke is not None and token.group(1).startswith(revoke.group(1))
    key = revoke.group(1)
    as_alice.post(reverse("token-revoke", args=[key]))
    after = as_alice.get(reverse("tokens")).content.decode()
    assert f"Revoked token {key}" in after
    assert f"/tokens/{key}/revoke/" not in after


def test_what_if_plans_without_writing(ui: Pages, as_alice: Client) -> None:
    form = {
        "name": "maybe",
        "namespace": "default",
        "quota": "team-a",
        "priority_class": "koord-batch",
        "replicas": 1,
        "gpus": 8,
        "cpu": 8,
        "memory": 32,
        "action": "what-if",
    }
    response = as_alice.post(reverse("job-submit"), form)
    html = response.content.decode()
    assert response.status_code == 200
    outcome = re.search(r'data-outcome="(\w+)"', html)
    assert outcome is not None, html[-3000:]
    assert outcome.group(1) in {"placed", "preempting", "unschedulable"}
    # Whatever the engine decides, the page says where or why, and draws the nodes involved.
    assert "Placement:" in html or "Would preempt" in html or 'class="reason"' in html
    if outcome.group(1) != "unschedulable":
        assert "fig-whatif" in html
    assert not ui.cluster.jobs.filter(name__startswith="maybe").exists()


def test_a_tenant_sees_only_its_quotas_and_their_ancestors(ui: Pages, as_alice: Client) -> None:
    html = as_alice.get(reverse("quotas")).content.decode()
    names = figures(html)["fig-quotas"]["data"][0]["x"]
    assert "team-a" in names and "root" in names
    assert "team-b" not in names
