"""The round, preemption and quota pages as a hurried admin and a tenant read them: the round's
worker and metrics in words (never the metrics' field names), other teams' victims counted but
never named, the preemption rule saying whose priority is which, a cluster picker when several
clusters and no default, quotas without a column per resource, and the admin's read-only rounds.
"""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from django.test import Client
from django.urls import reverse

from koordweb.models import Cluster, Preemption
from koordweb.presenters.reasons import preemption_sentence
from koordweb.presenters.rounds import round_metrics
from tests.builders import Pages, RoundFactory
from tests.koordweb.ui.html import figures
from tests.koordweb.ui.test_walk import readable_text

# What the round's metrics are keyed by: a page shows words instead.
METRIC_FIELDS = re.compile(
    r"snapshot_changed_rows|engine_reused|warm_mismatch|cpu_ms|sync_snapshot_ms|record_enact_ms"
    r"|snapshot_cold_reason|kubelet_rejections|leftover_intents|\bNone\b|\bTrue\b|\bFalse\b"
    r"|\{'|\['|\b\d+(\.\d+)?e[+-]?\d+\b"
)
WARM_METRICS: dict[str, Any] = {
    "sync_snapshot_ms": 15,
    "engine_ms": 12,
    "record_enact_ms": 3,
    "enact_ms": 1,
    "cpu_ms": 29,
    "intents": 4,
    "evicted": 2,
    "pods_dropped": 1,
    "dropped": {"default/old-b-0": "node gone"},
    "kubelet_rejections": 0,
    "nodes": 5,
    "outside_topology": ["node-5"],
    "runtime_quota": {"team-a": {"nvidia.com/gpu": 16}},
    "snapshot": "checked",
    "snapshot_changed_rows": 7,
    "warm_mismatch": "nodes [3] differ",
    "pods_placed": 2,
    "pending_pods": 4,
}


def _plain(html: str) -> str:
    text = unescape(readable_text(html))
    found = METRIC_FIELDS.search(text)
    assert found is None, text[max(0, found.start() - 100) : found.end() + 100]
    return text


def test_round_page_says_who_ran_it_and_how_in_words(ui: Pages, as_admin: Client) -> None:
    rnd = RoundFactory(cluster=ui.cluster, worker="celery@w7", duration_ms=31, metrics=WARM_METRICS)
    html = as_admin.get(reverse("round-detail", args=[rnd.pk])).content.decode()
    text = _plain(html)
    assert "celery@w7" in text
    assert "15 ms reading the cluster, 12 ms in the engine" in text
    assert "29 ms of the worker's CPU" in text
    assert "updated with 7 rows changed since; checked against a rebuild from scratch" in text
    assert "differed from a rebuild from scratch" in text  # the warm-mismatch warning
    assert "1 outside the topology (node-5)" in text
    assert "default/old-b-0: node gone" in text  # admins see the dropped pod by name
    phases = figures(html)["fig-round-phases"]["data"]
    assert [bar["x"] for bar in phases] == [[15], [12], [3]]


def test_round_page_for_a_tenant_names_no_other_teams_pods(ui: Pages, as_alice: Client) -> None:
    rnd = RoundFactory(cluster=ui.cluster, metrics=WARM_METRICS)
    text = _plain(as_alice.get(reverse("round-detail", args=[rnd.pk])).content.decode())
    assert "old-b" not in text and "1 pod dropped" in text


def test_round_metrics_skip_unknown_counters_and_a_cold_round_says_why() -> None:
    shown = round_metrics({"snapshot": "cold", "snapshot_cold_reason": "first round", "x_y": 3})
    assert shown.lines == (("Cluster state", "rebuilt from scratch (first round)"),)
    idle = round_metrics({"snapshot": "warm", "snapshot_changed_rows": 0, "engine_reused": 1})
    assert idle.lines == (
        ("Cluster state", "kept from the last round: nothing changed, so the last plan was reused"),
    )


def test_round_page_lists_its_preemptions_to_the_victims_tenant(ui: Pages, as_bob: Client) -> None:
    # bob's old-b was the victim of alice's train-a in this round: the ledger shows it to him,
    # so does the round page, without naming the preemptor's quota's pods.
    html = as_bob.get(reverse("round-detail", args=[ui.good_round.pk])).content.decode()
    assert reverse("preemption-detail", args=[ui.preemption.pk]) in html
    assert "default/old-b" in html


def test_tenant_counts_other_teams_victims_without_their_names(ui: Pages, as_alice: Client) -> None:
    detail = as_alice.get(reverse("preemption-detail", args=[ui.preemption.pk])).content.decode()
    ledger = as_alice.get(reverse("preemptions")).content.decode()
    for html in (detail, ledger):
        text = _plain(html)
        assert "old-b" not in text
        assert "another team's job" in text
        assert reverse("job-detail", args=[ui.preempted.pk]) not in html
    assert "8 GPUs freed" in _plain(detail)  # counted, not dropped to 0
    assert "<strong>8</strong> GPUs freed" in ledger
    timeline = figures(ledger)["fig-timeline"]
    # One bar per preemption: the victims are named in its hover, another team's counted.
    hovers = " ".join(str(t.get("hovertext")) for t in timeline["data"])
    assert "another team's job" in hovers and "old-b" not in hovers


def test_preemption_rule_says_whose_priority_is_which() -> None:
    quota = "Insufficient quotas, quotaName: team-a, exceedDimensions: [nvidia.com/gpu]"
    priorities = {
        "preemptor_priority": 9000,
        "highest_victim_priority": 5000,
        "cause": {"code": "QuotaInsufficient", "plugin": "ElasticQuota", "values": {"quota": "a"}},
    }
    plain = preemption_sentence(quota, {"rule": "LowerPriority", **priorities})
    assert plain.startswith(
        "Evicted lower-priority jobs: the preemptor has priority 9000, the victims 5000 at most."
    )
    in_quota = preemption_sentence(quota, {"rule": "InQuota", **priorities})
    assert "jobs of its own quota" in in_quota
    reclaim = preemption_sentence(quota, {"rule": "QuotaReclaim", **priorities})
    assert reclaim.startswith("Took back quota that other quotas had borrowed beyond their")
    for sentence in (plain, in_quota, reclaim):
        assert "over at most" not in sentence and "quotaName" not in sentence


def test_several_clusters_and_no_default_ask_to_pick_one(
    ui: Pages, as_admin: Client, settings: Any
) -> None:
    settings.KOORDWEB_CLUSTER = ""
    Cluster.objects.create(name="lab")
    for name in ("overview", "jobs", "rounds", "preemptions", "quotas"):
        html = as_admin.get(reverse(name)).content.decode()
        assert "data-cluster-picker" in html, name
        assert "No cluster yet" not in html, name
        assert f'href="?cluster={ui.cluster.name}"' in html and 'href="?cluster=lab"' in html
    assert '<option value="" selected disabled>' in html  # the switcher shows no cluster chosen
    # A round's page opens whichever cluster is chosen, and chooses its own.
    assert as_admin.get(reverse("round-detail", args=[ui.good_round.pk])).status_code == 200
    assert "data-cluster-picker" not in as_admin.get(reverse("jobs")).content.decode()


def test_quotas_list_only_the_resources_each_quota_has(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("quotas")).content.decode()
    text = _plain(html)
    assert "min / max / runtime / used" not in text
    # team-a's row, in words: the key is only the cell's tooltip.
    assert re.search(r"GPUs\s+16 GPUs\s+32 GPUs", text)
    assert "nvidia.com/gpu" not in text


def test_admin_round_is_read_only_and_in_words(ui: Pages, as_admin: Client) -> None:
    rnd = RoundFactory(cluster=ui.cluster, worker="celery@w7", metrics=WARM_METRICS)
    listing = as_admin.get("/admin/koordweb/round/").content.decode()
    assert "updated with 7 rows changed since" in listing
    page = as_admin.get(f"/admin/koordweb/round/{rnd.pk}/change/").content.decode()
    assert "29 ms of the worker's CPU" in unescape(page)
    assert "snapshot_changed_rows" not in page and 'name="metrics"' not in page
    assert 'name="_save"' not in page


# The engine's rule names: a page says the rule in words instead (a job's preemption policy too:
# "may preempt lower-priority jobs").
RULE_NAMES = re.compile(r"\b(LowerPriority|InQuota|QuotaReclaim)\b")
LOWER_PRIORITY_OVER_QUOTA = {
    "reason": "Insufficient quotas, quotaName: team-a, exceedDimensions: [nvidia.com/gpu]",
    "cost": {"rule": "LowerPriority", "preemptor_priority": 9000, "highest_victim_priority": 5000},
}


def _victims_pages(ui: Pages) -> list[str]:
    return [
        reverse("preemption-detail", args=[ui.preemption.pk]),
        reverse("preemptions"),
        reverse("round-detail", args=[ui.good_round.pk]),
    ]


def test_victims_tenant_reads_no_word_of_the_other_teams_preemptor(
    ui: Pages, as_bob: Client
) -> None:
    # alice's train-a preempted bob's old-b: its name, and its reason (which names its quota),
    # stay out of every page bob reads about it; the rule is said.
    Preemption.objects.filter(pk=ui.preemption.pk).update(**LOWER_PRIORITY_OVER_QUOTA)
    for url in [*_victims_pages(ui), reverse("job-detail", args=[ui.preempted.pk])]:
        text = _plain(as_bob.get(url).content.decode())
        assert "train-a" not in text and "team-a" not in text, url
        assert RULE_NAMES.search(text) is None, url
    for url in _victims_pages(ui):
        assert "the preemptor has priority 9000" in _plain(as_bob.get(url).content.decode()), url


def test_victims_job_page_says_the_rule_of_the_other_teams_preemption(
    ui: Pages, as_bob: Client
) -> None:
    Preemption.objects.filter(pk=ui.preemption.pk).update(**LOWER_PRIORITY_OVER_QUOTA)
    text = _plain(as_bob.get(reverse("job-detail", args=[ui.preempted.pk])).content.decode())
    assert "the preemptor has priority 9000" in text
