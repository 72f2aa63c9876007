"""The Django admin names every row in words ("round 25 of cluster demo, ... UTC", never
"Round object (25)") and every model in a plural English has ("Priority classes")."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import unescape

from django.contrib import admin
from django.db import models
from django.test import Client

from koordweb.models import Node, NodeMetric, Preemption, Round
from tests.builders import Pages, RoundFactory

ADMIN_MODELS = [model for model in admin.site._registry if model._meta.app_label == "koordweb"]
INLINE_MODELS = [
    inline.model
    for model_admin in admin.site._registry.values()
    for inline in model_admin.inlines
    if inline.model._meta.app_label == "koordweb"
]


def test_every_model_in_the_admin_has_a_name_of_its_own() -> None:
    default = models.Model.__str__
    nameless = [m.__name__ for m in {*ADMIN_MODELS, *INLINE_MODELS} if m.__str__ is default]
    assert not nameless, f"shown as '<Model> object (n)' in the admin: {nameless}"


def test_plurals_are_english() -> None:
    for model in ADMIN_MODELS:
        plural = str(model._meta.verbose_name_plural)
        assert not re.search(r"(ss|x|ch|sh)s$", plural), plural


def test_a_round_is_titled_in_words(ui: Pages, as_admin: Client) -> None:
    started = datetime(2026, 12, 4, 14, 2, 11, tzinfo=UTC)
    rnd = RoundFactory(cluster=ui.cluster, started_at=started)
    assert str(rnd) == f"round {rnd.pk} of cluster {ui.cluster.name}, 2026-12-04 14:02:11 UTC"
    page = unescape(as_admin.get(f"/admin/koordweb/round/{rnd.pk}/change/").content.decode())
    assert str(rnd) in page and "Round object" not in page
    decisions = unescape(as_admin.get("/admin/koordweb/decision/").content.decode())
    assert "object (" not in decisions


def test_preemptions_and_node_metrics_are_named(ui: Pages, as_admin: Client) -> None:
    preemption = Preemption.objects.get(pk=ui.preemption.pk)
    assert str(preemption).startswith(f"preemption by job {preemption.preemptor}, ")
    node = Node.objects.filter(cluster=ui.cluster).first()
    assert node is not None
    metric = NodeMetric.objects.create(node=node, reported_at=datetime(2026, 1, 2, tzinfo=UTC))
    assert str(metric) == f"usage of node {node.name} reported 2026-01-02 00:00:00 UTC"
    for url in (
        "/admin/koordweb/preemption/",
        f"/admin/koordweb/preemption/{preemption.pk}/change/",
    ):
        assert "object (" not in as_admin.get(url).content.decode(), url


def test_the_priority_class_list_says_priority_classes(ui: Pages, as_admin: Client) -> None:
    index = as_admin.get("/admin/").content.decode()
    assert "Priority classes" in index and "Priority classs" not in index
    assert Round._meta.verbose_name_plural == "rounds"


def test_preemption_and_decision_records_read_in_words_and_cannot_be_edited(
    ui: Pages, as_admin: Client
) -> None:
    from koordweb.models import Decision, PreemptionVictim

    preemption = Preemption.objects.get(pk=ui.preemption.pk)
    victim = PreemptionVictim.objects.create(
        preemption=preemption,
        job=preemption.preemptor,
        pods=["train/low-0"],
        freed={"nvidia.com/gpu": 8},
    )
    html = as_admin.get(f"/admin/koordweb/preemption/{preemption.pk}/change/").content.decode()
    assert 'name="_save"' not in html
    page = unescape(re.sub(r"<[^>]*>", " ", html))  # the text a reader sees
    assert "8 GPUs" in page and victim.pods[0] in page
    for raw in ('{"', "highest_victim_priority", "preemptor_priority", "nvidia.com/gpu"):
        assert raw not in page, raw
    decision = Decision.objects.filter(round__cluster=ui.cluster).first()
    assert decision is not None
    page = unescape(
        as_admin.get(f"/admin/koordweb/decision/{decision.pk}/change/").content.decode()
    )
    assert 'name="_save"' not in page and '{"' not in page
    assert as_admin.get("/admin/koordweb/preemption/add/").status_code == 403
