"""The second audit's words: held Ascend cards in AI cores, engine enums and plugin names in plain
words, "may use now" for a quota's runtime, no zero amounts, and the pages that had none."""

from __future__ import annotations

import json
import re
from html import unescape

from django.test import Client
from django.urls import reverse

from koordweb.models import Job, JobState, Node
from koordweb.presenters.details import detail_lines
from koordweb.presenters.quantities import quantity_text, resource_label, shape_text
from koordweb.presenters.reasons import state_sentence
from koordweb.views.cluster import free_unit
from scheduler.vocabulary import NPU_CORE, NPU_CPU, NPU_DVPP
from tests.builders import DEVICE_ALLOCATED, Pages, gang
from tests.koordweb.ui.html import figures
from tests.koordweb.ui.test_words_on_pages import option_texts


def _ascend_job(ui: Pages) -> None:
    """Two pods of team-a on node-4 (Ascend 910B3), each holding a whole card in Koordinator's
    form: 20 AI cores and the card's memory, no GPU core."""
    node = Node.objects.get(name="node-4")
    job = gang(
        ui.cluster,
        "ascend-train",
        quota=ui.running.quota,
        replicas=2,
        requests={"cpu": 8000, "huawei.com/npu-core": 20, "koordinator.sh/gpu-memory-ratio": 100},
        nodes=[node, node],
    )
    for minor, pod in enumerate(job.pods.order_by("name")):
        card = {"huawei.com/npu-core": "20", "koordinator.sh/gpu-memory-ratio": "100"}
        pod.annotations = {
            DEVICE_ALLOCATED: json.dumps({"gpu": [{"minor": minor, "resources": card}]})
        }
        pod.save(update_fields=["annotations"])


def test_held_ascend_cards_are_drawn_held_in_ai_cores(ui: Pages, as_admin: Client) -> None:
    _ascend_job(ui)
    html = as_admin.get(reverse("devices"), {"vendor": "huawei"}).content.decode()
    heat = figures(html)["fig-heatmap"]["data"][0]
    assert heat["z"][0][:3] == [100, 100, 0]
    hover = heat["hovertext"][0]
    assert "Huawei Ascend 910B3" in hover[0] and "Ascend Ascend" not in hover[0]
    assert "allocated all 20 AI cores" in hover[0]
    assert "ascend-train ascend-train-0 20 AI cores" in hover[0]
    assert "free" in hover[2] and "used 0%" not in " ".join(hover)
    overview = as_admin.get(reverse("overview")).content.decode()
    row = re.search(r'<tr data-accelerator="Huawei Ascend 910B3">(.*?)</tr>', overview)
    assert row, "the Ascend model named once, vendor first"
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row.group(1))
    assert cells[1:] == ["2", "8", "8"]
    assert 'data-accelerator="NVIDIA H100"' in overview


def _text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_ascend_ai_cores_are_counted_never_a_percent(ui: Pages, as_admin: Client) -> None:
    assert (
        quantity_text(NPU_CORE, 40) == "40 AI cores" and quantity_text(NPU_CORE, 1) == "1 AI core"
    )
    assert shape_text({"cpu": 16000, NPU_CORE: 40}) == "40 AI cores, 16 cores"
    assert resource_label(NPU_CORE) == "NPU AI cores"
    assert resource_label(NPU_CPU) == "NPU AI CPUs"
    assert resource_label(NPU_DVPP) == "NPU media (DVPP) share (% of a card)"
    assert quantity_text(NPU_DVPP, 50) == "50% of an NPU's media engine (DVPP)"
    assert free_unit(NPU_CORE) == "AI cores"
    node = Node.objects.get(name="node-4")
    node.allocatable = {**node.allocatable, NPU_CORE: 160, NPU_CPU: 56, NPU_DVPP: 800}
    node.save(update_fields=["allocatable"])
    html = as_admin.get(reverse("topology")).content.decode()
    labels = option_texts(html, "resource")
    assert labels[NPU_CORE] == "NPU AI cores"
    assert labels[NPU_CPU] == "NPU AI CPUs" and labels[NPU_DVPP].startswith("NPU media (DVPP)")
    shaped = as_admin.get(
        reverse("topology"), {"resource": NPU_CORE, "count": 20, "cpu": 0, "memory": 0}
    ).content.decode()
    assert "<th>Free AI cores</th>" in shaped and "NPU core" not in shaped
    assert "free, " in shaped and " AI cores</strong> free" in shaped


def test_job_page_says_preemption_policy_and_gang_mode_in_words(
    ui: Pages, as_admin: Client
) -> None:
    html = as_admin.get(reverse("job-detail", args=[ui.running.pk])).content.decode()
    assert "may preempt lower-priority jobs" in html and "PreemptLowerPriority" not in html
    gang = re.search(r"<dd data-gang>(.*?)</dd>", html)
    assert gang and gang.group(1).startswith("all 2 pods must start together")
    Job.objects.filter(pk=ui.running.pk).update(
        preemption_policy="Never", mode="NonStrict", min_available=1
    )
    html = as_admin.get(reverse("job-detail", args=[ui.running.pk])).content.decode()
    assert "never preempts" in html and ">Never<" not in html
    assert "pods may start as they fit, at least 1 of 2 together" in html
    assert "NonStrict" not in _text(html)


def test_submit_form_labels_its_gang_fields_in_words(ui: Pages, as_alice: Client) -> None:
    html = as_alice.get(reverse("job-submit")).content.decode()
    assert "Pods that must start together" in html and "Min available" not in html
    strategies = option_texts(html, "gather_strategy")
    assert set(strategies) == {"MustGather", "PreferGather"}  # the submitted values
    assert "MustGather" not in strategies.values() and "PreferGather" not in strategies.values()


def test_decision_details_say_may_use_now_without_zero_amounts() -> None:
    lines = dict(
        detail_lines(
            {
                "plugin": "ElasticQuota",
                "runtime": {"cpu": 2_352_000, NPU_CORE: 0, "nvidia.com/gpu": 6, "memory": 0},
            }
        )
    )
    assert lines["The quota may use now"] == "2,352 cores and 6 GPUs"
    assert "runtime" not in str(lines).lower() and " 0 " not in lines["The quota may use now"]


def test_quotas_page_says_may_use_now(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("quotas")).content.decode()
    assert "<th>May use now</th>" in html and "Runtime" not in _text(html)
    assert "runtime" not in json.dumps(
        [trace.get("name") for fig in figures(html).values() for trace in fig["data"]]
    )


def test_every_engine_plugin_is_named_in_words() -> None:
    from scheduler.plugins import (
        devices,
        gang,
        loadaware,
        node_constraints,
        preemption,
        priority,
        quota,
        resources,
        topology,
    )

    modules = (devices, gang, loadaware, node_constraints, preemption, priority, quota)
    names = {
        cls.name
        for module in (*modules, resources, topology)
        for cls in vars(module).values()
        if isinstance(cls, type)
        and isinstance(getattr(cls, "name", None), str)
        and cls.__module__ == module.__name__
    }
    assert {"ElasticQuota", "NodeResourcesFit", "NetworkTopology"} <= names
    for name in names:
        words = dict(detail_lines({"plugin": name}))["Decided by"]
        assert name not in words and "plugin" not in words, words
    assert dict(detail_lines({"plugin": "ElasticQuota"}))["Decided by"] == "the quota check"


def test_a_preempting_decision_says_what_happens() -> None:
    lines = dict(detail_lines({"preemption": {"status": "Success", "reason": "preempting"}}))
    assert lines["Preemption"] == "Evicting lower-priority jobs to make room for it."


def test_efficiency_with_no_usage_says_no_team_held_a_gpu(ui: Pages, as_admin: Client) -> None:
    text = _text(as_admin.get(reverse("efficiency")).content.decode())
    assert "No team held a GPU in this window." in text
    assert not re.search(r"\bNone\b", text)


def test_cancelling_twice_says_the_state_in_plain_words(ui: Pages, as_alice: Client) -> None:
    job = ui.running
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED)
    response = as_alice.post(reverse("job-cancel", args=[job.pk]), follow=True)
    text = _text(response.content.decode())
    assert "is already cancelled; nothing to cancel" in text and "Cancelled;" not in text


def test_an_unknown_page_is_a_page_with_the_navigation(ui: Pages, as_alice: Client) -> None:
    response = as_alice.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    assert "<h1>Not found</h1>" in html and reverse("overview") in html
    assert 'aria-label="pages"' in html  # the site's navigation, not Django's bare page
    anonymous = Client().get("/no-such-page/")
    assert anonymous.status_code == 404 and "<h1>Not found</h1>" in anonymous.content.decode()


def test_state_reasons_do_not_repeat_the_state() -> None:
    assert state_sentence("Preempted", "Preempted by team-nlp/prod").sentence == (
        "Preempted by team-nlp/prod."
    )
    assert state_sentence("Succeeded", "Finished (demo history)").sentence == (
        "Finished (demo history)."
    )
    assert state_sentence("Failed", "OOMKilled").sentence == "Failed. OOMKilled."


def test_victim_pods_are_listed_in_natural_order(ui: Pages, as_admin: Client) -> None:
    victim = ui.preemption.victims.get()
    victim.pods = [f"default/old-b-{i}" for i in (0, 1, 10, 11, 2)]
    victim.save(update_fields=["pods"])
    html = as_admin.get(reverse("preemption-detail", args=[ui.preemption.pk])).content.decode()
    assert "default/old-b-0, default/old-b-1, default/old-b-2, default/old-b-10" in html


def test_a_finished_jobs_page_does_not_say_not_placed(ui: Pages, as_admin: Client) -> None:
    from koordweb.models import JobState, Pod

    Pod.objects.filter(job=ui.running).update(node=None, phase="Succeeded")
    Job.objects.filter(pk=ui.running.pk).update(state=JobState.SUCCEEDED)
    text = _text(as_admin.get(reverse("job-detail", args=[ui.running.pk])).content.decode())
    assert "Finished: its pods have left their nodes." in text and "Not placed" not in text
    pending = _text(as_admin.get(reverse("job-detail", args=[ui.pending.pk])).content.decode())
    assert "Not placed: no pod is bound to a node." in pending
