"""The admin's workbench (issue #37 items 4-9): a jobs table to work from, quotas an admin reads
and edits, numbers that agree from page to page, words for every device kind, paging, and the
submit form's devices and priorities. Django's test client on `builders.pages_world`."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from koordweb.api import filters as api_filters
from koordweb.engine.pipeline import round_number_next
from koordweb.models import (
    Cluster,
    Decision,
    ElasticQuota,
    Job,
    JobState,
    Pod,
    PriorityClass,
    QuotaChange,
    Round,
)
from koordweb.presenters.quantities import shape_text
from koordweb.presenters.reasons import decision_sentence
from koordweb.presenters.rounds import round_metrics
from koordweb.presenters.words import node_reason, priority_text, victims_sentence
from koordweb.selectors import job_table
from koordweb.selectors.topology import OCCUPYING_PHASES
from tests.builders import (
    ClusterFactory,
    DecisionFactory,
    JobFactory,
    Pages,
    PreemptionFactory,
    RoundFactory,
    VictimFactory,
)

GPU = "nvidia.com/gpu"


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def _job_names(html: str) -> list[str]:
    return re.findall(r'<tr data-job="([^"]+)">', html)


# Item 4: the jobs table.


def test_jobs_table_filters_by_team_state_device_and_name(ui: Pages, as_admin: Client) -> None:
    jobs = reverse("jobs")
    assert _job_names(as_admin.get(jobs, {"state": "all", "team": "team-a"}).content.decode()) == [
        "train-a"
    ]
    shared = as_admin.get(jobs, {"state": "all", "device": "gpu-share"}).content.decode()
    assert _job_names(shared) == ["notebook-b"]
    found = as_admin.get(jobs, {"state": "all", "q": "BIG"}).content.decode()
    assert _job_names(found) == ["big-b"]
    preempted = as_admin.get(jobs, {"state": "Preempted"}).content.decode()
    assert _job_names(preempted) == ["old-b"]
    by_class = as_admin.get(
        jobs, {"state": "all", "priority_class": ui.running.priority_class.name}
    )
    assert _job_names(by_class.content.decode()) == ["train-a"]


def test_jobs_table_sorts_and_shows_wait_runtime_cards_and_position(
    ui: Pages, as_admin: Client
) -> None:
    html = as_admin.get(reverse("jobs"), {"state": "all", "sort": "-gpus"}).content.decode()
    names = _job_names(html)
    assert names[:2] == ["big-b", "train-a"]  # 32 cards, then 16
    text = _text(html)
    assert "32 GPUs" in text and "16 GPUs" in text and "0.5 shared GPUs" in text
    assert "Waited" in text and "Ran" in text and "1 h" in text  # train-a ran an hour
    row = re.search(r'<tr data-job="big-b">\s*<td class="position">(\d+)</td>', html)
    assert row and row[1] == "1"
    longest = as_admin.get(reverse("jobs"), {"state": "all", "sort": "-wait"}).content.decode()
    assert _job_names(longest)[0] in {"big-b", "old-b"}  # submitted 3 h ago, still waiting
    lowest = as_admin.get(reverse("jobs"), {"state": "all", "sort": "priority"}).content.decode()
    assert _job_names(lowest)[-1] == "train-a"


def test_jobs_table_pages_on_the_server(ui: Pages, as_admin: Client) -> None:
    now = timezone.now()
    for i in range(55):
        JobFactory(
            cluster=ui.cluster,
            name=f"bulk-{i:02d}",
            quota=ui.running.quota,
            state=JobState.PENDING,
            submitted_at=now - timedelta(minutes=i),
        )
    first = as_admin.get(reverse("jobs"), {"state": "pending"}).content.decode()
    assert len(_job_names(first)) == 50 and "page 1 of 2" in first
    second = as_admin.get(reverse("jobs"), {"state": "pending", "page": 2}).content.decode()
    assert len(_job_names(second)) == 56 - 50  # 55 and big-b


def test_one_filterset_serves_the_api_and_the_page(ui: Pages) -> None:
    assert api_filters.JobFilter is job_table.JobFilter
    found = job_table.JobFilter({"device": "gpu", "state": ["pending"]}, queryset=Job.objects.all())
    assert [j.name for j in found.qs] == ["big-b"]


def test_overview_tiles_link_to_the_filtered_table(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("overview")).content.decode()
    link = re.search(r'<a class="count preempted" href="([^"]+)"', html)
    assert link is not None
    target = as_admin.get(link[1].replace("&amp;", "&")).content.decode()
    assert _job_names(target) == ["old-b"]
    running = re.search(r'<a class="count running" href="([^"]+)"', html)
    assert running is not None
    assert set(_job_names(as_admin.get(running[1].replace("&amp;", "&")).content.decode())) == {
        "train-a",
        "notebook-b",
    }


# Item 5: quotas.


def _cell(html: str, quota: str, resource: str, css: str) -> str:
    row = re.search(
        rf'<tr[^>]*data-quota="{quota}" data-resource="{re.escape(resource)}">(.*?)</tr>',
        html,
        re.S,
    )
    assert row, (quota, resource)
    cell = re.search(rf'<td class="{css}">(.*?)</td>', row[1], re.S)
    assert cell
    return _text(cell[1]).strip()


def test_quota_may_use_now_is_the_headroom_not_the_use(ui: Pages, as_admin: Client) -> None:
    html = as_admin.get(reverse("quotas")).content.decode()
    # team-b uses no whole GPU: it may use what is free of the cluster's NVIDIA cards (16),
    # within its max (24) and root's max (40) less team-a's 16.
    assert _cell(html, "team-b", GPU, "may-use") == "16 GPUs"
    assert "Borrowed" in html and "Lent" in html and "Waiting" in html
    assert "32 GPUs" in _text(html)  # big-b's 4 x 8 GPUs waiting
    assert "1 h" in _text(html)  # the idle-alert threshold (60 minutes)
    assert reverse("quota-edit", args=["team-b"]) in html


def _edit_post(client: Client, quota: str, **changes: object) -> tuple[int, str]:
    url = reverse("quota-edit", args=[quota])
    page = client.get(url)
    form = page.context["form"]
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items()}
    for resource_or_field, value in changes.items():
        if resource_or_field.startswith(("min:", "max:")):
            key, resource = resource_or_field.split(":", 1)
            data[f"{key}_{form.resources.index(resource)}"] = value
        else:
            data[resource_or_field] = value
    response = client.post(url, data)
    return response.status_code, response.content.decode()


def test_admin_edits_a_quota_in_units_and_the_change_is_recorded(
    ui: Pages, as_admin: Client
) -> None:
    status, _ = _edit_post(
        as_admin,
        "team-b",
        **{"max:" + GPU: "20", "max:cpu": "96", "max:memory": "512"},
        gpu_idle_alert_minutes=30,
        max_pending_jobs=40,
        gpu_efficiency_threshold_percent=35,
    )
    assert status == 302
    quota = ElasticQuota.objects.get(cluster=ui.cluster, name="team-b")
    assert quota.max[GPU] == 20 and quota.max["cpu"] == 96_000
    assert quota.max["memory"] == 512 * 1024**3
    assert quota.gpu_idle_alert_minutes == 30 and quota.max_pending_jobs == 40
    assert quota.gpu_efficiency_threshold_percent == 35
    change = QuotaChange.objects.get(quota=quota)
    assert change.username == ui.admin.username and change.changes["max"][0][GPU] == 24
    page = _text(as_admin.get(reverse("quota-edit", args=["team-b"])).content.decode())
    assert "max GPUs: 24 GPUs → 20 GPUs" in page
    assert "max GPUs" in _text(as_admin.get(reverse("quotas")).content.decode())


def test_quota_edit_is_validated_as_the_api(ui: Pages, as_admin: Client) -> None:
    status, html = _edit_post(as_admin, "team-b", **{"min:" + GPU: "30"})
    assert status == 200 and "is above the maximum" in html
    status, html = _edit_post(as_admin, "team-b", **{"max:" + GPU: "64"})
    assert status == 200 and "parent quota root" in html
    assert ElasticQuota.objects.get(cluster=ui.cluster, name="team-b").max[GPU] == 24
    assert not QuotaChange.objects.exists()


def test_cluster_owned_quota_only_takes_the_idle_threshold(ui: Pages, as_admin: Client) -> None:
    Cluster.objects.filter(pk=ui.cluster.pk).update(backend=Cluster.Backend.KUBERNETES)
    status, _ = _edit_post(as_admin, "team-b", **{"max:" + GPU: "2"}, gpu_idle_alert_minutes=15)
    quota = ElasticQuota.objects.get(cluster=ui.cluster, name="team-b")
    assert status == 302 and quota.max[GPU] == 24 and quota.gpu_idle_alert_minutes == 15
    page = as_admin.get(reverse("quota-edit", args=["team-b"])).content.decode()
    assert "owns its ElasticQuota objects" in page


def test_tenant_may_not_edit_quotas(ui: Pages, as_alice: Client) -> None:
    assert as_alice.get(reverse("quota-edit", args=["team-a"])).status_code == 404
    assert "edit</a>" not in as_alice.get(reverse("quotas")).content.decode()


# Item 6: numbers that agree.


def test_round_figures_before_and_after() -> None:
    lines = dict(round_metrics({"pending_pods": 1000, "pods_placed": 685}).lines)
    assert lines["Pods"] == (
        "1,000 pods waiting when it began, 685 pods placed, 315 pods still waiting after it"
    )


def test_rounds_are_numbered_per_cluster(ui: Pages, as_admin: Client) -> None:
    other = ClusterFactory(name="other")
    numbers = []
    for cluster in (ui.cluster, other, ui.cluster, other, ui.cluster):
        number = round_number_next(cluster)
        RoundFactory(cluster=cluster, number=number, started_at=timezone.now())
        numbers.append((cluster.name, number))
    base = numbers[0][1]
    assert [n for name, n in numbers if name == "default"] == [base, base + 1, base + 2]
    assert [n for name, n in numbers if name == "other"] == [1, 2]
    last = Round.objects.filter(cluster=other).order_by("-number").first()
    assert last is not None
    page = as_admin.get(reverse("round-detail", args=[last.pk])).content.decode()
    assert "Round #2 " in page


def test_a_quota_shortfall_beyond_the_ask_is_not_a_wrong_sum() -> None:
    details = {
        "quota": "team-a",
        "quota_shortfall": {"team-a": {GPU: 65}},
        "request": {GPU: 64},
        "used": {GPU: 33},
        "runtime": {GPU: 32},
    }
    cause = {"code": "QuotaInsufficient", "plugin": "ElasticQuota", "values": {"quota": "team-a"}}
    words = decision_sentence(
        "unschedulable", "Insufficient quotas, quotaName: team-a", {**details, "cause": cause}
    ).sentence
    assert "65" not in words and "asks for 64 GPUs" in words


def _count(html: str, name: str) -> int:
    found = re.search(rf'data-count="{name}">([\d,]+)<', html)
    assert found, name
    return int(found[1].replace(",", ""))


def test_headline_figures_agree_across_pages(ui: Pages, as_admin: Client) -> None:
    """Each figure computed from the rows here, independently of the selectors, and read off
    every page that shows it."""
    jobs = Job.objects.filter(cluster=ui.cluster)
    running = jobs.filter(state__in=[JobState.RUNNING, JobState.SCHEDULED]).count()
    waiting = jobs.filter(state__in=JobState.WAITING).count()
    preempted = jobs.filter(state__in=[JobState.PREEMPTED, JobState.PREEMPTING]).count()
    bound = Pod.objects.filter(
        cluster=ui.cluster, node__isnull=False, phase__in=OCCUPYING_PHASES
    ).values_list("requests", "job__quota__name")
    gpus_used: dict[str, int] = {}
    for requests, quota in bound:
        gpus_used[quota] = gpus_used.get(quota, 0) + int((requests or {}).get(GPU, 0))
    cards = sum(
        1 for _ in ui.cluster.nodes.values_list("devices__id", flat=True).exclude(devices__id=None)
    )

    overview = as_admin.get(reverse("overview")).content.decode()
    assert _count(overview, "running") == running
    assert _count(overview, "pending") == waiting
    assert _count(overview, "preempted") == preempted
    table = reverse("jobs")
    for states, expected in (
        ({"state": ["Running", "Scheduled"]}, running),
        ({"state": "pending"}, waiting),
        ({"state": ["Preempted", "Preempting"]}, preempted),
    ):
        assert _count(as_admin.get(table, states).content.decode(), "jobs") == expected
    quotas = as_admin.get(reverse("quotas")).content.decode()
    for quota in ("team-a", "team-b"):
        row = re.search(
            rf'data-quota="{quota}" data-resource="{GPU}">.*?<strong>(.*?)</strong>', quotas, re.S
        )
        assert row and row[1] == f"{gpus_used.get(quota, 0)} GPUs"
    devices = as_admin.get(reverse("devices")).content.decode()
    assert _count(devices, "cards") == cards
    topology = _text(as_admin.get(reverse("topology")).content.decode())
    assert f"{sum(gpus_used.values())} of" in _text(overview) or "GPUs" in topology


# Item 7: words for every device kind.


def test_npu_and_mlu_jobs_are_said_in_their_own_words() -> None:
    npu = shape_text(
        {
            "huawei.com/npu": 4,
            "koordinator.sh/gpu-core": 400,
            "koordinator.sh/gpu-memory-ratio": 400,
            "cpu": 8000,
        }
    )
    assert npu == "4 NPUs, 8 cores" and "GPU" not in npu
    mlu = shape_text({"cambricon.com/mlu": 2, "koordinator.sh/gpu-memory-ratio": 100})
    assert "GPU" not in mlu and "MLU" in mlu


def _refused(code: str, nodes: int, resource: str, text: str) -> dict[str, Any]:
    return {"code": code, "nodes": nodes, "plugin": "", "text": text, "resource": resource}


def test_no_raw_scheduler_phrase_and_one_word_for_gpus() -> None:
    load = _refused("LoadOverThreshold", 997, "cpu", "node(s) cpu usage exceed threshold")
    assert node_reason(load) == "with CPU use above the load-aware threshold"
    gpu = _refused("Insufficient", 2, "gpu", "Insufficient gpu")
    nvidia = _refused("Insufficient", 1, "nvidia.com/gpu", "Insufficient nvidia.com/gpu")
    assert node_reason(gpu) == node_reason(nvidia)
    cause = {"code": "NodesUnavailable", "plugin": "NodeResourcesFit", "values": {}}
    words = decision_sentence(
        "unschedulable",
        "0/1000 nodes are available",
        {"cause": {**cause, "node_reasons": [gpu, nvidia, load]}},
    ).sentence
    assert "exceed threshold" not in words and "3 with too little free GPUs" in words


def test_what_if_and_priority_sentences_are_whole(ui: Pages, as_admin: Client) -> None:
    assert victims_sentence([], 1) == "Would preempt 1 job of another tenant."
    assert victims_sentence(["default/a"], 2) == (
        "Would preempt default/a and 2 jobs of other tenants."
    )
    assert priority_text(0, None) == "default priority (0)"
    plain = JobFactory(cluster=ui.cluster, name="plain", quota=ui.running.quota, priority=0)
    page = _text(as_admin.get(reverse("job-detail", args=[plain.pk])).content.decode())
    assert "default priority (0)" in page and "0, may preempt" not in page


# Item 8: paging.


def test_preemptions_page_pages_and_says_the_reason_once(ui: Pages, as_admin: Client) -> None:
    now = timezone.now()
    for i in range(30):
        item = PreemptionFactory(
            cluster=ui.cluster,
            preemptor=ui.running,
            reason="the same reason",
            cost={},
            created_at=now - timedelta(hours=2, minutes=i),
        )
        for v in range(3):
            victim = JobFactory(
                cluster=ui.cluster,
                name=f"v-{i}-{v}",
                quota=ui.pending.quota,
                state=JobState.PREEMPTED,
                started_at=now - timedelta(hours=5),
            )
            VictimFactory(preemption=item, job=victim, pods=[f"default/v-{i}-{v}-0"])
    html = as_admin.get(reverse("preemptions")).content.decode()
    assert html.count('href="/preemptions/') - html.count("/preemptions/?") >= 20
    assert "page 1 of 2" in html and _count(html, "preemptions") == 32
    rows = re.findall(r'<tr><td><a href="/preemptions/\d+/">', html)
    assert len(rows) == 20
    assert "v-0-0" in html and "v-29-0" not in html
    second = as_admin.get(reverse("preemptions"), {"page": 2}).content.decode()
    assert len(re.findall(r'<tr><td><a href="/preemptions/\d+/">', second)) == 12


def test_round_page_pages_its_decisions(ui: Pages, as_admin: Client) -> None:
    now = timezone.now()
    big = RoundFactory(cluster=ui.cluster, started_at=now)
    for i in range(120):
        job = JobFactory(cluster=ui.cluster, name=f"d-{i:03d}", quota=ui.running.quota)
        DecisionFactory(
            round=big,
            job=job,
            outcome=Decision.Outcome.UNSCHEDULABLE,
            reason="gang",
            created_at=now,
        )
    html = as_admin.get(reverse("round-detail", args=[big.pk])).content.decode()
    assert html.count('href="/jobs/') - html.count('href="/jobs/?') <= 60
    assert "page 1 of 3" in html
    last = as_admin.get(reverse("round-detail", args=[big.pk]), {"page": 3}).content.decode()
    assert "page 3 of 3" in last


# Item 9: the submit form and the API docs.


def test_submit_offers_every_device_kind_and_only_usable_priorities(
    ui: Pages, as_alice: Client
) -> None:
    PriorityClass.objects.create(
        cluster=ui.cluster, name="system-node-critical", value=2_000_001_000
    )
    page = as_alice.get(reverse("job-submit"))
    form = page.context["form"]
    devices = dict(form.fields["device"].choices)
    assert {"gpu", "gpu-share", "npu"} <= set(devices)
    classes = dict(form.fields["priority_class"].choices)
    assert "system-node-critical" not in classes
    assert all("(" in label for key, label in classes.items() if key)  # values shown
    response = as_alice.post(
        reverse("job-submit"),
        {
            "name": "npu-job",
            "namespace": "default",
            "quota": "team-a",
            "replicas": 1,
            "device": "npu",
            "gpus": 2,
            "cpu": 1,
            "memory": 1,
            "action": "submit",
        },
    )
    assert response.status_code in (200, 302)
    job = Job.objects.filter(name="npu-job").first()
    if job is not None:
        assert job.pods.first().requests.get("huawei.com/npu") == 2
    share = as_alice.post(
        reverse("job-submit"),
        {
            "name": "share-job",
            "namespace": "default",
            "quota": "team-a",
            "replicas": 1,
            "device": "gpu-share",
            "gpus": 0,
            "gpu_share": 25,
            "gpu_memory": 10,
            "cpu": 1,
            "memory": 1,
            "action": "submit",
        },
    )
    assert share.status_code == 302
    pod = Job.objects.get(name="share-job").pods.get()
    assert pod.requests["koordinator.sh/gpu-core"] == 25
    assert pod.requests["koordinator.sh/gpu-memory"] == 10 * 1024**3


@pytest.mark.parametrize("who", ["as_admin", "as_alice"])
def test_api_docs_keep_the_navigation(who: str, request: pytest.FixtureRequest) -> None:
    client: Client = request.getfixturevalue(who)
    html = client.get("/api/docs/").content.decode()
    assert f'href="{reverse("jobs")}"' in html and f'href="{reverse("quotas")}"' in html
    assert 'aria-current="page">API docs' in html
